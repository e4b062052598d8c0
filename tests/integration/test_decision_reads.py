"""A decision reads the candidate's state with one strongly consistent Query (plus its pages), and the
project's with one strongly consistent Query on a container's first read; a Lambda container then reads one
GetItem of each chain's HEAD while that head is unchanged. Read units are computed from the items returned,
by DynamoDB's rules (moto's own ConsumedCapacity is a placeholder)."""

import math
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest
from moto import mock_aws

from sentinel_domain.models import ChangeContextRequest
from sentinel_service.adapters.dynamodb_store import DynamoStateStore
from sentinel_service.adapters.tables import ensure_tables
from support.world import CI, PROJECT, REQUESTER, World


def value_size(value: dict[str, Any]) -> int:
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode("utf-8"))
    if kind == "N":
        return (max(1, len(Decimal(inner).normalize().as_tuple().digits)) + 1) // 2 + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + value_size(v) for k, v in inner.items())
    raise AssertionError(f"no size rule here for attribute type {kind}")


def read_units(items: list[dict[str, Any]], consistent: bool) -> float:
    """One GetItem's item or one Query page: its bytes rounded up to 4 KB, at least one block; a strongly
    consistent read pays a whole unit per block."""
    size = sum(len(name.encode("utf-8")) + value_size(v) for item in items for name, v in item.items())
    blocks = max(1, math.ceil(size / 4096))
    return float(blocks) if consistent else blocks / 2


class RecordingClient:
    """Counts every DynamoDB call by (operation, partition, consistent read), and the read units each paid."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: Counter[tuple[str, str, bool]] = Counter()
        self.rru: Counter[tuple[str, str, bool]] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if not callable(attr) or name.startswith("_") or name in ("meta", "exceptions", "get_waiter"):
            return attr

        def call(**kwargs: Any) -> Any:
            values = kwargs.get("ExpressionAttributeValues", {})
            pk = next(
                (v["S"] for k, v in values.items() if k in (":pk", ":p")),
                kwargs.get("Key", {}).get("pk", {}).get("S", ""),
            )
            key = (name, pk, bool(kwargs.get("ConsistentRead")))
            self.calls[key] += 1
            answer = attr(**kwargs)
            if name in ("query", "get_item"):
                items = answer.get("Items", [answer["Item"]] if "Item" in answer else [])
                self.rru[key] += read_units(items, key[2])
            return answer

        return call

    def clear(self) -> None:
        self.calls.clear()
        self.rru.clear()


@pytest.fixture
def dynamo_world(monkeypatch):
    for name, value in {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        import boto3

        client = RecordingClient(boto3.client("dynamodb"))
        ensure_tables(client.client, "state", "principals")
        world = World(store=DynamoStateStore(client, "state", page_size=3), hold_chains=True)
        yield world, client


def test_a_decision_reads_the_candidate_with_one_consistent_query_and_its_pages(dynamo_world) -> None:
    world, client = dynamo_world
    # Given a candidate with a few facts on DynamoDB (pages of 3 items, so the read pages)
    cid = world.candidate()["candidate_id"]
    world.gate.add_change_context(
        PROJECT,
        cid,
        CI,
        ChangeContextRequest.model_validate({"change": {"files": ["services/payments/api.py"]}}),
        None,
    )
    world.gate.propose(PROJECT, cid, REQUESTER, None, None)
    client.clear()
    # When the hook's decision is read, the container's first
    decision = world.gate.decision(PROJECT, cid, REQUESTER, None).as_json()
    # Then the candidate's partition was read by one paged, strongly consistent Query and nothing else
    assert decision["decision"] == "hold"
    candidate_pk = f"P#{PROJECT}#C#{cid}"
    queries = {k: n for k, n in client.calls.items() if k[0] == "query"}
    assert queries[("query", candidate_pk, True)] == 2  # 4 events + HEAD in pages of 3: one Query, two pages
    assert queries[("query", f"P#{PROJECT}", True)] >= 1  # the project's chain in full: nothing held yet
    assert set(queries) == {("query", candidate_pk, True), ("query", f"P#{PROJECT}", True)}
    assert not [k for k in client.calls if k[0] != "query"]


def test_a_hook_read_gets_both_heads_then_queries_only_a_chain_that_moved(dynamo_world) -> None:
    world, client = dynamo_world
    # Given a candidate on DynamoDB (pages of 3 items) and a first decision read that held both chains
    cid = world.candidate()["candidate_id"]
    world.gate.add_change_context(
        PROJECT,
        cid,
        CI,
        ChangeContextRequest.model_validate({"change": {"files": ["services/payments/api.py"]}}),
        None,
    )
    client.clear()
    first = world.gate.decision(PROJECT, cid, REQUESTER, None).as_json()
    cold_rru = sum(client.rru.values())
    client.clear()
    # When the hook reads the decision again, nothing changed
    again = world.gate.decision(PROJECT, cid, REQUESTER, None).as_json()
    # Then each chain was read by one strongly consistent GetItem of its HEAD, one read unit each, and nothing
    # else: the read no longer grows with either chain
    candidate_pk, project_pk = f"P#{PROJECT}#C#{cid}", f"P#{PROJECT}"
    assert dict(client.calls) == {("get_item", candidate_pk, True): 1, ("get_item", project_pk, True): 1}
    assert client.rru == {("get_item", candidate_pk, True): 1, ("get_item", project_pk, True): 1}
    assert sum(client.rru.values()) == 2 < cold_rru
    # And the answer is the one the whole read gave
    assert again == first
    # When the candidate's chain moves (a proposal is stored) and the hook reads again
    world.gate.propose(PROJECT, cid, REQUESTER, None, None)
    client.clear()
    world.gate.decision(PROJECT, cid, REQUESTER, None).as_json()
    # Then the candidate was read by its HEAD and one paged, strongly consistent Query; the project by its
    # HEAD
    assert dict(client.calls) == {
        ("get_item", candidate_pk, True): 1,
        ("query", candidate_pk, True): 2,
        ("get_item", project_pk, True): 1,
    }
