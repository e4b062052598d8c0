"""Prototypes of the product changes the report recommends, measured against the product in the same run.
They reuse the product's own rules unchanged and only change how facts are looked up, so each one's output
is checked equal to the product's before its time counts. Never imported by product code."""

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sentinel_domain import decision as decision_module
from sentinel_domain.decision import Decision, decide
from sentinel_domain.state import CandidateState, ProjectState


class _IndexedCandidate:
    """The candidate state, with its evidence grouped by (check, obligation) and its reports by (digest,
    task) once per decision: what decide() scanned in full for every check and every task."""

    def __init__(self, state: CandidateState) -> None:
        self._state = state
        self.evidence_by_check: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for e in state.evidence:  # chain order kept within each group
            for obligation_id in e["binding"]["obligation_ids"]:
                self.evidence_by_check[(e["check_id"], obligation_id)].append(e)
        self._reports: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for report in state.reports:
            self._reports[(report["plan_digest"], report["task_id"])].append(report)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)

    def reports_for(self, digest: str, task_id: str) -> list[dict[str, Any]]:
        return list(self._reports.get((digest, task_id), ()))


class _EvidenceView:
    """What check_findings sees for one (check, obligation): only the evidence written for that pair."""

    def __init__(self, indexed: _IndexedCandidate, evidence: list[dict[str, Any]]) -> None:
        self._indexed = indexed
        self.evidence = evidence

    def __getattr__(self, name: str) -> Any:
        return getattr(self._indexed, name)


class _MemoProject:
    """The project state, with each policy looked up (and validated by pydantic) once per decision."""

    def __init__(self, project: ProjectState) -> None:
        self._project = project
        self._policies: dict[tuple[str, str | None, int | None], Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._project, name)

    def policy(self, policy_id: str, as_of: str | None = None, version: int | None = None) -> Any:
        key = (policy_id, as_of, version)
        if key not in self._policies:
            self._policies[key] = self._project.policy(policy_id, as_of, version)
        return self._policies[key]


@contextmanager
def _indexed_check_findings() -> Iterator[None]:
    original = decision_module.check_findings

    def check_findings(
        state: Any, project: Any, check: dict[str, Any], obligation_id: str, as_of: str
    ) -> list[dict[str, Any]]:
        if isinstance(state, _IndexedCandidate):
            state = _EvidenceView(state, state.evidence_by_check.get((check["check_id"], obligation_id), []))
        return original(state, project, check, obligation_id, as_of)

    decision_module.check_findings = check_findings
    try:
        yield
    finally:
        decision_module.check_findings = original


def decide_indexed(state: CandidateState, project: ProjectState, as_of: str) -> Decision:
    """decide(), with evidence and reports indexed once and policies memoised: linear in the facts."""
    with _indexed_check_findings():
        return decide(_IndexedCandidate(state), _MemoProject(project), as_of)  # type: ignore[arg-type]
