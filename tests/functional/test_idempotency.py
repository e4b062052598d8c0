"""Idempotency-Key through the HTTP handlers (DOMAIN.md rule 17, API.md conventions): a replay returns the
original status and body with `Idempotent-Replay: true` and appends nothing; an execution replay causes no
second side effect; only successes are kept; keys are scoped per route path (per action for executions)."""

from functools import partial
from typing import Any

import pytest

from sentinel_domain.errors import StoreUnavailable
from support import api as shared
from support.api import A1, NEW, OTHER_REV, C, audit_length, evidence, project_length, snapshot
from support.world import REV

A2 = {"action_id": "A2", "type": "notify", "params": {"channel": "release-room"}}


# ---- helpers ------------------------------------------------------------------------------------------
# The shared set-up requests (support/api.py), as this file uses them: every set-up write must be a first
# write (no Idempotent-Replay), and every plan carries a second task, T2.

T2 = {
    "task_id": "T2",
    "title": "Contract tests",
    "checks": [
        {
            "check_id": "C2",
            "policy_ref": "unit-tests",
            "command": "pytest -q payments-api/contract",
            "expected_exit_code": 0,
        }
    ],
}
ok = partial(shared.ok, fresh=True)
create = partial(shared.create, fresh=True)
ready_candidate = partial(shared.ready_candidate, fresh=True, extra_tasks=(T2,))
passed_task = partial(shared.passed_task, fresh=True)


def key(value: str) -> dict[str, str]:
    return {"idempotency-key": value}


# ---- replays ------------------------------------------------------------------------------------------


def _route(api, name: str) -> tuple[str | None, str, str, Any]:
    """Given the state a POST route needs: (candidate id, path, caller, body)."""
    if name == "candidates":
        return None, C, "requester", NEW
    if name == "proposals":
        cid = create(api)["candidate_id"]
        return cid, f"{C}/{cid}/proposals", "requester", None
    r = ready_candidate(api, approve=name != "reviews")
    if name == "change-context":
        return r.cid, r.path + "/change-context", "ci", {"change": {"files": ["docs/readme.md"]}}
    if name == "reviews":
        return (
            r.cid,
            r.path + "/reviews",
            "reviewer",
            {"decision": "approve", "plan_digest": r.digest, "revision": REV, "comment": "ok"},
        )
    if name == "evidence":
        return r.cid, r.path + "/evidence", "ci", evidence()
    if name == "reports":
        return (
            r.cid,
            r.path + "/tasks/T1/reports",
            "requester",
            {"plan_digest": r.digest, "status": "failed", "summary": "red"},
        )
    if name == "settlement":
        passed_task(api, r)
        return r.cid, r.path + "/tasks/T1/settlement", "reviewer", {"plan_digest": r.digest, "note": "fine"}
    if name == "decisions":
        return r.cid, r.path + "/decisions", "requester", None
    if name == "executions":
        return (
            r.cid,
            r.path + "/actions/A1/executions",
            "requester",
            {"plan_digest": r.digest, "params": A1["params"]},
        )
    raise AssertionError(name)


@pytest.mark.parametrize(
    "name",
    [
        "candidates",
        "change-context",
        "proposals",
        "reviews",
        "evidence",
        "reports",
        "settlement",
        "decisions",
        "executions",
    ],
)
def test_post_replay_returns_the_original_and_appends_nothing(api, name) -> None:
    # Given a successful POST with an Idempotency-Key
    cid, path, who, body = _route(api, name)
    status, headers, first = api.call("POST", path, as_=who, body=body, headers=key("k-1"))
    assert status == 201, first
    assert "idempotent-replay" not in headers
    cid = cid or first["candidate_id"]
    before, chain, project = snapshot(api.world), audit_length(api, cid), project_length(api)
    # When the same caller sends the same request with the same key, a minute later
    api.world.clock.advance(60)
    status, headers, again = api.call("POST", path, as_=who, body=body, headers=key("k-1"))
    # Then the original status and body come back, marked as a replay
    assert status == 201, again
    assert again == first
    assert headers.get("idempotent-replay") == "true", headers
    assert headers.get("content-type", "").startswith("application/json")
    # And nothing was appended: same chain length, same store
    assert audit_length(api, cid) == chain and project_length(api) == project
    assert snapshot(api.world) == before


def test_candidate_replay_creates_no_second_candidate(api) -> None:
    first = ok(api, "POST", C, body=NEW, headers=key("create-1"))
    status, headers, again = api.call("POST", C, body=NEW, headers=key("create-1"))
    # Then the replay is the first 201 (not 409 CANDIDATE_EXISTS), and one candidate exists
    assert (status, again, headers.get("idempotent-replay")) == (201, first, "true")
    listed = api.call("GET", C)[2]["candidates"]
    assert [c["candidate_id"] for c in listed] == [first["candidate_id"]]
    assert audit_length(api, first["candidate_id"]) == first["seq"] == 1


