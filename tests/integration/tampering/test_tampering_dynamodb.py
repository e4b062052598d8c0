"""Tampering, through the DynamoDB store (moto): the items of a finished ready flow are edited, removed,
reordered or forged with put_item/delete_item, as someone with write access to the table (but not the chain
key, nor the witness) would. Then:

- verification against the witness (`verify_against_witness`: what release paths and the scheduled verifier
  run) is invalid and names the first bad event: the edited or forged event itself, since every event
  carries its tag under the chain key and a forger cannot make one;
- every decision holds with STATE_TAMPERED (the advisory read too, wherever the chain alone shows it), the
  recorded one included, which is answered unrecorded: never `ready`.

A tail cut back to a genuine earlier head is caught against the witness's newest checkpoint only (the
checkpoints the outbox carried to it: `DynamoWorld.deliver_checkpoints` stands in for the witness writer).
The same attacks on both stores, with every write refused: test_chain_attacks.py. What is detected where, and
within what window: docs/failing-closed.md. Budget: about 25 cases, 2-4 s."""

import json
from collections.abc import Callable
from typing import Any

import pytest

from sentinel_domain.audit import AuditChain, event_hash, fact_digest
from sentinel_domain.canonical import canonical_text
from sentinel_domain.integrity import checkpoint_from_outbox, verify_against_witness
from sentinel_domain.models import CandidateRequest, ReviewRequest
from sentinel_domain.ports import StreamRef
from sentinel_domain.usecases import Gate
from support.moto_world import DynamoWorld, Flow, Frozen, Tables, outcome
from support.world import AUDITOR, BASE, PROJECT, REQUESTER, REV, REVIEWER_2, SEAL

EVENT_FIELDS = (
    "project",
    "candidate_id",
    "seq",
    "type",
    "actor",
    "at",
    "payload_digest",
    "prev_hash",
    "hash",
)


@pytest.fixture(scope="module")
def finished(moto: Any, tables: Tables) -> dict[str, Frozen]:
    """The ready flow run to its recorded ready decision (eleven candidate events), and the same flow stopped
    with the plan rejected instead of approved; plus a second candidate whose first fact is split in parts."""
    world = DynamoWorld(moto, tables)
    points = {}
    for step in Flow.STEPS[:-1]:
        if step == "approve":
            points["approvable"] = world.freeze()
        assert world.step(step).accepted, step
    assert world.flow.run(world.gate, "read decision").body["decision"] == "ready"
    # A change of 1,900 files no rule classifies, each owing its own obligation: its candidate.created fact
    # (the obligations it derived; a fact keeps at most 1,000 of the paths) is past one item's size, stored in
    # parts.
    files = [f"legacy/module_{n:05d}/a_handler_with_a_rather_long_descriptive_name.py" for n in range(1_900)]
    big = world.gate.create_candidate(
        PROJECT,
        REQUESTER,
        CandidateRequest.model_validate(
            {
                "subject": "payments",
                "base_revision": BASE,
                "revision": "c" * 40,
                "environment": "staging",
                "change": {"files": files},
            }
        ),
        None,
    ).as_json()
    points["end"] = world.freeze()
    points["big"] = big["candidate_id"]  # type: ignore[assignment]  # its id rides with the frozen points
    world.drop()
    return points


# ---- the table, as a tamperer sees it ----------------------------------------------------------------------


