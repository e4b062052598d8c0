"""Rule 26 in the decision: what a principal revoked as compromised did stops counting on every candidate,
from the revocation on (APPROVAL_REVOKED, ATTESTATION_REVOKED, EVIDENCE_UNTRUSTED, REQUESTER_REVOKED, each
with remediation), while a decision as of an earlier instant, and a decision recorded before, read as they
were. A plain revocation withdraws nothing. Through the Gate use cases on the in-memory store."""

from typing import Any

from sentinel_domain.models import Actor, ChangeContextRequest, EvidenceRequest, ReportRequest, ReviewRequest
from support.world import CI, HUMAN_REQUESTER, PROJECT, REQUESTER, REV, REVIEWER, REVIEWER_2, World

BEFORE = "2026-11-29T12:00:00Z"  # the world's START: everything below is proved by then
JUNIT_PASS = (
    '<testsuite name="s"><testcase classname="a" name="t1"/><testcase classname="a" name="t2"/></testsuite>'
)


def ready(world: World, reviewers: tuple[Actor, ...] = (REVIEWER,), creator: Actor = REQUESTER) -> str:
    """A candidate created by `creator` (the agent by default), attested and proved by ci-bot, its fallback
    plan (stored by the agent) approved."""
    cid = world.candidate(by=creator)["candidate_id"]
    context = ChangeContextRequest.model_validate({"change": {"files": ["services/payments/api.py"]}})
    world.gate.add_change_context(PROJECT, cid, CI, context, None)
    digest = world.gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()["plan_digest"]
    for reviewer in reviewers:
        request = ReviewRequest(decision="approve", plan_digest=digest, revision=REV)
        world.gate.review(PROJECT, cid, reviewer, request, None)
    evidence = {
        "check_id": "C1",
        "subject": "payments",
        "revision": REV,
        "environment": "staging",
        "scope": ["payments-api"],
        "observed_at": "2026-11-29T11:59:00Z",
        "source": {"system": "ci", "run_id": "1", "url": ""},
        "junit_xml": JUNIT_PASS,
    }
    posted = world.gate.post_evidence(PROJECT, cid, CI, EvidenceRequest.model_validate(evidence), None)
    checks = [{"check_id": "C1", "evidence_id": posted.as_json()["evidence_id"]}]
    body = {"plan_digest": digest, "status": "completed", "checks": checks}
    world.gate.report(PROJECT, cid, "T1", REQUESTER, ReportRequest.model_validate(body), None)
    return cid


def revoke(world: World, principal: Actor, compromised: bool) -> None:
    world.clock.advance(1)
    world.gate.record_project_event(
        PROJECT, "principal.revoked", {"principal_id": principal.id, "compromised": compromised}
    )


def decide(world: World, cid: str, as_of: str | None = None) -> dict[str, Any]:
    return world.gate.decision(PROJECT, cid, REQUESTER, as_of).as_json()


def codes(decision: dict[str, Any]) -> list[str]:
    return sorted({f["code"] for f in decision["findings"]})


def the(decision: dict[str, Any], code: str) -> dict[str, Any]:
    found = [f for f in decision["findings"] if f["code"] == code]
    assert len(found) == 1, decision["findings"]
    return found[0]


def test_a_compromised_reviewers_approval_stops_counting_even_on_a_recorded_ready(world: World) -> None:
    # Given a ready candidate approved by rita, its ready decision recorded
    cid = ready(world)
    recorded = world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    assert recorded.decision == "ready"
    # When rita is revoked as compromised
    revoke(world, REVIEWER, compromised=True)
    # Then the decision reads hold with APPROVAL_REVOKED, naming her, with remediation
    now = decide(world, cid)
    assert codes(now) == ["APPROVAL_REVOKED"]
    finding = the(now, "APPROVAL_REVOKED")
    assert REVIEWER.id in finding["detail"]
    assert (
        finding["remediation_hint"] and "review the current plan digest again" in finding["remediation_hint"]
    )
    # And the recorded ready still replays as it was made (its position predates the revocation)
    last = world.gate.get_candidate(PROJECT, cid, REQUESTER).last_decision
    assert last is not None and last.seq == recorded.seq
    assert last.decision == "ready" and last.findings_digest_matches is True
    # And so does a what-if read as of the earlier instant
    assert decide(world, cid, as_of=BEFORE)["decision"] == "ready"
    # And a decision recorded from then on is a hold
    assert world.gate.record_decision(PROJECT, cid, REQUESTER, None).decision == "hold"


