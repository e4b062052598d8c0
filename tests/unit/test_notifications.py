"""Notifications (sentinel_domain.notifications, docs/notifications.md): which transitions emit what, that
every emitted event validates against docs/schemas/notification.v1.json, that hostile caller text never
becomes a mention, a link or markup, and that they leave only in the outbox of the write that recorded their
cause (one per change; none for the same decision again, none on a replay)."""

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from unit.test_recorded_decisions import planned, ready_candidate

from sentinel_client import ci_wait
from sentinel_domain import notifications
from sentinel_domain.decision import Decision, Finding
from sentinel_domain.models import ReviewRequest
from support.world import CONFIG, PROJECT, REQUESTER, REV, REVIEWER, World

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "docs" / "schemas" / "notification.v1.json").read_text(encoding="utf-8")
)
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
CANDIDATE = {"candidate_id": "cand_1", "subject": "payments", "revision": REV, "environment": "staging"}
AT = "2026-11-29T12:00:00.000000Z"
HOSTILE = (
    "<!channel> @here @everyone <@U123|x> [click](https://evil.example/p?q=1) <https://evil.example|ok> "
    "`code` *bold* _it_ ~s~ \u202egnp.exe\u200b\nsecond line evil.example &amp; token snt_"
    + "A" * 49
    + " arn:aws:iam::123456789012:role/x 123456789012"
)


def verdict(decision: str, *codes: str, detail: str = "why") -> Decision:
    return Decision(
        decision=decision,  # type: ignore[arg-type]
        findings=[Finding(code=c, detail=detail) for c in codes],
        plan_digest="d" * 64,
        revision=REV,
        as_of=AT,
        facts_digest="f" * 64,
    )


def previous(decision: str, *codes: str) -> dict[str, Any]:
    return {"type": "decision.recorded", "decision": decision, "finding_counts": {c: 1 for c in codes}}


def events(items: list[dict[str, Any]]) -> list[str]:
    return [i["event"] for i in items]


def valid(item: dict[str, Any]) -> dict[str, Any]:
    errors = sorted(VALIDATOR.iter_errors(item), key=lambda e: list(e.path))
    assert not errors, [e.message for e in errors]
    return item


def assert_inert(text: str) -> None:
    """Nothing a chat would turn into a mention, a link or markup outside a code span."""
    assert "<" not in text and ">" not in text  # Slack's <!channel>, <@U…>, <url|label>
    assert not re.search(r"@(here|channel|everyone|U123)", text)  # a zero-width space follows every @
    assert "://" not in text  # no scheme for a chat to link
    outside = re.sub(r"`[^`\n]*`", "", text)
    assert "](" not in outside and "[" not in outside  # no Markdown link outside a code span
    assert "evil.example" not in text  # no bare domain for a chat to autolink
    assert "\u202e" not in text  # no bidi override
    for line in text.split("\n"):
        assert line.count("`") % 2 == 0, line  # every code span closes on its line
    assert "snt_" not in text and "123456789012" not in text  # no token, no account id


