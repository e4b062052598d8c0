"""The seam between Sentinel and a forge (GitHub first; another forge implements the same port).

The forge, not the agent, says what a change is: the use cases ask a `Forge` for the changed files between
two commits and for the documents the project's rules name, read at both commits, and publish the decision
back as a check on the judged commit. Adapters live in `sentinel_service.adapters` (`github_app`); the tests'
fake GitHub answers the same calls over loopback.

Failing closed: a file list the forge truncated (or may have) is `complete=False` and is never attested; a
forge that cannot be reached, rate-limits or answers an error raises `ForgeUnavailable`, which the outbox
retries with backoff and which never turns a check `success`."""

from dataclasses import dataclass, field
from typing import Literal, Protocol

CheckConclusion = Literal["success", "failure", "action_required", "neutral"]
CHECK_SUMMARY_LIMIT = 65535  # GitHub's limit on a check run's output.summary, in characters


class ForgeUnavailable(Exception):
    """The forge could not answer now (unreachable, rate-limited, 5xx): try again later, decide nothing."""

    def __init__(self, detail: str, retry_after_seconds: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retry_after_seconds = retry_after_seconds


class ForgeRefused(Exception):
    """The forge answered, and the answer cannot be used (not found, forbidden, malformed): no retry helps."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class ChangedFiles:
    """The paths a change touches between `base` and `head`, as the forge reports them. A rename owes both
    its old and its new path. `complete` is False when the forge's list is, or may be, truncated and no tree
    diff could replace it: such a list is never attested."""

    base: str
    head: str
    files: tuple[str, ...]
    complete: bool
    source: str = ""  # how the list was obtained, for the record ("compare", "pull_files", "tree_diff")


@dataclass(frozen=True)
class CheckRun:
    """One check on one commit. `check_run_id` set means update that run; None means create one."""

    name: str  # "sentinel/<environment>"
    head_sha: str
    conclusion: CheckConclusion
    title: str
    summary: str  # Markdown, at most CHECK_SUMMARY_LIMIT characters
    external_id: str = ""  # the candidate id
    details_url: str | None = None
    check_run_id: str | None = None


@dataclass(frozen=True)
class PublishedCheck:
    check_run_id: str
    html_url: str = ""


@dataclass(frozen=True)
class ForgeDocument:
    """One document read at one commit: `text` None when the path does not exist there."""

    path: str
    revision: str
    text: str | None


class Forge(Protocol):
    def changed_files(self, repository: str, base: str, head: str) -> ChangedFiles:
        """The files changed from `base` to `head` (full commit ids), renames with both paths."""
        ...

    def read_file(self, repository: str, revision: str, path: str) -> ForgeDocument:
        """One file's text at one commit (None when it does not exist there)."""
        ...

    def publish_check(self, repository: str, check: CheckRun) -> PublishedCheck:
        """Create (or, with `check_run_id`, update) the check run; answers its id."""
        ...

    def pull_request_author(self, repository: str, number: int) -> str | None:
        """The login that opened pull request `number` (None when the forge knows no such pull request):
        the merge queue's commit is judged for the queued pull request's author as its requester of record."""
        ...


@dataclass
class ForgeFiles:
    """What a forge-attested change carries into candidate creation, gathered by the use case."""

    changed: ChangedFiles
    documents: dict[str, tuple[ForgeDocument, ForgeDocument]] = field(default_factory=dict)
