"""Audit chain verification (DOMAIN.md rules 24 and 25): every edited, removed, reordered or inserted event,
every fact that no longer matches its event, and a cut tail are detected, naming the first bad seq."""

import copy
import json
from dataclasses import dataclass
from typing import Any

import pytest

from sentinel_domain import audit
from sentinel_domain.audit import AuditChain, Verification
from sentinel_domain.canonical import canonical_text, digest
from sentinel_domain.models import ChangeContextRequest, EvidenceRequest, ReportRequest, ReviewRequest
from sentinel_domain.ports import StreamRef
from support.world import CI, PROJECT, REQUESTER, REV, REVIEWER, World

JUNIT_PASS = '<testsuite name="s"><testcase classname="a" name="t1"/></testsuite>'


@dataclass
class Chain:
    project: str
    candidate_id: str | None
    events: list[dict[str, Any]]
    facts: dict[int, str]
    head: dict[str, Any] | None

    def verify(self, checkpoint: dict[str, Any] | None = None) -> Verification:
        return AuditChain.verify(
            self.project, self.candidate_id, self.events, self.facts, self.head, checkpoint
        )

    @property
    def length(self) -> int:
        return len(self.events)


def copy_of(world: World, ref: StreamRef) -> Chain:
    stream = copy.deepcopy(world.store.streams[ref])
    return Chain(ref.project, ref.candidate_id, stream.events, stream.facts, stream.head)


@pytest.fixture
def chain(world: World) -> Chain:
    """A candidate's chain of six events: created, change context, plan, review, evidence, report."""
    gate = world.gate
    cid = world.candidate()["candidate_id"]
    gate.add_change_context(
        PROJECT,
        cid,
        CI,
        ChangeContextRequest.model_validate({"change": {"files": ["services/payments/api.py"]}}),
        None,
    )
    digest_ = gate.propose(PROJECT, cid, REQUESTER, None, None).plan_digest
    gate.review(
        PROJECT, cid, REVIEWER, ReviewRequest(decision="approve", plan_digest=digest_, revision=REV), None
    )
    evidence = gate.post_evidence(
        PROJECT,
        cid,
        CI,
        EvidenceRequest.model_validate(
            {
                "check_id": "C1",
                "subject": "payments",
                "revision": REV,
                "environment": "staging",
                "scope": ["payments-api"],
                "observed_at": "2026-11-29T11:59:00Z",
                "source": {"system": "ci", "run_id": "1", "url": ""},
                "junit_xml": JUNIT_PASS,
            }
        ),
        None,
    ).as_json()
    gate.report(
        PROJECT,
        cid,
        "T1",
        REQUESTER,
        ReportRequest.model_validate(
            {
                "plan_digest": digest_,
                "status": "completed",
                "checks": [{"check_id": "C1", "evidence_id": evidence["evidence_id"]}],
            }
        ),
        None,
    )
    built = copy_of(world, StreamRef(PROJECT, cid))
    assert built.length == 6
    return built


def forge(
    chain: Chain, after: dict[str, Any] | None, fact: dict[str, Any], type_: str = "review.recorded"
) -> tuple[dict[str, Any], str]:
    """A self-consistent event following `after` (or first in the chain), as a forger would write it."""
    text = canonical_text(fact)
    event = audit.next_event(
        chain.project,
        chain.candidate_id,
        after["seq"] if after else 0,
        after["hash"] if after else None,
        type_,
        "mallory",
        "2026-11-29T12:00:00.000000Z",
        text,
    )
    return event, text


def rehash(event: dict[str, Any]) -> None:
    event["hash"] = audit.event_hash(event)


def assert_bad(result: Verification, seq: int) -> None:
    assert result.valid is False
    assert result.first_bad_seq == seq, result.reason
    assert result.reason


# ---- a valid chain --------------------------------------------------------------------------------------


