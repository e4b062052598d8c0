"""Red-team finding: an idempotency record is not part of the sealed chain, yet a replay answers it as the
gate's own recorded decision. Whoever can write the state table (no chain key, no witness) writes a
`completed` idempotency row for POST .../decisions whose stored answer is a recorded `ready`; the request
hash of that route is digest({}) (public), the caller is the principal's id (public), the key is the
client's retry key. The next POST .../decisions with that key answers `ready`, recorded, for a candidate that
holds, with no event on its chain and no comparison with the witness. FAILS today."""

from pathlib import Path

from sentinel_domain.canonical import digest
from sentinel_domain.outcomes import DecisionRecorded
from sentinel_domain.ports import IdempotencyRecord, StreamRef
from sentinel_service.adapters.file_witness import FileWitness, create_witness_file
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore, pack_body
from support.moto_world import Flow
from support.world import PROJECT, REQUESTER, REV, SEAL, World


def test_attack_forged_idempotency_row_never_replays_a_ready_decision(tmp_path: Path) -> None:
    # Given a candidate that holds (created and attested; no plan, no evidence), on the local SQLite store
    store = SqliteStateStore(SqliteDatabase(tmp_path / "state.db"))
    create_witness_file(tmp_path / "witness.jsonl")
    world = World(store=store, witness=FileWitness(tmp_path / "witness.jsonl", SEAL))
    gate = world.gate
    flow = Flow()
    for step in ("create", "attest"):
        assert flow.run(gate, step).accepted, step
    cid = flow.candidate_id
    assert gate.decision(PROJECT, cid, REQUESTER, None).decision == "hold"
    events_before = len(store.load(StreamRef(PROJECT, cid)).events)

    # And a table writer (no chain key, no witness) adds a completed idempotency row for the decisions route
    forged = DecisionRecorded(
        decision="ready",
        findings=[],
        plan_digest=None,
        revision=REV,
        as_of="2026-01-01T00:00:00.000000Z",
        facts_digest="0" * 64,
        as_of_source="service",
        seq=99,
    ).as_json()
    record = IdempotencyRecord(
        StreamRef(PROJECT, cid),
        f"/candidates/{cid}/decisions",
        "release-retry-1",
        REQUESTER.id,
        digest({}),
        status="completed",
        response_body=forged,
        claimed_at="2026-01-01T00:00:00.000000Z",
        lease_until="2026-01-01T00:00:30.000000Z",
    )
    with store.db.write() as connection:  # the row as the tamperer writes it, straight into the file
        store._put_idempotency(connection, record, "completed", pack_body(forged))

    # When the principal records a decision with that key (a retry after a lost answer)
    answer = gate.record_decision(PROJECT, cid, REQUESTER, "release-retry-1")

    # Then the gate never answers ready for a candidate that holds, and nothing unrecorded claims a seq
    assert answer.decision == "hold"
    assert len(store.load(StreamRef(PROJECT, cid)).events) >= events_before
