"""The decision read's project state (sentinel_domain.usecases.project_reads): held per process while the
project's HEAD is unchanged, read and verified in full on any other head, and never used when the HEAD
cannot be established."""

import copy
from collections import Counter
from typing import Any

import pytest

from sentinel_domain.errors import Refusal, StoreUnavailable
from sentinel_domain.memory import MemoryStore
from sentinel_domain.models import Policy
from sentinel_domain.ports import Stream, StreamRef
from sentinel_domain.usecases import Gate
from sentinel_domain.usecases.project_reads import ChainCache, HeldChain, project_for_decision
from support.world import ADMIN, PROJECT, REQUESTER, SEAL, UNIT_POLICY, World

PROJECT_REF = StreamRef(PROJECT)


class CountingStore:
    """The in-memory store, counting whole-chain reads and HEAD reads of the project's chain; its HEAD read
    can be made to fail."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.reads: Counter[str] = Counter()
        self.head_fails = False

    def load(self, ref: StreamRef) -> Stream | None:
        if ref == PROJECT_REF:
            self.reads["load"] += 1
        return self.inner.load(ref)

    def load_head(self, ref: StreamRef) -> dict[str, Any] | None:
        if ref == PROJECT_REF:
            self.reads["load_head"] += 1
            if self.head_fails:
                raise StoreUnavailable("GetItem failed: ThrottlingException")
        return self.inner.load_head(ref)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def world() -> World:
    return World(store=CountingStore(MemoryStore()), hold_chains=True)


def project_chain(world: World) -> Stream:
    return world.store.inner.streams[PROJECT_REF]


def held(world: World) -> HeldChain | None:
    return world.services.chain_cache.get(PROJECT_REF)


def read(world: World, cid: str, gate: Gate | None = None) -> dict[str, Any]:
    """One hook read, counting the project's reads from zero."""
    world.store.reads.clear()
    return (gate or world.gate).decision(PROJECT, cid, REQUESTER, None).as_json()


def codes(decision: dict[str, Any]) -> list[str]:
    return sorted({f["code"] for f in decision["findings"]})


def warm(world: World) -> tuple[str, dict[str, Any]]:
    """A candidate whose first decision read has read, verified and held the project's chain."""
    cid = world.candidate()["candidate_id"]
    first = read(world, cid)
    assert world.store.reads == {"load": 1}  # nothing held yet: the whole chain, as before
    assert held(world) is not None
    return cid, first


def test_the_gate_the_services_build_holds_the_services_cache(world: World) -> None:
    # Given the composition root's services (one per Lambda container)
    services = world.services
    # When its gate is built
    gate = services.gate
    # Then the gate holds the one cache those services keep
    assert isinstance(services.chain_cache, ChainCache)
    assert gate.chain_cache is services.chain_cache


def test_an_unchanged_head_reuses_the_held_project_state(world: World) -> None:
    # Given a project chain held after a first decision read
    cid, first = warm(world)
    # When the hook reads the decision again, nothing having changed
    again = read(world, cid)
    # Then only the project's HEAD was read, and the decision is the same
    assert world.store.reads == {"load_head": 1}
    assert again == first


def test_a_new_append_to_the_project_chain_reads_and_verifies_it_in_full(world: World) -> None:
    # Given a held project chain
    cid, _first = warm(world)
    seq = held(world).seq
    # When an admin amends a policy (the project's head moves on)
    world.gate.put_policy(PROJECT, "unit-tests", ADMIN, Policy.model_validate(dict(UNIT_POLICY, min_tests=2)))
    read(world, cid)
    # Then the next decision read reads the whole chain again and holds the new head
    assert world.store.reads == {"load_head": 1, "load": 1}
    assert held(world).seq == seq + 1 == project_chain(world).seq
    # And the read after it is a HEAD read again
    read(world, cid)
    assert world.store.reads == {"load_head": 1}


def test_a_head_that_moved_backwards_is_a_change(world: World) -> None:
    # Given a project chain held at its newest head, one append after an older head
    cid = world.candidate()["candidate_id"]
    older = copy.deepcopy(project_chain(world))
    world.gate.put_policy(PROJECT, "unit-tests", ADMIN, Policy.model_validate(dict(UNIT_POLICY, min_tests=2)))
    read(world, cid)
    assert held(world).seq == older.seq + 1
    # When the table is rolled back to the older chain (head included)
    world.store.inner.streams[PROJECT_REF] = older
    decision = read(world, cid)
    # Then the decision read does not take the older head for the held one: it reads the chain in full, which
    # the witness's newest checkpoint names as rolled back, and nothing is held
    assert world.store.reads == {"load_head": 1, "load": 1}
    assert "STATE_TAMPERED" in codes(decision)
    assert held(world) is None