def test_execution_replay_causes_no_second_outbox_item(api) -> None:
    # Given an approved plan declaring A1
    r = ready_candidate(api)
    body = {"plan_digest": r.digest, "params": A1["params"]}
    path = r.path + "/actions/A1/executions"
    # When the requester executes A1, then replays the same key twice
    first = ok(api, "POST", path, body=body, headers=key("exec-1"))
    chain = audit_length(api, r.cid)
    for _ in range(2):
        status, headers, again = api.call("POST", path, body=body, headers=key("exec-1"))
        assert (status, again, headers.get("idempotent-replay")) == (201, first, "true")
    # Then exactly one side effect left through the outbox, and one execution is on the chain
    outbox = api.world.store.outbox
    assert len(outbox) == 1 and outbox[0]["execution_id"] == first["execution_id"]
    assert audit_length(api, r.cid) == chain == first["seq"]
    assert len(api.call("GET", r.path)[2]["executions"]) == 1


def test_execution_replay_is_looked_up_before_the_checks(api) -> None:
    # Given A1 (max_executions 1) executed once: a new key is now ACTION_EXHAUSTED
    r = ready_candidate(api)
    body = {"plan_digest": r.digest, "params": A1["params"]}
    path = r.path + "/actions/A1/executions"
    first = ok(api, "POST", path, body=body, headers=key("exec-1"))
    assert api.call("POST", path, body=body, headers=key("exec-2"))[2]["code"] == "ACTION_EXHAUSTED"
    # When the first key is replayed after the approval expired (for the life of the candidate)
    api.world.clock.advance(2 * 86400)
    status, headers, again = api.call("POST", path, body=body, headers=key("exec-1"))
    # Then it replays the first result, never a refusal, and no second side effect
    assert (status, again, headers.get("idempotent-replay")) == (201, first, "true")
    assert len(api.world.store.outbox) == 1


def test_decision_replay_returns_the_first_verdict(api) -> None:
    r = ready_candidate(api)
    first = ok(api, "POST", r.path + "/decisions", headers=key("d-1"))
    # When evidence arrives and time passes, then the key is replayed
    ok(api, "POST", r.path + "/evidence", as_="ci", body=evidence())
    api.world.clock.advance(3600)
    chain = audit_length(api, r.cid)
    status, headers, again = api.call("POST", r.path + "/decisions", headers=key("d-1"))
    # Then the first recorded verdict comes back unchanged, and nothing new is recorded
    assert (status, again, headers.get("idempotent-replay")) == (201, first, "true")
    assert audit_length(api, r.cid) == chain


def test_a_stored_plan_answers_its_digest_as_etag_and_a_replayed_proposal_only_the_replay_marker(api) -> None:
    # Given a candidate with no plan yet
    cid = create(api)["candidate_id"]
    # When the service drafts a plan under an Idempotency-Key
    status, headers, first = api.call("POST", f"{C}/{cid}/proposals", headers=key("p-1"))
    # Then it answers 201 with the plan digest as its ETag, which the candidate answers too
    assert (status, headers.get("etag")) == (201, f'"{first["plan_digest"]}"'), first
    assert api.call("GET", f"{C}/{cid}")[1].get("etag") == f'"{first["plan_digest"]}"'
    # When the proposal is replayed
    status, headers, again = api.call("POST", f"{C}/{cid}/proposals", headers=key("p-1"))
    # Then the first status and body come back with the replay marker and no other header of the first answer
    assert (status, again, headers.get("idempotent-replay")) == (201, first, "true")
    assert "etag" not in headers, headers
    # And an amendment naming that ETag is stored and answers the new digest as its ETag
    status, headers, amended = api.call(
        "PUT", f"{C}/{cid}/plan", body=first["plan"], headers={"if-match": f'"{first["plan_digest"]}"'}
    )
    assert (status, headers.get("etag")) == (201, f'"{amended["plan_digest"]}"'), amended


# ---- only successes are kept --------------------------------------------------------------------------


def test_refused_execution_key_can_be_used_once_the_refusal_is_gone(api) -> None:
    # Given an unapproved plan: an execution with key K is refused
    r = ready_candidate(api, approve=False)
    body = {"plan_digest": r.digest, "params": A1["params"]}
    path = r.path + "/actions/A1/executions"
    status, _h, refused = api.call("POST", path, body=body, headers=key("K"))
    assert (status, refused["code"]) == (403, "PLAN_NOT_APPROVED")
    # When a reviewer approves and the same request is sent with the same key
    ok(
        api,
        "POST",
        r.path + "/reviews",
        as_="reviewer",
        body={"decision": "approve", "plan_digest": r.digest, "revision": REV},
    )
    status, headers, done = api.call("POST", path, body=body, headers=key("K"))
    # Then it executes: the refusal was not kept for replay
    assert status == 201, done
    assert "idempotent-replay" not in headers
    assert len(api.world.store.outbox) == 1