class Table:
    def __init__(self, world: DynamoWorld, candidate_id: str | None) -> None:
        self.world, self.client, self.name = world, world.raw, world.table
        self.pk = f"P#{PROJECT}" + (f"#C#{candidate_id}" if candidate_id else "")

    def get(self, sk: str) -> dict[str, Any]:
        return self.client.get_item(
            TableName=self.name, Key={"pk": {"S": self.pk}, "sk": {"S": sk}}, ConsistentRead=True
        )["Item"]

    def put(self, item: dict[str, Any]) -> None:
        self.client.put_item(TableName=self.name, Item=item)

    def delete(self, sk: str) -> None:
        self.client.delete_item(TableName=self.name, Key={"pk": {"S": self.pk}, "sk": {"S": sk}})

    @staticmethod
    def sk(seq: int, part: int = 0) -> str:
        return f"E#{seq:010d}" + (f"#{part:03d}" if part else "")

    def event(self, seq: int) -> dict[str, Any]:
        item = self.get(self.sk(seq))
        return {
            k: (int(item[k]["N"]) if "N" in item[k] else None if "NULL" in item[k] else item[k]["S"])
            for k in EVENT_FIELDS
        }

    def fact(self, seq: int) -> dict[str, Any]:
        return json.loads(self.get(self.sk(seq))["fact"]["S"])

    def write_event(self, seq: int, event: dict[str, Any], fact_text: str | None = None) -> None:
        """Put an event (and its fact) at position `seq`, as a forger would: the item's other parts kept."""
        item = self.get(self.sk(seq)) if fact_text is None else {"fact_parts": {"N": "1"}}
        item.update({"pk": {"S": self.pk}, "sk": {"S": self.sk(seq)}})
        for k in EVENT_FIELDS:
            value = event[k]
            item[k] = {"NULL": True} if value is None else {"N": str(value)} if k == "seq" else {"S": value}
        if fact_text is not None:
            item["fact"] = {"S": fact_text}
        self.put(item)

    def head(self) -> dict[str, Any]:
        return self.get("HEAD")

    def move_head(self, seq: int, hash_: str) -> None:
        head = self.head()
        head["seq"], head["hash"] = {"N": str(seq)}, {"S": hash_}
        self.put(head)

    def length(self) -> int:
        return int(self.head()["seq"]["N"])


# ---- what every tampering must lead to ---------------------------------------------------------------------


def assert_caught(
    world: DynamoWorld, candidate_id: str, first_bad: int, *, project_chain: bool = False, alone: bool = True
) -> None:
    """`alone`: the chain shows it without the witness, so the advisory decision read holds too."""
    gate: Gate = world.gate
    ref = StreamRef(PROJECT, None if project_chain else candidate_id)
    # Then verification against the witness names the first bad event
    verification = verify_against_witness(world.store, world.witness, ref, SEAL)
    assert verification.valid is False and verification.first_bad_seq == first_bad, verification
    # And the decision holds with STATE_TAMPERED, recorded (a release path) or read: never ready
    if alone:
        read = gate.evaluate(PROJECT, candidate_id, REQUESTER)
        assert read.decision == "hold" and "STATE_TAMPERED" in {f.code for f in read.findings}, read.findings
    recorded = outcome(lambda: gate.record_decision(PROJECT, candidate_id, REQUESTER, None))
    # (recording is a write: refused with 503, nothing appended, the hold's findings in the problem)
    assert (recorded.status, recorded.code) == (503, "STATE_UNAVAILABLE"), recorded
    assert "STATE_TAMPERED" in {f["code"] for f in recorded.body["findings"]}


def genuine_head(table: "Table", seq: int) -> dict[str, Any]:
    """HEAD as the gate wrote it at `seq`, rebuilt from the checkpoint item the table still holds."""
    head = table.head()
    for item in table.world.items():
        if item["pk"]["S"] == table.pk and item["sk"]["S"].startswith("O#"):
            checkpoint = checkpoint_from_outbox(json.loads(item["item"]["S"]))
            if checkpoint is not None and checkpoint["seq"] == seq:
                head.update(seq={"N": str(seq)}, hash={"S": checkpoint["hash"]}, mac={"S": checkpoint["mac"]})
                return head
    raise AssertionError(f"no checkpoint item for seq {seq}")


