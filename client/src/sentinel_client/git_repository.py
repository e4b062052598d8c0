"""The git facts the hook reads from the repository a command runs in, with git at an absolute path.

Every config source the command itself would see is honoured by asking git with the command's own global
options (`-c`, `--config-env`, `--git-dir`...) and environment (`GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`,
`GIT_CONFIG_GLOBAL`, `GIT_CONFIG_SYSTEM`, `GIT_CONFIG_NOSYSTEM`, `HOME`, `XDG_CONFIG_HOME`, `GIT_DIR`...):
git applies its own precedence and follows `include` and `includeIf`, so the hook never re-implements
them. Only commands that run no hook, pager, filter or helper are used.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence

from .releases import FULL_COMMIT, RepoFacts

# All git calls of one hook run share this budget, so the whole run stays well below the hook's timeout.
GIT_BUDGET_SECONDS = 5.0
# Variables of the hook's own environment that would make git run something or talk to someone.
_DROPPED = ("GIT_EXEC_PATH", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "GIT_PAGER", "PAGER", "GIT_EDITOR")


class GitRepository:
    """The git facts the hook needs; every failure is None, never a guess."""

    def __init__(self, git: str = "/usr/bin/git", budget: float = GIT_BUDGET_SECONDS) -> None:
        self.git = git
        self._end = time.monotonic() + budget
        self._cache: dict[tuple[object, ...], RepoFacts | None] = {}

    def _run(
        self, directory: str, options: Sequence[str], env: Mapping[str, str], *args: str
    ) -> tuple[int, str] | None:
        remaining = self._end - time.monotonic()
        if remaining <= 0:
            return None
        environ = {key: value for key, value in os.environ.items() if key not in _DROPPED}
        environ.update(env)
        environ.update(
            {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_PAGER": "cat", "GIT_OPTIONAL_LOCKS": "0"}
        )
        try:
            done = subprocess.run(
                [self.git, "--no-pager", "-C", directory, *options, *args],
                capture_output=True,
                timeout=remaining,
                env=environ,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.SubprocessError, ValueError):
            return None
        return done.returncode, done.stdout.decode("utf-8", "surrogateescape")

    def run(self, directory: str, *args: str, options: Sequence[str] = ()) -> tuple[int, str] | None:
        """One git command in `directory` with only the global `options` given, under the budget: (exit code,
        standard output), or None when git could not run or the budget is spent."""
        return self._run(directory, options, {}, *args)

    def facts(self, directory: str, options: Sequence[str], env: Mapping[str, str]) -> RepoFacts | None:
        key = (directory, tuple(options), tuple(sorted(env.items())))
        if key not in self._cache:
            self._cache[key] = self._facts(directory, options, env)
        return self._cache[key]

    def _facts(self, directory: str, options: Sequence[str], env: Mapping[str, str]) -> RepoFacts | None:
        listed = self._run(directory, options, env, "config", "--list", "-z")
        if listed is None or listed[0] not in (0, 1):
            return None  # an unreadable or broken config: what it says cannot be known
        config: dict[str, list[str]] = {}
        for entry in listed[1].split("\0"):
            if entry:
                name, _, value = entry.partition("\n")
                config.setdefault(_normal_key(name), []).append(value)
        # One call for every local ref and the one HEAD points at (`*`); it fails outside a repository.
        refs = self._run(directory, options, env, "for-each-ref", "--format=%(HEAD)%(refname)")
        if refs is None or refs[0] != 0:
            return RepoFacts(config=config, head=None, refs=(), repository=False)
        lines = [line for line in refs[1].splitlines() if len(line) > 1]
        return RepoFacts(
            config=config,
            head=next((line[1:] for line in lines if line[0] == "*"), None),
            refs=tuple(line[1:] for line in lines),
        )

    def rev_parse(
        self, directory: str, options: Sequence[str], ref: str, env: Mapping[str, str] | None = None
    ) -> str | None:
        if FULL_COMMIT.fullmatch(ref):
            return ref.lower()
        found = self._run(
            directory,
            options,
            env or {},
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            f"{ref}^{{commit}}",
        )
        if found is None or found[0] != 0:
            return None
        sha = found[1].strip()
        return sha.lower() if FULL_COMMIT.fullmatch(sha) else None


def _normal_key(name: str) -> str:
    """git prints section and key lower-cased and the subsection as written; the hook does the same."""
    section, _, rest = name.partition(".")
    if "." in rest:
        subsection, _, key = rest.rpartition(".")
        return f"{section.lower()}.{subsection}.{key.lower()}"
    return f"{section.lower()}.{rest.lower()}"
