"""A Forge (sentinel_domain.forge) in memory that records every check run it is asked to publish: the unit
tests' stand-in for GitHub's check runs API. It can be told to be unreachable for the next N calls, and to
forget a run (GitHub answering 404 for a run id it no longer has)."""

from dataclasses import dataclass, field, replace

from sentinel_domain.forge import (
    ChangedFiles,
    CheckRun,
    ForgeDocument,
    ForgeRefused,
    ForgeUnavailable,
    PublishedCheck,
)


@dataclass
class RecordingForge:
    calls: list[tuple[str, CheckRun]] = field(default_factory=list)  # every publish_check, answered or not
    runs: dict[str, tuple[str, CheckRun]] = field(default_factory=dict)  # run id -> (repository, latest)
    unavailable: int = 0  # the next this-many calls raise ForgeUnavailable
    _next_id: int = 1000

    def changed_files(self, repository: str, base: str, head: str) -> ChangedFiles:
        raise ForgeRefused("the recording forge answers check runs only")

    def read_file(self, repository: str, revision: str, path: str) -> ForgeDocument:
        raise ForgeRefused("the recording forge answers check runs only")

    def pull_request_author(self, repository: str, number: int) -> str | None:
        raise ForgeRefused("the recording forge answers check runs only")

    def publish_check(self, repository: str, check: CheckRun) -> PublishedCheck:
        self.calls.append((repository, check))
        if self.unavailable > 0:
            self.unavailable -= 1
            raise ForgeUnavailable("GitHub answered 502", retry_after_seconds=30)
        if check.check_run_id is None:
            self._next_id += 1
            run_id = str(self._next_id)
        elif check.check_run_id in self.runs:
            run_id = check.check_run_id
        else:
            raise ForgeRefused(f"no check run {check.check_run_id}")
        self.runs[run_id] = (repository, replace(check, check_run_id=run_id))
        return PublishedCheck(check_run_id=run_id, html_url=f"https://github.com/{repository}/runs/{run_id}")

    def latest(self, name: str, head_sha: str) -> CheckRun | None:
        """What GitHub shows for this name on this commit: the newest run created with it."""
        found = [run for _repo, run in self.runs.values() if (run.name, run.head_sha) == (name, head_sha)]
        return max(found, key=lambda run: int(run.check_run_id or 0)) if found else None