@pytest.fixture
def tampered(moto: Any, tables: Tables, finished: dict[str, Any]) -> Callable[..., tuple[DynamoWorld, Table]]:
    made: list[DynamoWorld] = []

    def make(
        point: str = "end", candidate: str | None = None, chain: str = "candidate"
    ) -> tuple[DynamoWorld, Table]:
        world = DynamoWorld(moto, tables, finished[point])
        made.append(world)
        cid = candidate or world.flow.candidate_id
        return world, Table(world, None if chain == "project" else cid)

    yield make
    for world in made:
        world.drop()


# ---- edited ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("actor", "mallory"),
        ("at", "2026-11-29T11:00:00.000000Z"),
        ("type", "task.settled"),
        ("prev_hash", "0" * 64),
    ],
)
def test_an_event_edited_in_place_is_named(tampered: Any, field: str, value: str) -> None:
    # Given the review event (seq 5) of a ready candidate edited in its item
    world, table = tampered()
    event = table.event(5)
    event[field] = value
    table.write_event(5, event)
    # Then seq 5 is named and every decision holds
    assert_caught(world, world.flow.candidate_id, 5)


def test_a_fact_edited_in_place_is_named(tampered: Any) -> None:
    # Given the first evidence fact (seq 7) edited to claim more tests, its event untouched
    world, table = tampered()
    fact = table.fact(7)
    fact["counts"]["tests"] = 1000
    item = table.get(table.sk(7))
    item["fact"] = {"S": canonical_text(fact)}
    table.put(item)
    # Then seq 7 is named
    assert_caught(world, world.flow.candidate_id, 7)


@pytest.mark.parametrize("how", ["edited", "removed", "added"])
def test_a_fact_part_tampered_with_is_named(tampered: Any, finished: dict[str, Any], how: str) -> None:
    # Given the large candidate, whose first fact is stored in parts: one part edited, removed, or one added
    world, table = tampered(candidate=finished["big"])
    parts = int(table.get(table.sk(1))["fact_parts"]["N"])
    assert parts >= 2
    if how == "edited":
        item = table.get(table.sk(1, 1))
        item["fact"] = {"S": item["fact"]["S"].replace("module_", "modulo_", 1)}
        table.put(item)
    elif how == "removed":
        table.delete(table.sk(1, 1))
    else:
        table.put({"pk": {"S": table.pk}, "sk": {"S": table.sk(1, parts)}, "fact": {"S": "{}"}})
    # Then seq 1 is named, and the large candidate's decisions hold
    assert_caught(world, finished["big"], 1)


def test_a_policy_fact_edited_on_the_project_chain_holds_every_candidate(tampered: Any) -> None:
    # Given the unit-tests policy (project seq 2) edited to ask for no tests at all
    world, table = tampered(chain="project")
    item = table.get(table.sk(2))
    fact = json.loads(item["fact"]["S"])
    assert fact["type"] == "policy.set"
    fact["policy"]["min_tests"] = 0
    item["fact"] = {"S": canonical_text(fact)}
    table.put(item)
    # Then the project chain names seq 2, and the candidate's decisions hold with STATE_TAMPERED
    assert_caught(world, world.flow.candidate_id, 2, project_chain=True)


# ---- removed, reordered, inserted --------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [1, 5, 8])
def test_a_removed_event_is_named(tampered: Any, seq: int) -> None:
    # Given one event item deleted from the middle of the chain
    world, table = tampered()
    table.delete(table.sk(seq))
    # Then its seq is named
    assert_caught(world, world.flow.candidate_id, seq)


def test_reordered_events_are_named(tampered: Any) -> None:
    # Given the review (5) and the execution (6) swapped between their items
    world, table = tampered()
    five, six = table.get(table.sk(5)), table.get(table.sk(6))
    five["sk"], six["sk"] = six["sk"], five["sk"]
    table.put(five)
    table.put(six)
    # Then seq 5 is named
    assert_caught(world, world.flow.candidate_id, 5)


