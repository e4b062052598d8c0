"""State and side effects: two protected tables, and the outbox relay from the state table's stream through
EventBridge Pipes to a bus that an archive keeps."""

import json
from typing import Any

import pytest

from sentinel_service import names
from sentinel_service.adapters.tables import principals_table_definition, state_table_definition
from support.infra import Synthesized, as_list, ref_name, statements


def tables(synth: Synthesized) -> dict[str, dict[str, Any]]:
    """{"state" | "principals": properties}, told apart by their key schema."""
    found = {}
    for resource in synth.of_type("AWS::DynamoDB::Table").values():
        found["state" if len(resource["Properties"]["KeySchema"]) == 2 else "principals"] = resource
    return found


@pytest.mark.parametrize("name", ["state", "principals"])
def test_both_tables_are_on_demand_encrypted_recoverable_and_never_deleted_with_the_stack(
    synthesized: Synthesized, name: str
) -> None:
    # Given one table
    resource = tables(synthesized)[name]
    props = resource["Properties"]
    # Then it bills on demand, is encrypted with a KMS key, keeps 35 days of point-in-time recovery
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["SSESpecification"] == {"SSEEnabled": True}  # the AWS managed key aws/dynamodb
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    # And neither a deletion nor a stack deletion or replacement can drop it
    assert props["DeletionProtectionEnabled"] is True
    assert resource["DeletionPolicy"] == resource["UpdateReplacePolicy"] == "Retain"


def test_the_tables_have_the_key_schema_the_code_creates_locally(synthesized: Synthesized) -> None:
    # Given the local definitions in sentinel_service.adapters.tables and the deployed tables
    found = tables(synthesized)
    for name, local in (
        ("state", state_table_definition("x")),
        ("principals", principals_table_definition("x")),
    ):
        # Then keys and attribute types are the same
        assert found[name]["Properties"]["KeySchema"] == local["KeySchema"]
        assert found[name]["Properties"]["AttributeDefinitions"] == local["AttributeDefinitions"]
    # And the state table streams new images, as the relay expects
    assert found["state"]["Properties"]["StreamSpecification"] == {
        "StreamViewType": state_table_definition("x")["StreamSpecification"]["StreamViewType"]
    }
    # And expired token records may be swept on the principals table (the authorizer never relies on it)
    assert found["principals"]["Properties"]["TimeToLiveSpecification"] == {
        "AttributeName": names.PRINCIPALS_TTL_ATTRIBUTE,
        "Enabled": True,
    }
    assert "StreamSpecification" not in found["principals"]["Properties"]


WITNESS_FEED = "witness writer"


def pipes(synth: Synthesized) -> dict[str, dict[str, Any]]:
    """The pipes on the state table's stream, by what they deliver: a detail type on the bus, or the feed of
    the witness writer (tests/infrastructure/test_stack_integrity.py)."""
    return {
        (
            p["TargetParameters"]["EventBridgeEventBusParameters"]["DetailType"]
            if "EventBridgeEventBusParameters" in p["TargetParameters"]
            else WITNESS_FEED
        ): p
        for p in synth.properties("AWS::Pipes::Pipe")
    }


def test_one_pipe_relays_outbox_items_from_the_stream_to_the_bus(
    synthesized: Synthesized,
) -> None:
    # Given the pipes, the state table and the bus
    state_id = next(
        k
        for k, t in synthesized.of_type("AWS::DynamoDB::Table").items()
        if len(t["Properties"]["KeySchema"]) == 2
    )
    (bus_id,) = synthesized.of_type("AWS::Events::EventBus")
    relays = pipes(synthesized)
    # Then there is one pipe for side effects (checkpoints feed the witness writer, not the bus)
    assert set(relays) == {names.DETAIL_TYPE_OUTBOX, WITNESS_FEED}
    for pipe in [relays[names.DETAIL_TYPE_OUTBOX]]:
        # And each reads the state table's stream from its oldest record and puts events on the bus
        assert pipe["Source"] == {"Fn::GetAtt": [state_id, "StreamArn"]}
        assert ref_name(pipe["Target"]) == bus_id
        stream = pipe["SourceParameters"]["DynamoDBStreamParameters"]
        assert stream["StartingPosition"] == "TRIM_HORIZON"
        # And a record that keeps failing goes to the dead-letter queue rather than vanishing
        assert ref_name(stream["DeadLetterConfig"]["Arn"]) in synthesized.of_type("AWS::SQS::Queue")
        assert 0 < stream["MaximumRetryAttempts"] <= 185
        assert pipe["TargetParameters"]["EventBridgeEventBusParameters"]["Source"] == names.EVENT_SOURCE


def stream_record(sk: str, event_name: str = "INSERT", **attributes: str) -> dict[str, Any]:
    keys = {"pk": {"S": "P#demo#C#cand_1"}, "sk": {"S": sk}}
    image = {**keys, **{k: {"S": v} for k, v in attributes.items()}}
    body = {"Keys": keys} if event_name == "REMOVE" else {"Keys": keys, "NewImage": image}
    return {"eventName": event_name, "dynamodb": body}


