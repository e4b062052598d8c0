"""The implementations the hot-path figures are measured against: `decide()` and `AuditChain.verify` as they
were at commit e908c9a, before they were made linear and fast (docs/benchmarks.md). Copied verbatim, with
the digests taken through `rfc8785` itself as they then were (the product's canonical writer has a faster
path since), so each benchmark times today's code and its baseline in one run. Never imported by product
code; the benchmarks check that both give the same answers before timing them."""

from collections.abc import Callable
from typing import Any

import rfc8785

from sentinel_domain.audit import EVENT_FIELDS, HASHED_FIELDS, Verification, fact_digest, genesis_hash
from sentinel_domain.canonical import sha256_hex
from sentinel_domain.decision import TRUST_FINDING, Decision, Finding, finding
from sentinel_domain.evidence import scope_covers
from sentinel_domain.models import Policy
from sentinel_domain.reviews import approval_status
from sentinel_domain.state import CandidateState, ProjectState
from sentinel_domain.times import parse_time


def digest(value: Any) -> str:
    """The digest as it was: SHA-256 of `rfc8785.dumps`."""
    return sha256_hex(rfc8785.dumps(value))


# ---- decide() at e908c9a ------------------------------------------------------------------------------


def _sort_findings(findings: list[Finding]) -> list[Finding]:
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


def _check_findings(
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


def decide_baseline(
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
                    for f in _check_findings(state, project, check, obligation_id, as_of):
                        findings.append(f.model_copy(update={"task_id": task["task_id"]}))
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
    findings = _sort_findings(findings)
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


# ---- AuditChain.verify at e908c9a ------------------------------------------------------------------


def event_hash(event: dict[str, Any]) -> str:
    return digest({k: event[k] for k in HASHED_FIELDS})


def _failure(length: int, head_hash: str | None, seq: int) -> Callable[[str], Verification]:
    return lambda reason: Verification(False, length, head_hash, seq, reason)


class AuditChainBaseline:
    """Verifies a chain: every link, every fact against its event, the head, and the newest checkpoint."""

    @staticmethod
    def verify(
        project: str,
        candidate_id: str | None,
        events: list[dict[str, Any]],
        facts: dict[int, str],
        head: dict[str, Any] | None,
        checkpoint: dict[str, Any] | None = None,
    ) -> Verification:
        prev = genesis_hash(project, candidate_id)
        length = len(events)
        last_hash = None
        for expected_seq, event in enumerate(events, start=1):
            seq = event.get("seq")
            bad = _failure(length, last_hash, expected_seq)
            if seq != expected_seq:
                return bad(
                    f"expected seq {expected_seq}, found {seq}: an event was removed, inserted or reordered"
                )
            if event.get("project") != project or event.get("candidate_id") != candidate_id:
                return bad("event belongs to another chain")
            if set(event) != EVENT_FIELDS:
                return bad("the event carries fields outside its hash")
            if event.get("prev_hash") != prev:
                return bad("prev_hash does not match the previous event")
            if event_hash(event) != event.get("hash"):
                return bad("event hash does not match its content")
            fact = facts.get(expected_seq)
            if fact is None:
                return bad("the fact recorded by this event is missing")
            if fact_digest(fact) != event.get("payload_digest"):
                return bad("the fact no longer matches its event's payload_digest")
            prev = last_hash = event["hash"]
        extra = sorted(set(facts) - set(range(1, length + 1)))
        if extra:
            return Verification(False, length, last_hash, extra[0], "a fact exists without its audit event")
        if head is not None and (int(head.get("seq", 0)) != length or head.get("hash") != last_hash):
            return Verification(
                False,
                length,
                last_hash,
                min(length + 1, int(head.get("seq", 0)) or 1),
                "the chain head does not match the last event: the tail was cut or rewritten",
            )
        if checkpoint is not None:
            cp_seq = int(checkpoint["seq"])
            if cp_seq > length:
                return Verification(
                    False,
                    length,
                    last_hash,
                    length + 1,
                    f"the newest checkpoint names seq {cp_seq}: the tail was cut",
                )
            if events[cp_seq - 1]["hash"] != checkpoint["hash"]:
                return Verification(False, length, last_hash, cp_seq, "the event differs from its checkpoint")
        return Verification(True, length, last_hash, None, None)