# ---- which transitions emit what ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "now", "expected"),
    [
        (None, verdict("hold", "EVIDENCE_MISSING"), ["decision.changed"]),
        (None, verdict("ready"), ["decision.changed"]),
        (previous("hold", "EVIDENCE_MISSING"), verdict("ready"), ["decision.changed"]),
        (previous("ready"), verdict("hold", "EVIDENCE_STALE"), ["decision.changed"]),
        (previous("hold", "EVIDENCE_MISSING"), verdict("hold", "EVIDENCE_NEGATIVE"), []),
        (previous("ready"), verdict("ready"), []),
        # A hold that only a person can move on: announced when its person-only findings are new
        (previous("ready"), verdict("hold", "REVIEW_EXPIRED"), ["decision.changed", "hold.needs_person"]),
        (None, verdict("hold", "REVIEW_MISSING"), ["decision.changed", "hold.needs_person"]),
        (previous("hold", "EVIDENCE_MISSING"), verdict("hold", "REVIEW_MISSING"), ["hold.needs_person"]),
        (
            previous("hold", "REVIEW_MISSING"),
            verdict("hold", "REVIEW_MISSING", "TASK_NOT_SETTLED"),
            ["hold.needs_person"],
        ),
        (previous("hold", "REVIEW_MISSING"), verdict("hold", "REVIEW_MISSING"), []),
        # ...whatever else the hold owes CI or the agent (a reviewer approves the plan before evidence exists)
        (
            previous("hold", "EVIDENCE_MISSING"),
            verdict("hold", "REVIEW_MISSING", "EVIDENCE_MISSING"),
            ["hold.needs_person"],
        ),
        (previous("hold", "REVIEW_MISSING", "EVIDENCE_MISSING"), verdict("hold", "REVIEW_MISSING"), []),
        # A hold that owes nothing to a person is CI's or the agent's to move
        (previous("hold", "REVIEW_MISSING"), verdict("hold", "EVIDENCE_STALE"), []),
    ],
)
def test_which_decision_transitions_emit_what(
    before: dict[str, Any] | None, now: Decision, expected: list[str]
) -> None:
    # Given the candidate's previous recorded decision, When a decision is recorded at seq 7
    emitted = notifications.decision_notifications(PROJECT, CANDIDATE, before, now, 7)
    # Then exactly the expected events are built, each valid under the published schema
    assert events(emitted) == expected
    for item in emitted:
        valid(item)
        assert item["seq"] == 7 and item["recorded_at"] == AT and item["kind"] == "notification"


def test_a_decision_change_says_from_and_to_with_its_findings() -> None:
    # Given a ready candidate whose approval expired
    now = verdict("hold", "REVIEW_EXPIRED", "EVIDENCE_STALE", detail="the approval of plan v1 expired")
    # When the hold is recorded
    changed, _paged = notifications.decision_notifications(PROJECT, CANDIDATE, previous("ready"), now, 9)
    # Then the event names both values and the codes, and its text is one line plus the findings
    assert (changed["from"], changed["to"]) == ("ready", "hold")
    assert changed["finding_codes"] == ["EVIDENCE_STALE", "REVIEW_EXPIRED"]
    first, *rest = changed["text"].split("\n")
    assert first.startswith("Sentinel: `payments`") and "is now HOLD (was READY)" in first
    assert [line.split(" ")[1] for line in rest] == ["REVIEW_EXPIRED", "EVIDENCE_STALE"]


def test_findings_beyond_five_are_counted_not_listed() -> None:
    now = verdict("hold", *[f"EVIDENCE_{c}" for c in "ABCDEFGH"])
    [changed] = notifications.decision_notifications(PROJECT, CANDIDATE, None, now, 2)
    lines = changed["text"].split("\n")
    assert len(lines) == 1 + 5 + 1 and lines[-1] == "• …and 3 more"


def test_the_needs_person_codes_are_decision_findings_of_the_domain() -> None:
    # The one list names only codes DOMAIN.md defines (a typo would silently never match)
    domain = Path(__file__).parents[3] / "shared" / "design" / "DOMAIN.md"
    if not domain.exists():
        pytest.skip(f"{domain} is absent: the shared design folder is not beside the repository")
    text = domain.read_text(encoding="utf-8").split("Decision findings:")[1].split("Preflight findings")[0]
    assert notifications.NEEDS_PERSON <= set(re.findall(r"`([A-Z_]+)`", text))
    assert notifications.NEEDS_PERSON == set(
        SCHEMA["oneOf"][2]["properties"]["person_codes"]["items"]["enum"]
    ), "the schema lists the same codes"


def test_a_person_hears_of_the_hold_at_which_the_ci_wait_stops() -> None:
    # The CI wait (standard library only, so it cannot import the core) stops on the same set
    assert notifications.NEEDS_PERSON == ci_wait.PERSON_ONLY


def test_a_needs_person_hold_names_the_persons_findings_first() -> None:
    now = verdict("hold", "EVIDENCE_MISSING", "REVIEW_MISSING", detail="no approval")
    [_changed, paged] = notifications.decision_notifications(PROJECT, CANDIDATE, None, now, 4)
    assert (paged["person_codes"], paged["finding_codes"]) == (
        ["REVIEW_MISSING"],
        ["EVIDENCE_MISSING", "REVIEW_MISSING"],
    )
    assert [line.split(" ")[1] for line in paged["text"].split("\n")[1:]] == ["REVIEW_MISSING"]


