"""Recorded decisions (POST .../decisions) keep digests, counts, chain positions and the principals they
relied on, not their findings' prose (src/sentinel_domain/records.py); reading one back recomputes its
findings from the facts as of its position and checks them against the recorded digest (DOMAIN.md rules 2,
24 and 26)."""

import json
from typing import Any

from sentinel_domain.decision import findings_digest, sort_findings
from sentinel_domain.models import ChangeContextRequest, EvidenceRequest, ReportRequest, ReviewRequest
from sentinel_domain.ports import StreamRef
from sentinel_domain.records import recorded_decision
from sentinel_domain.state import ProjectState, parse_facts
from sentinel_domain.usecases.chain import CommitRequest
from support.world import CI, PROJECT, REQUESTER, REV, REVIEWER, World

JUNIT_PASS = '<testsuite name="s"><testcase classname="a" name="t1"/><testcase classname="a" name="t2"/>' + (
    "</testsuite>"
)


def files(n: int) -> tuple[str, ...]:
    """n changed files, each owing its own (unclassified) obligation."""
    return tuple(f"src/module{i:03d}.py" for i in range(n))


def planned(world: World, n: int, revision: str = REV) -> str:
    """A candidate of n changed files, each owing an obligation, with the fallback plan: nothing proved."""
    cid = world.candidate(files=files(n), revision=revision)["candidate_id"]
    world.gate.propose(PROJECT, cid, REQUESTER, None, None)
    return cid


def recorded_fact(world: World, cid: str, seq: int) -> tuple[str, dict[str, Any]]:
    text = world.store.streams[StreamRef(PROJECT, cid)].facts[seq]
    return text, json.loads(text)


def ready_candidate(world: World) -> str:
    """Attested, the fallback plan approved, its one check proved by the trusted ci publisher, reported."""
    cid = world.candidate()["candidate_id"]
    context = ChangeContextRequest.model_validate({"change": {"files": ["services/payments/api.py"]}})
    world.gate.add_change_context(PROJECT, cid, CI, context, None)
    digest = world.gate.propose(PROJECT, cid, REQUESTER, None, None).plan_digest
    world.gate.review(
        PROJECT, cid, REVIEWER, ReviewRequest(decision="approve", plan_digest=digest, revision=REV), None
    )
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
    proved = world.gate.post_evidence(PROJECT, cid, CI, EvidenceRequest.model_validate(evidence), None)
    claim = {
        "plan_digest": digest,
        "status": "completed",
        "checks": [{"check_id": "C1", "evidence_id": proved.evidence_id}],
    }
    world.gate.report(PROJECT, cid, "T1", REQUESTER, ReportRequest.model_validate(claim), None)
    return cid


def test_a_recorded_hold_keeps_digests_and_counts_not_the_findings_prose(world: World) -> None:
    # Given a planned candidate of 40 changed files, each owing an obligation nothing proves yet
    cid = planned(world, 40)
    # When its decision is recorded
    answer = world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    # Then the answer still carries every finding it computed, in full
    assert answer.decision == "hold" and len(answer.findings) == 82
    assert all(f.detail for f in answer.findings)
    # And the recorded fact keeps their digest and a count per code, not their words
    text, fact = recorded_fact(world, cid, answer.seq)
    assert "findings" not in fact and "detail" not in text
    assert fact["findings_digest"] == findings_digest(answer.findings)
    assert fact["finding_counts"] == {
        "CHANGE_CONTEXT_UNVERIFIED": 1,
        "EVIDENCE_MISSING": 40,
        "REVIEW_MISSING": 1,
        "TASK_NOT_REPORTED": 40,
    }
    assert fact["facts_digest"] == answer.facts_digest
    # And the position it was decided at is the chain's head before it
    assert fact["decided_at_seq"] == answer.seq - 1 and fact["recorded_at"] == answer.as_of


def test_the_recorded_fact_does_not_grow_with_the_findings(world: World) -> None:
    # Given two planned candidates, holding with 4 and with 402 findings
    small = planned(world, 1)
    large = planned(world, 200, revision="c" * 40)
    # When both decisions are recorded
    sizes = []
    for cid in (small, large):
        answer = world.gate.record_decision(PROJECT, cid, REQUESTER, None)
        sizes.append((len(answer.findings), len(recorded_fact(world, cid, answer.seq)[0])))
    # Then the facts differ only by the digits of their counts, each well under the 1 KB of one write unit
    (few, few_bytes), (many, many_bytes) = sizes
    assert (few, many) == (4, 402)
    assert many_bytes - few_bytes == len("200200") - len("11") and many_bytes < 1024


def test_a_recorded_ready_names_the_principals_it_relied_on(world: World) -> None:
    # Given a ready candidate: attested by ci-bot, approved by rita, proved by ci-bot's evidence
    cid = ready_candidate(world)
    # When its decision is recorded
    answer = world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    # Then the fact names them
    assert answer.decision == "ready"
    _text, fact = recorded_fact(world, cid, answer.seq)
    assert fact["relied_on"] == {"approvers": [REVIEWER.id], "attesters": [CI.id], "publishers": [CI.id]}