def test_the_approval_of_a_reviewer_still_standing_keeps_counting(world: World) -> None:
    # Given a candidate approved by two reviewers (one approval is required)
    cid = ready(world, reviewers=(REVIEWER, REVIEWER_2))
    # When one of them is revoked as compromised
    revoke(world, REVIEWER, compromised=True)
    # Then the other's approval is enough: still ready
    assert decide(world, cid)["decision"] == "ready"
    # And a ready recorded now names only the reviewer it relied on
    assert world.gate.record_decision(PROJECT, cid, REQUESTER, None).decision == "ready"
    last = world.gate.get_candidate(PROJECT, cid, REQUESTER).last_decision
    assert last is not None and last.relied_on is not None
    assert last.relied_on.approvers == [REVIEWER_2.id]


def test_a_plain_revocation_does_not_withdraw_past_approvals_attestations_or_evidence(world: World) -> None:
    # Given a ready candidate
    cid = ready(world)
    # When its reviewer and its ci publisher are revoked, not as compromised (they left, say)
    revoke(world, REVIEWER, compromised=False)
    revoke(world, CI, compromised=False)
    # Then what they did still counts: ready
    decision = decide(world, cid)
    assert decision["decision"] == "ready", decision["findings"]


def test_a_compromised_ci_publisher_leaves_its_evidence_untrusted_and_its_attestation_void(
    world: World,
) -> None:
    # Given a ready candidate attested and proved by ci-bot
    cid = ready(world)
    # When ci-bot is revoked as compromised
    revoke(world, CI, compromised=True)
    # Then its evidence is untrusted and its attestation no longer vouches for the change, each with a remedy
    decision = decide(world, cid)
    assert codes(decision) == ["ATTESTATION_REVOKED", "EVIDENCE_UNTRUSTED"]
    assert the(decision, "ATTESTATION_REVOKED")["remediation_hint"]
    assert CI.id in the(decision, "EVIDENCE_UNTRUSTED")["detail"]
    # And as of before the revocation it was ready
    assert decide(world, cid, as_of=BEFORE)["decision"] == "ready"


def test_a_compromised_requester_holds_the_candidates_it_created(world: World) -> None:
    # Given a ready candidate created (and planned) by the agent
    cid = ready(world)
    # When the agent is revoked as compromised
    revoke(world, REQUESTER, compromised=True)
    # Then the candidate holds with REQUESTER_REVOKED, once, with the way forward
    decision = decide(world, cid)
    assert codes(decision) == ["REQUESTER_REVOKED"]
    finding = the(decision, "REQUESTER_REVOKED")
    assert REQUESTER.id in finding["detail"] and "new commit" in finding["remediation_hint"]


def test_a_plan_stored_by_a_compromised_requester_holds_until_a_live_one_stores_it_again(
    world: World,
) -> None:
    # Given a ready candidate created by a human requester, its plan stored by the agent
    cid = ready(world, creator=HUMAN_REQUESTER)
    # When the agent is revoked as compromised
    revoke(world, REQUESTER, compromised=True)
    # Then the candidate holds with REQUESTER_REVOKED, naming the plan
    finding = the(decide(world, cid), "REQUESTER_REVOKED")
    assert "current plan was stored by agent-1" in finding["detail"]
    # When the human requester stores the same plan again, as the remediation says
    current = world.gate.get_candidate(PROJECT, cid, HUMAN_REQUESTER).as_json()
    digest = current["plan_digest"]
    stored = world.gate.put_plan(PROJECT, cid, HUMAN_REQUESTER, current["plan"], f'"{digest}"')
    # Then the plan is the same digest, its approval still stands, and the candidate is ready again
    assert stored.plan_digest == digest
    decision = decide(world, cid)
    assert decision["decision"] == "ready", decision["findings"]
