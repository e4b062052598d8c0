"""The seal on the audit chains (sentinel_domain.integrity): the tags every event, head and checkpoint
carries, what verification makes of them, how a witness admits a checkpoint, and how the gate fails closed
without its key or its witness."""

import copy

import pytest

from sentinel_domain.audit import AuditChain, next_event
from sentinel_domain.canonical import canonical_text
from sentinel_domain.errors import Refusal, StoreUnavailable
from sentinel_domain.integrity import (
    ChainKeyUnavailable,
    ChainSeal,
    CheckpointForged,
    WitnessBook,
    checkpoint_from_outbox,
    checkpoint_outbox_entry,
)
from sentinel_domain.models import Policy
from sentinel_domain.ports import StreamRef, WitnessConflict
from support.world import ADMIN, PROJECT, REQUESTER, SEAL, UNIT_POLICY, World

OTHER = ChainSeal(b"another-chain-key-of-at-least-32-bytes!!")
AT = "2026-11-29T12:00:00.000000Z"


def sealed_chain(n: int, seal: ChainSeal = SEAL) -> tuple[list[dict], dict[int, str], dict]:
    """A chain of `n` events as the gate writes it: every event and the head with its tag."""
    events, facts, prev = [], {}, None
    for seq in range(1, n + 1):
        text = canonical_text({"type": "evidence.recorded", "n": seq, "recorded_at": AT})
        event = next_event(PROJECT, "cand_1", seq - 1, prev, "evidence.recorded", "ci-bot", AT, text)
        event["mac"] = seal.event_mac(event["hash"])
        events.append(event)
        facts[seq] = text
        prev = event["hash"]
    head = {"seq": n, "hash": prev, "mac": seal.checkpoint(PROJECT, "cand_1", n, prev, AT)["mac"]}
    return events, facts, head


def verify(events, facts, head, checkpoint=None, seal=SEAL):
    return AuditChain.verify(PROJECT, "cand_1", events, facts, head, checkpoint, seal=seal)


# ---- tags ------------------------------------------------------------------------------------------------


def test_an_event_tag_is_the_tag_of_its_hash_for_that_purpose_only() -> None:
    # Given an event hash
    hash_ = "ab" * 32
    # Then the fast tag is the general one, and a tag for another purpose (or key) is another tag
    assert SEAL.event_mac(hash_) == SEAL.tag("event", {"hash": hash_})
    assert SEAL.event_mac(hash_) != SEAL.tag("checkpoint", {"hash": hash_})
    assert SEAL.event_mac(hash_) != OTHER.event_mac(hash_)
    # And a value that is no hash goes the general way, and never verifies as the hash it is not
    assert SEAL.event_mac('"x') == SEAL.tag("event", {"hash": '"x'})
    assert not SEAL.event_verifies("AB" * 32, SEAL.event_mac("ab" * 32))


def test_the_key_never_shows_and_a_short_key_is_no_key() -> None:
    seal = ChainSeal(b"k" * 40)
    assert "kkkk" not in repr(seal) and "kkkk" not in str(seal)
    with pytest.raises(ChainKeyUnavailable):
        ChainSeal(b"k" * 31)


def test_the_checkpoint_outbox_entry_round_trips_and_only_the_key_vouches_for_it() -> None:
    checkpoint = SEAL.checkpoint(PROJECT, "cand_1", 3, "ab" * 32, AT)
    entry = checkpoint_outbox_entry(checkpoint)
    assert entry["kind"] == "checkpoint" and checkpoint_from_outbox(entry) == checkpoint
    assert SEAL.checkpoint_verifies(checkpoint_from_outbox(entry))
    assert checkpoint_from_outbox({"kind": "action"}) is None
    assert not SEAL.checkpoint_verifies(dict(checkpoint, seq=4))
    assert not SEAL.checkpoint_verifies(dict(checkpoint, extra=1))
    assert not OTHER.checkpoint_verifies(checkpoint)


# ---- verification with the seal --------------------------------------------------------------------------


def test_a_sealed_chain_verifies_and_against_its_own_checkpoint() -> None:
    events, facts, head = sealed_chain(5)
    assert verify(events, facts, head).valid
    assert verify(events, facts, head, SEAL.checkpoint(PROJECT, "cand_1", 3, events[2]["hash"], AT)).valid


@pytest.mark.parametrize(
    ("tamper", "first_bad"),
    [
        (lambda e, f, h: e[2].pop("mac"), 3),  # an event without its tag
        (lambda e, f, h: e[2].update(mac=OTHER.event_mac(e[2]["hash"])), 3),  # a tag under another key
        (lambda e, f, h: e[3].update(mac=e[2]["mac"]), 4),  # a tag copied from another event
        (lambda e, f, h: h.update(mac=OTHER.checkpoint(PROJECT, "cand_1", 5, h["hash"], AT)["mac"]), 5),
        (lambda e, f, h: h.pop("mac"), 5),  # a head without its tag
    ],
)
def test_a_missing_or_foreign_tag_is_tampering_named_where_it_is(tamper, first_bad: int) -> None:
    events, facts, head = sealed_chain(5)
    tamper(events, facts, head)
    found = verify(events, facts, head)
    assert not found.valid and found.first_bad_seq == first_bad, found
    # And without the key the same chain still verifies as a hash chain (the tags are what the key adds)
    assert verify(events, facts, head, seal=None).valid