def test_reading_a_recorded_decision_recomputes_its_findings_from_the_facts_as_of_its_seq(
    world: World,
) -> None:
    # Given a hold recorded on a planned candidate, then more facts appended after it (the change attested)
    cid = planned(world, 3)
    answer = world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    world.clock.advance(60)
    context = ChangeContextRequest.model_validate({"change": {"files": list(files(3))}})
    world.gate.add_change_context(PROJECT, cid, CI, context, None)
    # When the candidate is read
    last = world.gate.get_candidate(PROJECT, cid, REQUESTER).last_decision
    # Then its recorded decision shows the findings of its own instant, recomputed, and says so
    assert last is not None
    assert last.findings_recomputed is True and last.findings_digest_matches is True
    assert last.findings == answer.findings
    assert "CHANGE_CONTEXT_UNVERIFIED" in {f.code for f in last.findings}
    assert (last.seq, last.decided_at_seq, last.as_of) == (answer.seq, answer.seq - 1, answer.as_of)
    assert (last.plan_digest, last.revision, last.facts_digest) == (
        answer.plan_digest,
        REV,
        answer.facts_digest,
    )


def test_a_ready_recorded_before_its_publisher_was_compromised_still_reads_as_recorded(world: World) -> None:
    # Given a recorded ready, then its evidence's publisher revoked as compromised
    cid = ready_candidate(world)
    recorded = world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    world.clock.advance(1)
    world.gate.record_project_event(
        PROJECT, "principal.revoked", {"principal_id": CI.id, "compromised": True}
    )
    # When the candidate is read and decided now
    last = world.gate.get_candidate(PROJECT, cid, REQUESTER).last_decision
    now = world.gate.decision(PROJECT, cid, REQUESTER, None)
    # Then the decision reads hold from then on (rule 26), while the record still verifies as it was made
    assert now.decision == "hold"
    assert last is not None and last.seq == recorded.seq
    assert last.decision == "ready" and last.findings == []
    assert last.findings_digest_matches is True
    assert last.relied_on is not None and last.relied_on.publishers == [CI.id]


def project_state(world: World) -> ProjectState:
    return ProjectState.from_facts(PROJECT, world.store.streams[StreamRef(PROJECT)].facts)


def test_a_recorded_digest_that_no_longer_matches_is_shown_as_tampering() -> None:
    # Given a recorded hold whose findings digest does not match what its facts give
    world = World()
    cid = planned(world, 2)
    answer = world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    facts = parse_facts(world.store.streams[StreamRef(PROJECT, cid)].facts)
    fact = dict(facts[-1], findings_digest="0" * 64)
    # When it is read back
    shown = recorded_decision(fact, facts, project_state(world))
    # Then it says so: no match, and a STATE_TAMPERED finding beside the recomputed ones
    assert shown.findings_recomputed is True and shown.findings_digest_matches is False
    tampered = [f for f in shown.findings if f.code == "STATE_TAMPERED"]
    assert len(tampered) == 1 and f"seq {answer.seq - 1}" in tampered[0].detail
    assert [f for f in shown.findings if f.code != "STATE_TAMPERED"] == answer.findings


def test_a_recorded_decision_keeps_the_findings_of_its_own_read(world: World) -> None:
    # Given a hold recorded while the project's chain could be read only in part
    cid = world.candidate()["candidate_id"]
    answer = world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    facts = parse_facts(world.store.streams[StreamRef(PROJECT, cid)].facts)
    incomplete = {
        "code": "EVIDENCE_QUERY_INCOMPLETE",
        "obligation_id": None,
        "check_id": None,
        "task_id": None,
        "detail": "the project's configuration and policies took more pages to read than the budget allows",
        "remediation_hint": None,
    }
    with_read = [*answer.findings, type(answer.findings[0]).model_validate(incomplete)]
    fact = dict(
        facts[-1],
        read_findings=[incomplete],
        findings_digest=findings_digest(sort_findings(with_read)),
    )
    # When it is read back
    shown = recorded_decision(fact, facts, project_state(world))
    # Then the read's own finding is judged again with the facts, and the digests match
    assert shown.findings_digest_matches is True
    assert "EVIDENCE_QUERY_INCOMPLETE" in {f.code for f in shown.findings}


def test_a_decision_recorded_with_its_findings_in_full_still_reads(world: World) -> None:
    # Given a candidate whose chain holds a decision recorded by an earlier release: every finding in full
    cid = world.candidate()["candidate_id"]
    chain = world.gate.chain
    stream, _state = chain.candidate(PROJECT, cid)
    finding = {
        "code": "PLAN_MISSING",
        "obligation_id": None,
        "check_id": None,
        "task_id": None,
        "detail": "no work plan was stored for this candidate",
        "remediation_hint": None,
    }
    old = {
        "type": "decision.recorded",
        "decision": "hold",
        "findings": [finding],
        "plan_digest": None,
        "revision": REV,
        "as_of": "2026-11-29T12:00:00.000000Z",
        "facts_digest": "f" * 64,
        "actor": REQUESTER.fact(),
        "recorded_at": "2026-11-29T12:00:00.000000Z",
    }
    seq = chain.commit(CommitRequest(stream, REQUESTER.id, old), lambda s: _Seq(s)).seq
    # When the candidate is read
    last = world.gate.get_candidate(PROJECT, cid, REQUESTER).last_decision
    # Then the recorded decision shows its stored findings, and says they were not recomputed
    assert last is not None and last.seq == seq
    assert last.findings_recomputed is False and last.findings_digest_matches is None
    assert [f.model_dump() for f in last.findings] == [finding]
    assert last.finding_counts == {"PLAN_MISSING": 1} and last.relied_on is None


class _Seq:
    """The smallest outcome chain.commit needs: the new seq."""

    def __init__(self, seq: int) -> None:
        self.seq = seq