def test_the_schema_describes_exactly_the_events_the_core_emits() -> None:
    described = [v["properties"]["event"]["const"] for v in SCHEMA["oneOf"]]
    assert described == list(notifications.EVENTS)
    assert all(v["additionalProperties"] is False for v in SCHEMA["oneOf"])  # nothing rides along unnamed


def test_a_stored_plan_asks_for_its_approvals() -> None:
    plan = {"plan_digest": "e" * 64, "plan_version": 2, "plan": {"tasks": [{}, {}]}, "mode": "model"}
    [asked] = notifications.review_requested(PROJECT, CANDIDATE, dict(plan, recorded_at=AT), 2, 5)
    valid(asked)
    assert (asked["plan_version"], asked["approvals_required"], asked["plan_digest"]) == (2, 2, "e" * 64)
    assert "plan v2" in asked["text"] and "needs 2 approvals" in asked["text"]


# ---- hostile text ---------------------------------------------------------------------------------------


def test_hostile_caller_text_is_escaped_for_chat() -> None:
    # Given a subject, an environment-like value and a failing test name chosen by a hostile caller
    candidate = dict(CANDIDATE, subject=HOSTILE[:200])  # a subject is at most 200 characters
    now = verdict("hold", "EVIDENCE_NEGATIVE", detail=f"failing test: {HOSTILE}")
    # When the change is announced
    [changed] = notifications.decision_notifications(PROJECT, candidate, None, now, 3)
    # Then the text makes no mention, no link and no markup, carries no token or account id, and is bounded
    valid(changed)
    assert_inert(changed["text"])
    assert len(changed["text"].split("\n")) == 2  # the newline in the test name did not start a line


def test_the_longest_text_a_caller_can_cause_stays_within_the_schema() -> None:
    # Given every caller-chosen value at its longest and made of the character that escapes longest
    candidate = {
        "candidate_id": "c" * 60,
        "subject": "&" * 200,
        "revision": "a" * 64,
        "environment": "a." * 63 + "a",
    }
    findings = [Finding(code="EVIDENCE_WRONG_ENVIRONMENT", detail="&" * 4000) for _ in range(9)]
    now = Decision(
        decision="hold",
        findings=findings,
        plan_digest=None,
        revision="a" * 64,
        as_of=AT,
        facts_digest="f" * 64,
    )
    # When the change is announced, Then the text is bounded and the event valid
    [changed] = notifications.decision_notifications("p" * 63, candidate, None, now, 1)
    assert 4000 < len(valid(changed)["text"]) <= SCHEMA["oneOf"][0]["properties"]["text"]["maxLength"]


@pytest.mark.parametrize(
    "value",
    ["<!here>", "@channel", "[x](http://a.b)", "http://a.b/c", "a`b`c", "\n", "", "x" * 500, "\u200f\u2066"],
)
def test_a_chat_literal_is_one_inert_bounded_code_span(value: str) -> None:
    shown = notifications.chat_literal(value)
    assert shown.startswith("`") and shown.endswith("`") and shown.count("`") == 2
    assert "\n" not in shown and len(shown) <= notifications.LITERAL_LIMIT + 2 + 40
    assert_inert(shown)


def test_redaction_touches_prose_not_identifiers() -> None:
    # A revision prefix of twelve digits is an identifier, not an account id
    assert notifications.chat_literal("123456789012") == "`123456789012`"
    assert "[account]" in notifications.chat_literal("role 123456789012 denied", redact=True)


# ---- in the outbox of the same write ------------------------------------------------------------------


def notified(world: World) -> list[dict[str, Any]]:
    return [{k: v for k, v in n.items() if k != "_tag"} for n in world.store.notifications]


