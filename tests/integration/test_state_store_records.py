"""The StateStore contract, once on each store: idempotency records and their leases (DOMAIN.md rule 17), the
outbox the relay moves and the chain heads it checkpoints (rules 16, 25)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sentinel_domain.errors import StoreConflict
from sentinel_domain.ports import StreamRef
from sentinel_service.adapters.state_layout import partition
from support.stores import CAND, PROJECT, T0, T1, T2, Chain, StoreKit, completed, fact, record, write

SCOPE = "/candidates/cand_00000001/evidence"

# --- idempotency (rule 17) ----------------------------------------------------------------------------


def test_idempotency_begin_get_release(store: Any) -> None:
    # Given alice claims a key
    mine = record()
    assert store.idempotency_begin(mine)
    # When bob tries the same key while alice's lease runs, Then he cannot take it
    assert not store.idempotency_begin(record(caller="bob", claimed_at=T0))
    got = store.idempotency_get(CAND, mine.scope, mine.key)
    assert got == mine and got.status == "in_progress"
    # And bob cannot release alice's claim
    store.idempotency_release(record(caller="bob"))
    assert store.idempotency_get(CAND, mine.scope, mine.key) is not None
    # When alice releases it, Then the key is free again
    store.idempotency_release(mine)
    assert store.idempotency_get(CAND, mine.scope, mine.key) is None
    assert store.idempotency_begin(record(caller="bob"))


def test_keys_are_apart_by_scope_key_and_partition(store: Any) -> None:
    # Given alice's claim of key-1 on the candidate
    assert store.idempotency_begin(record())
    # When the same key is claimed in another partition, or another key in the same one, Then both succeed
    assert store.idempotency_begin(record(ref=StreamRef(PROJECT)))
    assert store.idempotency_begin(record(key="key-2"))
    # And a read of a key never claimed finds nothing
    assert store.idempotency_get(CAND, SCOPE, "key-3") is None
    assert store.idempotency_get(CAND, "/other/scope", "key-1") is None


def test_a_lapsed_lease_can_be_taken_over(store: Any) -> None:
    # Given alice's claim lasting until T1
    assert store.idempotency_begin(record(lease_until=T1))
    # When bob claims just before T1, Then he cannot; at T1 (exactly at the end of the lease) he takes it over
    assert not store.idempotency_begin(record(caller="bob", claimed_at="2026-11-29T12:04:59.999999Z"))
    assert store.idempotency_begin(record(caller="bob", claimed_at=T1, lease_until=T2))
    assert store.idempotency_get(CAND, SCOPE, "key-1").caller == "bob"


def test_completion_inside_the_append_keeps_the_response_for_replay(store: Any) -> None:
    # Given alice's in-progress key and an append that completes it
    mine = record()
    assert store.idempotency_begin(mine)
    body = {"evidence_id": "ev_1", "seq": 1, "note": "ü"}
    # When the append lands
    write(store, Chain(CAND), fact(1), idempotency=completed(mine, body))
    # Then the completed record is readable with its response, and the key cannot be claimed again
    got = store.idempotency_get(CAND, mine.scope, mine.key)
    assert got is not None and got.status == "completed"
    assert (got.response_body, got.caller, got.request_hash) == (body, "alice", "req-hash")
    assert not store.idempotency_begin(record(caller="alice", claimed_at=T2, lease_until=T2))
    # And a release after completion keeps it
    store.idempotency_release(mine)
    assert store.idempotency_get(CAND, mine.scope, mine.key) is not None


def test_a_large_response_body_is_kept_whole(store: Any) -> None:
    # Given a response body above one DynamoDB item's size (a candidate's 2,000 obligations)
    mine = record()
    assert store.idempotency_begin(mine)
    body = {
        "obligations": [{"obligation_id": f"ob_{i:05d}", "scope": f"services/p/{i}" * 5} for i in range(4000)]
    }
    assert len(json.dumps(body)) > 400_000
    # When the append completing it lands, Then the body replays whole
    write(store, Chain(CAND), fact(1), idempotency=completed(mine, body))
    assert store.idempotency_get(CAND, mine.scope, mine.key).response_body == body


@pytest.mark.parametrize("holder", ["bob", None, "alice-later"])
def test_completion_over_another_claim_cancels_the_whole_append(kit: StoreKit, holder: str | None) -> None:
    # Given the key is held by bob, by nobody, or by a later claim of alice's that took the lapsed lease over
    store = kit.store
    if holder == "bob":
        assert store.idempotency_begin(record(caller="bob"))
    elif holder == "alice-later":
        assert store.idempotency_begin(record())
        assert store.idempotency_begin(record(claimed_at=T1, lease_until=T2))
    before = kit.dump()
    # When alice's append tries to complete her (first) claim
    a = Chain(CAND).next(fact(1), idempotency=completed(record(), {"seq": 1}), outbox=[{"outbox_id": "o"}])
    with pytest.raises(StoreConflict):
        store.append(a)
    # Then nothing at all was written
    assert kit.dump() == before


# --- outbox and checkpoints (rules 16, 25) -------------------------------------------------------------


def test_pending_outbox_and_mark_relayed(kit: StoreKit) -> None:
    # Given an execution with two outbox items
    store = kit.store
    items = [
        {"outbox_id": "cand_00000001/exe_1", "kind": "action", "params": {"checks": ["c1"]}},
        {"outbox_id": "cand_00000001/exe_2", "kind": "action", "params": {}},
    ]
    write(store, Chain(CAND), fact(1), outbox=items)
    # When the relay reads the pending items
    pending = store.pending_outbox()
    # Then both are there, as written, under the chain's partition and their outbox keys
    assert [p["item"] for p in pending] == items and {p["kind"] for p in pending} == {"action"}
    assert {p["pk"] for p in pending} == {partition(CAND)}
    assert [p["sk"] for p in pending] == ["O#cand_00000001/exe_1", "O#cand_00000001/exe_2"]
    # When one is relayed, Then only the other stays pending
    assert store.mark_relayed(pending[0]["pk"], pending[0]["sk"])
    assert [p["item"] for p in store.pending_outbox()] == items[1:]
    # And marking something that is not an outbox item creates nothing
    before = kit.dump()
    assert not store.mark_relayed(partition(CAND), "O#missing")
    assert not store.mark_relayed(partition(CAND), "HEAD")
    assert kit.dump() == before


def test_pending_outbox_comes_in_chain_order_and_respects_its_limit(store: Any) -> None:
    # Given outbox items on two chains, written in an order that is not the chains'
    later, earlier = Chain(StreamRef(PROJECT, "cand_b")), Chain(StreamRef(PROJECT, "cand_a"))
    write(store, later, fact(1), outbox=[{"outbox_id": "b1", "kind": "action"}])
    write(store, earlier, fact(1), outbox=[{"outbox_id": "a1", "kind": "action"}])
    write(store, earlier, fact(2), outbox=[{"outbox_id": "a2", "kind": "notify"}])
    # When the relay reads them, Then each chain's come oldest first, chain by chain
    assert [p["item"]["outbox_id"] for p in store.pending_outbox()] == ["a1", "a2", "b1"]
    # And a limit bounds the read
    assert len(store.pending_outbox(limit=2)) == 2


def test_chain_heads_name_every_chain(store: Any) -> None:
    # Given a project chain and a candidate chain
    p = write(store, Chain(StreamRef(PROJECT)), fact(1))
    chain = Chain(CAND)
    write(store, chain, fact(1))
    c = write(store, chain, fact(2))
    # When the heads are listed, Then each names its chain, seq and hash
    assert store.chain_heads() == [
        {"pk": "P#demo", "project": PROJECT, "candidate_id": None, "seq": 1, "hash": p.event["hash"]},
        {
            "pk": "P#demo#C#cand_00000001",
            "project": PROJECT,
            "candidate_id": "cand_00000001",
            "seq": 2,
            "hash": c.event["hash"],
        },
    ]


def test_project_heads_name_every_project_chain_and_no_candidate_chain(store: Any) -> None:
    # Given two project chains and a candidate chain under one of them
    shop = write(store, Chain(StreamRef("shop")), fact(1))
    demo = Chain(StreamRef(PROJECT))
    write(store, demo, fact(1))
    d = write(store, demo, fact(2))
    write(store, Chain(CAND), fact(1))
    # When the project heads are listed, Then each project appears once, by id, with its chain's head
    assert store.project_heads() == [
        {"project": PROJECT, "seq": 2, "hash": d.event["hash"]},
        {"project": "shop", "seq": 1, "hash": shop.event["hash"]},
    ]


def test_no_chain_lists_no_project(store: Any) -> None:
    assert store.project_heads() == []
