"""The attacks of issue 13, each against the embedded SQLite store (the local gate: every read compares with
the witness file, every write appends its checkpoint to it before answering) and against DynamoDB on moto
(AWS: only release paths read the witness, and the witness writer, stood in for by the relay, delivers the
checkpoints from the outbox). The tamperer writes the store's rows directly, with no key and no access to the
witness (tests/support/tamper.py).

Every attack is detected (locally by the very next read; in the AWS emulation by the release paths: recording
a decision compares with the witness, as `verify_against_witness` does for the scheduled verifier), its
decision holds with STATE_TAMPERED (recorded: never, the hold is answered unrecorded), every write to the
chain is refused with STATE_UNAVAILABLE and appends nothing, and nothing reaches the witness that the gate
did not authenticate. Budget: 20 flows, about 10 s."""

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sentinel_domain.audit import AuditChain, event_hash, fact_digest
from sentinel_domain.canonical import canonical_text
from sentinel_domain.errors import Refusal
from sentinel_domain.integrity import checkpoint_from_outbox, verify_against_witness
from sentinel_domain.models import CandidateRequest, Policy, SettlementRequest
from sentinel_domain.ports import StreamRef
from sentinel_domain.usecases import Gate
from sentinel_runner.relay import EventLog, OutboxRelay
from sentinel_service.adapters.file_witness import FileWitness, create_witness_file
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore
from support.moto_world import DynamoWorld, Flow, outcome
from support.stores import STORES
from support.tamper import DynamoRows, SqliteRows
from support.world import (
    ADMIN,
    AUDITOR,
    BASE,
    PROJECT,
    REQUESTER,
    REVIEWER,
    SEAL,
    UNIT_POLICY,
    World,
)

DECIDED = Flow.STEPS.index("decide") + 1  # the flow's steps up to its recorded ready decision


@dataclass
class Scene:
    """One ready candidate (eleven events, its decision recorded ready) on one store, and what the tests
    need around it."""

    kind: str
    gate: Gate
    store: Any
    witness: Any
    rows: Any  # the tamperer's view of the store
    flow: Flow
    relay: Callable[[], int]  # the local relay, or (AWS) the witness writer
    genuine: set[str]  # every event hash the gate wrote

    @property
    def local(self) -> bool:
        return self.kind == "sqlite"

    @property
    def ref(self) -> StreamRef:
        return StreamRef(PROJECT, self.flow.candidate_id)

    def length(self, ref: StreamRef | None = None) -> int:
        return len(self.rows.events(ref or self.ref))

    def remember(self, *more: StreamRef) -> None:
        """Every event hash the gate wrote so far on these chains (the project's and the candidate's)."""
        for ref in (StreamRef(PROJECT), self.ref, *more):
            self.genuine.update(e["hash"] for e in self.rows.events(ref))

    def witnessed(self) -> list[dict[str, Any]]:
        """Every checkpoint the witness holds, of every chain."""
        book = getattr(self.witness, "book", None)
        if book is not None:
            return [c for ref in book.chains() for c in book.checkpoints(ref)]
        return [c for ref in self.witness.chains() for c in self.witness.checkpoints(ref)]


@pytest.fixture(params=STORES)
def scene(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Scene]:
    flow = Flow()
    if request.param == "sqlite":
        store = SqliteStateStore(SqliteDatabase(tmp_path / "state.db"))
        create_witness_file(tmp_path / "witness.jsonl")
        witness = FileWitness(tmp_path / "witness.jsonl", SEAL)
        world = World(store=store, witness=witness)
        gate = world.gate
        for step in Flow.STEPS[:DECIDED]:
            assert flow.run(gate, step).accepted, step
        made = Scene(
            "sqlite",
            gate,
            store,
            witness,
            SqliteRows(tmp_path / "state.db"),
            flow,
            lambda: OutboxRelay(store, EventLog(), witness=witness).run_once(),
            set(),
        )
        made.remember()
        yield made
        return
    dynamo = DynamoWorld(request.getfixturevalue("moto"), request.getfixturevalue("tables"))
    for step in Flow.STEPS[:DECIDED]:
        assert dynamo.step(step).accepted, step
    dynamo.deliver_checkpoints()  # the witness writer has run
    made = Scene(
        "dynamodb",
        dynamo.gate,
        dynamo.store,
        dynamo.witness,
        DynamoRows(dynamo.raw, dynamo.table),
        dynamo.flow,
        dynamo.deliver_checkpoints,
        set(),
    )
    made.remember()
    yield made
    dynamo.drop()