def test_an_inserted_forged_event_is_named_where_the_chain_breaks(tampered: Any) -> None:
    # Given a self-consistent forged approval inserted as seq 6, the later items moved up one place
    world, table = tampered()
    length = table.length()
    for seq in range(length, 5, -1):
        item = table.get(table.sk(seq))
        item["sk"] = {"S": table.sk(seq + 1)}
        table.put(item)
    before = table.event(5)
    forged_fact = canonical_text(
        {
            "type": "review.recorded",
            "decision": "approve",
            "plan_digest": world.flow.digest,
            "recorded_at": before["at"],
        }
    )
    forged = dict(
        before,
        seq=6,
        type="review.recorded",
        actor="mallory",
        prev_hash=before["hash"],
        payload_digest=fact_digest(forged_fact),
    )
    forged["hash"] = event_hash(forged)
    table.write_event(6, forged, forged_fact)
    table.move_head(length + 1, table.event(length + 1)["hash"])
    # Then the forgery itself is named: it links, but carries no tag under the chain key
    assert_caught(world, world.flow.candidate_id, 6)


def test_an_event_rehashed_without_its_successors_is_named_itself(tampered: Any) -> None:
    # Given the review event edited and its own hash recomputed, the later events left as they were
    world, table = tampered()
    event = table.event(5)
    event["actor"] = "mallory"
    event["hash"] = event_hash(event)
    table.write_event(5, event)
    # Then seq 5 is named: its tag (kept from the original) is not the tag of its new hash
    assert_caught(world, world.flow.candidate_id, 5)


def test_a_fact_and_its_event_rewritten_without_the_successors_are_named_themselves(
    tampered: Any,
) -> None:
    # Given the first evidence fact rewritten, its event's payload_digest and hash recomputed to match
    world, table = tampered()
    fact = table.fact(7)
    fact["counts"]["tests"] = 1000
    text = canonical_text(fact)
    event = dict(table.event(7), payload_digest=fact_digest(text))
    event["hash"] = event_hash(event)
    table.write_event(7, event, text)
    # Then seq 7 is named
    assert_caught(world, world.flow.candidate_id, 7)


# ---- cut or rewritten tails, and the checkpoints ---------------------------------------------------------


def test_a_cut_tail_is_named_against_the_head(tampered: Any) -> None:
    # Given the last two events deleted, the head left as it was
    world, table = tampered()
    length = table.length()
    table.delete(table.sk(length))
    table.delete(table.sk(length - 1))
    # Then the first missing seq is named
    assert_caught(world, world.flow.candidate_id, length - 1)


def test_a_tail_cut_behind_the_newest_checkpoint_is_named(tampered: Any) -> None:
    # Given the witness holding the chain's checkpoints, then the last two events deleted and HEAD put back
    # to the genuine head before them, so that the chain on its own looks whole
    world, table = tampered()
    world.deliver_checkpoints()
    length = table.length()
    table.delete(table.sk(length))
    table.delete(table.sk(length - 1))
    table.put(genuine_head(table, length - 2))
    alone = world.gate.audit(StreamRef(PROJECT, world.flow.candidate_id), AUDITOR, 500, None).as_json()
    assert alone["verification"]["valid"] is True  # an advisory read in AWS does not read the witness
    # Then the witness's newest checkpoint names the first missing seq, and the recorded decision holds
    assert_caught(world, world.flow.candidate_id, length - 1, alone=False)


def test_a_rewritten_last_event_is_named(tampered: Any) -> None:
    # Given the last event replaced by a self-consistent forgery and the head moved to it
    world, table = tampered()
    world.deliver_checkpoints()
    length = table.length()
    last, before = table.event(length), table.event(length - 1)
    forged_fact = canonical_text(
        {"type": "decision.recorded", "decision": "ready", "recorded_at": last["at"]}
    )
    forged = dict(last, actor="mallory", payload_digest=fact_digest(forged_fact), prev_hash=before["hash"])
    forged["hash"] = event_hash(forged)
    table.write_event(length, forged, forged_fact)
    table.move_head(length, forged["hash"])
    # Then that seq is named
    assert_caught(world, world.flow.candidate_id, length)


