"""The one way a rule on the Sentinel bus hands relayed outbox items to a consumer (a function, a topic, a
webhook): `consumer_rule`, whose pattern always excludes a synthetic project's side effects.

The acceptance suite works in a project the operator created synthetic; every outbox item a write on it
carries has the top-level attribute `outbox_synthetic` (sentinel_service.names). The outbox pipe relays those
items like any other, so the archive keeps them, but no consumer may act on them: an acceptance run must
dispatch no check, publish no GitHub check run and page or notify nobody.

The exclusion is `exists: false` on the attribute's `S` leaf. EventBridge applies comparison operators to
leaf nodes only: on the attribute itself (`"outbox_synthetic": [{"exists": false}]`) the pattern would look
for a leaf named `outbox_synthetic`, find none (the stream image nests the value under its type, `{"S":
"1"}`), and match a synthetic item (tests/infrastructure/test_synthetic_side_effects.py shows both).
tests/infrastructure also asserts that every rule on the bus carries the exclusion, so a rule built any other
way fails the suite. The archive is not a rule: it keeps everything.
"""

from collections.abc import Mapping
from typing import Any

from aws_cdk import aws_events as events
from constructs import Construct

from sentinel_service import names

# The item carries no outbox_synthetic attribute (its `S` leaf: see the module's docstring).
NOT_SYNTHETIC: dict[str, Any] = {names.OUTBOX_SYNTHETIC_ATTRIBUTE: {"S": [{"exists": False}]}}


def consumer_pattern(new_image: Mapping[str, Any], **detail: Any) -> dict[str, Any]:
    """The event pattern (JSON) of relayed outbox items whose new image matches `new_image` (and whose
    stream record matches `detail`, e.g. eventName), synthetic ones excluded."""
    if names.OUTBOX_SYNTHETIC_ATTRIBUTE in new_image or "dynamodb" in detail:
        raise ValueError("a consumer rule's pattern may not say anything about synthetic items itself")
    return {
        "source": [names.EVENT_SOURCE],
        "detail-type": [names.DETAIL_TYPE_OUTBOX],
        "detail": {**detail, "dynamodb": {"NewImage": {**new_image, **NOT_SYNTHETIC}}},
    }


def consumer_rule(
    scope: Construct,
    construct_id: str,
    *,
    bus: events.IEventBus,
    new_image: Mapping[str, Any],
    detail: Mapping[str, Any] | None = None,
    **rule: Any,
) -> events.Rule:
    """An EventBridge rule on `bus` for the outbox items `consumer_pattern` matches; `rule` is passed to
    events.Rule (targets, description, rule_name, ...)."""
    pattern = consumer_pattern(new_image, **dict(detail or {}))
    return events.Rule(
        scope,
        construct_id,
        event_bus=bus,
        event_pattern=events.EventPattern(
            source=pattern["source"], detail_type=pattern["detail-type"], detail=pattern["detail"]
        ),
        **rule,
    )
