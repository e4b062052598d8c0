"""What the release analysis finds, and the git facts it asks for.

A `Release` is a command the gate must judge; a `Hidden` construct is one the gate cannot see through, a
denial on its own, never judged by the service. The few facts that need git (the branch an implicit push
updates, git aliases) come through `Repository`, so the analysis itself stays pure.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from .shell_lexer import Word

# A revision named in full needs no lookup (and may not exist locally, e.g. a pull request's head).
FULL_COMMIT = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")

# ---- what the analysis finds ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Release:
    """A release command the gate must judge."""

    command: str  # the simple command, rendered canonically
    refs: tuple[str, ...] = ()  # what to resolve with `git rev-parse`; none: HEAD
    directory: str | None = None  # where it runs; None: the hook cannot tell
    git_options: tuple[str, ...] = ()  # --git-dir / --work-tree / -c, passed on to git
    unresolved: str | None = None  # why the revision it acts on cannot be known
    git_env: tuple[tuple[str, str], ...] = ()  # the environment the command gives git


@dataclass(frozen=True)
class Hidden:
    """A construct the gate cannot see through (a denial on its own, never judged by the service)."""

    construct: str
    command: str


@dataclass
class Analysis:
    releases: list[Release] = field(default_factory=list)
    hidden: list[Hidden] = field(default_factory=list)


@dataclass(frozen=True)
class RepoFacts:
    """What git says about the repository a command runs in, with every config source it would see."""

    config: dict[str, list[str]]  # keys as `git config --list` prints them; values in order of precedence
    head: str | None  # the full ref HEAD points at; None when detached or unknown
    refs: tuple[str, ...]  # every local ref
    repository: bool = True

    def get(self, key: str) -> str | None:
        values = self.config.get(key)
        return values[-1] if values else None


class Repository(Protocol):
    """The git facts the analysis needs. Directory is absolute; options are global git options."""

    def facts(self, directory: str, options: Sequence[str], env: Mapping[str, str]) -> RepoFacts | None: ...


class NoRepository:
    """Answers nothing: every implicit push destination is unknown and no git alias exists."""

    def facts(self, directory: str, options: Sequence[str], env: Mapping[str, str]) -> RepoFacts | None:
        return None


# ---- where a release runs ------------------------------------------------------------------------------


def _replace(release: Release, **changes: object) -> Release:
    return replace(release, **changes)


def _located(release: Release, directory: str | None) -> Release:
    if directory is None and release.unresolved is None:
        return _replace(release, unresolved="the command runs in a directory the hook cannot follow")
    return _replace(release, directory=directory)


def _change_directory(name: str, args: Sequence[Word], directory: str | None) -> str | None:
    """The working directory after cd/pushd/popd; None when it cannot be known from the text."""
    operands = [w for w in args if not (w.text.startswith("-") and w.text != "-" and not w.dynamic)]
    if name == "popd" or not operands or directory is None:
        return None
    target = operands[0]
    if target.dynamic or target.text == "-" or not target.text:
        return None
    return posixpath.normpath(posixpath.join(directory, target.text))
