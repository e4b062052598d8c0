"""The StateStore contract, once on each store (SQLite in a file, DynamoDB on moto): chains, the conditions
of an append, claims (DOMAIN.md rules 16, 24 and "Limits that shape the store"). What only one store has is in
test_dynamodb_store.py and test_sqlite_store.py; idempotency, the outbox and the heads are in
test_state_store_records.py."""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_domain.audit import AuditChain
from sentinel_domain.errors import Refusal, StoreConflict
from sentinel_domain.ports import ClaimTaken, StreamRef
from support.stores import (
    CAND,
    PROJECT,
    T0,
    T1,
    T2,
    Chain,
    StoreKit,
    completed,
    created,
    fact,
    record,
    write,
)

# --- append and load ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ref", [CAND, StreamRef(PROJECT)], ids=["candidate", "project"])
def test_append_then_load_round_trips(store: Any, ref: StreamRef) -> None:
    # Given three appends to one chain, the last head carrying plan digest and (empty) approval expiry
    chain = Chain(ref)
    appends = [
        write(
            store,
            chain,
            fact(n, note="" if n == 2 else "text é"),
            head={"plan_digest": "d" * 64 if n == 3 else "", "approval_valid_until": ""},
        )
        for n in (1, 2, 3)
    ]
    # When the chain is loaded
    stream = store.load(ref)
    # Then one complete page returned the events, facts and head exactly as given
    assert stream is not None and stream.complete and stream.pages == 1
    assert stream.events == [a.event for a in appends]
    assert stream.facts == {a.event["seq"]: a.fact_text for a in appends}
    assert stream.head == appends[-1].head
    assert stream.seq == 3 and stream.head_hash == appends[-1].event["hash"]
    assert AuditChain.verify(ref.project, ref.candidate_id, stream.events, stream.facts, stream.head).valid


@pytest.mark.parametrize("ref", [CAND, StreamRef(PROJECT)], ids=["candidate", "project"])
def test_load_head_is_the_head_load_reads(store: Any, ref: StreamRef) -> None:
    # Given two appends to one chain, the last head carrying a plan digest
    chain = Chain(ref)
    write(store, chain, fact(1))
    last = write(store, chain, fact(2), head={"plan_digest": "d" * 64})
    # When its head alone is read, Then it is the head the last append wrote, as load() reads it
    assert store.load_head(ref) == last.head == store.load(ref).head
    # And a chain with nothing stored has no head
    assert store.load_head(StreamRef("other")) is None


def test_load_of_an_unknown_chain_is_none(store: Any) -> None:
    # Given an empty store, When a chain is loaded, Then there is nothing
    assert store.load(CAND) is None


def test_load_ignores_idempotency_outbox_and_claim_records(store: Any) -> None:
    # Given a project chain beside an idempotency record, a claim and an outbox item of the same project
    project = StreamRef(PROJECT)
    chain = Chain(project)
    assert store.idempotency_begin(record(ref=project))
    write(store, chain, fact(1), outbox=[{"outbox_id": "x", "kind": "checkpoint"}])
    write(store, Chain(CAND), created("cand_00000001"), claim=("k", "cand_00000001"))
    # When the project chain is loaded
    stream = store.load(project)
    # Then it holds only its own event and head
    assert stream is not None and [e["seq"] for e in stream.events] == [1] and list(stream.facts) == [1]
    assert stream.seq == 1


def test_stale_expected_seq_is_a_conflict_and_writes_nothing(kit: StoreKit) -> None:
    # Given a chain with one event, and a second writer that read it when it was empty
    chain, stale = Chain(CAND), Chain(CAND)
    write(kit.store, chain, fact(1))
    before = kit.dump()
    late = stale.next(fact(2), outbox=[{"outbox_id": "o-1", "kind": "action"}])
    # When the stale writer appends
    with pytest.raises(StoreConflict):
        kit.store.append(late)
    # Then nothing was written
    assert kit.dump() == before


def test_a_writer_ahead_of_the_head_is_a_conflict(kit: StoreKit) -> None:
    # Given a chain with one event, and a writer that believes it is at seq 2
    chain = Chain(CAND)
    write(kit.store, chain, fact(1))
    ahead = Chain(CAND)
    for n in (1, 2):
        ahead.done(ahead.next(fact(n)))
    before = kit.dump()
    # When it appends seq 3, Then it lost a race and nothing was written
    with pytest.raises(StoreConflict):
        kit.store.append(ahead.next(fact(3)))
    assert kit.dump() == before