def test_a_valid_candidate_chain_verifies(chain: Chain) -> None:
    # Given an untouched candidate chain
    # When it is verified
    result = chain.verify()
    # Then it is valid, names no bad seq, and its head is the last event's hash
    assert (result.valid, result.first_bad_seq, result.reason) == (True, None, None)
    assert (result.length, result.head_hash) == (6, chain.events[-1]["hash"])


def test_a_valid_project_chain_verifies_from_its_genesis(world: World) -> None:
    # Given the project's chain (candidate_id null)
    project_chain = copy_of(world, StreamRef(PROJECT))
    # When it is verified
    result = project_chain.verify()
    # Then it is valid, and its first prev_hash is SHA-256 of the canonical {project, candidate_id: null}
    assert result.valid is True and result.length == 4
    assert project_chain.events[0]["prev_hash"] == digest({"project": PROJECT, "candidate_id": None})


def test_a_valid_chain_verifies_against_its_newest_checkpoint(chain: Chain) -> None:
    # Given a checkpoint of the chain's head as it left through the outbox
    checkpoint = {"seq": 6, "hash": chain.events[-1]["hash"]}
    # When it is verified against it
    # Then it is valid
    assert chain.verify(checkpoint).valid is True


# ---- edited events --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("actor", "mallory"),
        ("type", "task.settled"),
        ("at", "2026-11-29T11:00:00.000000Z"),
        ("payload_digest", "0" * 64),
        ("prev_hash", "0" * 64),
        ("hash", "0" * 64),
        ("candidate_id", "cand_99999999"),
    ],
)
def test_an_edited_event_is_detected_at_its_seq(chain: Chain, field: str, value: str) -> None:
    # Given a chain whose third event was edited
    chain.events[2][field] = value
    # When it is verified
    # Then the third event is named
    assert_bad(chain.verify(), 3)


def test_an_event_with_a_field_added_is_detected_at_its_seq(chain: Chain) -> None:
    # Given a chain whose review event (seq 4) gained a field that auditors will read
    chain.events[3]["approved_by"] = "the-cto"
    # When it is verified
    # Then the edit is detected at seq 4: an event is exactly its hashed fields and its hash
    assert_bad(chain.verify(), 4)


def test_an_edited_first_event_is_detected_at_seq_1(chain: Chain) -> None:
    # Given a chain whose genesis event was edited
    chain.events[0]["actor"] = "mallory"
    # Then seq 1 is named
    assert_bad(chain.verify(), 1)


# ---- removed, reordered, inserted events ----------------------------------------------------------------


@pytest.mark.parametrize("seq", [1, 3, 5])
def test_a_removed_event_is_detected_at_its_seq(chain: Chain, seq: int) -> None:
    # Given a chain with one event removed (its fact left in place)
    del chain.events[seq - 1]
    # When it is verified
    # Then the removed event's seq is named
    assert_bad(chain.verify(), seq)


def test_a_removed_event_and_its_fact_are_detected(chain: Chain) -> None:
    # Given a chain with event 4 and its fact removed
    del chain.events[3]
    del chain.facts[4]
    # Then seq 4 is named
    assert_bad(chain.verify(), 4)


def test_reordered_events_are_detected_at_the_first_moved_seq(chain: Chain) -> None:
    # Given a chain whose events 3 and 4 were swapped
    chain.events[2], chain.events[3] = chain.events[3], chain.events[2]
    # Then seq 3 is named
    assert_bad(chain.verify(), 3)


def test_reordered_events_with_their_seqs_renumbered_are_detected(chain: Chain) -> None:
    # Given a chain whose events 3 and 4 were swapped and renumbered (facts swapped along)
    chain.events[2], chain.events[3] = chain.events[3], chain.events[2]
    chain.events[2]["seq"], chain.events[3]["seq"] = 3, 4
    chain.facts[3], chain.facts[4] = chain.facts[4], chain.facts[3]
    # Then seq 3 is named
    assert_bad(chain.verify(), 3)


def test_an_inserted_copy_of_an_event_is_detected_at_its_position(chain: Chain) -> None:
    # Given a chain with event 2 inserted a second time, after itself
    chain.events.insert(2, copy.deepcopy(chain.events[1]))
    # Then the position it took, seq 3, is named
    assert_bad(chain.verify(), 3)


