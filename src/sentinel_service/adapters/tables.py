"""The one place that names the tables' key schema.

The state table holds every chain partition (events, head, facts), idempotency records, outbox items and
candidate claims under a string partition key `pk` and a string sort key `sk`; the principals table is keyed
by `pk` alone. The CDK stack defines the deployed tables; `ensure_tables` creates the same shape locally
(moto, the local runner)."""

from typing import Any

from botocore.exceptions import ClientError

from sentinel_service.names import PK, SK, STATE_STREAM_VIEW

__all__ = [
    "PK",
    "SK",
    "STATE_STREAM_VIEW",
    "ensure_tables",
    "principals_table_definition",
    "state_table_definition",
]


def state_table_definition(name: str) -> dict[str, Any]:
    """kwargs for `create_table`: on-demand, pk/sk strings, a NEW_IMAGE stream."""
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": PK, "AttributeType": "S"},
            {"AttributeName": SK, "AttributeType": "S"},
        ],
        "KeySchema": [
            {"AttributeName": PK, "KeyType": "HASH"},
            {"AttributeName": SK, "KeyType": "RANGE"},
        ],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": STATE_STREAM_VIEW},
    }


def principals_table_definition(name: str) -> dict[str, Any]:
    """kwargs for `create_table`: on-demand, a string hash key `pk` only."""
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": PK, "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": PK, "KeyType": "HASH"}],
    }


def ensure_tables(client: Any, state_table: str, principals_table: str) -> None:
    """Create whichever table is missing and wait until both are ACTIVE. Safe to call again."""
    for definition in (state_table_definition(state_table), principals_table_definition(principals_table)):
        name = definition["TableName"]
        try:
            client.describe_table(TableName=name)
        except ClientError as missing:
            if missing.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            try:
                client.create_table(**definition)
            except ClientError as taken:  # created concurrently by someone else: wait for it like for our own
                if taken.response.get("Error", {}).get("Code") != "ResourceInUseException":
                    raise
        client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
