"""Template assertions: no consumer rule on the Sentinel bus takes a synthetic project's side effects (the
acceptance suite's); the archive keeps them. And why the exclusion sits on the attribute's `S` leaf: on
EventBridge's matching (moto's implementation, which like EventBridge applies operators to leaves only), an
`exists: false` on the attribute itself would let a synthetic item through."""

from typing import Any

import pytest
from infrastructure.test_stack_notifications import notifying  # noqa: F401  (the fixture)
from moto.events.models import EventPattern

from sentinel_domain.usecases.chain import SYNTHETIC
from sentinel_infra.constructs.consumers import NOT_SYNTHETIC, consumer_pattern
from sentinel_service import names
from sentinel_service.adapters.dynamodb_items import outbox_item
from support.infra import Synthesized


def bus_rules(synth: Synthesized) -> dict[str, dict[str, Any]]:
    """Every rule on a bus other than the default one (the schedules are on the default bus), and every rule
    on relayed outbox items wherever it is."""
    return {
        rid: r["Properties"]
        for rid, r in synth.of_type("AWS::Events::Rule").items()
        if "EventBusName" in r["Properties"]
        or names.EVENT_SOURCE in r["Properties"].get("EventPattern", {}).get("source", [])
    }


def relayed(kind: str, synthetic: bool) -> dict[str, Any]:
    """The event the outbox pipe puts on the bus for one outbox item, as the DynamoDB adapter writes it."""
    entry = {"kind": kind, "outbox_id": f"cand_1/{kind}", **({SYNTHETIC: True} if synthetic else {})}
    image = outbox_item("P#acceptance#C#cand_1", 3, 0, entry, "2026-12-01T00:00:00Z")
    detail = {"eventName": "INSERT", "dynamodb": {"Keys": {}, "NewImage": image}}
    return {"source": names.EVENT_SOURCE, "detail-type": names.DETAIL_TYPE_OUTBOX, "detail": detail}


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    return EventPattern(None, pattern).matches_event(event)


@pytest.mark.parametrize("which", ["synthesized", "notifying"])
def test_every_rule_on_the_bus_excludes_synthetic_side_effects(
    which: str, request: pytest.FixtureRequest
) -> None:
    synth: Synthesized = request.getfixturevalue(which)
    rules = bus_rules(synth)
    # Given the stack's rules on the Sentinel bus (forge worker, forge check publisher, and notifications)
    assert len(rules) >= (3 if which == "notifying" else 2), sorted(rules)
    for rule_id, rule in rules.items():
        image = rule["EventPattern"]["detail"]["dynamodb"]["NewImage"]
        # Then each excludes items carrying the synthetic attribute, on its S leaf
        assert (
            image.get(names.OUTBOX_SYNTHETIC_ATTRIBUTE) == NOT_SYNTHETIC[names.OUTBOX_SYNTHETIC_ATTRIBUTE]
        ), rule_id
        # And so the kind it consumes reaches it when plain, and never when synthetic
        [kind, *_] = image["outbox_kind"]["S"]
        assert matches(rule["EventPattern"], relayed(kind, synthetic=False)), rule_id
        assert not matches(rule["EventPattern"], relayed(kind, synthetic=True)), rule_id


def test_the_archive_keeps_synthetic_side_effects(synthesized: Synthesized) -> None:
    # Given the archive of the bus
    [archive] = synthesized.properties("AWS::Events::Archive")
    # Then it keeps a synthetic item like any other: it is where they may go
    assert matches(archive["EventPattern"], relayed(names.OUTBOX_KIND_FORGE_CHECK, synthetic=True))


def test_exists_false_on_the_attribute_itself_would_not_exclude_anything() -> None:
    # Given the exclusion written on the attribute node rather than its S leaf
    wrong = consumer_pattern({"outbox_kind": {"S": ["forge_check"]}})
    wrong["detail"]["dynamodb"]["NewImage"][names.OUTBOX_SYNTHETIC_ATTRIBUTE] = [{"exists": False}]
    right = consumer_pattern({"outbox_kind": {"S": ["forge_check"]}})
    # Then the wrong one lets a synthetic item through (the leaf it names does not exist); the right one not
    assert matches(wrong, relayed("forge_check", synthetic=True))
    assert not matches(right, relayed("forge_check", synthetic=True))


def test_a_consumer_pattern_cannot_speak_of_synthetic_items_itself() -> None:
    with pytest.raises(ValueError, match="synthetic"):
        consumer_pattern({names.OUTBOX_SYNTHETIC_ATTRIBUTE: {"S": ["1"]}})
