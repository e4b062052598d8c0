"""Recorded decisions (`POST .../decisions`): the bounded fact a decision leaves on the candidate's chain, and
how a recorded decision is read back (DOMAIN.md rules 2, 24 and 26).

A decision is a pure function of the facts at an instant (rule 2), so its findings' prose need not be stored:
it grows with the candidate (about 215 bytes, 0.42 write units, a finding) and every later read of the
candidate would carry it again. The `decision.recorded` fact keeps instead what the facts cannot give back,
and digests of what they can:

- `decision`: `ready` or `hold`;
- `facts_digest`: the decision's facts digest (rule 2);
- `findings_digest`: SHA-256 of the RFC 8785 form of the findings, in their order (`findings_digest`);
- `finding_counts`: code -> how many findings carried it;
- `read_findings`: the findings of the read itself (`STATE_UNAVAILABLE`, `EVIDENCE_QUERY_INCOMPLETE`,
  `STATE_TAMPERED`): they are about the store, not the facts, so they are kept as they were (a few at most);
- `decided_at_seq`: the candidate chain's position the decision was judged at (the seq before its own);
- `project_seq`: the project chain's position it was judged with (0 when it could not be read);
- `relied_on`: the principals it relied on: `approvers` (valid approvals of the current plan), `attesters`
  (attested change contexts), `publishers` (of the evidence that decided each check);
- `actor`, `recorded_at`: who recorded it, and its instant (its `as_of`).

Reading it back recomputes the findings from the candidate's facts up to `decided_at_seq` and the project's
up to `project_seq`, as of `recorded_at`, with its `read_findings`, and checks their digest (and the facts
digest) against the recorded ones. A recorded decision written before this shape keeps its findings in full
and is shown as stored."""

from collections import Counter
from typing import Any

from .decision import Decision, Finding, Judge, attester, decide, finding, findings_digest, hold
from .outcomes import RecordedDecision
from .state import CandidateState, ProjectState


def relied_on(state: CandidateState | None, project: ProjectState, as_of: str) -> dict[str, list[str]]:
    """The principals a decision at `as_of` relied on (rule 26), each list sorted, each id once."""
    if state is None:
        return {"approvers": [], "attesters": [], "publishers": []}
    digest = state.plan_digest
    # Whoever was revoked as compromised by then counted for nothing, so nothing relied on it.
    compromised = project.compromised(as_of)
    approvers = {
        r["reviewer"]["id"]
        for r in state.reviews
        if r["plan_digest"] == digest and r["decision"] == "approve" and as_of < r["expires_at"]
    } - set(compromised)
    attesters = {attester(c) for c in state.contexts if c["attested"]} - set(compromised)
    publishers: set[str] = set()
    if state.plan is not None:
        judge = Judge(state, project, as_of)
        for task in state.plan["plan"]["tasks"]:
            for check in task["checks"]:
                for obligation_id in check["covers"]:
                    evidence = judge.deciding(check, obligation_id)
                    if evidence is not None:
                        publishers.add(evidence["publisher"]["id"])
    return {
        "approvers": sorted(approvers),
        "attesters": sorted(attesters),
        "publishers": sorted(publishers),
    }


def decision_fact(
    verdict: Decision,
    state: CandidateState | None,
    project: ProjectState,
    read_findings: list[Finding],
    decided_at_seq: int,
    project_seq: int,
    actor: dict[str, Any],
) -> dict[str, Any]:
    """The `decision.recorded` fact of a decision judged from `state` and `project` (with the read's own
    findings), at the chain positions it was read at. Its size does not grow with the findings."""
    return {
        "type": "decision.recorded",
        "decision": verdict.decision,
        "facts_digest": verdict.facts_digest,
        "findings_digest": findings_digest(verdict.findings),
        "finding_counts": dict(sorted(Counter(f.code for f in verdict.findings).items())),
        "read_findings": [f.model_dump() for f in read_findings],
        "decided_at_seq": decided_at_seq,
        "project_seq": project_seq,
        "relied_on": relied_on(state, project, verdict.as_of),
        "actor": actor,
        "recorded_at": verdict.as_of,
    }


def recompute(fact: dict[str, Any], candidate_facts: list[dict[str, Any]], project: ProjectState) -> Decision:
    """The recorded decision judged again from the facts as of its position: the candidate's facts up to
    `decided_at_seq`, the project's up to `project_seq`, at `recorded_at`, with its `read_findings` (as
    `usecases.decisions` judged it: a fact that cannot be read holds it with STATE_TAMPERED)."""
    as_of = str(fact["recorded_at"])
    extra = [Finding.model_validate(f) for f in fact["read_findings"]]
    seen = [f for f in candidate_facts if f["_seq"] <= fact["decided_at_seq"]]
    project_then = ProjectState(
        project.project, [f for f in project.facts if f["_seq"] <= fact["project_seq"]]
    )
    try:
        return decide(CandidateState.from_facts(seen, as_of), project_then, as_of, extra)
    except Exception as error:  # as the decision itself: an unreadable fact is tampering, never a pass
        extra.append(finding("STATE_TAMPERED", f"a stored fact cannot be read: {type(error).__name__}"))
        return hold(extra, as_of, findings_digest(extra))


