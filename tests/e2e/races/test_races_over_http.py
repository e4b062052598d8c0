"""Races over real HTTP: many concurrent requests against one candidate of `sentinel serve` (its embedded,
serialised store), started once for the module.

Each store call of the local runner is serialised, but requests interleave between their calls: two
executions read the same head, judge, and race to write. The gate's conditional writes decide the winner.
What must hold, whatever the interleaving: exactly one side effect per allowed execution (one outbox item,
delivered once), every accepted write exactly one event, chains without fork or gap that verify, refusals that
say retry (with Retry-After) or name the winner.

Threads are bounded (THREADS at once). Atomicity under real DynamoDB concurrency is the store's guarantee; it
is exercised here only through its conditional-write contract on the emulated store (docs/failing-closed.md).
Budget: a few seconds after the server is up."""

import json
import secrets
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sentinel_client.api import Response, SentinelClient, TransportError
from sentinel_runner.demo import LocalGate

pytestmark = pytest.mark.http

THREADS = 8
PROJECT = "demo"
FILES = ["services/payments/api.py", "docs/guide.md"]


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("races")
    key = folder / "token.key"
    key.write_text(secrets.token_hex(32) + "\n")
    key.chmod(0o600)
    running = LocalGate(folder / "data")
    # The server's own token key, never the operator's file in the home directory. The child copies the
    # environment when it starts, so the variable is set only for that moment, not for this worker's other
    # tests.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SENTINEL_TOKEN_KEY_FILE", str(key))
        running.__enter__()
    try:
        yield running
    finally:
        running.__exit__(None, None, None)


def clients(gate: Any) -> dict[str, SentinelClient]:
    return {role: gate.client(role) for role in ("requester", "publisher", "reviewer", "human_requester")}


def expect(response: Response, status: int) -> dict[str, Any]:
    assert response.status == status, (response.status, response.body)
    return response.body


def at_once(count: int, call: Callable[[int], Response]) -> list[Response | TransportError]:
    """`count` threads released together, each making one call; their answers in thread order."""
    barrier = threading.Barrier(count)
    answers: list[Response | TransportError | None] = [None] * count

    def run(i: int) -> None:
        barrier.wait()
        try:
            answers[i] = call(i)
        except TransportError as error:  # recorded, and judged by the test: never silently a success
            answers[i] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert all(isinstance(a, Response) for a in answers), answers
    return [a for a in answers if a is not None]


def approved(gate: Any, *, max_executions: int = 1) -> dict[str, Any]:
    """Given a candidate attested by the trusted publisher, its plan amended with one dispatch action, and a
    human approval of that exact digest."""
    c = clients(gate)
    revision = secrets.token_hex(20)
    created = expect(
        c["requester"].create_candidate(
            PROJECT,
            {
                "subject": "payments",
                "base_revision": secrets.token_hex(20),
                "revision": revision,
                "environment": "staging",
                "change": {"files": FILES},
            },
        ),
        201,
    )
    cid = created["candidate_id"]
    expect(c["publisher"].add_change_context(PROJECT, cid, {"files": FILES}), 201)
    proposal = expect(c["requester"].propose(PROJECT, cid), 201)
    checks = [ch["check_id"] for t in proposal["plan"]["tasks"] for ch in t["checks"]]
    plan = dict(
        proposal["plan"],
        actions=[
            {
                "action_id": "A1",
                "type": "dispatch_checks",
                "params": {"checks": checks},
                "max_executions": max_executions,
            }
        ],
    )
    digest = expect(c["requester"].put_plan(PROJECT, cid, plan, if_match=proposal["plan_digest"]), 201)[
        "plan_digest"
    ]
    expect(
        c["reviewer"].review(
            PROJECT, cid, {"decision": "approve", "plan_digest": digest, "revision": revision}
        ),
        201,
    )
    scopes = {o["obligation_id"]: o["scope"] for o in created["obligations"]}
    return {
        "cid": cid,
        "digest": digest,
        "revision": revision,
        "checks": checks,
        "plan": plan,
        "scopes": scopes,
    }


def whole_chain(gate: Any, cid: str) -> list[dict[str, Any]]:
    """The candidate's chain, every page: it verifies, and its seqs run 1..n without fork or gap."""
    auditor = gate.client("auditor")
    events, cursor = [], None
    while True:
        page = expect(auditor.candidate_audit(PROJECT, cid, limit=500, cursor=cursor), 200)
        assert page["verification"]["valid"] is True, page["verification"]
        events += page["events"]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len({e["hash"] for e in events}) == len(events)
    return events


