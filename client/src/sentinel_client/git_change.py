"""A candidate's change read from git: `BASE..HEAD` resolved to full commit ids, the files changed between
them, and each OpenAPI document the project's derivation rules name, read at both commits.

What the forge worker reads from GitHub for a pull request (sentinel_domain.usecases.forge), read from a
local clone instead: renames count as both paths (`--no-renames`), and a document is sent only when its
path changed (git's list is always complete), each side its text or null where the file is absent. Every
failure is a CommandRefused with a code and a next step, raised before anything is sent.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .cli_output import CommandRefused
from .git_repository import GitRepository

# What one change context carries (the service's models.Change and its path bound): a longer list could not
# be sent complete, and an incomplete list must never pass for the whole change.
MAX_FILES = 20000
MAX_PATH_CHARS = 1024
# Reading a large repository's diff takes a while; a person's command may wait longer than the hook.
GIT_BUDGET_SECONDS = 120.0
NOT_HERE = "-"  # `--openapi NAME=-`: the document lives in another repository
_RANGE = re.compile(r"^(?P<base>[^\s.](?:\S*[^\s.])?|)(?P<dots>\.\.\.?)(?P<head>[^\s.]\S*|)$")
# What a revision holds, whatever the clone says besides: `refs/replace/*` (and grafts) would have git read
# another commit's tree and blobs under the real commit id, so they are never honoured.
_GIT_OPTIONS = ("--no-replace-objects",)
_BLOB = re.compile(r"^(?P<mode>\d{6}) (?P<type>\w+) (?P<oid>[0-9a-f]{40}|[0-9a-f]{64})\t")


@dataclass(frozen=True)
class GitRange:
    base: str
    head: str
    merge_base: bool  # `A...B`: the change since B left A (their merge base), as a pull request shows it

    def __str__(self) -> str:
        return f"{self.base}{'...' if self.merge_base else '..'}{self.head}"


def parse_range(text: str) -> GitRange:
    """`BASE..HEAD` or `BASE...HEAD`; an empty side is HEAD, as git reads it. Anything else is BAD_RANGE."""
    found = _RANGE.match(text or "")
    if not found or (not found["base"] and not found["head"]) or text.startswith("-"):
        raise CommandRefused(
            "BAD_RANGE",
            f"{text!r} is not a range of two commits",
            "give --from-git BASE..HEAD, e.g. --from-git origin/main..HEAD",
        )
    return GitRange(found["base"] or "HEAD", found["head"] or "HEAD", found["dots"] == "...")


def parse_openapi_paths(items: Sequence[str]) -> dict[str, str]:
    """`--openapi NAME=PATH` (PATH `-`: not in this repository) as a mapping."""
    paths: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise CommandRefused(
                "BAD_OPTION", f"--openapi {item!r} is not NAME=PATH", "give --openapi NAME=PATH (or NAME=-)"
            )
        paths[name] = path.strip().lstrip("/") if path.strip() != NOT_HERE else NOT_HERE
    return paths


def _absolute_git() -> str | None:
    """git from PATH's absolute directories only: an empty or relative entry means the current directory, the
    agent's working tree, where a program named `git` would run as the person reading the change."""
    directories = [d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if os.path.isabs(d)]
    return shutil.which("git", path=os.pathsep.join(directories)) if directories else None