def test_another_hash_at_the_same_seq_is_a_change(world: World) -> None:
    # Given a held project chain
    cid, _first = warm(world)
    # When its HEAD is rewritten to another hash at the same seq
    project_chain(world).head["hash"] = "f" * 64
    decision = read(world, cid)
    # Then the chain is read in full, fails verification, and the decision holds with STATE_TAMPERED
    assert world.store.reads == {"load_head": 1, "load": 1}
    assert decision["decision"] == "hold"
    assert "STATE_TAMPERED" in codes(decision)
    # And a chain that fails is not held: the next read reads it in full again
    assert held(world) is None
    read(world, cid)
    assert world.store.reads == {"load": 1}


@pytest.mark.parametrize(
    "change",
    [
        {"seq": -1},
        {"seq": +1},
        {"hash": "0" * 64},
        {"seq_as": str},
        {"seq_as": float},
        {"drop": "hash"},
    ],
    ids=["earlier", "later", "rewritten", "seq-as-text", "seq-as-float", "no-hash"],
)
def test_only_the_same_seq_and_hash_is_the_held_head(world: World, change: dict[str, Any]) -> None:
    # Given a held project chain and its HEAD as stored
    _cid, _first = warm(world)
    current = held(world)
    head = dict(project_chain(world).head)
    assert current.same_head(head)
    # When the HEAD differs in one way
    head["seq"] = change.get("seq_as", int)(head["seq"] + change.get("seq", 0))
    head["hash"] = change.get("hash", head["hash"])
    if "drop" in change:
        del head[change["drop"]]
    # Then it is not the held head
    assert not current.same_head(head)


def test_a_head_read_that_fails_holds_with_state_unavailable(world: World) -> None:
    # Given a held project chain
    cid, _first = warm(world)
    # When the project's HEAD cannot be read
    world.store.head_fails = True
    decision = read(world, cid)
    # Then the decision holds with STATE_UNAVAILABLE: nothing held is used without a head that equals it
    assert decision["decision"] == "hold"
    assert "STATE_UNAVAILABLE" in codes(decision)
    assert world.store.reads == {"load_head": 1}
    # And once the HEAD reads again, unchanged, the held chain serves again
    world.store.head_fails = False
    assert "STATE_UNAVAILABLE" not in codes(read(world, cid))
    assert world.store.reads == {"load_head": 1}


def test_a_missing_head_holds_with_state_unavailable(world: World) -> None:
    # Given a held project chain
    cid, _first = warm(world)
    # When the project's HEAD item is gone
    project_chain(world).head = None
    decision = read(world, cid)
    # Then the decision holds with STATE_UNAVAILABLE
    assert decision["decision"] == "hold"
    assert "STATE_UNAVAILABLE" in codes(decision)
    assert world.store.reads == {"load_head": 1}


def test_a_checkpoint_the_held_chain_does_not_contain_reads_it_in_full() -> None:
    # Given a gate with a witness (as the local runner has), holding the project's chain
    world = World(store=CountingStore(MemoryStore()), hold_chains=True)
    cid, _first = warm(world)
    current = held(world)
    assert world.witness.newest(PROJECT_REF)["seq"] == current.seq
    read(world, cid)
    assert world.store.reads == {"load_head": 1}  # a checkpoint of the held head: reused
    # When the witness's newest checkpoint names a later seq (the chain was cut back to the held head)
    world.witness.append(SEAL.checkpoint(PROJECT, None, current.seq + 1, "e" * 64, "2026-11-29T12:00:00Z"))
    decision = read(world, cid)
    # Then the chain is read in full and the cut is named
    assert world.store.reads == {"load_head": 1, "load": 1}
    assert "STATE_TAMPERED" in codes(decision)
    assert held(world) is None