# ---- what every attack must lead to ------------------------------------------------------------------------


class FreshKeys:
    """The gate, with every Idempotency-Key the flow gives made new: each write is a new request, never a
    replay of the flow's own (a replay answers the first success and reads no chain)."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.gate, name)
        if not callable(method):
            return method

        def call(*args: Any) -> Any:
            return method(*[f"{a}-again" if isinstance(a, str) and a.startswith("k-") else a for a in args])

        return call


CANDIDATE_WRITES = ("attest", "propose", "amend", "approve", "execute", "evidence 1", "report 1")


def assert_writes_refused(scene: Scene) -> None:
    """Every kind of write to the candidate's chain is refused with STATE_UNAVAILABLE and appends nothing."""
    before = scene.rows.events(scene.ref)
    fresh = FreshKeys(scene.gate)
    for step in CANDIDATE_WRITES:
        answer = scene.flow.run(fresh, step)  # type: ignore[arg-type]
        assert (answer.status, answer.code) == (503, "STATE_UNAVAILABLE"), (step, answer)
    task = scene.flow.tasks()[0]["task_id"]
    settled = outcome(
        lambda: scene.gate.settle(
            PROJECT,
            scene.flow.candidate_id,
            task,
            REVIEWER,
            SettlementRequest(plan_digest=scene.flow.digest),
            None,
        )
    )
    assert settled.code == "STATE_UNAVAILABLE", settled
    assert scene.rows.events(scene.ref) == before


def assert_caught(scene: Scene, first_bad: int, *, alone: bool = True) -> None:
    """`alone`: the chain shows it without the witness, so in AWS the advisory decision read holds too."""
    ref, gate = scene.ref, scene.gate
    # Then verification against the witness names the first bad seq: locally on every read (the audit route),
    # in AWS on release paths and in the scheduled verifier (`verify_against_witness`)
    if scene.local:
        found = gate.audit(ref, AUDITOR, 500, None).verification
    else:
        found = verify_against_witness(scene.store, scene.witness, ref, SEAL)
    assert found.valid is False and found.first_bad_seq == first_bad, found
    # And the decision holds with STATE_TAMPERED: read (locally), and on recording, which appends nothing
    read = gate.evaluate(PROJECT, ref.candidate_id, REQUESTER)
    if scene.local or alone:
        assert read.decision == "hold" and "STATE_TAMPERED" in {f.code for f in read.findings}, read.findings
    else:  # AWS: an advisory read does not read the witness; the scheduled verifier's window (another branch)
        assert "STATE_TAMPERED" not in {f.code for f in read.findings}
    length = scene.length()
    with pytest.raises(Refusal) as refused:  # a write to a chain that fails verification: 503
        gate.record_decision(PROJECT, ref.candidate_id, REQUESTER, None)
    assert refused.value.code == "STATE_UNAVAILABLE", refused.value
    assert "STATE_TAMPERED" in {f["code"] for f in refused.value.findings}, refused.value.findings
    assert scene.length() == length
    # And every write to the chain is refused
    assert_writes_refused(scene)
    # And the witness holds nothing the gate did not write: each checkpoint verifies, names a genuine event
    scene.relay()
    for checkpoint in scene.witnessed():
        assert SEAL.checkpoint_verifies(checkpoint) and checkpoint["hash"] in scene.genuine, checkpoint


def alone_verifies(scene: Scene) -> bool:
    """The chain checked on its own (links, facts, every tag under the chain key), without the witness."""
    stream = scene.store.load(scene.ref)
    return AuditChain.verify(
        PROJECT, scene.ref.candidate_id, stream.events, stream.facts, stream.head, seal=SEAL
    ).valid


