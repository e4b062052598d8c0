"""The report writer: the single path that changes task state (DOMAIN.md rules 19 to 22)."""

from typing import Any

from .decision import Finding, Judge, finding, sort_findings
from .errors import Refusal
from .models import Actor, ReportRequest
from .state import CandidateState, ProjectState


def find_task(state: CandidateState, task_id: str) -> dict[str, Any] | None:
    plan = state.plan
    for task in plan["plan"]["tasks"] if plan else []:
        if task["task_id"] == task_id:
            return dict(task)
    return None


class ReportWriter:
    """Judges a task report against evidence and returns the attempt fact; it alone sets `passes`."""

    @staticmethod
    def write(
        state: CandidateState,
        project: ProjectState,
        task_id: str,
        request: ReportRequest,
        actor: Actor,
        now: str,
    ) -> dict[str, Any]:
        if state.plan_digest is None or request.plan_digest != state.plan_digest:
            raise Refusal("DIGEST_MISMATCH", "the report names a plan digest that is not the current plan's")
        task = find_task(state, task_id)
        if task is None:
            raise Refusal("NOT_FOUND", f"the current plan has no task {task_id}")
        digest = state.plan_digest
        waiting = [d for d in task["depends_on"] if not state.task_passes(digest, d)]
        if waiting:
            raise Refusal(
                "TASK_NOT_ELIGIBLE",
                f"task {task_id} depends on {', '.join(waiting)}, which do not "
                "pass under this plan digest yet",
            )
        if request.status == "blocked" and not (request.blocked_reason or "").strip():
            raise Refusal("VALIDATION_FAILED", "a blocked report needs a blocked_reason")

        findings: list[Finding] = []
        if request.status == "completed":
            findings = ReportWriter._unproven(state, project, task, request, now)
        recorded = {
            "completed": "completed" if not findings else "failed",
            "failed": "failed",
            "blocked": "blocked",
        }[request.status]
        attempt = len(state.reports_for(digest, task_id)) + 1
        return {
            "type": "task.reported",
            "task_id": task_id,
            "plan_digest": digest,
            "attempt": attempt,
            "claimed_status": request.status,
            "recorded_status": recorded,
            "passes": recorded == "completed",
            "checks": [c.model_dump(mode="json") for c in request.checks],
            "findings": [f.model_dump() for f in findings],
            "summary": request.summary,
            "blocked_reason": request.blocked_reason,
            "reporter": actor.fact(),
            "recorded_at": now,
        }

    @staticmethod
    def _unproven(
        state: CandidateState, project: ProjectState, task: dict[str, Any], request: ReportRequest, now: str
    ) -> list[Finding]:
        """Every required check of the task must be satisfied by evidence of this candidate; every claim
        must name evidence of this candidate for that check."""
        findings: list[Finding] = []
        evidence_by_id = {e["evidence_id"]: e for e in state.evidence}
        check_ids = {c["check_id"] for c in task["checks"]}
        for claim in request.checks:
            evidence = evidence_by_id.get(claim.evidence_id)
            if claim.check_id not in check_ids or evidence is None or evidence["check_id"] != claim.check_id:
                findings.append(
                    finding(
                        "EVIDENCE_MISSING",
                        f"claimed evidence {claim.evidence_id} is not evidence "
                        f"of this candidate for check {claim.check_id}",
                        check_id=claim.check_id,
                        task_id=task["task_id"],
                    )
                )
        judge = Judge(state, project, now)
        for check in task["checks"]:
            for obligation_id in check["covers"]:
                findings += judge.findings(check, obligation_id, task["task_id"])
        return sort_findings(findings)