class GitReader:
    """git in one working tree, through the hook's GitRepository (its environment scrubbing and budget)."""

    def __init__(self, directory: str, git: str | None = None) -> None:
        found = git or _absolute_git()
        if not found:
            raise CommandRefused("GIT_UNAVAILABLE", "git is not installed or not on PATH", "install git")
        self.repository = GitRepository(git=found, budget=GIT_BUDGET_SECONDS)
        top = self._run(directory, "rev-parse", "--show-toplevel")
        if top[0] != 0 or not top[1].strip():
            raise CommandRefused(
                "NOT_A_GIT_REPOSITORY",
                f"{directory} is not inside a git working tree",
                "run it in your clone, or give --repo DIR",
            )
        self.top = top[1].strip()

    def _run(self, directory: str, *args: str) -> tuple[int, str]:
        done = self.repository.run(directory, *args, options=_GIT_OPTIONS)
        if done is None:
            raise CommandRefused(
                "GIT_FAILED",
                f"git {args[0]} did not finish",
                "try again; a very large repository may need time",
            )
        return done

    def commit(self, ref: str) -> str:
        sha = self.repository.rev_parse(self.top, _GIT_OPTIONS, ref)
        if sha is None or self._run(self.top, "cat-file", "-e", f"{sha}^{{commit}}")[0] != 0:
            raise CommandRefused(
                "BAD_RANGE",
                f"{ref!r} is not a commit in {self.top}",
                "check the range with `git log --oneline BASE..HEAD` (fetch the base first if it is remote)",
            )
        return sha

    def resolve(self, given: GitRange) -> tuple[str, str]:
        """The full commit ids of the range's base (the merge base for `...`) and head."""
        base, head = self.commit(given.base), self.commit(given.head)
        if given.merge_base:
            code, out = self._run(self.top, "merge-base", base, head)
            if code != 0 or not out.strip():
                raise CommandRefused(
                    "BAD_RANGE", f"{given} has no merge base", "give the range with two dots: BASE..HEAD"
                )
            base = out.strip().lower()
        return base, head

    def changed_files(self, base: str, head: str) -> list[str]:
        code, out = self._run(
            self.top,
            "diff",
            "--name-only",
            "-z",
            "--no-renames",
            "--no-relative",
            "--no-ext-diff",
            # A submodule whose pointer moved is a changed path, whatever `.gitmodules` (committed by the
            # change's author) or the clone's config says to ignore: GitHub lists it.
            "--ignore-submodules=none",
            base,
            head,
        )
        if code != 0:
            raise CommandRefused("GIT_FAILED", f"git diff {base[:12]}..{head[:12]} failed", "check the range")
        files = sorted({path for path in out.split("\0") if path})
        if len(files) > MAX_FILES:
            raise CommandRefused(
                "TOO_MANY_FILES",
                f"{len(files)} files changed; a change context holds at most {MAX_FILES}",
                "split the change into smaller candidates",
            )
        long = [path for path in files if len(path) > MAX_PATH_CHARS]
        if long:
            raise CommandRefused(
                "BAD_PATH", f"a changed path is longer than {MAX_PATH_CHARS}: {long[0][:80]}…"
            )
        return files

    def text_at(self, revision: str, path: str) -> str | None:
        """The file's text at `revision`, or None where it does not exist there."""
        code, out = self._run(self.top, "ls-tree", "--full-tree", revision, "--", path)
        line = next((entry for entry in out.splitlines() if entry.endswith("\t" + path)), None)
        if code != 0 or line is None:
            return None
        entry = _BLOB.match(line)
        if entry is None or entry["type"] != "blob":
            raise CommandRefused("BAD_OPENAPI_PATH", f"{path} at {revision[:12]} is not a file")
        code, text = self._run(self.top, "cat-file", "blob", entry["oid"])
        if code != 0:
            raise CommandRefused("GIT_FAILED", f"cannot read {path} at {revision[:12]}")
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8-sig")
        except UnicodeDecodeError:
            raise CommandRefused(
                "MALFORMED_CHANGE_CONTEXT", f"{path} at {revision[:12]} is not UTF-8 text"
            ) from None


def documents_named(config: Mapping[str, Any]) -> list[str]:
    """The OpenAPI documents the project's derivation rules name, in order, once."""
    names: list[str] = []
    for rule in config.get("derivation_rules") or []:
        name = rule.get("openapi") if isinstance(rule, dict) else None
        if isinstance(name, str) and name not in names:
            names.append(name)
    return names


def document_path(
    name: str, config: Mapping[str, Any], subject: str, given: Mapping[str, str], exists: Any
) -> str | None:
    """Where the document `name` lives in this repository: `--openapi NAME=PATH` first, then the project's
    `github.repositories[].openapi` (the repository for this subject first), then the name itself when it
    is a file at either commit (`exists(path)`). None: not in this repository. No answer is refused: a
    document nobody can find would silently derive nothing."""
    if name in given:
        return None if given[name] == NOT_HERE else given[name]
    repositories = [
        r for r in ((config.get("github") or {}).get("repositories") or []) if isinstance(r, dict)
    ]
    mine = [r for r in repositories if r.get("subject") == subject] or repositories
    paths = sorted({str(r["openapi"][name]) for r in mine if name in (r.get("openapi") or {})})
    if len(paths) == 1:
        return paths[0]
    if len(paths) > 1:
        raise CommandRefused(
            "OPENAPI_PATH_AMBIGUOUS",
            f"the project's repositories place document {name} at {', '.join(paths)}",
            f"say which with --openapi {name}=PATH",
        )
    if exists(name):
        return name
    raise CommandRefused(
        "OPENAPI_PATH_UNKNOWN",
        f"a derivation rule names the OpenAPI document {name}, and nothing says where it lives",
        f"give --openapi {name}=PATH (or {name}=- when it is not in this repository)",
    )


def openapi_changes(
    reader: GitReader,
    base: str,
    head: str,
    files: Sequence[str],
    config: Mapping[str, Any],
    subject: str,
    openapi_paths: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """`change.openapi`: each document a rule names whose path changed between the commits, read at both
    (null where absent); a document whose text is the same on both sides derives nothing and is left out."""
    changed = set(files)
    documents = []
    for name in documents_named(config):

        def exists(path: str) -> bool:
            return path in changed or reader.text_at(head, path) is not None

        path = document_path(name, config, subject, openapi_paths or {}, exists)
        if path is None or path not in changed:
            continue
        before, after = reader.text_at(base, path), reader.text_at(head, path)
        if before != after:
            documents.append({"name": name, "before": before, "after": after})
    return documents