def genuine_head(scene: Scene, seq: int) -> dict[str, Any]:
    """The head the gate wrote at `seq`, as the tamperer can rebuild it from the checkpoint items the store
    still holds (their `mac` is the head's): an earlier genuine head, not a forgery."""
    head = scene.rows.head(scene.ref)
    for entry in scene.rows.outbox(scene.ref):
        checkpoint = checkpoint_from_outbox(entry)
        if checkpoint is not None and checkpoint["seq"] == seq:
            return {**head, "seq": seq, "hash": checkpoint["hash"], "mac": checkpoint["mac"]}
    raise AssertionError(f"no checkpoint item for seq {seq}")


# ---- the attacks -------------------------------------------------------------------------------------------


def test_the_newest_event_deleted_and_head_rolled_back(scene: Scene) -> None:
    # Given the recorded decision (the newest event) deleted, and HEAD put back to the genuine head before it
    length = scene.length()
    scene.rows.delete(scene.ref, length)
    scene.rows.set_head(scene.ref, genuine_head(scene, length - 1))
    # Then the chain alone verifies (a genuine earlier state), but the witness names the cut
    assert alone_verifies(scene)
    assert_caught(scene, length, alone=False)


def test_events_deleted_from_the_middle(scene: Scene) -> None:
    # Given the approval and the execution (5 and 6) deleted
    scene.rows.delete(scene.ref, 5)
    scene.rows.delete(scene.ref, 6)
    # Then seq 5 is named
    assert_caught(scene, 5)


def test_a_fact_edited_and_everything_after_rehashed_then_a_write_of_every_kind(scene: Scene) -> None:
    # Given the first evidence fact (7) edited to claim more tests, its event and every later one rehashed,
    # the head moved to the new last hash (the tamperer has no key: the old macs stay)
    ref, length = scene.ref, scene.length()
    events = scene.rows.events(ref)
    fact = json.loads(scene.rows.fact(ref, 7))
    fact["counts"]["tests"] = 1000
    text = canonical_text(fact)
    prev = events[5]["hash"]
    for event in events[6:]:
        event["prev_hash"] = prev
        if event["seq"] == 7:
            event["payload_digest"] = fact_digest(text)
        event["hash"] = prev = event_hash(event)
        scene.rows.put(ref, event["seq"], event, text if event["seq"] == 7 else None)
    scene.rows.set_head(ref, {**scene.rows.head(ref), "hash": prev})
    # When the tamperer then makes one write of every kind, the project chain's included
    assert_writes_refused(scene)
    policy = Policy.model_validate(dict(UNIT_POLICY, min_tests=1))
    assert outcome(lambda: scene.gate.put_policy(PROJECT, "unit-tests", ADMIN, policy)).accepted
    scene.remember()
    # Then none of them launders the forgery: the first forged event, seq 7, is named, not the newest one
    assert scene.length() == length
    assert_caught(scene, 7)


def test_an_event_inserted(scene: Scene) -> None:
    # Given a self-consistent approval inserted as seq 6 (the later events moved up one place, the head
    # moved to the last), carrying the original seq 6's mac
    ref, length = scene.ref, scene.length()
    events = scene.rows.events(ref)
    for event in reversed(events[5:]):
        scene.rows.put(ref, event["seq"] + 1, event, scene.rows.fact(ref, event["seq"]))
    text = canonical_text({"type": "review.recorded", "decision": "approve", "recorded_at": events[4]["at"]})
    forged = dict(
        events[5], type="review.recorded", prev_hash=events[4]["hash"], payload_digest=fact_digest(text)
    )
    forged["hash"] = event_hash(forged)
    scene.rows.put(ref, 6, forged, text)
    scene.rows.set_head(ref, {**scene.rows.head(ref), "seq": length + 1, "hash": events[-1]["hash"]})
    # Then the inserted event is named
    assert_caught(scene, 6)