def delivered(gate: Any, execution_ids: set[str]) -> list[dict[str, Any]]:
    """The side effects the relay delivered for these executions (after one more relay round)."""
    for execution_id in execution_ids:
        gate.delivered(execution_id)
    lines = Path(gate.event_log).read_text().splitlines() if Path(gate.event_log).exists() else []
    return [
        e["detail"]
        for e in map(json.loads, lines)
        if e["detail-type"] == "sentinel.action" and e["detail"]["execution_id"] in execution_ids
    ]


def retryable(response: Response) -> bool:
    return (
        response.status in (409, 503)
        and response.code in ("IDEMPOTENCY_IN_PROGRESS", "STATE_UNAVAILABLE")
        and response.retry_after is not None
    )


def test_one_key_sent_many_times_at_once_makes_one_side_effect(gate: Any) -> None:
    # Given an approved plan with one dispatch action
    a = approved(gate)
    requester = clients(gate)["requester"]
    body = {"plan_digest": a["digest"], "params": a["plan"]["actions"][0]["params"]}
    # When THREADS copies of one execution, with one Idempotency-Key, arrive at once
    answers = at_once(
        THREADS, lambda _i: requester.execute(PROJECT, a["cid"], "A1", body, idempotency_key="one-key")
    )
    # Then each is the execution (first or replayed) or a retryable "in progress"
    done = [r for r in answers if r.status == 201]
    assert done and all(r.status == 201 or retryable(r) for r in answers), [
        (r.status, r.body) for r in answers
    ]
    assert len({json.dumps(r.body, sort_keys=True) for r in done}) == 1, "one execution, one answer"
    assert sum(not r.replayed for r in done) <= 1
    # And a client retrying later gets the same execution, replayed
    again = requester.execute(PROJECT, a["cid"], "A1", body, idempotency_key="one-key")
    assert again.status == 201 and again.replayed and again.body == done[0].body
    # And exactly one execution was audited and one side effect delivered, once
    events = whole_chain(gate, a["cid"])
    assert [e["type"] for e in events].count("action.executed") == 1
    assert len(delivered(gate, {again.body["execution_id"]})) == 1


def test_many_keys_at_once_for_an_action_allowed_once_make_one_side_effect(gate: Any) -> None:
    # Given an approved plan whose action may run once
    a = approved(gate, max_executions=1)
    requester = clients(gate)["requester"]
    body = {"plan_digest": a["digest"], "params": a["plan"]["actions"][0]["params"]}
    # When THREADS executions with distinct keys arrive at once
    answers = at_once(
        THREADS, lambda i: requester.execute(PROJECT, a["cid"], "A1", body, idempotency_key=f"key-{i}")
    )
    # Then one wins; every other is exhausted, or told to retry (and exhausted when it does)
    winners = [r for r in answers if r.status == 201]
    assert len(winners) == 1, [(r.status, r.body) for r in answers]
    assert all(r.status == 201 or r.code == "ACTION_EXHAUSTED" or retryable(r) for r in answers)
    for i, r in enumerate(answers):
        if retryable(r):
            late = requester.execute(PROJECT, a["cid"], "A1", body, idempotency_key=f"key-{i}")
            assert late.code == "ACTION_EXHAUSTED", (late.status, late.body)
    # And one execution was audited and one side effect delivered
    events = whole_chain(gate, a["cid"])
    assert [e["type"] for e in events].count("action.executed") == 1
    assert len(delivered(gate, {winners[0].body["execution_id"]})) == 1


