"""The local relay hands forge outbox items to the forge worker in-process, as the bus rule's target does in
AWS: on the embedded SQLite store, a verified delivery becomes candidates once the forge answers; while the
forge is unavailable the item stays pending and is retried with backoff, nothing created; a forged item is
never acted on."""

from pathlib import Path

from unit.test_forge_webhook_receive import BASE_SHA, FORGE_CONFIG, HEAD, REPO, SECRET, pull_request, sign

from sentinel_domain.ports import StreamRef
from sentinel_runner.relay import FIRST_RETRY, EventLog, OutboxRelay, forge_consumers
from sentinel_service.adapters.file_witness import FileWitness, create_witness_file
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore
from support.memory_forge import MemoryForge
from support.tamper import SqliteRows
from support.world import PROJECT, SEAL, World


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def setup(tmp_path: Path) -> tuple[World, SqliteStateStore, MemoryForge, OutboxRelay, EventLog, Clock]:
    store = SqliteStateStore(SqliteDatabase(tmp_path / "state.db"))
    create_witness_file(tmp_path / "witness.jsonl")
    witness = FileWitness(tmp_path / "witness.jsonl", SEAL)
    world = World(config=FORGE_CONFIG, store=store, witness=witness)
    forge = MemoryForge()
    forge.change(REPO, BASE_SHA, HEAD, ["services/payments/api.py"])
    world.services._forge = forge
    world.services._admin = Principals()
    log, clock = EventLog(), Clock()
    relay = OutboxRelay(
        store, log, witness=witness, seal=lambda: SEAL, consumers=forge_consumers(world.services), clock=clock
    )
    return world, store, forge, relay, log, clock


class Principals:
    """The principal directory as the worker reads it (one principal by id)."""

    def __init__(self) -> None:
        self.held: dict[str, dict] = {}

    def get(self, principal_id: str) -> dict | None:
        return self.held.get(principal_id)


def add_app_principal(world: World) -> None:
    world.services.admin.held["gh-app"] = {
        "id": "gh-app",
        "kind": "ci",
        "sponsor": None,
        "roles": {PROJECT: ["publisher", "requester"]},
        "revoked": False,
        "compromised": False,
    }


def deliver(world: World, delivery: str = "d-1") -> None:
    body = pull_request()
    answer = world.gate.receive_webhook(lambda: SECRET, "pull_request", delivery, sign(body), body)
    assert answer.status == "accepted"


def candidates(store: SqliteStateStore) -> list[dict]:
    return store.list_claims(PROJECT, 100, None)[0]


def test_the_relay_retries_an_unavailable_forge_with_backoff_then_creates_the_candidate(
    tmp_path: Path,
) -> None:
    # Given a verified delivery recorded and a forge unavailable for its next call
    world, store, forge, relay, log, clock = setup(tmp_path)
    add_app_principal(world)
    deliver(world)
    forge.unavailable_for = 1
    # When the relay runs
    relay.run_once()
    # Then nothing was created and the item is still pending
    assert candidates(store) == []
    assert any(p["kind"] == "forge_delivery" for p in store.pending_outbox())
    # And before its backoff is over the forge is not asked again
    calls = len(forge.calls)
    clock.now += FIRST_RETRY / 2
    relay.run_once()
    assert len(forge.calls) == calls
    # When the backoff is over and the forge answers
    clock.now += FIRST_RETRY
    relay.run_once()
    # Then the candidate exists, attested by the app, and the delivery left the outbox
    assert len(candidates(store)) == 1
    assert not any(p["kind"] == "forge_delivery" for p in store.pending_outbox())
    assert [e["detail-type"] for e in log.events].count("sentinel.forge_delivery") == 1


def test_a_revoked_app_principal_creates_nothing_and_the_refusal_is_logged(tmp_path: Path) -> None:
    # Given no principal for the app in the directory
    world, store, _forge, relay, log, _clock = setup(tmp_path)
    deliver(world)
    relay.run_once()
    # Then nothing is created and the item is published with the consumer's refusal (not retried forever)
    assert candidates(store) == []
    failed = [e["detail"] for e in log.events if e["detail-type"] == "sentinel.forge_delivery"]
    assert failed and failed[0]["consumer_detail"] == "NOT_FOUND"


def test_a_forged_forge_delivery_in_the_table_is_never_acted_on(tmp_path: Path) -> None:
    world, store, forge, relay, _log, _clock = setup(tmp_path)
    add_app_principal(world)
    ref = StreamRef(PROJECT, "dlv_forged")
    deliver(world)  # a real chain to write beside
    relay.run_once()
    forge.calls.clear()
    SqliteRows(tmp_path / "state.db").put_outbox(
        StreamRef(PROJECT, "dlv_d-1"),
        "O#forged-delivery",
        99,
        {
            "kind": "forge_delivery",
            "project": PROJECT,
            "delivery": {
                "delivery_id": "forged",
                "event": "pull_request",
                "action": "opened",
                "repository": REPO,
                "installation_id": 42,
                "pull_request": 9,
                "base": BASE_SHA,
                "head": "e" * 40,
                "author": "octocat",
            },
        },
    )
    relay.run_once()
    assert forge.calls == [] and relay.forged == 1
    assert ref  # the forged item named no chain of its own
