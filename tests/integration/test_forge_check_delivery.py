"""How forge check items reach the publisher: locally the relay hands each one over before marking it relayed,
keeps it with backoff while the forge is down and then hands it to the sweep; in AWS the publisher function
takes the item out of the relayed stream record, or runs the sweep on its schedule. On the SQLite store the
runner uses, with the recording forge."""

import json
from pathlib import Path
from typing import Any

import pytest

from sentinel_domain.forge import ForgeUnavailable
from sentinel_runner.relay import FORGE_ATTEMPTS, EventLog, OutboxRelay
from sentinel_service.adapters.file_witness import FileWitness, create_witness_file
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore
from sentinel_service.compose import compose
from sentinel_service.forge_publishing import handle
from sentinel_service.settings import Settings
from support.recording_forge import RecordingForge
from support.world import CONFIG, PROJECT, REV, SEAL, World

GITHUB = {
    "app_id": 1,
    "installation_id": 2,
    "app_principal": "ci-bot",
    "repositories": [{"repository": "acme/payments", "subject": "payments", "environments": ["staging"]}],
}


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def world(tmp_path: Path) -> World:
    store = SqliteStateStore(SqliteDatabase(tmp_path / "state.db"))
    create_witness_file(tmp_path / "witness.jsonl")
    return World(
        {**CONFIG, "github": GITHUB}, store=store, witness=FileWitness(tmp_path / "witness.jsonl", SEAL)
    )


def services(world: World, forge: RecordingForge) -> Any:
    return compose(
        Settings.from_env({}),
        store=world.store,
        clock=world.clock,
        ids=world.ids,
        seal=SEAL,
        witness=world.witness,
        forge=forge,
    )


def relay_for(world: World, forge: RecordingForge, ticks: Ticks) -> tuple[OutboxRelay, EventLog]:
    log = EventLog()
    checks = services(world, forge).forge_checks
    return OutboxRelay(
        world.store, log, witness=world.witness, seal=lambda: SEAL, forge_checks=checks, monotonic=ticks
    ), log


def pending_forge(world: World) -> int:
    return sum(1 for p in world.store.pending_outbox() if p["kind"] == "forge_check")


def test_the_relay_publishes_each_forge_item_then_marks_it_relayed(world: World) -> None:
    # Given a candidate just created, and the runner's relay with a forge
    forge, ticks = RecordingForge(), Ticks()
    relay, log = relay_for(world, forge, ticks)
    world.candidate()
    # When the relay runs
    relay.run_once()
    # Then the check was published, the item relayed to the log as the bus would carry it, and nothing waits
    assert [c.name for _r, c in forge.calls] == ["sentinel/staging"]
    assert any(e["detail-type"] == "sentinel.forge_check" for e in log.events)
    assert pending_forge(world) == 0


def test_the_relay_keeps_an_item_while_the_forge_is_down_then_hands_it_to_the_sweep(world: World) -> None:
    # Given GitHub down for longer than the relay's retries
    forge, ticks = RecordingForge(unavailable=100), Ticks()
    relay, log = relay_for(world, forge, ticks)
    world.candidate()
    # When the relay runs: the item stays, and is not tried again before its backoff has passed
    relay.run_once()
    relay.run_once()
    assert len(forge.calls) == 1 and pending_forge(world) == 1
    for attempt in range(2, FORGE_ATTEMPTS + 1):
        ticks.now += 31  # GitHub asked for 30 s (Retry-After): more than the backoff
        relay.run_once()
        assert len(forge.calls) == attempt
    # Then after its last attempt the item leaves the outbox, noted as deferred, and nothing is success
    assert pending_forge(world) == 0
    assert any(e["detail-type"] == "sentinel.forge_check_deferred" for e in log.events)
    assert all(c.conclusion != "success" for _r, c in forge.calls)
    # And once GitHub answers, the sweep publishes the check the outage held back
    forge.unavailable = 0
    world.clock.advance(120)
    ticks.now += 10_000
    relay.sweep_if_due()
    assert forge.latest("sentinel/staging", REV) is not None


def test_the_publisher_function_takes_the_item_from_the_relayed_stream_record(world: World) -> None:
    forge = RecordingForge()
    cid = world.candidate()["candidate_id"]
    item = next(p for p in world.store.pending_outbox() if p["kind"] == "forge_check")["item"]
    # Given the event the bus rule delivers: the outbox pipe's stream record, the item in NewImage
    event = {
        "detail-type": "sentinel.outbox",
        "detail": {
            "dynamodb": {"NewImage": {"item": {"S": json.dumps(item)}, "outbox_kind": {"S": "forge_check"}}}
        },
    }
    answer = handle(services(world, forge), event)
    assert answer == {"published": [(cid, "published", "action_required")]}
    # And an event that is not a forge item is ignored; the schedule runs the sweep
    assert handle(services(world, forge), {"detail-type": "sentinel.outbox", "detail": {}}) == {
        "ignored": True
    }
    assert handle(services(world, forge), {"detail-type": "Scheduled Event", "detail": {}})["sweep"] is True
    # And a synthetic project's item, had its excluded attribute been stripped, publishes nothing
    marked = json.dumps({**item, "synthetic": True})
    event["detail"]["dynamodb"]["NewImage"]["item"] = {"S": marked}
    calls = len(forge.calls)
    assert handle(services(world, forge), event) == {"ignored": True, "synthetic": True}
    assert len(forge.calls) == calls


def test_the_publisher_function_raises_a_forge_fault_for_lambda_to_retry(world: World) -> None:
    world.candidate()
    item = next(p for p in world.store.pending_outbox() if p["kind"] == "forge_check")["item"]
    event = {
        "detail-type": "sentinel.outbox",
        "detail": {"dynamodb": {"NewImage": {"item": {"S": json.dumps(item)}}}},
    }
    with pytest.raises(ForgeUnavailable):
        handle(services(world, RecordingForge(unavailable=1)), event)


def test_without_an_app_key_nothing_is_published_and_the_fault_says_so(world: World) -> None:
    # Given services composed with no forge handed in and no GitHub App key configured
    cid = world.candidate()["candidate_id"]
    bare = compose(
        Settings.from_env({}),
        store=world.store,
        clock=world.clock,
        ids=world.ids,
        seal=SEAL,
        witness=world.witness,
    )
    # Then a publication through the project's GitHub App is a forge fault (retried, never lost)
    with pytest.raises(ForgeUnavailable, match="no GitHub App key configured"):
        bare.forge_checks.publish(PROJECT, cid)
    record = world.store.check_record(PROJECT, cid)
    assert record is not None and record.check_run_id is None and record.due_at  # the sweep retries it