def test_an_inserted_forged_event_is_detected_where_the_chain_breaks(chain: Chain) -> None:
    # Given a self-consistent forged event inserted as seq 3 (with its fact), the original events shifted on
    forged, text = forge(
        chain,
        chain.events[1],
        {"type": "review.recorded", "decision": "approve", "recorded_at": "2026-11-29T12:00:00.000000Z"},
    )
    chain.events.insert(2, forged)
    chain.facts[3] = text
    # When it is verified
    result = chain.verify()
    # Then the first link that no longer holds, the displaced original at position 4, is named
    assert_bad(result, 4)


def test_an_inserted_event_renumbering_its_successors_is_detected(chain: Chain) -> None:
    # Given a forged seq 3 inserted and every later event renumbered (facts moved along)
    forged, text = forge(chain, chain.events[1], {"type": "review.recorded", "recorded_at": "x"})
    later = chain.events[2:]
    old_facts = dict(chain.facts)
    for event in later:
        event["seq"] += 1
        chain.facts[event["seq"]] = old_facts[event["seq"] - 1]
    chain.events[2:] = [forged, *later]
    chain.facts[3] = text
    # Then seq 4 (whose prev_hash names the real event 3, not the forgery) is named
    assert_bad(chain.verify(), 4)


def test_a_fact_without_its_event_is_detected(chain: Chain) -> None:
    # Given a fact slipped in after the last event, with no event
    chain.facts[7] = canonical_text({"type": "review.recorded", "recorded_at": "2026-11-29T12:00:00.000000Z"})
    # Then seq 7 is named
    assert_bad(chain.verify(), 7)


def test_an_event_from_another_chain_is_detected(world: World, chain: Chain) -> None:
    # Given a second candidate's chain, and the first candidate's event 2 spliced into it
    other_id = world.candidate(revision="c" * 40)["candidate_id"]
    world.gate.add_change_context(
        PROJECT,
        other_id,
        CI,
        ChangeContextRequest.model_validate({"change": {"files": ["services/payments/api.py"]}}),
        None,
    )
    other = copy_of(world, StreamRef(PROJECT, other_id))
    other.events[1] = copy.deepcopy(chain.events[1])
    other.facts[2] = chain.facts[2]
    # Then seq 2 is named
    assert_bad(other.verify(), 2)


# ---- hashes recomputed, facts edited -------------------------------------------------------------------


def test_a_hash_recomputed_without_its_successors_is_detected_at_the_successor(chain: Chain) -> None:
    # Given event 3 edited and its own hash recomputed, the later events left as they were
    chain.events[2]["actor"] = "mallory"
    rehash(chain.events[2])
    # When it is verified
    # Then event 3 is consistent in itself, and the chain breaks at 4, whose prev_hash names the original
    assert_bad(chain.verify(), 4)


def test_a_fact_and_its_event_rewritten_without_the_successors_are_detected(chain: Chain) -> None:
    # Given the evidence fact (seq 5) rewritten, its event's payload_digest and hash recomputed to match
    fact = json.loads(chain.facts[5])
    fact["outcome"] = "pass" if fact["outcome"] != "pass" else "fail"
    chain.facts[5] = canonical_text(fact)
    chain.events[4]["payload_digest"] = audit.fact_digest(chain.facts[5])
    rehash(chain.events[4])
    # Then the break shows at seq 6
    assert_bad(chain.verify(), 6)


def test_the_last_event_rehashed_is_detected_against_the_head(chain: Chain) -> None:
    # Given the last event edited and rehashed (no successor to break)
    chain.events[-1]["actor"] = "mallory"
    rehash(chain.events[-1])
    # Then the head no longer matches, and the last seq is named
    assert_bad(chain.verify(), 6)


