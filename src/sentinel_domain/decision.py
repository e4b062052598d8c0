"""The deterministic decision (DOMAIN.md rules 1 to 10 and 22): `ready` only when nothing is unproven."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .canonical import digest
from .evidence import scope_covers
from .models import Policy
from .reviews import approval_status
from .state import CandidateState, ProjectState
from .times import parse_time

TRUST_FINDING = {"unverified": "EVIDENCE_UNVERIFIED", "untrusted": "EVIDENCE_UNTRUSTED"}


class Finding(BaseModel):
    """One reason a decision holds (or a report does not pass): a stable code and where it applies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str
    obligation_id: str | None = None
    check_id: str | None = None
    task_id: str | None = None
    detail: str
    remediation_hint: str | None = None

    def where(self, task_id: str) -> "Finding":
        return self.model_copy(update={"task_id": task_id})


def finding(
    code: str,
    detail: str,
    *,
    obligation_id: str | None = None,
    check_id: str | None = None,
    task_id: str | None = None,
    remediation_hint: str | None = None,
) -> Finding:
    return Finding(
        code=code,
        obligation_id=obligation_id,
        check_id=check_id,
        task_id=task_id,
        detail=detail,
        remediation_hint=remediation_hint,
    )


def findings_digest(findings: list[Finding]) -> str:
    return digest([f.model_dump() for f in findings])


def sort_findings(findings: list[Finding]) -> list[Finding]:
    unique = {digest(f.model_dump()): f for f in findings}
    return sorted(
        unique.values(),
        key=lambda f: (f.code, f.obligation_id or "", f.check_id or "", f.task_id or "", f.detail),
    )


def _trust_at(evidence: dict[str, Any], project: ProjectState, as_of: str) -> str:
    """A principal revoked as compromised makes its evidence untrusted from the revocation on."""
    if evidence["trust"] == "verified" and project.compromised_since(evidence["publisher"]["id"], as_of):
        return "untrusted"
    return str(evidence["trust"])


def _binding_problems(
    evidence: dict[str, Any], state: CandidateState, obligation: dict[str, Any]
) -> list[str]:
    candidate = state.candidate
    problems = []
    if evidence["subject"] != candidate["subject"]:
        problems.append("EVIDENCE_WRONG_SUBJECT")
    if evidence["revision"] != candidate["revision"]:
        problems.append("EVIDENCE_WRONG_REVISION")
    if evidence["environment"] != candidate["environment"]:
        problems.append("EVIDENCE_WRONG_ENVIRONMENT")
    if not scope_covers(evidence["scope"], obligation["scope"]):
        problems.append("EVIDENCE_WRONG_SCOPE")
    return problems


def check_findings(
    state: CandidateState, project: ProjectState, check: dict[str, Any], obligation_id: str, as_of: str
) -> list[Finding]:
    """Rule 7 for one (check, obligation): [] when satisfied, else why not."""
    where = {"obligation_id": obligation_id, "check_id": str(check["check_id"])}
    policy_entry = project.policy(check["policy_ref"], as_of)
    obligation = state.obligations.get(obligation_id)
    if policy_entry is None or obligation is None:
        return [
            finding(
                "EVIDENCE_MISSING", "the check's policy or obligation is unknown at this instant", **where
            )
        ]
    version, policy = policy_entry
    hint = policy.remediation_hint or None
    bound = [
        e
        for e in state.evidence_for(check["check_id"], obligation_id)
        if e["binding"]["policy_id"] == check["policy_ref"] and e["binding"]["policy_version"] == version
    ]
    deciding = [
        e
        for e in bound
        if _trust_at(e, project, as_of) == "verified" and not _binding_problems(e, state, obligation)
    ]
    if deciding:
        newest = max(deciding, key=lambda e: (e["observed_at"], e["recorded_at"], e["_seq"]))
        return _judge_newest(newest, policy, as_of, where, hint)
    if not bound:
        return [
            finding(
                "EVIDENCE_MISSING",
                f"no evidence for check {check['check_id']} under policy {check['policy_ref']} v{version}",
                remediation_hint=hint,
                **where,
            )
        ]
    out: list[Finding] = []
    for e in bound:
        trust = _trust_at(e, project, as_of)
        if trust in TRUST_FINDING:
            out.append(
                finding(
                    TRUST_FINDING[trust],
                    f"evidence {e['evidence_id']} is {trust}: its publisher "
                    f"{e['publisher']['id']} is not a trusted ci publisher of {check['policy_ref']}",
                    remediation_hint=hint,
                    **where,
                )
            )
        for code in _binding_problems(e, state, obligation):
            out.append(
                finding(
                    code,
                    f"evidence {e['evidence_id']} is not bound to this candidate's "
                    f"{code.removeprefix('EVIDENCE_WRONG_').lower()}",
                    remediation_hint=hint,
                    **where,
                )
            )
    return out