def test_a_chain_reforged_from_the_middle_is_named_at_the_first_forged_event(tampered: Any) -> None:
    # Given the witness holding every head's checkpoint, then the first evidence fact rewritten and every
    # later event rehashed, the head moved to the last (the tamperer has no key: the old tags stay)
    world, table = tampered()
    world.deliver_checkpoints()
    length = table.length()
    fact = table.fact(7)
    fact["counts"]["tests"] = 1000
    text = canonical_text(fact)
    prev = table.event(6)["hash"]
    for seq in range(7, length + 1):
        event = dict(table.event(seq), prev_hash=prev)
        if seq == 7:
            event["payload_digest"] = fact_digest(text)
        event["hash"] = event_hash(event)
        table.write_event(seq, event, text if seq == 7 else None)
        prev = event["hash"]
    table.move_head(length, prev)
    # Then the first forged event, seq 7, is named, with or without the witness
    alone = table.world.clean_store().load(StreamRef(PROJECT, world.flow.candidate_id))
    check = AuditChain.verify(
        PROJECT, alone.ref.candidate_id, alone.events, alone.facts, alone.head, seal=SEAL
    )
    assert check.first_bad_seq == 7, check
    assert_caught(world, world.flow.candidate_id, 7)


# ---- what a tampered chain must not be used for ------------------------------------------------------------


def test_an_execution_on_a_chain_whose_rejection_was_edited_into_an_approval_is_refused(
    tampered: Any,
) -> None:
    # Given a plan the reviewer rejected, that rejection edited into an approval in its item, and the head's
    # approval expiry moved to match
    world, table = tampered("approvable")
    assert outcome(
        lambda: world.gate.review(
            PROJECT,
            world.flow.candidate_id,
            REVIEWER_2,
            ReviewRequest(decision="reject", plan_digest=world.flow.digest, revision=REV),
            None,
        )
    ).accepted
    seq = table.length()
    item = table.get(table.sk(seq))
    fact = json.loads(item["fact"]["S"])
    fact["decision"] = "approve"
    item["fact"] = {"S": canonical_text(fact)}
    table.put(item)
    head = table.head()
    head["approval_valid_until"] = {"S": fact["expires_at"]}
    table.put(head)
    assert world.gate.evaluate(PROJECT, world.flow.candidate_id, REQUESTER).decision == "hold"
    # When the requester executes the declared action
    executed = world.step("execute")
    # Then it is refused, and no side effect left through the outbox
    outbox = [
        i
        for i in world.items()
        if i["sk"]["S"].startswith("O#") and i["outbox_kind"]["S"] not in ("checkpoint", "notification")
    ]
    assert not executed.accepted and outbox == [], (executed, outbox)


def test_a_fact_that_is_not_json_is_answered_with_a_problem_on_every_route(tampered: Any) -> None:
    # Given the review fact replaced by bytes that are not JSON
    world, table = tampered()
    item = table.get(table.sk(5))
    item["fact"] = {"S": "{not json"}
    table.put(item)
    # When the candidate is read, and a new review is written (a replay of an earlier success would only
    # return its recorded answer, acting on no fact)
    before = table.length()
    read = outcome(lambda: world.gate.get_candidate(PROJECT, world.flow.candidate_id, REQUESTER))
    written = outcome(
        lambda: world.gate.review(
            PROJECT,
            world.flow.candidate_id,
            REVIEWER_2,
            ReviewRequest(decision="reject", plan_digest=world.flow.digest, revision=REV),
            None,
        )
    )
    # Then both are refusals with a retryable code, never an unhandled error, and nothing was appended
    assert (read.code, written.code) == ("STATE_UNAVAILABLE", "STATE_UNAVAILABLE")
    assert table.length() == before
