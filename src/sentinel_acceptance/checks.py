"""What one check found: a stable name, a status, a sentence saying why, the evidence read, and its timing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

PASSED = "passed"
FAILED = "failed"
# A check that could not run because something it needs failed first (no stack outputs, no tokens, a flow
# step before it broke): never a pass, and it fails the gate like a failure does.
BLOCKED = "blocked"
# The emulation has no such thing to read (moto does not create it): said plainly, never counted as passed.
NOT_EMULATED = "not emulated"
# The account does not let this caller read it (for example AWS Budgets without budgets:ViewBudget).
UNAVAILABLE = "unavailable"

STATUSES = (PASSED, FAILED, BLOCKED, NOT_EMULATED, UNAVAILABLE)
FAILING = frozenset({FAILED, BLOCKED})


class CheckFailed(Exception):
    """Raised inside a check: the check failed for the reason given; `evidence` goes into the report."""

    def __init__(self, detail: str, evidence: dict[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.evidence = evidence or {}


class CheckSkipped(Exception):
    """Raised inside a check that cannot be judged here: status NOT_EMULATED, UNAVAILABLE or BLOCKED."""

    def __init__(self, status: str, detail: str, evidence: dict[str, Any] | None = None) -> None:
        if status not in (BLOCKED, NOT_EMULATED, UNAVAILABLE):
            raise ValueError(f"not a skip status: {status}")
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.evidence = evidence or {}


@dataclass
class CheckResult:
    name: str
    title: str
    status: str
    detail: str
    ran_against: str  # what answered: "AWS CloudFormation", "moto CloudFormation", "local runner", ...
    evidence: dict[str, Any] = field(default_factory=dict)
    duration_ms: int = 0

    @property
    def failing(self) -> bool:
        return self.status in FAILING

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class CheckLog:
    """The results of one run, in the order the checks ran."""

    def __init__(self, on_result: Callable[[CheckResult], None] = lambda _r: None) -> None:
        self.results: list[CheckResult] = []
        self._on_result = on_result

    def add(self, result: CheckResult) -> CheckResult:
        if any(r.name == result.name for r in self.results):
            raise ValueError(f"check {result.name} recorded twice")
        self.results.append(result)
        self._on_result(result)
        return result

    def run(
        self, name: str, title: str, ran_against: str, body: Callable[[], tuple[str, dict[str, Any]]]
    ) -> CheckResult:
        """Run `body` (returns the passing detail and its evidence); any exception is a failure, never a
        pass."""
        started = time.monotonic()
        try:
            detail, evidence = body()
            status = PASSED
        except CheckFailed as failed:
            status, detail, evidence = FAILED, failed.detail, failed.evidence
        except CheckSkipped as skipped:
            status, detail, evidence = skipped.status, skipped.detail, skipped.evidence
        except Exception as error:  # an unexpected error is a failed check that says what it was
            status, detail, evidence = FAILED, f"{type(error).__name__}: {error}", {}
        return self.add(
            CheckResult(
                name, title, status, detail, ran_against, evidence, int((time.monotonic() - started) * 1000)
            )
        )

    def status(self, name: str) -> str | None:
        return next((r.status for r in self.results if r.name == name), None)

    @property
    def passed(self) -> bool:
        """The gate passes when nothing failed or was blocked, and at least one check passed."""
        return (
            bool(self.results)
            and not any(r.failing for r in self.results)
            and any(r.status == PASSED for r in self.results)
        )

    def counts(self) -> dict[str, int]:
        return {status: sum(1 for r in self.results if r.status == status) for status in STATUSES}


@contextmanager
def stopwatch() -> Iterator[Callable[[], int]]:
    started = time.monotonic()
    yield lambda: int((time.monotonic() - started) * 1000)