def test_a_chain_rehashed_from_the_middle_is_named_at_its_first_forged_event() -> None:
    # Given events 3..5 re-forged with their hashes recomputed, the head moved, the old tags kept
    events, facts, head = sealed_chain(5)
    from sentinel_domain.audit import event_hash, fact_digest

    facts[3] = canonical_text({"type": "evidence.recorded", "n": 999, "recorded_at": AT})
    prev = events[1]["hash"]
    for event in events[2:]:
        event["prev_hash"] = prev
        if event["seq"] == 3:
            event["payload_digest"] = fact_digest(facts[3])
        event["hash"] = prev = event_hash(event)
    head["hash"] = prev
    # Then seq 3 is named, not the head
    assert verify(events, facts, head).first_bad_seq == 3


@pytest.mark.parametrize(
    "checkpoint",
    [
        {"seq": "3", "hash": "x"},  # malformed
        SEAL.checkpoint(PROJECT, "cand_2", 3, "ab" * 32, AT),  # another chain's
        dict(SEAL.checkpoint(PROJECT, "cand_1", 3, "ab" * 32, AT), mac="0" * 64),  # forged
    ],
)
def test_a_checkpoint_that_does_not_verify_for_the_chain_is_tampering_never_a_crash(checkpoint) -> None:
    events, facts, head = sealed_chain(5)
    found = verify(events, facts, head, checkpoint)
    assert not found.valid and found.first_bad_seq == 1


def test_a_witness_ahead_of_the_chain_names_the_first_missing_seq() -> None:
    events, facts, head = sealed_chain(5)
    ahead = SEAL.checkpoint(PROJECT, "cand_1", 7, "ab" * 32, AT)
    found = verify(events, facts, head, ahead)
    assert not found.valid and found.first_bad_seq == 6


@pytest.mark.parametrize("head", [{"seq": "5"}, {"seq": None}, {"seq": 0, "hash": None}, {"seq": True}])
def test_a_malformed_head_is_tampering_never_a_crash(head) -> None:
    events, facts, _head = sealed_chain(5)
    assert not verify(events, facts, head).valid


# ---- the witness's admission rule ------------------------------------------------------------------------


def test_a_witness_admits_only_what_the_key_tagged_once_and_refuses_a_fork() -> None:
    book = WitnessBook(SEAL)
    genuine = SEAL.checkpoint(PROJECT, None, 1, "ab" * 32, AT)
    chain, kept, duplicate = book.check(genuine)
    assert not duplicate
    book.keep(chain, kept)
    assert book.check(genuine)[2] is True  # the same one again: nothing new
    with pytest.raises(CheckpointForged):
        book.check(dict(genuine, mac="0" * 64))
    with pytest.raises(WitnessConflict):
        book.check(SEAL.checkpoint(PROJECT, None, 1, "cd" * 32, AT))
    assert book.newest(StreamRef(PROJECT)) == genuine


# ---- the gate without its key or its witness -------------------------------------------------------------


class Broken:
    """A witness that cannot be read."""

    def newest(self, ref):
        raise StoreUnavailable("the witness is gone")

    tampered = newest

    def append(self, checkpoint):
        raise StoreUnavailable("the witness is gone")

    def mark_tampered(self, ref, finding):
        raise StoreUnavailable("the witness is gone")


def unavailable_key() -> ChainSeal:
    raise ChainKeyUnavailable("cannot read the chain key file /nowhere: No such file or directory")


@pytest.mark.parametrize("fault", ["key", "witness"])
def test_without_its_key_or_its_witness_the_gate_holds_and_appends_nothing(fault: str) -> None:
    # Given a ready-to-use project and candidate, then the chain key or the witness lost
    world = World()
    cid = world.candidate()["candidate_id"]
    if fault == "key":
        world.gate.chain.seal = unavailable_key
    else:
        world.gate.witness = Broken()
    before = copy.deepcopy(world.store.snapshot())
    # When a decision is read and recorded, and a policy and a candidate written
    read = world.gate.decision(PROJECT, cid, REQUESTER, None).as_json()
    recorded = world.gate.record_decision(PROJECT, cid, REQUESTER, None).as_json()
    with pytest.raises(Refusal) as refused:
        world.gate.put_policy(PROJECT, "unit-tests", ADMIN, Policy.model_validate(UNIT_POLICY))
    # Then the decisions hold with STATE_UNAVAILABLE, the recorded one unrecorded; the write is refused
    assert read["decision"] == "hold" and "STATE_UNAVAILABLE" in {f["code"] for f in read["findings"]}
    assert recorded["recorded"] is False and "STATE_UNAVAILABLE" in {f["code"] for f in recorded["findings"]}
    assert refused.value.code == "STATE_UNAVAILABLE"
    # And nothing was appended, and no key appears in what was said
    assert world.store.snapshot() == before
    assert SEAL.key.decode() not in repr(read) + repr(recorded) + refused.value.detail
