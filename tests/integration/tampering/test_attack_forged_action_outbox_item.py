"""Red-team finding: the relay publishes every non-checkpoint outbox item to the event bus as a side effect
(`sentinel.action`), without checking that the gate wrote it. Checkpoint items are authenticated under the
chain key (a forged one is refused and marked as tampering), but an action item carries no tag and is never
matched to a sealed `action.executed` event. Whoever can write the state table (no chain key, no witness)
therefore triggers any side effect, `promote {environment: production}` included, with no plan, no approval,
no execution: "no side effect without approval" (failing-closed.md) fails open.
Fixed: the gate tags every side effect, and the local relay publishes only what verifies."""

from pathlib import Path

from sentinel_domain.ports import StreamRef
from sentinel_runner.relay import EventLog, OutboxRelay
from sentinel_service.adapters.file_witness import FileWitness, create_witness_file
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore
from support.moto_world import Flow
from support.tamper import SqliteRows
from support.world import PROJECT, SEAL, World


def test_attack_forged_action_outbox_item_never_reaches_the_bus(tmp_path: Path) -> None:
    # Given a candidate that was created and attested (no plan, no approval, no execution)
    store = SqliteStateStore(SqliteDatabase(tmp_path / "state.db"))
    create_witness_file(tmp_path / "witness.jsonl")
    witness = FileWitness(tmp_path / "witness.jsonl", SEAL)
    world = World(store=store, witness=witness)
    flow = Flow()
    for step in ("create", "attest"):
        assert flow.run(world.gate, step).accepted, step
    ref = StreamRef(PROJECT, flow.candidate_id)
    log = EventLog()
    relay = OutboxRelay(store, log, witness=witness, seal=lambda: SEAL)  # as `sentinel serve` builds it
    relay.run_once()
    log.events.clear()

    # When a table writer adds an action outbox item for a promotion nobody approved or executed
    SqliteRows(tmp_path / "state.db").put_outbox(
        ref,
        "O#forged-1",
        99,
        {
            "outbox_id": "forged-1",
            "kind": "action",
            "project": PROJECT,
            "candidate_id": flow.candidate_id,
            "execution_id": "exec-forged",
            "action_id": "A1",
            "action_type": "promote",
            "params": {"environment": "production"},
            "plan_digest": "0" * 64,
            "recorded_at": "2026-11-29T12:00:00.000000Z",
        },
    )
    relay.run_once()

    # Then nothing reaches the bus as a side effect (and the forgery is flagged, as a forged checkpoint is)
    published = [e for e in log.events if e["detail-type"] == "sentinel.action"]
    assert published == [], published
    assert relay.forged == 1 and witness.tampered(ref) is not None


def test_a_side_effect_the_gate_wrote_is_published_without_its_tag(tmp_path: Path) -> None:
    # Given the ready flow up to an executed dispatch (its outbox item written with the execution)
    store = SqliteStateStore(SqliteDatabase(tmp_path / "state.db"))
    create_witness_file(tmp_path / "witness.jsonl")
    witness = FileWitness(tmp_path / "witness.jsonl", SEAL)
    world = World(store=store, witness=witness)
    flow = Flow()
    for step in Flow.STEPS:
        assert flow.run(world.gate, step).accepted, step
    log = EventLog()
    relay = OutboxRelay(store, log, witness=witness, seal=lambda: SEAL)
    # When the relay runs
    relay.run_once()
    # Then the genuine side effect is published, as the gate wrote it, and nothing was called forged
    actions = [e["detail"] for e in log.events if e["detail-type"] == "sentinel.action"]
    assert actions and all("_tag" not in a for a in actions) and relay.forged == 0
