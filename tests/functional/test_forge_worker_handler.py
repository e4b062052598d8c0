"""The forge worker's Lambda entry (sentinel_service.forge_worker.worker_handler) as the bus rule invokes it:
the event's detail is the outbox item's DynamoDB stream record. An item the gate wrote is acted on; one
written by anyone else (its tag does not verify) is refused; an unavailable forge raises, so Lambda retries
it and, in the end, parks it in the dead-letter queue."""

import hashlib
import json
from typing import Any

import pytest
from unit.test_forge_webhook_receive import BASE_SHA, FORGE_CONFIG, HEAD, REPO, SECRET, pull_request, sign

from sentinel_domain.forge import ForgeUnavailable
from sentinel_service.forge_worker import worker_handler
from support.memory_forge import MemoryForge
from support.world import PROJECT, World


class Principals:
    def get(self, principal_id: str) -> dict[str, Any] | None:
        if principal_id != "gh-app":
            return None
        roles = {PROJECT: ["publisher", "requester"]}
        return {"id": principal_id, "kind": "ci", "sponsor": None, "roles": roles, "revoked": False}


def bus_event(entry: dict[str, Any], body: bytes | None = None) -> dict[str, Any]:
    """The stream record of an outbox item of the delivery chain of `body` (the first pull request's)."""
    signed = hashlib.sha256(pull_request() if body is None else body).hexdigest()
    record = {
        "eventName": "INSERT",
        "dynamodb": {
            "Keys": {"pk": {"S": f"P#{PROJECT}#C#dlv_{signed}"}, "sk": {"S": "O#0000000001-0"}},
            "NewImage": {"outbox_kind": {"S": entry["kind"]}, "item": {"S": json.dumps(entry)}},
        },
    }
    return {"source": "sentinel.outbox-relay", "detail-type": "sentinel.outbox", "detail": record}


@pytest.fixture
def world() -> World:
    world = World(config=FORGE_CONFIG)
    forge = MemoryForge()
    forge.change(REPO, BASE_SHA, HEAD, ["services/payments/api.py"])
    world.services._forge = forge
    world.services._admin = Principals()
    body = pull_request()
    world.gate.receive_webhook(lambda: SECRET, "pull_request", "d-1", sign(body), body)
    return world


def delivered(world: World) -> dict[str, Any]:
    (entry,) = [o for o in world.store.outbox if o.get("kind") == "forge_delivery"]
    return entry


def test_an_item_the_gate_wrote_creates_the_candidate(world: World) -> None:
    answer = worker_handler(lambda: world.services)(bus_event(delivered(world)), None)
    assert answer["status"] == "done" and len(answer["result"]["created"]) == 1


def test_an_item_altered_in_the_table_is_refused(world: World) -> None:
    forged = json.loads(json.dumps(delivered(world)))
    forged["delivery"]["head"] = "e" * 40
    before = world.store.snapshot()
    answer = worker_handler(lambda: world.services)(bus_event(forged), None)
    assert answer["status"] == "forged" and world.store.snapshot() == before


def test_an_item_moved_to_another_project_is_refused(world: World) -> None:
    moved = dict(delivered(world), project="other")
    assert worker_handler(lambda: world.services)(bus_event(moved), None)["status"] == "forged"


def test_an_unavailable_forge_raises_for_lambda_to_retry(world: World) -> None:
    world.services._forge.unavailable_for = 1
    with pytest.raises(ForgeUnavailable):
        worker_handler(lambda: world.services)(bus_event(delivered(world)), None)


def test_other_outbox_kinds_are_not_the_workers(world: World) -> None:
    event = bus_event({"kind": "action", "project": PROJECT})
    assert worker_handler(lambda: world.services)(event, None) == {"status": "ignored"}


def test_a_reopened_pull_request_republishes_the_existing_candidates_check(world: World) -> None:
    # Given the candidate the first delivery created
    handler = worker_handler(lambda: world.services)
    first = delivered(world)
    assert handler(bus_event(first), None)["status"] == "done"
    forge = world.services._forge
    before = len(forge.checks)
    # When the pull request is reopened at the same head (a candidate exists: nothing new is created)
    body = pull_request("reopened")
    world.gate.receive_webhook(lambda: SECRET, "pull_request", "d-2", sign(body), body)
    (again,) = [o for o in world.store.outbox if o.get("kind") == "forge_delivery" and o is not first]
    answer = handler(bus_event(again, body), None)
    # Then the worker hands the existing candidate to the check publisher, which publishes its check now
    # (not only at the next sweep), and never as success: the candidate has no plan
    assert answer["status"] == "done" and answer["result"]["created"] == []
    published = forge.checks[before:]
    assert [check.name for _repo, check in published] == ["sentinel/staging"]
    assert published[0][1].conclusion != "success"


def test_a_synthetic_item_that_reaches_the_worker_anyway_is_never_acted_on(world: World) -> None:
    from sentinel_domain.ports import StreamRef
    from sentinel_domain.usecases.chain import ANSWER_TAG, SYNTHETIC, seal_side_effect
    from support.world import SEAL

    # Given a synthetic project's delivery item, tagged by the gate, whose attribute the bus rule excludes
    # was stripped from the table item (so the rule let it through)
    entry = delivered(world)
    signed = hashlib.sha256(pull_request()).hexdigest()
    body = {k: v for k, v in entry.items() if k != ANSWER_TAG}
    synthetic = seal_side_effect(SEAL, StreamRef(PROJECT, f"dlv_{signed}"), {**body, SYNTHETIC: True})
    before = world.store.snapshot()
    # When the worker receives it
    answer = worker_handler(lambda: world.services)(bus_event(synthetic), None)
    # Then it is ignored: no candidate, nothing written
    assert answer == {"status": "synthetic"} and world.store.snapshot() == before