@pytest.mark.parametrize("seq", [1, 4, 6])
def test_a_fact_edited_in_place_is_detected_at_its_seq(chain: Chain, seq: int) -> None:
    # Given one stored fact edited in place
    fact = json.loads(chain.facts[seq])
    fact["recorded_at"] = "2026-11-29T11:00:00.000000Z"
    chain.facts[seq] = canonical_text(fact)
    # Then its seq is named
    assert_bad(chain.verify(), seq)


def test_a_fact_edited_by_one_byte_is_detected(chain: Chain) -> None:
    # Given the review fact with one whitespace byte added (the same JSON value, other bytes)
    chain.facts[4] = chain.facts[4] + " "
    # Then seq 4 is named
    assert_bad(chain.verify(), 4)


def test_a_missing_fact_is_detected(chain: Chain) -> None:
    # Given a fact deleted while its event remains
    del chain.facts[2]
    # Then seq 2 is named
    assert_bad(chain.verify(), 2)


# ---- cut or rewritten tails ----------------------------------------------------------------------------


@pytest.mark.parametrize("cut", [1, 2, 5])
def test_a_cut_tail_is_detected_against_the_head(chain: Chain, cut: int) -> None:
    # Given the last `cut` events and their facts removed, the head left in place
    for _ in range(cut):
        removed = chain.events.pop()
        del chain.facts[removed["seq"]]
    # When it is verified
    result = chain.verify()
    # Then the first missing seq is named
    assert_bad(result, 6 - cut + 1)
    assert result.length == 6 - cut


def test_a_cut_tail_with_a_rewritten_head_is_detected_against_the_newest_checkpoint(chain: Chain) -> None:
    # Given a checkpoint taken at seq 6, then the tail cut to 4 and the head rewritten to match
    checkpoint = {"seq": 6, "hash": chain.events[-1]["hash"]}
    del chain.events[4:]
    del chain.facts[5], chain.facts[6]
    chain.head = dict(chain.head or {}, seq=4, hash=chain.events[-1]["hash"])
    # Then on its own the chain looks whole, but the checkpoint names the first missing seq
    assert chain.verify().valid is True
    assert_bad(chain.verify(checkpoint), 5)


def test_a_rewritten_tail_is_detected_against_the_newest_checkpoint(chain: Chain) -> None:
    # Given a checkpoint taken at seq 6, then event 6 replaced by a forgery and the head moved to it
    checkpoint = {"seq": 6, "hash": chain.events[-1]["hash"]}
    forged, text = forge(
        chain,
        chain.events[4],
        {"type": "task.reported", "passes": True, "recorded_at": "2026-11-29T12:00:00.000000Z"},
        type_="task.reported",
    )
    chain.events[5] = forged
    chain.facts[6] = text
    chain.head = dict(chain.head or {}, seq=6, hash=forged["hash"])
    # Then the checkpoint names seq 6
    assert chain.verify().valid is True
    assert_bad(chain.verify(checkpoint), 6)


def test_events_without_a_head_do_not_verify(chain: Chain) -> None:
    # Given an untouched chain whose head was deleted (every accepted write moves it with the event)
    chain.head = None
    # When it is verified, Then nothing vouches for where it ends: invalid, at its last event
    assert_bad(chain.verify(), chain.length)


@pytest.mark.parametrize(
    ("mark", "seq"),
    [
        (
            json.dumps(
                {"first_bad_seq": 4, "reason": "the chain ends before the witness's newest checkpoint"}
            ),
            4,
        ),
        ("not json", 1),
        (json.dumps({"first_bad_seq": "4"}), 1),
        (7, 1),
    ],
)
def test_a_head_the_scheduled_verifier_marked_fails_at_the_seq_it_named(
    chain: Chain, mark: Any, seq: int
) -> None:
    # Given an intact chain whose HEAD carries the scheduled verifier's finding (AWS)
    chain.head = {**chain.head, audit.TAMPER_MARK: mark}
    # When it is verified
    result = chain.verify()
    # Then it fails at the seq the finding names (1 when the mark cannot be read), whatever else holds
    assert_bad(result, seq)
    assert "scheduled verifier" in (result.reason or "")