def test_a_project_chain_edited_behind_an_unchanged_head_is_the_writes_and_the_verifiers_to_find(
    world: World,
) -> None:
    """What the issue ("Persistent and fast on one machine") trades for a cheaper hook read, stated plainly:
    a decision read that finds the project's HEAD unchanged reuses the project state it verified before and
    does not read the project's chain again, so an event or fact of that chain edited behind an unchanged
    head is not seen by those reads. The full-chain check of an unchanged project partition is now the write
    paths' job (every route that appends reads and verifies the whole project chain and refuses on a chain
    that fails) and, from the next issue, the scheduled verifier's. The candidate's chain is held the same
    way (tests/unit/test_candidate_reads.py), and a process that holds nothing reads both in full."""
    # Given a held project chain
    cid, _first = warm(world)
    # When the unit-tests policy fact is edited in place, the head left as it was
    chain = project_chain(world)
    seq = max(
        s for s, text in chain.facts.items() if '"type":"policy.set"' in text and '"min_tests":1' in text
    )
    chain.facts[seq] = chain.facts[seq].replace('"min_tests":1', '"min_tests":0')
    # Then the hook's read does not see it: the project's HEAD alone was read, and no STATE_TAMPERED
    decision = read(world, cid)
    assert world.store.reads == {"load_head": 1}
    assert "STATE_TAMPERED" not in codes(decision)
    # But every write refuses on it, naming the chain's failure
    with pytest.raises(Refusal) as refused:
        world.gate.put_policy(PROJECT, "lint", ADMIN, Policy.model_validate(UNIT_POLICY))
    assert refused.value.code == "STATE_UNAVAILABLE"
    assert f"seq {seq}" in str(refused.value)
    # And recording a decision (a write) is refused too, with the hold's STATE_TAMPERED among its findings
    with pytest.raises(Refusal) as refused:
        world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    assert refused.value.code == "STATE_UNAVAILABLE"
    assert "STATE_TAMPERED" in {f["code"] for f in refused.value.findings}
    # And a process holding nothing (a fresh container) sees it on its first read
    fresh = Gate(world.store, world.clock, world.ids, chain_cache=ChainCache())
    assert "STATE_TAMPERED" in codes(read(world, cid, fresh))


def test_a_recorded_decision_reads_the_whole_project_chain(world: World) -> None:
    # Given a held project chain
    cid, _first = warm(world)
    # When a decision is recorded (an append to the candidate's chain)
    world.store.reads.clear()
    world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    # Then it read and verified the project's chain in full, and never its HEAD alone
    assert world.store.reads == {"load": 1}


def test_a_gate_without_a_cache_reads_the_project_in_full_every_time(world: World) -> None:
    # Given a gate built without a cache
    gate = Gate(world.store, world.clock, world.ids)
    cid = world.candidate()["candidate_id"]
    # When it answers two decision reads
    for _ in range(2):
        read(world, cid, gate)
        # Then each reads the whole project chain, as before
        assert world.store.reads == {"load": 1}


def test_the_cache_holds_at_most_its_bound_dropping_the_least_recently_used() -> None:
    # Given a cache bounded to two projects, holding a and b, a used last
    cache = ChainCache(max_chains=2)
    entry = HeldChain(1, "h", ("h",), [])
    a, b, c = StreamRef("a"), StreamRef("a", "c-1"), StreamRef("c")
    cache.put(a, entry)
    cache.put(b, entry)
    assert cache.get(a) is entry
    # When a third chain is held
    cache.put(c, entry)
    # Then the least recently used (b) was dropped
    assert len(cache) == 2
    assert (cache.get(a), cache.get(b), cache.get(c)) == (entry, None, entry)
    # And a cache must hold at least one project
    with pytest.raises(ValueError):
        ChainCache(max_chains=0)


def test_a_reused_state_shares_the_held_facts_but_no_memo(world: World) -> None:
    # Given a held project chain, and the state one decision read took from it and asked a question of
    _cid, _first = warm(world)
    first, _ = project_for_decision(world.gate.chain, PROJECT, world.services.chain_cache)
    first.policy("unit-tests", "2026-11-29T12:00:00Z")
    assert first._policy_memo
    # When the next decision read reuses it
    second, findings = project_for_decision(world.gate.chain, PROJECT, world.services.chain_cache)
    # Then it gets the same facts in a state of its own, whose memos start empty (they are per decision)
    assert findings == []
    assert second is not first and second.facts is first.facts is held(world).facts
    assert second._policy_memo == {} and second._revoked_memo == {}
