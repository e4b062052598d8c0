"""A decision reads the candidate's state with one strongly consistent Query (plus its pages)."""

from collections import Counter
from typing import Any

import pytest
from moto import mock_aws

from sentinel_domain.models import ChangeContextRequest
from sentinel_service.adapters.dynamodb_store import DynamoStateStore
from sentinel_service.adapters.tables import ensure_tables
from support.world import CI, PROJECT, REQUESTER, World


class RecordingClient:
    """Counts every DynamoDB call by (operation, partition, consistent read)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: Counter[tuple[str, str, bool]] = Counter()

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
            self.calls[(name, pk, bool(kwargs.get("ConsistentRead")))] += 1
            return attr(**kwargs)

        return call


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
        world = World(store=DynamoStateStore(client, "state", page_size=3))
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
    client.calls.clear()
    # When the hook's decision is read
    decision = world.gate.decision(PROJECT, cid, REQUESTER, None).as_json()
    # Then the candidate's partition was read by one paged, strongly consistent Query and nothing else
    assert decision["decision"] == "hold"
    candidate_pk = f"P#{PROJECT}#C#{cid}"
    queries = {k: n for k, n in client.calls.items() if k[0] == "query"}
    assert queries[("query", candidate_pk, True)] == 2  # 4 events + HEAD in pages of 3: one Query, two pages
    assert queries[("query", f"P#{PROJECT}", True)] >= 1  # the project's configuration and policies
    assert set(queries) == {("query", candidate_pk, True), ("query", f"P#{PROJECT}", True)}
    assert not [k for k in client.calls if k[0] != "query"]
