"""An in-memory Forge (sentinel_domain.forge): the repositories' commits as path -> text maps, the changes
between commits as file lists (renames owe both paths; a list may be marked truncated), the check runs
published, and faults a test switches on (unavailable for the next n calls, refused).

It keeps the port's contract where the worker relies on it: a changed-file list answers for exactly the
commits asked, a file absent at a commit reads as None, and an unavailable forge raises ForgeUnavailable
before answering anything."""

from dataclasses import dataclass, field

from sentinel_domain.forge import (
    ChangedFiles,
    CheckRun,
    ForgeDocument,
    ForgeRefused,
    ForgeUnavailable,
    PublishedCheck,
)


@dataclass
class MemoryForge:
    # (repository, commit) -> {path: text}
    trees: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    # (repository, base, head) -> (files, renames as (old, new), complete)
    changes: dict[tuple[str, str, str], tuple[list[str], list[tuple[str, str]], bool]] = field(
        default_factory=dict
    )
    checks: list[tuple[str, CheckRun]] = field(default_factory=list)
    calls: list[tuple[str, ...]] = field(default_factory=list)
    pull_authors: dict[tuple[str, int], str] = field(default_factory=dict)  # (repository, number) -> login
    unavailable_for: int = 0  # the next n calls raise ForgeUnavailable
    refuse: str | None = None  # every call raises ForgeRefused with this detail

    def commit(self, repository: str, sha: str, files: dict[str, str]) -> None:
        self.trees[(repository, sha)] = dict(files)

    def change(
        self,
        repository: str,
        base: str,
        head: str,
        files: list[str],
        renames: list[tuple[str, str]] | None = None,
        complete: bool = True,
    ) -> None:
        self.changes[(repository, base, head)] = (list(files), list(renames or []), complete)

    def _fault(self) -> None:
        if self.unavailable_for > 0:
            self.unavailable_for -= 1
            raise ForgeUnavailable("the forge is unavailable (test fault)", retry_after_seconds=1)
        if self.refuse is not None:
            raise ForgeRefused(self.refuse)

    def changed_files(self, repository: str, base: str, head: str) -> ChangedFiles:
        self.calls.append(("changed_files", repository, base, head))
        self._fault()
        if (repository, base, head) not in self.changes:
            raise ForgeRefused(f"no comparison {base[:7]}...{head[:7]} in {repository}")
        files, renames, complete = self.changes[(repository, base, head)]
        paths = {*files, *(old for old, _new in renames), *(new for _old, new in renames)}
        return ChangedFiles(base, head, tuple(sorted(paths)), complete, "memory")

    def read_file(self, repository: str, revision: str, path: str) -> ForgeDocument:
        self.calls.append(("read_file", repository, revision, path))
        self._fault()
        tree = self.trees.get((repository, revision))
        if tree is None:
            raise ForgeRefused(f"no commit {revision[:7]} in {repository}")
        return ForgeDocument(path, revision, tree.get(path))

    def publish_check(self, repository: str, check: CheckRun) -> PublishedCheck:
        self.calls.append(("publish_check", repository, check.head_sha, check.name))
        self._fault()
        self.checks.append((repository, check))
        return PublishedCheck(check.check_run_id or str(len(self.checks)))

    def pull_request_author(self, repository: str, number: int) -> str | None:
        self.calls.append(("pull_request_author", repository, str(number)))
        self._fault()
        return self.pull_authors.get((repository, number))
