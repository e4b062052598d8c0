"""The live gate's `action_replay` reads the execution's side effect from the state table: it must be marked
synthetic (the attribute every consumer rule excludes, and the mark inside the item), or the check fails,
naming why. On DynamoDB (moto), through the same reader the gate uses against AWS."""

import json
from types import SimpleNamespace
from typing import Any

import pytest

from sentinel_acceptance.checks import CheckFailed
from sentinel_acceptance.gate import OutboxCounter
from sentinel_service import names
from sentinel_service.adapters.dynamodb_items import outbox_item
from sentinel_service.adapters.tables import ensure_tables
from support.moto_world import moto_dynamodb

TABLE = "state-acceptance"
PARTITION = "P#acceptance#C#cand_1"


def counter(client: Any) -> OutboxCounter:
    created = SimpleNamespace(
        role="requester",
        method="POST",
        path="/projects/acceptance/candidates",
        status=201,
        body={"candidate_id": "cand_1"},
    )
    target = SimpleNamespace(project="acceptance", client=lambda _service: client)
    found = SimpleNamespace(outputs={names.OUTPUT_STATE_TABLE: TABLE})
    return OutboxCounter(target, found, SimpleNamespace(record=[created]))  # type: ignore[arg-type]


@pytest.mark.parametrize("synthetic", [True, False])
def test_the_side_effect_of_the_runs_execution_must_be_marked_synthetic(synthetic: bool) -> None:
    with moto_dynamodb() as client:
        ensure_tables(client, TABLE, "principals-acceptance")
        # Given the execution's side effect as the gate wrote it, in a synthetic project or a plain one
        entry = {"kind": "action", "execution_id": "exe_1", **({"synthetic": True} if synthetic else {})}
        client.put_item(TableName=TABLE, Item=outbox_item(PARTITION, 5, 0, entry, "t"))
        # When the gate counts the execution's side effects
        if synthetic:
            # Then a marked one counts
            assert counter(client)("exe_1") == 1
        else:
            # Then an unmarked one fails the check, naming why
            with pytest.raises(CheckFailed, match="not marked synthetic"):
                counter(client)("exe_1")


def test_an_item_whose_mark_was_stripped_from_the_attribute_alone_still_fails() -> None:
    with moto_dynamodb() as client:
        ensure_tables(client, TABLE, "principals-acceptance")
        item = outbox_item(
            PARTITION, 5, 0, {"kind": "action", "execution_id": "exe_1", "synthetic": True}, "t"
        )
        item.pop(names.OUTBOX_SYNTHETIC_ATTRIBUTE)
        client.put_item(TableName=TABLE, Item=item)
        assert json.loads(item["item"]["S"])["synthetic"] is True
        with pytest.raises(CheckFailed, match="not marked synthetic"):
            counter(client)("exe_1")
