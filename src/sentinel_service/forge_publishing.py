"""The forge check publisher's Lambda entry (docs/github.md, "Why the check cannot go stale").

One function, two triggers (sentinel_infra/constructs/forge_checks.py):

- the Sentinel bus's rule for outbox items of kind `forge_check` or `forge_recheck` (the event's detail is
  the state table's stream record, as the outbox pipe relays it): the item's candidate, or every checked
  candidate of its project, is published again;
- the EventBridge schedule (every 5 minutes): the sweep publishes again what expires before the next one.

A forge that cannot be reached raises out of the handler: Lambda retries the event with backoff and, once
its retries are spent, sends it to the dead-letter queue, whose alarm pages; the record of the run falls due
again meanwhile, so the sweep publishes it as soon as the forge answers. Nothing here ever publishes
`success` for anything but `ready` (sentinel_domain.usecases.forge_checks).

The item's tag is not checked here: an item written by someone else only makes the publisher evaluate the
candidate from its verified chain and publish the truth again, which anyone may ask for."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from sentinel_domain.forge_checks import FORGE_CHECK_KIND, FORGE_RECHECK_KIND
from sentinel_domain.usecases.chain import SYNTHETIC
from sentinel_service.compose import Services

log = logging.getLogger("sentinel.forge_checks")
SCHEDULED = "Scheduled Event"


def outbox_item(event: dict[str, Any]) -> dict[str, Any] | None:
    """The outbox item a relayed stream record carries (`NewImage.item`), or None when it is none of ours."""
    image = ((event.get("detail") or {}).get("dynamodb") or {}).get("NewImage") or {}
    text = (image.get("item") or {}).get("S")
    try:
        item = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    if not isinstance(item, dict) or item.get("kind") not in (FORGE_CHECK_KIND, FORGE_RECHECK_KIND):
        return None
    return item


def handle(services: Services, event: dict[str, Any]) -> dict[str, Any]:
    """One invocation: a sweep for the schedule, else the relayed item's publications. Raises
    ForgeUnavailable (and StoreUnavailable) for the invocation to be retried."""
    checks = services.forge_checks
    if event.get("detail-type") == SCHEDULED:
        report = checks.sweep()
        if report.deferred:
            log.warning("forge checks deferred to the next sweep: %d", len(report.deferred))
        return {
            "sweep": True,
            "published": report.published,
            "unchanged": report.unchanged,
            "skipped": report.skipped,
            "deferred": len(report.deferred),
        }
    item = outbox_item(event)
    if item is None:
        return {"ignored": True}
    if item.get(SYNTHETIC) is True:  # excluded by the bus rule; arrived anyway (its attribute stripped)
        return {"ignored": True, "synthetic": True}
    done = checks.handle(item)
    return {"published": [(p.candidate_id, p.status, p.conclusion) for p in done]}


def publisher_handler(services: Callable[[], Services]) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    def handler(event: dict[str, Any], _context: Any) -> dict[str, Any]:
        return handle(services(), event)

    return handler