@pytest.mark.parametrize("blob", ["x" * 800_000, "é" * 400_000], ids=["ascii", "two-byte-utf8"])
def test_a_large_fact_is_stored_and_read_back_whole(store: Any, blob: str) -> None:
    # Given a fact far above one DynamoDB item's size, and another after it
    chain = Chain(CAND)
    a = write(store, chain, fact(1, blob=blob))
    write(store, chain, fact(2))
    # When the chain is loaded
    stream = store.load(CAND)
    # Then the fact is whole again and the chain verifies
    assert stream is not None and stream.complete and stream.facts[1] == a.fact_text
    assert AuditChain.verify(PROJECT, CAND.candidate_id, stream.events, stream.facts, stream.head).valid


def test_a_read_beyond_the_page_budget_is_incomplete(kit: StoreKit) -> None:
    # Given a chain of five events and stores reading two items a page
    chain = Chain(CAND)
    for n in range(1, 6):
        write(kit.store, chain, fact(n))
    tight = kit.make(page_budget=1, page_size=2)
    roomy = kit.make(page_budget=10, page_size=2)
    # When each loads it
    cut, whole = tight.load(CAND), roomy.load(CAND)
    # Then the tight read stops after one page, says so, and holds no head (a write from it must fail)
    assert cut is not None and not cut.complete and cut.pages == 1
    assert [e["seq"] for e in cut.events] == [1, 2] and cut.head is None
    # And the roomy one reads every page (five events and the head, two a page)
    assert whole is not None and whole.complete and whole.pages == 3 and len(whole.events) == 5
    assert whole.head is not None and whole.head["seq"] == 5


def test_a_budget_cut_inside_a_large_fact_leaves_that_event_unread(kit: StoreKit) -> None:
    # Given a chain whose first fact spans three items, and a store reading two items in its one page
    write(kit.store, Chain(CAND), fact(1, blob="x" * 800_000))
    tight = kit.make(page_budget=1, page_size=2)
    # When it loads the chain
    cut = tight.load(CAND)
    # Then the half-read event is not returned, and the read says it is incomplete
    assert cut is not None and not cut.complete and cut.events == [] and cut.facts == {} and cut.head is None


def test_a_chain_over_the_byte_budget_is_incomplete(kit: StoreKit) -> None:
    # Given a chain of four facts of 600 KB each (two items each), read with a budget of two 1 MB pages
    chain = Chain(CAND)
    for n in (1, 2, 3, 4):
        write(kit.store, chain, fact(n, blob="y" * 600_000))
    # When it is loaded with that budget, and with room to spare
    cut, whole = kit.make(page_budget=2).load(CAND), kit.make(page_budget=10).load(CAND)
    # Then the budgeted read is incomplete and never holds the head, and the roomy one is whole
    assert cut is not None and not cut.complete and cut.pages == 2 and cut.head is None
    assert len(cut.events) < 4 and set(cut.facts) == {e["seq"] for e in cut.events}
    assert whole is not None and whole.complete and len(whole.events) == 4 and whole.head is not None


@pytest.mark.parametrize(
    "outbox",
    [[{"outbox_id": f"o-{i}"} for i in range(99)], [{"outbox_id": "same"}, {"outbox_id": "same"}]],
    ids=["over-one-hundred-items", "one-item-twice"],
)
def test_an_append_no_transaction_can_hold_is_refused_before_anything_is_written(
    kit: StoreKit, outbox: list[dict[str, Any]]
) -> None:
    # Given an append carrying 99 outbox items next to its head and event, or two outbox items sharing an id
    a = Chain(CAND).next(fact(1), outbox=outbox)
    before = kit.dump()
    # When it is appended, Then it is refused as a programming error and nothing is written
    with pytest.raises(ValueError):
        kit.store.append(a)
    assert kit.dump() == before


@pytest.mark.parametrize(
    "change",
    [
        {"expected_seq": 1},
        {"event": {"seq": 2}},
        {"head": {"seq": 1, "pk": "x"}},
        {"head": {"seq": 1, "score": 0.5}},
    ],
    ids=["seqs-disagree", "event-seq-ahead", "reserved-name", "float-value"],
)
def test_a_malformed_append_is_a_value_error(kit: StoreKit, change: dict[str, Any]) -> None:
    # Given an append whose seqs disagree, whose head uses a reserved name or a value no item can hold
    a = Chain(CAND).next(fact(1))
    for name, value in change.items():
        setattr(a, name, {**getattr(a, name), **value} if isinstance(value, dict) else value)
    before = kit.dump()
    # When it is appended, Then it is refused and nothing is written
    with pytest.raises(ValueError):
        kit.store.append(a)
    assert kit.dump() == before


# --- transaction conditions (rule 16) -----------------------------------------------------------------


