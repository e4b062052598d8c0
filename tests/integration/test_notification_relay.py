"""Locally, notifications appear in the relay's event log as actions do (`sentinel.<kind>`, the item without
its tag as `detail`), on the embedded SQLite store `sentinel serve` uses; one the gate did not write never
does (docs/notifications.md)."""

import json
from pathlib import Path

import jsonschema

from sentinel_domain.ports import StreamRef
from sentinel_runner.relay import EventLog, OutboxRelay
from sentinel_service.adapters.file_witness import FileWitness, create_witness_file
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore
from support.paths import REPO
from support.tamper import SqliteRows
from support.world import PROJECT, REQUESTER, SEAL, World

SCHEMA = json.loads((REPO / "docs" / "schemas" / "notification.v1.json").read_text(encoding="utf-8"))


def served(tmp_path: Path) -> tuple[World, SqliteStateStore, FileWitness]:
    store = SqliteStateStore(SqliteDatabase(tmp_path / "state.db"))
    create_witness_file(tmp_path / "witness.jsonl")
    witness = FileWitness(tmp_path / "witness.jsonl", SEAL)
    return World(store=store, witness=witness), store, witness


def test_a_decision_change_reaches_the_event_log_once(tmp_path: Path) -> None:
    # Given a candidate with a plan, served from the SQLite store, and the relay as `sentinel serve` builds it
    world, store, witness = served(tmp_path)
    cid = world.candidate()["candidate_id"]
    world.gate.propose(PROJECT, cid, REQUESTER, None, None)
    log = EventLog(tmp_path / "events.jsonl")
    relay = OutboxRelay(store, log, witness=witness, seal=lambda: SEAL)
    # When its decision is recorded twice (the same hold) and the relay runs
    first = world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    relay.run_once()
    relay.run_once()  # a second round finds nothing left to publish
    # Then the log holds the review request, then one decision change and one call for a reviewer (the hold
    # owes an approval), in the shape side effects have
    shown = [
        e for e in EventLog(tmp_path / "events.jsonl").events if e["detail-type"] == "sentinel.notification"
    ]
    assert [(e["source"], e["detail"]["event"]) for e in shown] == [
        ("sentinel", "review.requested"),
        ("sentinel", "decision.changed"),
        ("sentinel", "hold.needs_person"),
    ]
    assert shown[2]["detail"]["person_codes"] == ["REVIEW_MISSING"]
    changed = shown[1]["detail"]
    assert (changed["seq"], changed["from"], changed["to"]) == (first.seq, None, "hold")
    # And each is the event as the schema describes it, without the chain key's tag
    for event in shown:
        assert "_tag" not in event["detail"]
        jsonschema.validate(event["detail"], SCHEMA, format_checker=jsonschema.FormatChecker())


def test_a_notification_the_gate_did_not_write_never_reaches_the_log(tmp_path: Path) -> None:
    # Given a served candidate whose outbox was relayed
    world, store, witness = served(tmp_path)
    cid = world.candidate()["candidate_id"]
    log = EventLog()
    relay = OutboxRelay(store, log, witness=witness, seal=lambda: SEAL)
    relay.run_once()
    log.events.clear()
    # When a table writer adds a notification item of its own (a chat message with a link)
    SqliteRows(tmp_path / "state.db").put_outbox(
        StreamRef(PROJECT, cid),
        "O#notification/forged",
        1,
        {
            "kind": "notification",
            "event": "decision.changed",
            "text": "ready! <https://evil.example|ship it>",
        },
    )
    relay.run_once()
    # Then it is not published, and the forgery is flagged on its chain
    assert [e for e in log.events if e["detail-type"] == "sentinel.notification"] == []
    assert relay.forged == 1 and witness.tampered(StreamRef(PROJECT, cid)) is not None
