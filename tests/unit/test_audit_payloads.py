"""The audit route's events carry the fact each one recorded (`payload`), so an auditor reads what happened,
not only its digest; a page stops early when its payloads grow past the budget, and paging goes on."""

import pytest

from sentinel_domain.audit import fact_digest
from sentinel_domain.canonical import canonical_text
from sentinel_domain.ports import StreamRef
from sentinel_domain.usecases import audit as audit_usecase
from support.world import AUDITOR, PROJECT, REQUESTER, World


def test_each_event_carries_the_fact_it_recorded(world: World) -> None:
    # Given a candidate with a plan
    cid = world.candidate()["candidate_id"]
    world.gate.propose(PROJECT, cid, REQUESTER, None, None)
    # When its chain is read
    page = world.gate.audit(StreamRef(PROJECT, cid), AUDITOR, 500, None).as_json()
    # Then every event's payload is its fact: same type, and its digest is the event's payload_digest
    events = page["events"]
    assert [e["type"] for e in events] == ["candidate.created", "plan.stored"]
    for event in events:
        assert event["payload"]["type"] == event["type"]
        assert fact_digest(canonical_text(event["payload"])) == event["payload_digest"]
    assert events[1]["payload"]["plan_version"] == 1 and "plan" in events[1]["payload"]


def test_a_page_ends_early_past_the_payload_budget_and_the_cursor_goes_on(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a chain of two events and a budget smaller than their payloads together
    cid = world.candidate()["candidate_id"]
    world.gate.propose(PROJECT, cid, REQUESTER, None, None)
    monkeypatch.setattr(audit_usecase, "PAYLOAD_PAGE_BYTES", 10)
    # When a page of up to 500 is read
    first = world.gate.audit(StreamRef(PROJECT, cid), AUDITOR, 500, None).as_json()
    # Then it holds one event (at least one always) and a cursor to the next
    assert [e["seq"] for e in first["events"]] == [1] and first["next_cursor"]
    second = world.gate.audit(StreamRef(PROJECT, cid), AUDITOR, 500, first["next_cursor"]).as_json()
    assert [e["seq"] for e in second["events"]] == [2] and second["next_cursor"] is None
