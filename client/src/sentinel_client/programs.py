"""Which program a command name runs: the hook gives `git`, shells, wrappers and forge clients their
meaning only when the name runs the program it stands for. A command that changes PATH (`PATH=./bin:$PATH
git push`, an earlier `export PATH=...`) or names a path (`./git push`) could run a script of the agent's
under a trusted name; `git` must be the git the hook trusts (its absolute path, from the managed settings).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping


def _same(one: str | None, other: str | None) -> bool:
    if one is None or other is None:
        return False
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def resolve(name: str, path: str | None) -> str | None:
    """What `name` runs under PATH `path` (the hook's own PATH when None)."""
    return shutil.which(name, path=path if path is not None else os.environ.get("PATH", os.defpath))


def impostor(
    head: str,
    name: str,
    changed_path: str | None,
    path_changed: bool,
    trusted_git: str,
    directory: str | None,
) -> str | None:
    """Why the program `head` names is not the `name` it looks like; None when it is that program."""
    if "/" in head:
        actual: str | None = (
            head if head.startswith("/") or directory is None else os.path.join(directory, head)
        )
    elif path_changed:
        if changed_path is None:
            return f"{name} under a PATH computed at run time"
        actual = resolve(name, changed_path)
    else:
        actual = resolve(name, None)
    expected = trusted_git if name == "git" else resolve(name, None)
    if actual is None:
        return None if not path_changed and "/" not in head else f"{head} is not a program the hook can find"
    if not _same(actual, expected):
        return f"{head} runs {actual}, not the {name} the hook trusts"
    return None


def changed_path(assignments: Mapping[str, str | None]) -> tuple[bool, str | None]:
    """Whether the command (or an earlier one in its line) sets PATH, and to what (None: computed)."""
    if "PATH" not in assignments:
        return False, None
    value = assignments["PATH"]
    if value is not None and "$PATH" in value:
        value = value.replace("$PATH", os.environ.get("PATH", os.defpath))
    return True, value
