"""The git facts the hook reads from the repository a command runs in, with the git on PATH."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence

from .releases import FULL_COMMIT

# All git calls of one hook run share this budget, so the whole run stays within
# SENTINEL_TIMEOUT_SECONDS (the service) plus this, below the hook timeout the docs recommend (60 s).
GIT_BUDGET_SECONDS = 5.0


class GitRepository:
    """The git facts the hook needs, read with the git on PATH; every failure is None, never a guess."""

    def __init__(self, budget: float = GIT_BUDGET_SECONDS) -> None:
        self._end = time.monotonic() + budget
        self._environ = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}

    def _git(self, directory: str, options: Sequence[str], *args: str) -> str | None:
        remaining = self._end - time.monotonic()
        if remaining <= 0:
            return None
        try:
            done = subprocess.run(
                ["git", "-C", directory, *options, *args],
                capture_output=True,
                text=True,
                timeout=remaining,
                env=self._environ,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.SubprocessError, ValueError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    def current_branch(self, directory: str, options: Sequence[str]) -> str | None:
        return self._git(directory, options, "symbolic-ref", "--quiet", "--short", "HEAD") or None

    def push_destinations(self, directory: str, options: Sequence[str]) -> list[str] | None:
        branch = self.current_branch(directory, options)
        if branch is None:
            return None
        if self._git(directory, options, "config", "--get-regexp", r"^remote\..*\.push$"):
            return None  # configured push refspecs: the destination is theirs to decide, not visible here
        mapped = self._git(
            directory,
            options,
            "for-each-ref",
            "--format=%(upstream:remoteref)%0a%(push:remoteref)",
            f"refs/heads/{branch}",
        )
        names = {branch}
        for line in (mapped or "").splitlines():
            if line.startswith("refs/heads/"):
                names.add(line.removeprefix("refs/heads/"))
        return sorted(names)

    def git_alias(self, directory: str, options: Sequence[str], name: str) -> str | None:
        return self._git(directory, options, "config", "--get", f"alias.{name}")

    def rev_parse(self, directory: str, options: Sequence[str], ref: str) -> str | None:
        if FULL_COMMIT.fullmatch(ref):
            return ref.lower()
        found = self._git(
            directory, options, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"
        )
        return found.lower() if found and FULL_COMMIT.fullmatch(found) else None