def recorded_decision(
    fact: dict[str, Any], candidate_facts: list[dict[str, Any]], project: ProjectState
) -> RecordedDecision:
    """A recorded decision as the candidate view shows it: its findings recomputed and checked against the
    recorded digests. A mismatch means the facts as of its position, or the rules that judge them, no longer
    give what was recorded: it is shown with `findings_digest_matches: false` and a STATE_TAMPERED finding
    added to the recomputed ones, never silently. A fact of the earlier shape is shown as stored."""
    if "findings_digest" not in fact:
        return _stored(fact)
    again = recompute(fact, candidate_facts, project)
    matches = (
        findings_digest(again.findings) == fact["findings_digest"]
        and again.facts_digest == fact["facts_digest"]
    )
    findings = list(again.findings)
    if not matches:
        findings.append(
            finding(
                "STATE_TAMPERED",
                f"the findings recomputed from the facts as of seq {fact['decided_at_seq']} do not match "
                "this recorded decision's digests: its facts, or the rules that judged them, have changed",
            )
        )
    return RecordedDecision.model_validate(
        {
            "seq": fact["_seq"],
            "decision": fact["decision"],
            "as_of": fact["recorded_at"],
            "decided_at_seq": fact["decided_at_seq"],
            "project_seq": fact["project_seq"],
            "plan_digest": again.plan_digest,
            "revision": again.revision,
            "facts_digest": fact["facts_digest"],
            "findings": findings,
            "findings_recomputed": True,
            "findings_digest": fact["findings_digest"],
            "findings_digest_matches": matches,
            "finding_counts": fact["finding_counts"],
            "relied_on": fact["relied_on"],
            "actor": fact["actor"],
            "recorded_at": fact["recorded_at"],
        }
    )


def _stored(fact: dict[str, Any]) -> RecordedDecision:
    """A decision recorded before facts were bounded: its findings are in the fact, shown as they are."""
    findings = [Finding.model_validate(f) for f in fact["findings"]]
    return RecordedDecision.model_validate(
        {
            "seq": fact["_seq"],
            "decision": fact["decision"],
            "as_of": fact["as_of"],
            "decided_at_seq": fact["_seq"] - 1,
            "project_seq": None,
            "plan_digest": fact["plan_digest"],
            "revision": fact["revision"],
            "facts_digest": fact["facts_digest"],
            "findings": findings,
            "findings_recomputed": False,
            "findings_digest": findings_digest(findings),
            "findings_digest_matches": None,
            "finding_counts": dict(sorted(Counter(f.code for f in findings).items())),
            "relied_on": None,
            "actor": fact["actor"],
            "recorded_at": fact["recorded_at"],
        }
    )


RELIED_ROLES = ("approvers", "attesters", "publishers")


def exposures(candidate_facts: list[dict[str, Any]], principal_id: str) -> list[dict[str, Any]]:
    """The recorded `ready` decisions of one candidate (its facts, parsed, in chain order) that relied on
    `principal_id` (rule 26), each with how: as an approver, attester or publisher (what the decision
    names in `relied_on`), or as the requester (it created the candidate, or stored the plan in force at
    the decision's position). A decision recorded before `relied_on` existed is listed when the principal
    appears anywhere in the candidate's facts up to it, as `unknown`: it cannot be cleared from the record."""
    if not candidate_facts or candidate_facts[0]["type"] != "candidate.created":
        return []
    candidate = candidate_facts[0]
    out: list[dict[str, Any]] = []
    for fact in candidate_facts:
        if fact["type"] != "decision.recorded" or fact.get("decision") != "ready":
            continue
        position = int(fact.get("decided_at_seq", fact["_seq"] - 1))
        seen = [f for f in candidate_facts if f["_seq"] <= position]
        plans = [f for f in seen if f["type"] == "plan.stored"]
        roles: list[str] = []
        relied = fact.get("relied_on")
        if isinstance(relied, dict):
            roles = [role.removesuffix("s") for role in RELIED_ROLES if principal_id in relied.get(role, [])]
            if candidate["created_by"]["id"] == principal_id or (
                plans and plans[-1]["author"]["id"] == principal_id
            ):
                roles.append("requester")
        elif any(_names(f, principal_id) for f in seen):
            roles = ["unknown"]
        if roles:
            out.append(
                {
                    "candidate_id": candidate["candidate_id"],
                    "subject": candidate["subject"],
                    "revision": candidate["revision"],
                    "environment": candidate["environment"],
                    "decided_at": fact["recorded_at"],
                    "seq": fact["_seq"],
                    "plan_digest": plans[-1]["plan_digest"] if plans else None,
                    "relied_on_as": roles,
                }
            )
    return out


def _names(value: Any, principal_id: str) -> bool:
    """Whether an actor (`{"id": ...}`) anywhere in a fact is the principal."""
    if isinstance(value, dict):
        return value.get("id") == principal_id or any(_names(v, principal_id) for v in value.values())
    if isinstance(value, list):
        return any(_names(v, principal_id) for v in value)
    return False