def _judge_newest(
    e: dict[str, Any], policy: Policy, as_of: str, where: dict[str, str], hint: str | None
) -> list[Finding]:
    label = f"evidence {e['evidence_id']}"
    if e["outcome"] == "fail":
        return [
            finding(
                "EVIDENCE_NEGATIVE",
                f"{label} failed: {policy.fail_message or 'the check failed'}",
                remediation_hint=hint,
                **where,
            )
        ]
    if e["outcome"] != "pass":
        return [
            finding(
                "EVIDENCE_UNKNOWN",
                f"{label} proves nothing: no test was executed",
                remediation_hint=hint,
                **where,
            )
        ]
    age = (parse_time(as_of) - parse_time(min(e["observed_at"], e["recorded_at"]))).total_seconds()
    if not 0 <= age < policy.max_evidence_age_seconds:
        return [
            finding(
                "EVIDENCE_STALE",
                f"{label} is {age:.0f} s old; the policy accepts under {policy.max_evidence_age_seconds} s",
                remediation_hint=hint,
                **where,
            )
        ]
    if policy.min_tests >= 1 and (e["kind"] != "junit" or e["counts"]["tests"] < policy.min_tests):
        return [
            finding(
                "EVIDENCE_TOO_FEW_TESTS",
                f"{label} executed {e['counts']['tests']} tests; the policy "
                f"needs a JUnit report with at least {policy.min_tests}",
                remediation_hint=hint,
                **where,
            )
        ]
    return []


class Decision(BaseModel):
    """`ready` only with no finding; the facts digest names exactly what was considered."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decision: Literal["ready", "hold"]
    findings: list[Finding]
    plan_digest: str | None
    revision: str
    as_of: str
    facts_digest: str

    def as_dict(self) -> dict[str, Any]:
        """The decision as JSON values (what a decision.recorded fact stores)."""
        return self.model_dump(mode="json")


def hold(findings: list[Finding], as_of: str, facts_digest: str) -> Decision:
    """A hold the gate could not judge from facts (nothing readable to bind it to a plan or revision)."""
    return Decision(
        decision="hold",
        findings=sort_findings(findings),
        plan_digest=None,
        revision="",
        as_of=as_of,
        facts_digest=facts_digest,
    )


def decide(
    state: CandidateState, project: ProjectState, as_of: str, extra_findings: list[Finding] | None = None
) -> Decision:
    """A pure function of the facts recorded at or before `as_of` (the caller folds them so)."""
    findings = list(extra_findings or [])
    config = project.config(as_of)
    if not state.obligations:
        findings.append(
            finding("NO_OBLIGATIONS", "nothing was derived to prove: zero obligations is not a pass")
        )
    if not state.attested:
        findings.append(
            finding("CHANGE_CONTEXT_UNVERIFIED", "no change context was attested by a trusted ci publisher")
        )
    plan = state.plan
    if plan is None:
        findings.append(finding("PLAN_MISSING", "no work plan was stored for this candidate"))
    elif config is None:
        findings.append(finding("STATE_UNAVAILABLE", "the project has no configuration"))
    else:
        code, _until = approval_status(state, config, as_of)
        if code:
            findings.append(
                finding(
                    code,
                    {
                        "REVIEW_REJECTED": "a reviewer rejected the current plan digest; amend the plan to "
                        "go on",
                        "REVIEW_EXPIRED": "the approval of the current plan digest has expired",
                        "REVIEW_STALE": "the approval names an older plan digest",
                        "REVIEW_MISSING": f"the current plan digest needs {config.approvals_required} valid "
                        "approval(s)",
                    }[code],
                )
            )
        digest_now = plan["plan_digest"]
        covered: set[str] = set()
        for task in plan["plan"]["tasks"]:
            for check in task["checks"]:
                for obligation_id in check["covers"]:
                    covered.add(obligation_id)
                    for f in check_findings(state, project, check, obligation_id, as_of):
                        findings.append(f.where(task["task_id"]))
            reports = state.reports_for(digest_now, task["task_id"])
            if not reports:
                findings.append(
                    finding(
                        "TASK_NOT_REPORTED",
                        "no report for this task under the current plan",
                        task_id=task["task_id"],
                    )
                )
            elif reports[-1]["recorded_status"] == "blocked":
                findings.append(
                    finding(
                        "TASK_BLOCKED",
                        f"blocked: {reports[-1].get('blocked_reason') or ''}; "
                        "a human amendment of the plan is needed",
                        task_id=task["task_id"],
                    )
                )
            elif not reports[-1]["passes"]:
                findings.append(
                    finding(
                        "TASK_FAILED",
                        f"attempt {reports[-1]['attempt']} did not pass",
                        task_id=task["task_id"],
                    )
                )
            elif config.settlement_required and not state.task_settled(digest_now, task["task_id"]):
                findings.append(
                    finding(
                        "TASK_NOT_SETTLED",
                        "the project requires a reviewer's settlement",
                        task_id=task["task_id"],
                    )
                )
        for obligation_id in sorted(set(state.obligations) - covered):
            findings.append(
                finding(
                    "EVIDENCE_MISSING",
                    "an obligation added after the plan is covered by no check: amend the plan",
                    obligation_id=obligation_id,
                )
            )
    findings = sort_findings(findings)
    facts_digest = digest(
        {
            "as_of": as_of,
            "candidate": state.considered,
            "project": [f["_digest"] for f in project.visible(as_of)],
        }
    )
    return Decision(
        decision="ready" if not findings else "hold",
        findings=findings,
        plan_digest=state.plan_digest,
        revision=str(state.candidate["revision"]),
        as_of=as_of,
        facts_digest=facts_digest,
    )
