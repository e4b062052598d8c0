"""The use cases answer typed outcomes: what happened, as data, never an HTTP status or header. A replay is
the stored outcome read back and marked replayed; the chain transaction appends one fact, its event and its
head in one write, completing the idempotency record with the outcome's JSON."""

import pytest

from sentinel_domain.errors import StoreConflict, StoreUnavailable
from sentinel_domain.memory import MemoryStore
from sentinel_domain.models import CandidateRequest
from sentinel_domain.outcomes import (
    CandidateCreated,
    DecisionNotRecorded,
    DecisionRecorded,
    PlanProposed,
    ProjectEventRecorded,
)
from sentinel_domain.ports import Append, IdempotencyRecord, StreamRef
from sentinel_domain.usecases import Chain, CommitRequest
from support.world import PROJECT, REQUESTER, World


def test_a_created_candidate_is_its_outcome_and_its_json_is_exactly_the_route_body(world: World) -> None:
    # Given a candidate created under an Idempotency-Key
    request = CandidateRequest.model_validate(
        {
            "subject": "payments",
            "base_revision": "b" * 40,
            "revision": "a" * 40,
            "environment": "staging",
            "change": {"files": ["services/payments/api.py"]},
        }
    )
    first = world.gate.create_candidate(PROJECT, REQUESTER, request, "k-1")
    # Then it is a typed outcome whose JSON carries the documented fields, and never `replayed`
    assert isinstance(first, CandidateCreated) and not first.replayed
    assert list(first.as_json()) == ["candidate_id", "scope", "obligations", "change_context", "seq"]
    # When the same request is sent with the same key
    again = world.gate.create_candidate(PROJECT, REQUESTER, request, "k-1")
    # Then the stored outcome comes back, marked replayed, with the very same JSON
    assert again.replayed and again.as_json() == first.as_json()
    # And what is stored is that JSON and its tag under the chain key (a forged row is never replayed)
    stored = dict(world.store.idempotency[(StreamRef(PROJECT), "/candidates", "k-1")].response_body)
    assert len(stored.pop("_tag")) == 64 and stored == first.as_json()


def test_a_proposal_says_how_it_was_drafted(world: World) -> None:
    # Given a candidate and no model
    cid = world.candidate()["candidate_id"]
    # When the service drafts its plan
    proposed = world.gate.propose(PROJECT, cid, REQUESTER, None, None)
    # Then the outcome says it fell back and why, beside the plan it stored
    assert isinstance(proposed, PlanProposed)
    assert (proposed.mode, proposed.fallback_reason) == ("fallback", "MODEL_NOT_CONFIGURED")
    assert list(proposed.as_json())[-2:] == ["mode", "fallback_reason"]


def test_a_decision_it_could_not_record_is_a_distinct_outcome_not_a_status(world: World) -> None:
    # Given a candidate, and a store whose writes fail
    cid = world.candidate()["candidate_id"]
    recorded = world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    assert isinstance(recorded, DecisionRecorded) and recorded.recorded and recorded.seq == 2

    class FailingWrites(MemoryStore):
        def append(self, append: Append) -> None:
            raise StoreUnavailable("down")

    failing = FailingWrites()
    failing.streams = world.store.streams
    world.gate.store = failing
    # When a decision is recorded
    held = world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    # Then the outcome is a hold that says, as data, that nothing was recorded (the edge answers it 200)
    assert isinstance(held, DecisionNotRecorded) and held.recorded is False
    assert held.as_json()["recorded"] is False and "seq" not in held.as_json()
    assert [f.code for f in held.findings] == ["STATE_UNAVAILABLE"]


def test_the_chain_transaction_appends_one_fact_with_its_event_head_and_completed_record(
    world: World,
) -> None:
    # Given a project chain and an idempotency claim on it
    chain = Chain(world.store, world.clock, world.ids)
    stream = world.store.load(StreamRef(PROJECT))
    assert stream is not None
    record = IdempotencyRecord(StreamRef(PROJECT), "scope", "key", "operator", "hash")
    assert world.store.idempotency_begin(record)
    fact = {"type": "principal.added", "principal_id": "p-1", "recorded_at": chain.now()}
    # When one fact is committed
    answer = chain.commit(
        CommitRequest(stream, "operator", fact, head={"note": "kept"}, idempotency=record),
        lambda seq: ProjectEventRecorded(project=PROJECT, seq=seq),
    )
    # Then one event of the fact's type is appended at the next seq, the head carries what was asked, and the
    # idempotency record completed with the outcome's JSON in the same write
    after = world.store.load(StreamRef(PROJECT))
    assert after is not None and answer.seq == stream.seq + 1 == after.seq
    assert after.events[-1]["type"] == "principal.added" and after.events[-1]["actor"] == "operator"
    assert after.head is not None and after.head["note"] == "kept"
    stored = world.store.idempotency[(StreamRef(PROJECT), "scope", "key")]
    assert (stored.status, stored.response_body) == ("completed", {"project": PROJECT, "seq": answer.seq})
    # And a commit judged against the chain as it was before loses the race and writes nothing
    with pytest.raises(StoreConflict):
        chain.commit(
            CommitRequest(stream, "operator", fact),
            lambda seq: ProjectEventRecorded(project=PROJECT, seq=seq),
        )
    assert world.store.load(StreamRef(PROJECT)) == after