def test_two_events_reordered(scene: Scene) -> None:
    # Given the approval (5) and the execution (6) swapped, with their facts
    ref = scene.ref
    five, six = scene.rows.events(ref)[4:6]
    five_fact, six_fact = scene.rows.fact(ref, 5), scene.rows.fact(ref, 6)
    scene.rows.put(ref, 5, six, six_fact)
    scene.rows.put(ref, 6, five, five_fact)
    # Then seq 5 is named
    assert_caught(scene, 5)


def test_an_event_copied_from_another_chain(scene: Scene) -> None:
    # Given a second candidate, and its change-context event (2, genuine, with its mac) copied over the first
    # candidate's seq 2, with its fact
    other = scene.gate.create_candidate(
        PROJECT,
        REQUESTER,
        CandidateRequest.model_validate(
            {
                "subject": "payments",
                "base_revision": BASE,
                "revision": "c" * 40,
                "environment": "staging",
                "change": {"files": ["services/payments/api.py"]},
            }
        ),
        None,
    ).candidate_id
    other_ref = StreamRef(PROJECT, other)
    scene.remember(other_ref)
    scene.rows.put(scene.ref, 1, scene.rows.events(other_ref)[0], scene.rows.fact(other_ref, 1))
    # Then seq 1 is named
    assert_caught(scene, 1)


def test_head_replaced_with_an_older_genuine_head(scene: Scene) -> None:
    # Given every event in place, and HEAD replaced by the genuine head of three writes ago
    length = scene.length()
    scene.rows.set_head(scene.ref, genuine_head(scene, length - 3))
    # Then the head is named where it stops
    assert_caught(scene, length - 3)


def test_a_partition_restored_from_an_earlier_snapshot(scene: Scene, tmp_path: Path) -> None:
    # Given the candidate's whole partition as it was after the execution (seq 6), and restored to that later
    ref = scene.ref
    assert scene.length() > 6
    snapshot_at = [e for e in scene.rows.events(ref) if e["seq"] <= 6]
    earlier = scene.rows.snapshot(ref)
    # (the snapshot taken at seq 6: the later rows removed from the copy)
    if scene.local:
        earlier = {
            table: [
                row for row in rows if table in ("idempotency", "chain_heads") or _seq_of(table, row) <= 6
            ]
            for table, rows in earlier.items()
        }
        earlier["chain_heads"] = [
            (*row[:3], 6, json.dumps(genuine_head(scene, 6), sort_keys=True))
            for row in earlier["chain_heads"]
        ]
    else:
        earlier = [i for i in earlier if _item_seq(i) <= 6 and i["sk"]["S"] != "HEAD"]
        from sentinel_service.adapters.dynamodb_items import head_item

        earlier.append(head_item(f"P#{PROJECT}#C#{ref.candidate_id}", genuine_head(scene, 6)))
    scene.rows.restore(ref, earlier)
    assert scene.rows.events(ref) == snapshot_at and alone_verifies(scene)
    # Then the witness names the first write the snapshot lost
    assert_caught(scene, 7, alone=False)


def _seq_of(table: str, row: tuple[Any, ...]) -> int:
    """The seq a row of the SQLite store belongs to."""
    return int(row[{"events": 1, "facts": 1, "outbox": 3}[table]])


def _item_seq(item: dict[str, Any]) -> int:
    sk = item["sk"]["S"]
    if sk.startswith("E#"):
        return int(sk[2:12])
    return int(item["seq"]["N"]) if "seq" in item and sk.startswith("O#") else 0


def test_a_forged_checkpoint_written_into_the_outbox(scene: Scene) -> None:
    # Given a checkpoint item the gate did not write, naming a seq beyond the chain's (its tag cannot verify)
    ref, length = scene.ref, scene.length()
    forged = {
        "kind": "checkpoint",
        "project": PROJECT,
        "candidate_id": ref.candidate_id,
        "seq": length + 1,
        "hash": "f" * 64,
        "at": "2026-11-29T12:00:00.000000Z",
        "mac": "0" * 64,
    }
    scene.rows.put_outbox(ref, "O#forged", length + 1, forged)
    # When the relay (locally) or the witness writer (AWS) takes it
    scene.relay()
    # Then it never reaches the witness; the chain is recorded as tampered at the seq it named
    assert all(c["seq"] <= length for c in scene.witnessed() if c["candidate_id"] == ref.candidate_id)
    assert scene.witness.tampered(ref) is not None
    assert_caught(scene, length + 1, alone=False)