def test_plan_digest_and_approval_conditions_refuse_when_not_met(kit: StoreKit) -> None:
    # Given a chain whose head records plan digest D approved until T1
    store, chain = kit.store, Chain(CAND)
    head = {"plan_digest": "d" * 64, "approval_valid_until": T1}
    write(store, chain, fact(1), head=head)
    before = kit.dump()
    # When an execution requires another digest, or an approval valid after T1 (the expiry itself)
    for kwargs in (
        {"require_plan_digest": "e" * 64},
        {"require_approval_after": T1},
        {"require_approval_after": T2},
    ):
        with pytest.raises(StoreConflict):
            store.append(chain.next(fact(2), head=head, outbox=[{"outbox_id": "exe"}], **kwargs))
    # Then nothing was written
    assert kit.dump() == before
    # And when both hold, the execution is written
    write(store, chain, fact(2), head=head, require_plan_digest="d" * 64, require_approval_after=T0)
    loaded = store.load(CAND)
    assert loaded is not None and loaded.seq == 2


def test_a_changed_project_chain_refuses_the_append(kit: StoreKit) -> None:
    # Given a project chain at seq 1 and a candidate write judged against it
    store = kit.store
    project = Chain(StreamRef(PROJECT))
    write(store, project, fact(1))
    judged = Chain(CAND).next(fact(1), require_project_seq=1)
    # When the project's configuration changes before the write lands
    write(store, project, fact(2))
    before = kit.dump()
    # Then the write is a conflict and nothing is written
    with pytest.raises(StoreConflict):
        store.append(judged)
    assert kit.dump() == before
    # And judged against the current project chain, it is written
    write(store, Chain(CAND), fact(1), require_project_seq=2)
    assert store.load(CAND).seq == 1


def test_a_missing_project_chain_refuses_a_write_that_requires_it(store: Any) -> None:
    # Given no project chain, When a candidate write requires the project at seq 1, Then it is a conflict
    with pytest.raises(StoreConflict):
        store.append(Chain(CAND).next(fact(1), require_project_seq=1))
    assert store.load(CAND) is None


# --- claims -------------------------------------------------------------------------------------------


def test_claim_race_raises_claim_taken_with_the_existing_id(kit: StoreKit) -> None:
    # Given candidate A created with the uniqueness claim K
    store = kit.store
    first = StreamRef(PROJECT, "cand_a")
    write(store, Chain(first), created("cand_a"), claim=("K", "cand_a"))
    second = StreamRef(PROJECT, "cand_b")
    idem = record(ref=StreamRef(PROJECT))
    assert store.idempotency_begin(idem)
    before = kit.dump()
    # When candidate B, racing, creates with the same claim (and completes its idempotency record)
    b = Chain(second).next(created("cand_b"), claim=("K", "cand_b"), idempotency=completed(idem, {"id": "b"}))
    with pytest.raises(ClaimTaken) as taken:
        store.append(b)
    # Then the existing id comes back and nothing else was written
    assert taken.value.existing_id == "cand_a"
    assert kit.dump() == before and store.load(second) is None
    assert store.find_claim(PROJECT, "K") == "cand_a" and store.find_claim(PROJECT, "other") is None


def test_list_claims_pages_with_an_opaque_cursor(store: Any) -> None:
    # Given five candidates with claims
    ids = [f"cand_{n}" for n in range(5)]
    for n, cid in enumerate(ids):
        write(store, Chain(StreamRef(PROJECT, cid)), created(cid, subject=f"s{n}"), claim=(f"key-{n}", cid))
    # When the claims are listed two at a time
    pages, cursor = [], None
    while True:
        rows, cursor = store.list_claims(PROJECT, 2, cursor)
        pages.append(rows)
        if cursor is None:
            break
        assert isinstance(cursor, str)
    # Then three pages hold every claim once, with its binding and creation time
    assert [len(p) for p in pages] == [2, 2, 1]
    rows = [r for p in pages for r in p]
    assert [r["candidate_id"] for r in rows] == ids
    assert rows[0] == {
        "candidate_id": "cand_0",
        "subject": "s0",
        "revision": "a" * 40,
        "environment": "staging",
        "created_at": T0,
    }
    # And an exact page leaves no dangling cursor, and another project has none
    assert store.list_claims(PROJECT, 5, None)[1] is None
    assert store.list_claims("other", 5, None) == ([], None)


def test_a_foreign_or_garbled_cursor_is_refused(store: Any) -> None:
    # Given a cursor issued for another project's claims
    write(store, Chain(StreamRef("other", "c1")), created("c1"), claim=("k1", "c1"))
    write(store, Chain(StreamRef("other", "c2")), created("c2"), claim=("k2", "c2"))
    _rows, foreign = store.list_claims("other", 1, None)
    assert foreign is not None
    # When it is used for this project, or a cursor is garbage, Then it is refused as invalid
    for cursor in (foreign, "not-base64!", "eyJhIjoxfQ=="):
        with pytest.raises(Refusal) as refused:
            store.list_claims(PROJECT, 1, cursor)
        assert refused.value.code == "VALIDATION_FAILED"