def matches(pattern: Any, event: Any) -> bool:
    """EventBridge's matching for the operators the filters use: values, prefix, anything-but and exists.
    A pattern's object over a field the event lacks is matched against nothing ({}): only its leaves'
    operators decide (an `exists: false` leaf under an absent field matches, as in EventBridge)."""
    if isinstance(pattern, dict):
        event = {} if event is None else event
        return isinstance(event, dict) and all(
            matches(value, event.get(key)) if not _is_exists(value) else (key in event) == value[0]["exists"]
            for key, value in pattern.items()
        )
    return any(
        (
            isinstance(option, dict)
            and "anything-but" in option
            and isinstance(event, str)
            and event not in option["anything-but"]
        )
        or (
            isinstance(option, dict)
            and "prefix" in option
            and isinstance(event, str)
            and event.startswith(option["prefix"])
        )
        or option == event
        for option in pattern
    )


def _is_exists(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict) and "exists" in value[0]


@pytest.mark.parametrize(
    ("record", "relayed_as"),
    [
        (
            stream_record("O#0000000003-0", outbox_pending="1", outbox_kind="dispatch_checks"),
            names.DETAIL_TYPE_OUTBOX,
        ),
        (stream_record("O#0000000003-0", outbox_kind="dispatch_checks"), None),  # already relayed
        # A notification is a side effect like an action's (docs/notifications.md)
        (
            stream_record(
                "O#notification/cand_1/3/decision.changed", outbox_pending="1", outbox_kind="notification"
            ),
            names.DETAIL_TYPE_OUTBOX,
        ),
        # A checkpoint outbox item feeds the witness writer, never the bus
        (stream_record("O#cp-3", outbox_pending="1", outbox_kind="checkpoint"), WITNESS_FEED),
        # Every change to a chain's head or events, whoever made it, tells the writer the chain moved
        (stream_record("HEAD", seq="3", hash="ab"), WITNESS_FEED),
        (stream_record("HEAD", "MODIFY", seq="2", hash="ab"), WITNESS_FEED),
        (stream_record("E#0000000003"), WITNESS_FEED),
        (stream_record("E#0000000003", "REMOVE"), WITNESS_FEED),
        (stream_record("O#cp-3", "MODIFY", outbox_kind="checkpoint"), None),  # only new checkpoints
        (stream_record("I#abc", outbox_pending="1"), None),  # not an outbox item, whatever its attributes
        (stream_record("U#abc"), None),
    ],
)
def test_the_filters_let_through_pending_side_effects_checkpoints_and_chain_changes_only(
    synthesized: Synthesized, record: dict[str, Any], relayed_as: str | None
) -> None:
    # Given the pipes' filters
    filters = {
        detail_type: [json.loads(f["Pattern"]) for f in pipe["SourceParameters"]["FilterCriteria"]["Filters"]]
        for detail_type, pipe in pipes(synthesized).items()
    }
    # When a stream record is matched against them
    relayed = [
        detail_type for detail_type, patterns in filters.items() if any(matches(p, record) for p in patterns)
    ]
    # Then it is relayed by the one pipe for its kind, or by none
    assert relayed == ([relayed_as] if relayed_as else [])


def test_the_relay_role_reads_only_the_stream_and_writes_only_the_bus_and_its_dead_letters(
    synthesized: Synthesized,
) -> None:
    # Given the role the relay's pipe assumes
    role_id = ref_name(pipes(synthesized)[names.DETAIL_TYPE_OUTBOX]["RoleArn"])
    role = synthesized.resources[role_id]["Properties"]
    granted = [
        s
        for p in synthesized.of_type("AWS::IAM::Policy").values()
        if role_id in [ref_name(r) for r in p["Properties"]["Roles"]]
        for s in statements(p)
    ]
    # Then only EventBridge Pipes of this account may assume it
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "pipes.amazonaws.com"}
    assert "aws:SourceAccount" in trust["Condition"]["StringEquals"]
    # And it reads the stream, puts events on the bus, and sends to the dead-letter queue: nothing else
    by_action = {a: json.dumps(s["Resource"]) for s in granted for a in as_list(s["Action"])}
    assert set(by_action) == {
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
        "dynamodb:ListStreams",
        "events:PutEvents",
        "sqs:SendMessage",
    }
    readers = ("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator")
    assert all("StreamArn" in by_action[a] for a in readers)
    # And ListStreams on "*", the only resource IAM authorises it on (a stream ARN there would grant nothing)
    assert by_action["dynamodb:ListStreams"] == '"*"'


def test_an_archive_keeps_every_relayed_event(synthesized: Synthesized) -> None:
    # Given the archive
    (archive,) = synthesized.properties("AWS::Events::Archive")
    (bus_id,) = synthesized.of_type("AWS::Events::EventBus")
    # Then it archives the relay's events from the Sentinel bus, indefinitely by default (checkpoints)
    assert ref_name(archive["SourceArn"]) == bus_id
    assert archive["EventPattern"] == {"source": [names.EVENT_SOURCE]}
    assert archive.get("RetentionDays", 0) == 0