def test_relay_lag_is_not_tampering_and_a_witness_ahead_of_the_table_is(scene: Scene) -> None:
    # Given a write whose checkpoint has not reached the witness yet (AWS: the witness writer has not run)
    answer = FreshKeys(scene.gate)
    assert scene.flow.run(answer, "decide").accepted  # type: ignore[arg-type]
    # Then the chain verifies against the witness: behind is lag
    assert verify_against_witness(scene.store, scene.witness, scene.ref, SEAL).valid
    # And once the witness holds it, a table one write behind it is a cut
    scene.relay()
    scene.remember()
    length = scene.length()
    scene.rows.delete(scene.ref, length)
    scene.rows.set_head(scene.ref, genuine_head(scene, length - 1))
    assert_caught(scene, length, alone=False)


# ---- malformed rows ----------------------------------------------------------------------------------------

MALFORMED = {
    "an event that is not JSON": ("UPDATE events SET event = '{not json' WHERE chain = ? AND seq = 3", 3),
    "an event that is a list": ("UPDATE events SET event = '[1, 2]' WHERE chain = ? AND seq = 3", 3),
    "a tag that is a number": (
        "UPDATE events SET event = json_set(event, '$.mac', 7) WHERE chain = ? AND seq = 3",
        3,
    ),
    "a head that is not JSON": ("UPDATE chain_heads SET head = 'x' WHERE chain = ?", None),
    "a head whose seq is text": (
        "UPDATE chain_heads SET head = json_set(head, '$.seq', 'eleven') WHERE chain = ?",
        None,
    ),
    "a head whose tag is an object": (
        "UPDATE chain_heads SET head = json_set(head, '$.mac', json('{}')) WHERE chain = ?",
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_row_holds_with_state_tampered_and_refuses_writes_never_a_500(
    case: str, tmp_path: Path
) -> None:
    # Given a ready candidate on the embedded store, one of its rows then edited into something malformed
    store = SqliteStateStore(SqliteDatabase(tmp_path / "state.db"))
    create_witness_file(tmp_path / "witness.jsonl")
    world = World(store=store, witness=FileWitness(tmp_path / "witness.jsonl", SEAL))
    flow = Flow()
    for step in Flow.STEPS[:DECIDED]:
        assert flow.run(world.gate, step).accepted, step
    sql, first_bad = MALFORMED[case]
    with closing(sqlite3.connect(tmp_path / "state.db", isolation_level=None)) as db:
        db.execute(sql, (f"P#{PROJECT}#C#{flow.candidate_id}",))
    # When the decision is read and recorded, and a write attempted
    read = outcome(lambda: world.gate.decision(PROJECT, flow.candidate_id, REQUESTER, None))
    recorded = outcome(lambda: world.gate.record_decision(PROJECT, flow.candidate_id, REQUESTER, None))
    written = FreshKeys(world.gate)
    again = flow.run(written, "evidence 1")  # type: ignore[arg-type]
    # Then each is an answer, never an unhandled error: holds with STATE_TAMPERED, and a 503 refusal
    assert read.status == 200 and "STATE_TAMPERED" in {f["code"] for f in read.body["findings"]}, read
    assert (recorded.status, recorded.code) == (503, "STATE_UNAVAILABLE"), recorded
    assert "STATE_TAMPERED" in {f["code"] for f in recorded.body["findings"]}, recorded
    assert (again.status, again.code) == (503, "STATE_UNAVAILABLE"), again
    if first_bad is not None:
        audit = world.gate.audit(StreamRef(PROJECT, flow.candidate_id), AUDITOR, 500, None).verification
        assert audit.first_bad_seq == first_bad, audit
