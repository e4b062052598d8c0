"""The decision read's candidate chain (sentinel_domain.usecases.project_reads): its verified facts held per
process while the candidate's HEAD is unchanged, so a hook polling its decision reads one item of the
candidate, not its partition; read and verified in full on any other head; the decision judged afresh on every
read; never used by a recorded decision."""

import copy
import json
from collections import Counter
from typing import Any

import pytest

from sentinel_domain.canonical import canonical_text
from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.memory import MemoryStore
from sentinel_domain.models import ChangeContextRequest
from sentinel_domain.ports import Stream, StreamRef
from sentinel_domain.usecases import Gate
from sentinel_domain.usecases.project_reads import ChainCache
from support.world import CI, PROJECT, REQUESTER, World


class CandidateCountingStore:
    """The in-memory store, counting whole-chain and HEAD reads of candidate chains; HEAD reads can fail."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.reads: Counter[str] = Counter()
        self.head_fails = False

    def load(self, ref: StreamRef) -> Stream | None:
        if ref.candidate_id is not None:
            self.reads["load"] += 1
        return self.inner.load(ref)

    def load_head(self, ref: StreamRef) -> dict[str, Any] | None:
        if ref.candidate_id is not None:
            self.reads["load_head"] += 1
            if self.head_fails:
                raise StoreUnavailable("GetItem failed: ThrottlingException")
        return self.inner.load_head(ref)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def world() -> World:
    return World(store=CandidateCountingStore(MemoryStore()), hold_chains=True)


def read(world: World, cid: str, gate: Gate | None = None, as_of: str | None = None) -> dict[str, Any]:
    world.store.reads.clear()
    return (gate or world.gate).decision(PROJECT, cid, REQUESTER, as_of).as_json()


def codes(decision: dict[str, Any]) -> list[str]:
    return sorted({f["code"] for f in decision["findings"]})


def chain_of(world: World, cid: str) -> Stream:
    return world.store.inner.streams[StreamRef(PROJECT, cid)]


def warm(world: World) -> tuple[str, dict[str, Any]]:
    cid = world.candidate()["candidate_id"]
    first = read(world, cid)
    assert world.store.reads == {"load": 1}  # nothing held yet: the whole chain
    return cid, first


def test_an_unchanged_candidate_head_reads_one_item_and_judges_the_same(world: World) -> None:
    # Given a candidate read once by a decision read
    cid, first = warm(world)
    # When the hook reads its decision again, nothing having changed
    again = read(world, cid)
    # Then only the candidate's HEAD was read, and the decision is the same
    assert world.store.reads == {"load_head": 1}
    assert again == first


def test_an_append_to_the_candidate_reads_it_in_full_and_holds_the_new_head(world: World) -> None:
    # Given a held candidate
    cid, _first = warm(world)
    # When the CI publisher attests its change (an append to the candidate's chain)
    world.gate.add_change_context(
        PROJECT,
        cid,
        CI,
        ChangeContextRequest.model_validate({"change": {"files": ["services/payments/api.py"]}}),
        None,
    )
    read(world, cid)
    # Then the next read reads the chain in full and holds its new head; the read after it is a HEAD read
    assert world.store.reads == {"load": 1, "load_head": 1}
    assert world.services.chain_cache.get(StreamRef(PROJECT, cid)).seq == chain_of(world, cid).seq
    read(world, cid)
    assert world.store.reads == {"load_head": 1}


def test_a_candidate_rolled_back_to_an_older_head_is_read_in_full(world: World) -> None:
    # Given a candidate held at its newest head, one append after an older chain
    cid = world.candidate()["candidate_id"]
    older = copy.deepcopy(chain_of(world, cid))
    world.gate.add_change_context(
        PROJECT,
        cid,
        CI,
        ChangeContextRequest.model_validate({"change": {"files": ["services/payments/api.py"]}}),
        None,
    )
    read(world, cid)
    # When the table is rolled back to the older chain, head included
    world.store.inner.streams[StreamRef(PROJECT, cid)] = older
    read(world, cid)
    # Then the older head is a change: the chain is read in full, never answered from what is held
    assert world.store.reads == {"load_head": 1, "load": 1}


def test_a_tampered_candidate_holds_and_is_never_held(world: World) -> None:
    # Given a candidate whose creation fact was edited in place, head left as it was
    cid = world.candidate()["candidate_id"]
    chain = chain_of(world, cid)
    chain.facts[1] = chain.facts[1].replace('"payments"', '"payroll"', 1)
    # When a process that holds nothing reads its decision, twice
    fresh = Gate(world.store, world.clock, world.ids, chain_cache=ChainCache())
    first = read(world, cid, fresh)
    second = read(world, cid, fresh)
    # Then each read holds with STATE_TAMPERED, and each read the chain in full (a failing chain is not held)
    assert "STATE_TAMPERED" in codes(first) and "STATE_TAMPERED" in codes(second)
    assert first["decision"] == second["decision"] == "hold"
    assert world.store.reads == {"load": 1}
    assert fresh.chain_cache.get(StreamRef(PROJECT, cid)) is None


def test_a_failed_or_missing_candidate_head_reads_in_full(world: World) -> None:
    # Given a held candidate
    cid, first = warm(world)
    # When its HEAD cannot be read, the chain is read in full (a failing store answers as a read always did)
    world.store.head_fails = True
    assert read(world, cid) == first
    assert world.store.reads == {"load_head": 1, "load": 1}
    world.store.head_fails = False
    # And when its HEAD is gone, the full read finds events without a head: STATE_TAMPERED
    chain_of(world, cid).head = None
    assert "STATE_TAMPERED" in codes(read(world, cid))


def test_each_read_is_judged_at_its_own_instant_over_facts_no_decision_changes(world: World) -> None:
    # Given a held candidate and the held facts as they were
    cid, first = warm(world)
    held = world.services.chain_cache.get(StreamRef(PROJECT, cid))
    before = canonical_text(held.facts)
    # When the clock moves on, and a what-if read asks about an earlier instant
    world.clock.advance(3600)
    later = read(world, cid)
    what_if = read(world, cid, as_of=first["as_of"])
    # Then each decision is judged at its own instant from the held facts
    assert later["as_of"] != first["as_of"]
    assert what_if["as_of"] == first["as_of"]
    assert world.store.reads == {"load_head": 1}
    # And judging never changed what is held (it is shared by every read of the process)
    assert canonical_text(held.facts) == before
    assert json.loads(before) == json.loads(canonical_text(held.facts))


def test_a_recorded_decision_reads_the_candidate_in_full(world: World) -> None:
    # Given a held candidate
    cid, _first = warm(world)
    # When a decision is recorded
    world.store.reads.clear()
    world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    # Then it read the candidate's chain in full, never its HEAD alone
    assert world.store.reads["load_head"] == 0 and world.store.reads["load"] >= 1


@pytest.mark.parametrize(("runtime", "held"), [("aws_lambda", True), ("local", False), ("operator", False)])
def test_only_a_lambda_container_holds_chains(runtime: str, held: bool, monkeypatch) -> None:
    # Given the settings of a runtime
    from sentinel_service.compose import compose
    from sentinel_service.settings import Settings

    monkeypatch.setenv("SENTINEL_RUNTIME", runtime)
    # When its services are composed
    services = compose(Settings.from_env(), store=MemoryStore())
    # Then only Lambda's hold verified chains between reads; the local gate verifies every read in full
    assert (services.chain_cache is not None) is held
    assert (services.gate.chain_cache is not None) is held