def test_refused_request_then_a_valid_one_with_the_same_key_succeeds(api) -> None:
    r = ready_candidate(api)
    # Evidence: a future-dated body refused, then a valid body with the same key
    status, _h, body = api.call(
        "POST",
        r.path + "/evidence",
        as_="ci",
        body=evidence(observed_at="2026-11-30T00:00:00Z"),
        headers=key("ev"),
    )
    assert (status, body["code"]) == (422, "EVIDENCE_FUTURE_DATED")
    stored = ok(api, "POST", r.path + "/evidence", as_="ci", body=evidence(), headers=key("ev"))
    assert stored["outcome"] == "pass"
    # Candidates: an unknown environment refused, then a valid candidate with the same key
    status, _h, body = api.call(
        "POST", C, body=dict(NEW, revision=OTHER_REV, environment="qa"), headers=key("c")
    )
    assert (status, body["code"]) == (422, "UNKNOWN_ENVIRONMENT")
    ok(api, "POST", C, body=dict(NEW, revision=OTHER_REV), headers=key("c"))
    # Reviews: a wrong digest refused, then the right one with the same key
    other = ready_candidate(api, approve=False, revision="d" * 40)
    review = {"decision": "approve", "plan_digest": "0" * 64, "revision": "d" * 40}
    status, _h, body = api.call(
        "POST", other.path + "/reviews", as_="reviewer", body=review, headers=key("rv")
    )
    assert (status, body["code"]) == (409, "DIGEST_MISMATCH")
    ok(
        api,
        "POST",
        other.path + "/reviews",
        as_="reviewer",
        body=dict(review, plan_digest=other.digest),
        headers=key("rv"),
    )


def test_a_store_failure_keeps_no_key(api) -> None:
    # Given the store fails every write once
    r = ready_candidate(api)
    store = api.world.gate.store

    class FailingAppend:
        def __getattr__(self, name: str):
            if name == "append":

                def fail(_append):
                    raise StoreUnavailable("append failed")

                return fail
            return getattr(store, name)

    api.world.gate.store = FailingAppend()
    try:
        status, headers, body = api.call(
            "POST", r.path + "/evidence", as_="ci", body=evidence(), headers=key("ev")
        )
    finally:
        api.world.gate.store = store
    assert (status, body["code"]) == (503, "STATE_UNAVAILABLE") and headers.get("retry-after")
    # When the request is retried with the same key / Then it is processed, not stuck in progress
    ok(api, "POST", r.path + "/evidence", as_="ci", body=evidence(), headers=key("ev"))


# ---- keys are scoped per route path -------------------------------------------------------------------


def test_the_same_key_on_different_routes_of_one_candidate_is_independent(api) -> None:
    r = ready_candidate(api)
    # When one key is used on evidence, on two tasks' reports, on a decision and on an execution
    ok(api, "POST", r.path + "/evidence", as_="ci", body=evidence(), headers=key("shared"))
    ok(
        api,
        "POST",
        r.path + "/tasks/T1/reports",
        body={"plan_digest": r.digest, "status": "failed"},
        headers=key("shared"),
    )
    ok(
        api,
        "POST",
        r.path + "/tasks/T2/reports",
        body={"plan_digest": r.digest, "status": "failed"},
        headers=key("shared"),
    )
    ok(api, "POST", r.path + "/decisions", headers=key("shared"))
    ok(
        api,
        "POST",
        r.path + "/actions/A1/executions",
        body={"plan_digest": r.digest, "params": A1["params"]},
        headers=key("shared"),
    )
    # Then each was processed (none a replay, none a conflict): five accepted writes after the setup
    assert audit_length(api, r.cid) == 4 + 5


def test_the_same_key_on_two_candidates_is_independent(api) -> None:
    first = ready_candidate(api)
    second = ready_candidate(api, revision=OTHER_REV)
    a = ok(api, "POST", first.path + "/evidence", as_="ci", body=evidence(), headers=key("shared"))
    b = ok(
        api,
        "POST",
        second.path + "/evidence",
        as_="ci",
        body=evidence(revision=OTHER_REV),
        headers=key("shared"),
    )
    assert a["evidence_id"] != b["evidence_id"]


def test_the_same_key_on_project_and_candidate_routes_is_independent(api) -> None:
    created = ok(api, "POST", C, body=NEW, headers=key("shared"))
    ok(
        api,
        "POST",
        f"{C}/{created['candidate_id']}/change-context",
        as_="ci",
        body={"change": NEW["change"]},
        headers=key("shared"),
    )
    ok(api, "POST", f"{C}/{created['candidate_id']}/proposals", headers=key("shared"))


def test_execution_keys_are_scoped_per_action(api) -> None:
    # Given a plan declaring A1 (dispatch_checks) and A2 (notify)
    r = ready_candidate(api, actions=[A1, A2])
    # When both run with one key
    one = ok(
        api,
        "POST",
        r.path + "/actions/A1/executions",
        body={"plan_digest": r.digest, "params": A1["params"]},
        headers=key("shared"),
    )
    two = ok(
        api,
        "POST",
        r.path + "/actions/A2/executions",
        body={"plan_digest": r.digest, "params": A2["params"]},
        headers=key("shared"),
    )
    # Then both side effects left through the outbox
    assert one["execution_id"] != two["execution_id"]
    assert sorted(item["action_id"] for item in api.world.store.outbox) == ["A1", "A2"]