def test_a_recorded_change_emits_one_notification_in_its_own_write(world: World) -> None:
    # Given a candidate proved ready, whose plan asked for review when it was stored
    cid = ready_candidate(world)
    assert events(notified(world)) == ["review.requested"]
    # When its decision is recorded
    answer = world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    # Then exactly one decision.changed was written, sealed like every side effect, at the decision's seq
    [changed] = world.store.notifications[1:]
    assert changed["_tag"]  # the chain key's tag: the relay publishes only what the gate wrote
    assert valid(notified(world)[1]) and changed["seq"] == answer.seq
    assert (changed["from"], changed["to"], changed["candidate_id"]) == (None, "ready", cid)


def test_the_same_decision_again_emits_nothing(world: World) -> None:
    cid = ready_candidate(world)
    world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    before = len(world.store.notifications)
    # When the same decision is recorded again
    again = world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    # Then it is recorded, and nothing is announced
    assert again.decision == "ready" and len(world.store.notifications) == before


def test_an_idempotent_replay_emits_nothing(world: World) -> None:
    cid = planned(world, 1)
    first = world.gate.record_decision(PROJECT, cid, REQUESTER, "k-1")
    before = list(world.store.notifications)
    # When the same request is replayed with its key
    replay = world.gate.record_decision(PROJECT, cid, REQUESTER, "k-1")
    # Then it answers the first result and writes no notification
    assert replay.replayed and replay.seq == first.seq
    assert world.store.notifications == before


def test_a_proposal_replay_asks_for_review_once(world: World) -> None:
    cid = world.candidate()["candidate_id"]
    world.gate.propose(PROJECT, cid, REQUESTER, None, "p-1")
    world.gate.propose(PROJECT, cid, REQUESTER, None, "p-1")
    assert events(notified(world)) == ["review.requested"]


def test_an_expired_approval_pages_a_person_once() -> None:
    # Given a ready candidate, recorded ready, whose approval lives an hour (its evidence a day)
    world = World(config=dict(CONFIG, approval_ttl_seconds=3600))
    cid = ready_candidate(world)
    world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    # When the approval expires (the evidence lives longer) and the decision is recorded, twice
    world.clock.advance(3601)
    world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    # Then the change and the need for a person are each announced once
    shown = notified(world)
    assert events(shown) == ["review.requested", "decision.changed", "decision.changed", "hold.needs_person"]
    assert shown[-1]["person_codes"] == ["REVIEW_EXPIRED"]
    for item in shown:
        valid(item)


def test_a_review_of_a_new_plan_version_is_requested_again(world: World) -> None:
    cid = world.candidate()["candidate_id"]
    first = world.gate.propose(PROJECT, cid, REQUESTER, None, None)
    world.gate.review(
        PROJECT,
        cid,
        REVIEWER,
        ReviewRequest(decision="reject", plan_digest=first.plan_digest, revision=REV),
        None,
    )
    world.gate.propose(PROJECT, cid, REQUESTER, first.plan_digest, None)
    asked = [n for n in notified(world) if n["event"] == "review.requested"]
    assert [a["plan_version"] for a in asked] == [1, 2]


def test_nothing_secret_leaves_in_a_notification(world: World) -> None:
    # Given every kind of notification a flow produces
    cid = ready_candidate(world)
    world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    text = json.dumps(notified(world))
    # Then none names a principal, the chain key or a token
    for secret in ("ci-bot", "rita-reviewer", "agent-1", "sentinel-tests-chain-key", "snt_"):
        assert secret not in text


def test_a_deployment_that_routes_no_notifications_writes_none(world: World) -> None:
    # Given a gate whose deployment routes no notifications (AWS without notifySns or notifyWebhookUrl)
    world.gate.chain.notify = False
    # When a plan is stored and its decision recorded
    cid = ready_candidate(world)
    world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    # Then no notification item rode in either write (each would cost the transaction one more item)
    assert world.store.notifications == []


def test_notifications_are_on_locally_and_in_aws_only_where_the_stack_routes_them() -> None:
    from sentinel_service.settings import Settings

    assert Settings.from_env({}).notifications is True
    assert Settings.from_env({"AWS_LAMBDA_FUNCTION_NAME": "gating"}).notifications is False
    routed = {"AWS_LAMBDA_FUNCTION_NAME": "gating", "SENTINEL_NOTIFICATIONS": "on"}
    assert Settings.from_env(routed).notifications is True