def test_concurrent_reviews_each_append_one_event_and_a_rejection_is_final(gate: Any) -> None:
    # Given an approved plan
    a = approved(gate)
    reviewer = clients(gate)["reviewer"]
    before = len(whole_chain(gate, a["cid"]))

    def review(i: int) -> Response:
        return reviewer.review(
            PROJECT,
            a["cid"],
            {
                "decision": "reject" if i % 4 == 0 else "approve",
                "plan_digest": a["digest"],
                "revision": a["revision"],
            },
        )

    # When approvals and rejections of that digest arrive at once
    answers = at_once(THREADS, review)
    # Then each is recorded, or told to retry; every recorded one is exactly one event
    assert all(r.status == 201 or retryable(r) for r in answers), [(r.status, r.body) for r in answers]
    events = whole_chain(gate, a["cid"])
    recorded = [r for r in answers if r.status == 201]
    assert len(events) == before + len(recorded)
    assert sorted(r.body["seq"] for r in recorded) == list(range(before + 1, len(events) + 1))
    # And once a rejection is recorded the digest holds and executes nothing
    if any(r.body["decision"] == "reject" for r in recorded):
        decision = expect(clients(gate)["requester"].decision(PROJECT, a["cid"]), 200)
        assert "REVIEW_REJECTED" in {f["code"] for f in decision["findings"]}
        refused = clients(gate)["requester"].execute(
            PROJECT,
            a["cid"],
            "A1",
            {"plan_digest": a["digest"], "params": a["plan"]["actions"][0]["params"]},
            idempotency_key="after-reject",
        )
        assert refused.code == "PLAN_NOT_APPROVED"


def test_concurrent_evidence_and_reports_on_one_candidate_keep_one_chain(gate: Any) -> None:
    # Given an approved plan
    a = approved(gate)
    c = clients(gate)
    before = len(whole_chain(gate, a["cid"]))
    tasks = a["plan"]["tasks"]
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def write(i: int) -> Response:
        task = tasks[i % len(tasks)]
        check = task["checks"][0]
        if i < THREADS // 2 + 2:
            body = {
                "check_id": check["check_id"],
                "subject": "payments",
                "revision": a["revision"],
                "environment": "staging",
                "scope": [a["scopes"][o] for o in check["covers"]],
                "observed_at": now,
                "source": {"system": "ci", "run_id": str(i)},
            }
            if check["policy_ref"] == "lint":
                body["result"] = {"exit_code": 0, "artifacts": []}
            else:
                body["junit_xml"] = "<testsuite>" + '<testcase name="t"/>' * 3 + "</testsuite>"
            return c["publisher"].post_evidence(PROJECT, a["cid"], body)
        return c["requester"].report(
            PROJECT,
            a["cid"],
            task["task_id"],
            {"plan_digest": a["digest"], "status": "completed", "checks": []},
        )

    # When evidence for every check and reports of every task arrive at once
    answers = at_once(THREADS, write)
    # Then each is recorded (a report possibly as failed: its evidence had not landed) or told to retry
    assert all(r.status == 201 or retryable(r) for r in answers), [(r.status, r.body) for r in answers]
    recorded = [r for r in answers if r.status == 201]
    # And every recorded write is exactly one event, in one chain without fork or gap
    events = whole_chain(gate, a["cid"])
    assert len(events) == before + len(recorded)
    assert sorted(r.body["seq"] for r in recorded) == list(range(before + 1, len(events) + 1))
    # And attempts of one task are numbered 1, 2, ... without a repeat (rule 21)
    attempts: dict[str, list[int]] = {}
    state = expect(c["requester"].get_candidate(PROJECT, a["cid"]), 200)
    for task in state["tasks"]:
        attempts[task["task_id"]] = [x["attempt"] for x in task["attempts"]]
        assert attempts[task["task_id"]] == list(range(1, len(attempts[task["task_id"]]) + 1))


def test_one_change_created_many_times_at_once_is_one_candidate(gate: Any) -> None:
    # Given one change (subject, revision, environment)
    c = clients(gate)
    change = {
        "subject": "payments",
        "base_revision": secrets.token_hex(20),
        "revision": secrets.token_hex(20),
        "environment": "staging",
        "change": {"files": FILES},
    }
    # When it is created THREADS times at once, by the requester and the publisher
    answers = at_once(
        THREADS, lambda i: (c["requester"] if i % 2 else c["publisher"]).create_candidate(PROJECT, change)
    )
    # Then one candidate exists; every other answer names it, or says retry
    winners = [r for r in answers if r.status == 201]
    assert len(winners) == 1, [(r.status, r.body) for r in answers]
    cid = winners[0].body["candidate_id"]
    assert all(
        r.status == 201 or (r.code == "CANDIDATE_EXISTS" and r.body["candidate_id"] == cid) or retryable(r)
        for r in answers
    )
    found = expect(
        c["requester"].find_candidates(PROJECT, change["subject"], change["revision"], "staging"), 200
    )
    assert [x["candidate_id"] for x in found["candidates"]] == [cid]
    assert len(whole_chain(gate, cid)) == 1
