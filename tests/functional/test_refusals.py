"""Every refusal code of DOMAIN.md, through the HTTP handlers: the status API.md names, a problem document,
and nothing changed (no fact, no audit event, no outbox item, no idempotency record, no claim)."""

import base64
import copy
import json
from typing import Any

import pytest

from sentinel_domain.canonical import digest
from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.models import EvidenceRequest, ExecutionRequest
from sentinel_domain.ports import IdempotencyRecord, StreamRef
from sentinel_gateway.events import http_event, response_parts, with_authorizer
from sentinel_gateway.gateway import LambdaContext
from sentinel_service.http.routes import route_for
from support.api import (
    A1,
    NEW,
    OTHER_REV,
    C,
    P,
    Ready,
    audit_length,
    create,
    evidence,
    ok,
    passed_task,
    plan_body,
    project_length,
    ready_candidate,
    snapshot,
)
from support.world import CONFIG, REV, UNIT_POLICY, actor

NO_DIGEST = "0" * 64
SMALL = 256 * 1024
LARGE = 2 * 1024 * 1024


# ---- helpers ------------------------------------------------------------------------------------------


def assert_problem(status: int, headers: dict[str, str], body: Any, expected_status: int, code: str) -> None:
    assert status == expected_status, body
    assert headers.get("content-type", "").startswith("application/problem+json"), headers
    assert isinstance(body, dict), body
    for name in ("type", "title", "status", "detail", "code"):
        assert name in body, f"problem document without {name}: {body}"
    assert isinstance(body["type"], str) and body["type"]
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    assert body["status"] == expected_status, body
    assert body["code"] == code, body


def refused(
    api,
    expected_status: int,
    code: str,
    method: str,
    path: str,
    *,
    cid: str | None = None,
    as_: str | None = "requester",
    **kw: Any,
) -> tuple[dict[str, str], dict[str, Any]]:
    """When the call is made, then it is refused with a problem document, and nothing changed."""
    before = snapshot(api.world)
    lengths = (audit_length(api, cid) if cid else None, project_length(api))
    status, headers, body = api.call(method, path, as_=as_, **kw)
    assert_problem(status, headers, body, expected_status, code)
    assert snapshot(api.world) == before, "a refused request changed the store"
    assert (audit_length(api, cid) if cid else None, project_length(api)) == lengths
    return headers, body


def execute(
    api,
    ready: Ready,
    key: str | None,
    action: str = "A1",
    params: Any = None,
    as_: str = "requester",
    plan_digest: str | None = None,
):
    headers = {"idempotency-key": key} if key is not None else {}
    body = {"plan_digest": plan_digest or ready.digest, "params": A1["params"] if params is None else params}
    return api.call("POST", f"{ready.path}/actions/{action}/executions", as_=as_, body=body, headers=headers)


@pytest.fixture
def add_actor(api, monkeypatch):
    """Extends the fake authorizer's token table (tests/functional/conftest.py ACTORS) for one test."""
    table = api.gateway.authorizer().__globals__["ACTORS"]

    def add(name: str, principal) -> None:
        monkeypatch.setitem(table, name, principal)

    return add


# ---- FORBIDDEN_ROLE -----------------------------------------------------------------------------------


def test_auditor_creating_a_candidate_is_forbidden_role(api) -> None:
    # Given an auditor (a role in the project, but not requester or publisher)
    # When it creates a candidate / Then 403 FORBIDDEN_ROLE and no candidate exists
    refused(api, 403, "FORBIDDEN_ROLE", "POST", C, as_="auditor", body=NEW)
    assert api.call("GET", C, as_="auditor")[2]["candidates"] == []


def test_requester_putting_config_is_forbidden_role(api) -> None:
    # Given the requester (no admin role) and the current config ETag
    _s, headers, _b = api.call("GET", P + "/config", as_="admin")
    # When it replaces the configuration, even naming the current version / Then 403 and the config is intact
    refused(
        api, 403, "FORBIDDEN_ROLE", "PUT", P + "/config", body=CONFIG, headers={"if-match": headers["etag"]}
    )
    assert api.call("GET", P + "/config", as_="admin")[1]["etag"] == headers["etag"]


@pytest.mark.parametrize(
    "who, method, suffix, body",
    [
        ("requester", "PUT", "/policies/unit-tests", UNIT_POLICY),
        ("requester", "GET", "/audit", None),
        ("reviewer", "POST", "/candidates", NEW),
    ],
)
def test_wrong_role_on_project_routes_is_forbidden_role(api, who, method, suffix, body) -> None:
    refused(api, 403, "FORBIDDEN_ROLE", method, P + suffix, as_=who, body=body)


def test_wrong_role_on_candidate_routes_is_forbidden_role(api) -> None:
    # Given a ready candidate
    r = ready_candidate(api)
    # When principals with a role, but the wrong one, write to it / Then 403 FORBIDDEN_ROLE each time
    refused(
        api,
        403,
        "FORBIDDEN_ROLE",
        "PUT",
        r.path + "/plan",
        cid=r.cid,
        as_="reviewer",
        body=plan_body(r.obligation),
        headers={"if-match": f'"{r.digest}"'},
    )
    refused(
        api,
        403,
        "FORBIDDEN_ROLE",
        "POST",
        r.path + "/proposals",
        cid=r.cid,
        as_="reviewer",
        headers={"if-match": f'"{r.digest}"'},
    )
    refused(
        api,
        403,
        "FORBIDDEN_ROLE",
        "POST",
        r.path + "/change-context",
        cid=r.cid,
        as_="reviewer",
        body={"change": {"files": ["x.py"]}},
    )
    refused(
        api, 403, "FORBIDDEN_ROLE", "POST", r.path + "/evidence", cid=r.cid, as_="auditor", body=evidence()
    )
    refused(
        api,
        403,
        "FORBIDDEN_ROLE",
        "POST",
        r.path + "/tasks/T1/reports",
        cid=r.cid,
        as_="auditor",
        body={"plan_digest": r.digest, "status": "failed"},
    )
    refused(
        api,
        403,
        "FORBIDDEN_ROLE",
        "POST",
        r.path + "/actions/A1/executions",
        cid=r.cid,
        as_="reviewer",
        body={"plan_digest": r.digest, "params": A1["params"]},
        headers={"idempotency-key": "k-1"},
    )
    refused(
        api,
        403,
        "FORBIDDEN_ROLE",
        "POST",
        r.path + "/actions/A1/executions",
        cid=r.cid,
        as_="untrusted-ci",
        body={"plan_digest": r.digest, "params": A1["params"]},
        headers={"idempotency-key": "k-2"},
    )


# ---- NOT_FOUND ----------------------------------------------------------------------------------------


def _every_route(r: Ready) -> list[tuple[str, str, Any, dict[str, str]]]:
    key = {"idempotency-key": "k-404"}
    return [
        ("GET", P + "/config", None, {}),
        ("PUT", P + "/config", CONFIG, {"if-match": '"1"'}),
        ("PUT", P + "/policies/unit-tests", UNIT_POLICY, {}),
        ("GET", P + "/policies", None, {}),
        ("GET", P + "/policies/unit-tests", None, {}),
        ("GET", P + "/audit", None, {}),
        ("POST", C, dict(NEW, revision=OTHER_REV), key),
        ("GET", C, None, {}),
        ("GET", r.path, None, {}),
        ("POST", r.path + "/change-context", {"change": NEW["change"]}, key),
        ("GET", r.path + "/decision", None, {}),
        ("POST", r.path + "/decisions", None, key),
        ("GET", r.path + "/audit", None, {}),
        ("POST", r.path + "/proposals", None, {"if-match": f'"{r.digest}"', **key}),
        ("PUT", r.path + "/plan", plan_body(r.obligation), {"if-match": f'"{r.digest}"'}),
        ("POST", r.path + "/reviews", {"decision": "approve", "plan_digest": r.digest, "revision": REV}, key),
        ("POST", r.path + "/tasks/T1/settlement", {"plan_digest": r.digest, "note": ""}, key),
        ("POST", r.path + "/actions/A1/executions", {"plan_digest": r.digest, "params": A1["params"]}, key),
        ("POST", r.path + "/evidence", evidence(), key),
        ("POST", r.path + "/tasks/T1/reports", {"plan_digest": r.digest, "status": "failed"}, key),
    ]


def test_outsider_gets_not_found_on_every_object_type(api) -> None:
    # Given a ready candidate in the project, and a principal with no role in it
    r = ready_candidate(api)
    # When the outsider calls every project and candidate route with a valid request
    for method, path, body, headers in _every_route(r):
        # Then each is 404 NOT_FOUND (it must not learn what exists) and nothing changes
        refused(api, 404, "NOT_FOUND", method, path, cid=r.cid, as_="outsider", body=body, headers=headers)


def test_unknown_candidate_is_not_found_on_every_candidate_route(api) -> None:
    # Given a project member and a candidate id that does not exist
    r = ready_candidate(api)
    ghost = Ready("cand_does_not_exist", r.digest, r.obligation)
    who = {"/reviews": "reviewer", "/settlement": "reviewer", "/evidence": "ci"}
    for method, path, body, headers in _every_route(ghost):
        if "/candidates/" not in path:
            continue
        as_ = next((name for suffix, name in who.items() if path.endswith(suffix)), "requester")
        # When it calls the route / Then 404 NOT_FOUND and nothing changes (no stream, no key kept)
        refused(api, 404, "NOT_FOUND", method, path, cid=r.cid, as_=as_, body=body, headers=headers)


def test_unknown_project_is_not_found(api) -> None:
    # Given principals with roles in "demo" only, and a project that does not exist
    for who, method, path, body in [
        ("admin", "GET", "/v1/projects/nope/config", None),
        ("admin", "PUT", "/v1/projects/nope/config", CONFIG),
        ("admin", "GET", "/v1/projects/nope/audit", None),
        ("requester", "POST", "/v1/projects/nope/candidates", NEW),
        ("requester", "GET", "/v1/projects/nope/candidates", None),
        ("auditor", "GET", "/v1/projects/nope/candidates/cand_1/audit", None),
    ]:
        # When they call it / Then 404 NOT_FOUND, never a hint that it is a role problem
        refused(api, 404, "NOT_FOUND", method, path, as_=who, body=body)


def test_unknown_policy_and_task_are_not_found(api) -> None:
    r = ready_candidate(api)
    refused(api, 404, "NOT_FOUND", "GET", P + "/policies/nope", as_="auditor")
    refused(api, 404, "NOT_FOUND", "GET", P + "/policies/unit-tests", as_="auditor", query={"version": "9"})
    refused(
        api,
        404,
        "NOT_FOUND",
        "POST",
        r.path + "/tasks/T9/reports",
        cid=r.cid,
        body={"plan_digest": r.digest, "status": "failed"},
    )


# ---- reviews: kind before role, SELF_APPROVAL, DIGEST_MISMATCH, REVISION_MISMATCH --------------------


def test_ci_reviewing_is_reviewer_not_human(api) -> None:
    r = ready_candidate(api, approve=False)
    for who in ("ci", "untrusted-ci"):
        refused(
            api,
            403,
            "REVIEWER_NOT_HUMAN",
            "POST",
            r.path + "/reviews",
            cid=r.cid,
            as_=who,
            body={"decision": "approve", "plan_digest": r.digest, "revision": REV},
        )


def test_agent_reviewing_is_agent_cannot_review(api) -> None:
    r = ready_candidate(api, approve=False)
    refused(
        api,
        403,
        "AGENT_CANNOT_REVIEW",
        "POST",
        r.path + "/reviews",
        cid=r.cid,
        as_="requester",
        body={"decision": "approve", "plan_digest": r.digest, "revision": REV},
    )


def test_kind_is_checked_before_role(api, add_actor) -> None:
    # Given an agent and a ci principal that (wrongly) hold the reviewer role, and a human without it
    add_actor("rogue-agent", actor("rogue-agent", "agent", "reviewer", "requester", sponsor="hank-human"))
    add_actor("rogue-ci", actor("rogue-ci", "ci", "reviewer", "publisher"))
    r = ready_candidate(api, approve=False)
    review = {"decision": "approve", "plan_digest": r.digest, "revision": REV}
    # When each reviews / Then kind decides first, whatever the roles; a human without the role is 403
    # FORBIDDEN_ROLE
    refused(
        api,
        403,
        "AGENT_CANNOT_REVIEW",
        "POST",
        r.path + "/reviews",
        cid=r.cid,
        as_="rogue-agent",
        body=review,
    )
    refused(
        api, 403, "REVIEWER_NOT_HUMAN", "POST", r.path + "/reviews", cid=r.cid, as_="rogue-ci", body=review
    )
    refused(
        api, 403, "AGENT_CANNOT_REVIEW", "POST", r.path + "/reviews", cid=r.cid, as_="requester", body=review
    )
    refused(
        api,
        403,
        "REVIEWER_NOT_HUMAN",
        "POST",
        r.path + "/reviews",
        cid=r.cid,
        as_="untrusted-ci",
        body=review,
    )
    refused(api, 403, "FORBIDDEN_ROLE", "POST", r.path + "/reviews", cid=r.cid, as_="auditor", body=review)
    refused(api, 403, "FORBIDDEN_ROLE", "POST", r.path + "/reviews", cid=r.cid, as_="admin", body=review)
    # And kind is checked before the digest: a wrong digest from an agent is still AGENT_CANNOT_REVIEW
    refused(
        api,
        403,
        "AGENT_CANNOT_REVIEW",
        "POST",
        r.path + "/reviews",
        cid=r.cid,
        as_="requester",
        body=dict(review, plan_digest=NO_DIGEST),
    )
    refused(
        api,
        403,
        "REVIEWER_NOT_HUMAN",
        "POST",
        r.path + "/reviews",
        cid=r.cid,
        as_="ci",
        body=dict(review, plan_digest=NO_DIGEST),
    )


def test_settlement_checks_kind_before_role(api) -> None:
    r = ready_candidate(api)
    passed_task(api, r)
    settle = {"plan_digest": r.digest, "note": "reconciled"}
    refused(
        api,
        403,
        "AGENT_CANNOT_REVIEW",
        "POST",
        r.path + "/tasks/T1/settlement",
        cid=r.cid,
        as_="requester",
        body=settle,
    )
    refused(
        api,
        403,
        "REVIEWER_NOT_HUMAN",
        "POST",
        r.path + "/tasks/T1/settlement",
        cid=r.cid,
        as_="ci",
        body=settle,
    )
    refused(
        api,
        403,
        "FORBIDDEN_ROLE",
        "POST",
        r.path + "/tasks/T1/settlement",
        cid=r.cid,
        as_="auditor",
        body=settle,
    )


def test_sponsor_of_the_creator_cannot_approve(api, add_actor) -> None:
    # Given hank-human, a human reviewer who sponsors the agent that created and planned the candidate
    add_actor("hank", actor("hank-human", "human", "reviewer", "requester"))
    r = ready_candidate(api, approve=False)
    approve = {"decision": "approve", "plan_digest": r.digest, "revision": REV}
    # When hank approves / Then 403 SELF_APPROVAL, nothing recorded
    refused(api, 403, "SELF_APPROVAL", "POST", r.path + "/reviews", cid=r.cid, as_="hank", body=approve)
    # And self-approval is judged before the digest (API.md order)
    refused(
        api,
        403,
        "SELF_APPROVAL",
        "POST",
        r.path + "/reviews",
        cid=r.cid,
        as_="hank",
        body=dict(approve, plan_digest=NO_DIGEST),
    )
    # But hank may reject it, and another reviewer may approve
    assert (
        ok(api, "POST", r.path + "/reviews", as_="hank", body=dict(approve, decision="reject"))["decision"]
        == "reject"
    )


def test_creator_cannot_approve(api, add_actor) -> None:
    # Given hank-human creates the candidate himself, and the ci principal submits the plan
    add_actor("hank", actor("hank-human", "human", "reviewer", "requester"))
    r = ready_candidate(api, approve=False, creator="hank", author="ci")
    # When hank approves / Then 403 SELF_APPROVAL
    refused(
        api,
        403,
        "SELF_APPROVAL",
        "POST",
        r.path + "/reviews",
        cid=r.cid,
        as_="hank",
        body={"decision": "approve", "plan_digest": r.digest, "revision": REV},
    )
    # While an uninvolved reviewer may approve
    ok(
        api,
        "POST",
        r.path + "/reviews",
        as_="reviewer",
        body={"decision": "approve", "plan_digest": r.digest, "revision": REV},
    )


def test_author_of_an_earlier_plan_version_cannot_approve(api, add_actor) -> None:
    # Given ci creates the candidate, hank authors plan v1 and ci amends it to v2
    add_actor("hank", actor("hank-human", "human", "reviewer", "requester"))
    r = ready_candidate(api, approve=False, creator="ci", author="hank")
    v2 = ok(
        api,
        "PUT",
        r.path + "/plan",
        as_="ci",
        body=plan_body(r.obligation, actions=[]),
        headers={"if-match": f'"{r.digest}"'},
    )
    # When hank approves v2 / Then 403 SELF_APPROVAL (he authored a version up to the approved digest)
    refused(
        api,
        403,
        "SELF_APPROVAL",
        "POST",
        r.path + "/reviews",
        cid=r.cid,
        as_="hank",
        body={"decision": "approve", "plan_digest": v2["plan_digest"], "revision": REV},
    )


def test_review_of_a_wrong_digest_is_digest_mismatch(api) -> None:
    r = ready_candidate(api, approve=False)
    refused(
        api,
        409,
        "DIGEST_MISMATCH",
        "POST",
        r.path + "/reviews",
        cid=r.cid,
        as_="reviewer",
        body={"decision": "approve", "plan_digest": NO_DIGEST, "revision": REV},
    )


def test_review_when_no_plan_exists_is_digest_mismatch(api) -> None:
    cid = create(api)["candidate_id"]
    refused(
        api,
        409,
        "DIGEST_MISMATCH",
        "POST",
        f"{C}/{cid}/reviews",
        cid=cid,
        as_="reviewer",
        body={"decision": "approve", "plan_digest": NO_DIGEST, "revision": REV},
    )


def test_review_of_an_older_digest_is_digest_mismatch(api) -> None:
    r = ready_candidate(api, approve=False)
    ok(
        api,
        "PUT",
        r.path + "/plan",
        body=plan_body(r.obligation, actions=[]),
        headers={"if-match": f'"{r.digest}"'},
    )
    refused(
        api,
        409,
        "DIGEST_MISMATCH",
        "POST",
        r.path + "/reviews",
        cid=r.cid,
        as_="reviewer",
        body={"decision": "approve", "plan_digest": r.digest, "revision": REV},
    )


def test_review_of_another_revision_is_revision_mismatch(api) -> None:
    r = ready_candidate(api, approve=False)
    refused(
        api,
        409,
        "REVISION_MISMATCH",
        "POST",
        r.path + "/reviews",
        cid=r.cid,
        as_="reviewer",
        body={"decision": "approve", "plan_digest": r.digest, "revision": OTHER_REV},
    )
    # And the same revision in upper case is the same commit: accepted
    ok(
        api,
        "POST",
        r.path + "/reviews",
        as_="reviewer",
        body={"decision": "approve", "plan_digest": r.digest, "revision": REV.upper()},
    )


def test_review_naming_a_branch_is_mutable_revision(api) -> None:
    r = ready_candidate(api, approve=False)
    refused(
        api,
        422,
        "MUTABLE_REVISION",
        "POST",
        r.path + "/reviews",
        cid=r.cid,
        as_="reviewer",
        body={"decision": "approve", "plan_digest": r.digest, "revision": "main"},
    )


# ---- candidates: MUTABLE_REVISION, CANDIDATE_EXISTS, UNKNOWN_ENVIRONMENT, TOO_MANY_OBLIGATIONS -------


@pytest.mark.parametrize(
    "field, value",
    [
        ("revision", "main"),
        ("base_revision", "main"),
        ("revision", "refs/heads/main"),
        ("revision", "a" * 39),
        ("revision", "a" * 12),
        ("revision", "g" * 40),
        ("revision", "HEAD"),
    ],
)
def test_branch_name_as_revision_on_create_is_mutable_revision(api, field, value) -> None:
    refused(api, 422, "MUTABLE_REVISION", "POST", C, body=dict(NEW, **{field: value}))


def test_branch_name_as_revision_on_evidence_is_mutable_revision(api) -> None:
    r = ready_candidate(api)
    refused(
        api,
        422,
        "MUTABLE_REVISION",
        "POST",
        r.path + "/evidence",
        cid=r.cid,
        as_="ci",
        body=evidence(revision="main"),
    )


def test_second_candidate_is_candidate_exists_with_the_existing_id(api) -> None:
    # Given an open candidate for (payments, REV, staging)
    first = create(api)
    # When the same triple is created again, by another principal and with the revision in upper case
    for who, body in [("requester", NEW), ("ci", dict(NEW, revision=REV.upper()))]:
        _h, problem = refused(
            api, 409, "CANDIDATE_EXISTS", "POST", C, cid=first["candidate_id"], as_=who, body=body
        )
        # Then 409 CANDIDATE_EXISTS names the existing id
        assert problem["candidate_id"] == first["candidate_id"]


def test_unlisted_environment_is_unknown_environment(api) -> None:
    refused(api, 422, "UNKNOWN_ENVIRONMENT", "POST", C, body=dict(NEW, environment="qa"))


def test_2001_obligations_is_too_many_obligations(api) -> None:
    # Given a change of 2001 files that match no derivation rule (each owes the unclassified policy)
    files = [f"misc/file-{n:04d}.txt" for n in range(2001)]
    # When a candidate is created from it / Then 422 TOO_MANY_OBLIGATIONS, nothing stored
    refused(api, 422, "TOO_MANY_OBLIGATIONS", "POST", C, body=dict(NEW, change={"files": files}))
    # And 2000 obligations are accepted
    created = create(api, change={"files": files[:2000]})
    assert len(created["obligations"]) == 2000


def test_change_context_past_2000_obligations_is_too_many_obligations(api) -> None:
    # Given a candidate with one obligation
    cid = create(api)["candidate_id"]
    # When a change context would add 2000 more / Then 422 TOO_MANY_OBLIGATIONS, nothing added
    files = [f"misc/file-{n:04d}.txt" for n in range(2000)]
    refused(
        api,
        422,
        "TOO_MANY_OBLIGATIONS",
        "POST",
        f"{C}/{cid}/change-context",
        cid=cid,
        as_="ci",
        body={"change": {"files": files}},
    )


# ---- plans: PLAN_PREFLIGHT_FAILED, VERSION_CONFLICT ---------------------------------------------------


def test_failing_plan_is_plan_preflight_failed_with_findings(api) -> None:
    cid = create(api)["candidate_id"]
    # Given a plan that names an unknown policy, leaves the obligation uncovered and declares a bad action
    plan = {
        "tasks": [
            {
                "task_id": "T1",
                "title": "t",
                "checks": [{"check_id": "C1", "policy_ref": "nope", "command": "x", "expected_exit_code": 0}],
            }
        ],
        "actions": [{"action_id": "A1", "type": "promote", "params": {"environment": "staging"}}],
    }
    # When it is submitted / Then 422 PLAN_PREFLIGHT_FAILED with one finding per problem, nothing stored
    _h, problem = refused(api, 422, "PLAN_PREFLIGHT_FAILED", "PUT", f"{C}/{cid}/plan", cid=cid, body=plan)
    codes = sorted(f["code"] for f in problem["findings"])
    assert codes == ["PLAN_ACTION_NOT_ALLOWED", "PLAN_OBLIGATION_UNCOVERED", "PLAN_UNKNOWN_POLICY"], problem
    assert api.call("GET", f"{C}/{cid}")[2]["plan_versions"] == []


def test_identity_or_unknown_field_in_a_plan_is_preflight_schema_invalid(api) -> None:
    created = create(api)
    cid, obligation = created["candidate_id"], created["obligations"][0]["obligation_id"]
    for extra in ({"author": "rita-reviewer"}, {"approved": True}):
        _h, problem = refused(
            api,
            422,
            "PLAN_PREFLIGHT_FAILED",
            "PUT",
            f"{C}/{cid}/plan",
            cid=cid,
            body=dict(plan_body(obligation), **extra),
        )
        assert [f["code"] for f in problem["findings"]] == ["PLAN_SCHEMA_INVALID"], problem


def test_plan_amendment_without_if_match_is_428_and_stale_is_412(api) -> None:
    r = ready_candidate(api, approve=False)
    amended = plan_body(r.obligation, actions=[])
    # When the plan is amended without If-Match / Then 428 VERSION_CONFLICT
    refused(api, 428, "VERSION_CONFLICT", "PUT", r.path + "/plan", cid=r.cid, body=amended)
    # When it names a stale digest / Then 412 VERSION_CONFLICT
    refused(
        api,
        412,
        "VERSION_CONFLICT",
        "PUT",
        r.path + "/plan",
        cid=r.cid,
        body=amended,
        headers={"if-match": f'"{NO_DIGEST}"'},
    )
    # And after a real amendment, the first digest is stale
    ok(api, "PUT", r.path + "/plan", body=amended, headers={"if-match": f'"{r.digest}"'})
    refused(
        api,
        412,
        "VERSION_CONFLICT",
        "PUT",
        r.path + "/plan",
        cid=r.cid,
        body=plan_body(r.obligation),
        headers={"if-match": f'"{r.digest}"'},
    )


def test_proposal_over_an_existing_plan_without_if_match_is_428(api) -> None:
    r = ready_candidate(api, approve=False)
    refused(api, 428, "VERSION_CONFLICT", "POST", r.path + "/proposals", cid=r.cid)
    refused(
        api,
        412,
        "VERSION_CONFLICT",
        "POST",
        r.path + "/proposals",
        cid=r.cid,
        headers={"if-match": f'"{NO_DIGEST}"'},
    )


def test_first_plan_naming_a_version_is_version_conflict(api) -> None:
    created = create(api)
    cid = created["candidate_id"]
    refused(
        api,
        412,
        "VERSION_CONFLICT",
        "PUT",
        f"{C}/{cid}/plan",
        cid=cid,
        body=plan_body(created["obligations"][0]["obligation_id"]),
        headers={"if-match": f'"{NO_DIGEST}"'},
    )


def test_config_replacement_without_if_match_is_428_and_stale_is_412(api) -> None:
    # Given a configured project (version 1)
    _s, headers, _b = api.call("GET", P + "/config", as_="admin")
    # When it is replaced without If-Match / Then 428 VERSION_CONFLICT
    refused(api, 428, "VERSION_CONFLICT", "PUT", P + "/config", as_="admin", body=CONFIG)
    # When the replacement names a version that does not exist / Then 412
    refused(
        api,
        412,
        "VERSION_CONFLICT",
        "PUT",
        P + "/config",
        as_="admin",
        body=CONFIG,
        headers={"if-match": '"7"'},
    )
    # And once replaced, the old ETag is stale: 412
    status, new_headers, _b = api.call(
        "PUT", P + "/config", as_="admin", body=CONFIG, headers={"if-match": headers["etag"]}
    )
    assert status == 201 and new_headers["etag"] != headers["etag"]
    refused(
        api,
        412,
        "VERSION_CONFLICT",
        "PUT",
        P + "/config",
        as_="admin",
        body=CONFIG,
        headers={"if-match": headers["etag"]},
    )


# ---- actions ------------------------------------------------------------------------------------------


def _refused_execution(api, r: Ready, status: int, code: str, **kw: Any) -> dict[str, Any]:
    key = kw.pop("key", "key-x")
    action = kw.pop("action", "A1")
    params = kw.pop("params", A1["params"])
    plan_digest = kw.pop("plan_digest", r.digest)
    as_ = kw.pop("as_", "requester")
    headers = {"idempotency-key": key} if key is not None else {}
    _h, problem = refused(
        api,
        status,
        code,
        "POST",
        f"{r.path}/actions/{action}/executions",
        cid=r.cid,
        as_=as_,
        body={"plan_digest": plan_digest, "params": params},
        headers=headers,
    )
    return problem


def test_execution_without_a_key_is_idempotency_key_required(api) -> None:
    r = ready_candidate(api)
    _refused_execution(api, r, 400, "IDEMPOTENCY_KEY_REQUIRED", key=None)
    _refused_execution(api, r, 400, "IDEMPOTENCY_KEY_REQUIRED", key="")


def test_execution_of_an_unapproved_plan_is_plan_not_approved(api) -> None:
    r = ready_candidate(api, approve=False)
    _refused_execution(api, r, 403, "PLAN_NOT_APPROVED")


def test_execution_after_a_rejection_or_an_expiry_is_plan_not_approved(api) -> None:
    # Given an approved plan that a second reviewer rejects (a rejection of a digest is final)
    r = ready_candidate(api)
    ok(
        api,
        "POST",
        r.path + "/reviews",
        as_="reviewer2",
        body={"decision": "reject", "plan_digest": r.digest, "revision": REV},
    )
    _refused_execution(api, r, 403, "PLAN_NOT_APPROVED")
    # Given another approved plan whose approval expires exactly now (approval_ttl_seconds 86400)
    other = ready_candidate(api, revision=OTHER_REV)
    api.world.clock.advance(86400)
    _refused_execution(api, other, 403, "PLAN_NOT_APPROVED")


def test_execution_with_a_wrong_digest_is_digest_mismatch(api) -> None:
    r = ready_candidate(api)
    _refused_execution(api, r, 409, "DIGEST_MISMATCH", plan_digest=NO_DIGEST)


def test_execution_checks_run_in_the_order_of_rule_17(api) -> None:
    # Given an unapproved plan: a wrong digest is named first, then the missing approval
    r = ready_candidate(api, approve=False)
    _refused_execution(api, r, 409, "DIGEST_MISMATCH", plan_digest=NO_DIGEST, action="A9")
    _refused_execution(api, r, 403, "PLAN_NOT_APPROVED", action="A9", params={"x": 1})


def test_execution_of_an_undeclared_action_is_action_undeclared(api) -> None:
    r = ready_candidate(api)
    _refused_execution(api, r, 403, "ACTION_UNDECLARED", action="A9")


def test_execution_of_a_type_no_longer_allowed_is_action_not_allowed(api) -> None:
    # Given an approved plan declaring dispatch_checks, then the admin stops allowing that type
    r = ready_candidate(api)
    _s, headers, _b = api.call("GET", P + "/config", as_="admin")
    config = dict(copy.deepcopy(CONFIG), allowed_action_types=["notify"])
    status, _h, body = api.call(
        "PUT", P + "/config", as_="admin", body=config, headers={"if-match": headers["etag"]}
    )
    assert status == 201, body
    # When the requester executes it / Then 403 ACTION_NOT_ALLOWED, no outbox item
    _refused_execution(api, r, 403, "ACTION_NOT_ALLOWED")
    assert api.world.store.outbox == []


def test_execution_with_other_params_is_action_params_mismatch(api) -> None:
    r = ready_candidate(api)
    for params in ({"checks": ["C1", "C1"]}, {"checks": []}, {"checks": ["C1"], "host": "evil.example"}, {}):
        _refused_execution(
            api, r, 409, "ACTION_PARAMS_MISMATCH", params=params, key=f"key-{len(str(params))}"
        )


def test_second_execution_with_a_new_key_is_action_exhausted(api) -> None:
    # Given A1 (max_executions 1) executed once
    r = ready_candidate(api)
    status, _h, body = execute(api, r, "key-1")
    assert status == 201, body
    # When it is executed again with a new key / Then 409 ACTION_EXHAUSTED, still one outbox item
    _refused_execution(api, r, 409, "ACTION_EXHAUSTED", key="key-2")
    assert len(api.world.store.outbox) == 1


# ---- idempotency refusals -----------------------------------------------------------------------------


def test_same_execution_key_with_other_params_is_idempotency_conflict(api) -> None:
    r = ready_candidate(api, actions=[dict(A1, max_executions=2)])
    assert execute(api, r, "key-1")[0] == 201
    _refused_execution(api, r, 409, "IDEMPOTENCY_CONFLICT", key="key-1", params={"checks": ["C1", "C1"]})


def test_same_execution_key_from_another_caller_is_idempotency_conflict(api) -> None:
    r = ready_candidate(api, actions=[dict(A1, max_executions=2)])
    assert execute(api, r, "key-1")[0] == 201
    # ci holds the requester role too: same key, same body, another caller
    _refused_execution(api, r, 409, "IDEMPOTENCY_CONFLICT", key="key-1", as_="ci")


def test_same_key_on_another_post_route_with_other_body_or_caller_is_idempotency_conflict(api) -> None:
    r = ready_candidate(api)
    key = {"idempotency-key": "ev-1"}
    ok(api, "POST", r.path + "/evidence", as_="ci", body=evidence(), headers=key)
    refused(
        api,
        409,
        "IDEMPOTENCY_CONFLICT",
        "POST",
        r.path + "/evidence",
        cid=r.cid,
        as_="ci",
        body=evidence(source={"system": "ci", "run_id": "2", "url": ""}),
        headers=key,
    )
    refused(
        api,
        409,
        "IDEMPOTENCY_CONFLICT",
        "POST",
        r.path + "/evidence",
        cid=r.cid,
        as_="requester",
        body=evidence(),
        headers=key,
    )
    # And on the project-level candidates route
    ok(api, "POST", C, body=dict(NEW, revision=OTHER_REV), headers={"idempotency-key": "c-1"})
    refused(
        api,
        409,
        "IDEMPOTENCY_CONFLICT",
        "POST",
        C,
        body=dict(NEW, revision="d" * 40),
        headers={"idempotency-key": "c-1"},
    )
    refused(
        api,
        409,
        "IDEMPOTENCY_CONFLICT",
        "POST",
        C,
        as_="ci",
        body=dict(NEW, revision=OTHER_REV),
        headers={"idempotency-key": "c-1"},
    )


def test_key_still_in_progress_is_idempotency_in_progress(api) -> None:
    # Given a request with this key in progress elsewhere (its lease runs into the future)
    r = ready_candidate(api)
    body = {"plan_digest": r.digest, "params": A1["params"]}
    now = "2026-11-29T12:00:00.000000Z"
    request_hash = digest(ExecutionRequest.model_validate(body).model_dump(mode="json"))
    seeded = IdempotencyRecord(
        StreamRef("demo", r.cid),
        "action:A1",
        "key-busy",
        "agent-1",
        request_hash,
        claimed_at=now,
        lease_until="2026-11-29T12:00:30.000000Z",
    )
    assert api.world.store.idempotency_begin(seeded)
    # When the same caller sends the same request with that key / Then 409 IDEMPOTENCY_IN_PROGRESS
    _refused_execution(api, r, 409, "IDEMPOTENCY_IN_PROGRESS", key="key-busy")
    assert api.world.store.outbox == []
    # And once the lease has lapsed the key can be taken over
    api.world.clock.advance(31)
    status, _h, out = execute(api, r, "key-busy")
    assert status == 201, out
    assert len(api.world.store.outbox) == 1


def test_key_in_progress_on_another_post_route_is_idempotency_in_progress(api) -> None:
    r = ready_candidate(api)
    body = evidence()
    request_hash = digest(
        EvidenceRequest.model_validate(body).model_dump(mode="json")
    )  # as the gate hashes it
    seeded = IdempotencyRecord(
        StreamRef("demo", r.cid),
        f"/candidates/{r.cid}/evidence",
        "ev-busy",
        "ci-bot",
        request_hash,
        claimed_at="2026-11-29T12:00:00.000000Z",
        lease_until="2026-11-29T12:05:00.000000Z",
    )
    assert api.world.store.idempotency_begin(seeded)
    refused(
        api,
        409,
        "IDEMPOTENCY_IN_PROGRESS",
        "POST",
        r.path + "/evidence",
        cid=r.cid,
        as_="ci",
        body=body,
        headers={"idempotency-key": "ev-busy"},
    )


# ---- tasks --------------------------------------------------------------------------------------------

T2 = {
    "task_id": "T2",
    "title": "After T1",
    "depends_on": ["T1"],
    "checks": [
        {
            "check_id": "C2",
            "policy_ref": "unit-tests",
            "command": "pytest -q payments-api/contract",
            "expected_exit_code": 0,
        }
    ],
}


def test_report_for_a_task_whose_dependency_does_not_pass_is_task_not_eligible(api) -> None:
    # Given T2 depends on T1, which has no report
    r = ready_candidate(api, extra_tasks=(T2,))
    report = {"plan_digest": r.digest, "status": "blocked", "blocked_reason": "waiting"}
    refused(api, 409, "TASK_NOT_ELIGIBLE", "POST", r.path + "/tasks/T2/reports", cid=r.cid, body=report)
    # And after T1 is reported failed, T2 is still not eligible
    ok(api, "POST", r.path + "/tasks/T1/reports", body={"plan_digest": r.digest, "status": "failed"})
    refused(
        api,
        409,
        "TASK_NOT_ELIGIBLE",
        "POST",
        r.path + "/tasks/T2/reports",
        cid=r.cid,
        body=dict(report, status="completed"),
    )


def test_settlement_of_a_task_that_does_not_pass_is_task_not_eligible(api) -> None:
    r = ready_candidate(api)
    settle = {"plan_digest": r.digest, "note": "looks fine"}
    # Not reported at all, then reported completed without evidence (recorded failed)
    refused(
        api,
        409,
        "TASK_NOT_ELIGIBLE",
        "POST",
        r.path + "/tasks/T1/settlement",
        cid=r.cid,
        as_="reviewer",
        body=settle,
    )
    rep = ok(api, "POST", r.path + "/tasks/T1/reports", body={"plan_digest": r.digest, "status": "completed"})
    assert rep["passes"] is False and rep["recorded_status"] == "failed"
    refused(
        api,
        409,
        "TASK_NOT_ELIGIBLE",
        "POST",
        r.path + "/tasks/T1/settlement",
        cid=r.cid,
        as_="reviewer",
        body=settle,
    )


def test_report_or_settlement_with_a_wrong_digest_is_digest_mismatch(api) -> None:
    r = ready_candidate(api)
    refused(
        api,
        409,
        "DIGEST_MISMATCH",
        "POST",
        r.path + "/tasks/T1/reports",
        cid=r.cid,
        body={"plan_digest": NO_DIGEST, "status": "failed"},
    )
    passed_task(api, r)
    refused(
        api,
        409,
        "DIGEST_MISMATCH",
        "POST",
        r.path + "/tasks/T1/settlement",
        cid=r.cid,
        as_="reviewer",
        body={"plan_digest": NO_DIGEST, "note": ""},
    )


def test_report_on_a_candidate_without_plan_is_digest_mismatch(api) -> None:
    cid = create(api)["candidate_id"]
    refused(
        api,
        409,
        "DIGEST_MISMATCH",
        "POST",
        f"{C}/{cid}/tasks/T1/reports",
        cid=cid,
        body={"plan_digest": NO_DIGEST, "status": "failed"},
    )


# ---- VALIDATION_FAILED --------------------------------------------------------------------------------


def test_unknown_and_identity_fields_are_validation_failed(api) -> None:
    r = ready_candidate(api)
    key = {"idempotency-key": "v-1"}
    cases = [
        ("requester", "POST", C, dict(NEW, requested_by="rita-reviewer"), {}),
        ("requester", "POST", C, dict(NEW, unexpected=1), {}),
        ("requester", "POST", C, dict(NEW, change={"files": ["a.py"], "obligations": []}), {}),
        (
            "requester",
            "POST",
            r.path + "/change-context",
            {"change": NEW["change"], "principal": "ci-bot"},
            {},
        ),
        (
            "reviewer",
            "POST",
            r.path + "/reviews",
            {"decision": "approve", "plan_digest": r.digest, "revision": REV, "reviewer": "rob-reviewer"},
            {},
        ),
        (
            "reviewer",
            "POST",
            r.path + "/reviews",
            {"decision": "maybe", "plan_digest": r.digest, "revision": REV},
            {},
        ),
        (
            "requester",
            "POST",
            r.path + "/actions/A1/executions",
            {"plan_digest": r.digest, "params": A1["params"], "principal": "rita-reviewer"},
            key,
        ),
        ("requester", "POST", r.path + "/evidence", dict(evidence(), actor="ci-bot"), {}),
        ("ci", "POST", r.path + "/evidence", dict(evidence(), trust="verified"), {}),
        (
            "requester",
            "POST",
            r.path + "/tasks/T1/reports",
            {"plan_digest": r.digest, "status": "failed", "actor": "hank-human"},
            {},
        ),
        (
            "requester",
            "POST",
            r.path + "/tasks/T1/reports",
            {"plan_digest": r.digest, "status": "passed"},
            {},
        ),
        ("reviewer", "POST", r.path + "/tasks/T1/settlement", {"plan_digest": r.digest, "reviewer": "x"}, {}),
        ("admin", "PUT", P + "/config", dict(CONFIG, actor="alice-admin"), {"if-match": '"1"'}),
        ("admin", "PUT", P + "/policies/unit-tests", dict(UNIT_POLICY, principal="alice-admin"), {}),
    ]
    for who, method, path, body, headers in cases:
        _h, problem = refused(
            api, 422, "VALIDATION_FAILED", method, path, cid=r.cid, as_=who, body=body, headers=headers
        )


def test_a_body_that_is_not_json_is_answered_with_a_problem_document(api) -> None:
    # Given a candidate body sent with a content type the API does not speak
    before = snapshot(api.world)
    for content_type in ("text/plain", "application/xml"):
        status, headers, body = api.call("POST", C, body=NEW, headers={"content-type": content_type})
        # Then it is refused with a problem document (API.md: errors are RFC 9457 problem documents)
        assert status in (415, 422), body
        assert_problem(status, headers, body, status, "VALIDATION_FAILED")
    assert snapshot(api.world) == before


def test_blocked_report_without_a_reason_is_validation_failed(api) -> None:
    r = ready_candidate(api)
    for reason in (None, "", "   "):
        body = {"plan_digest": r.digest, "status": "blocked"}
        if reason is not None:
            body["blocked_reason"] = reason
        refused(api, 422, "VALIDATION_FAILED", "POST", r.path + "/tasks/T1/reports", cid=r.cid, body=body)
    # And with a reason it is recorded as blocked (not a failure)
    assert (
        ok(
            api,
            "POST",
            r.path + "/tasks/T1/reports",
            body={"plan_digest": r.digest, "status": "blocked", "blocked_reason": "needs a new check"},
        )["recorded_status"]
        == "blocked"
    )


def test_empty_evidence_scope_is_validation_failed(api) -> None:
    r = ready_candidate(api)
    refused(
        api,
        422,
        "VALIDATION_FAILED",
        "POST",
        r.path + "/evidence",
        cid=r.cid,
        as_="ci",
        body=evidence(scope=[]),
    )


def test_evidence_with_both_or_neither_body_is_validation_failed(api) -> None:
    r = ready_candidate(api)
    neither = evidence()
    del neither["junit_xml"]
    both = evidence(result={"exit_code": 0, "artifacts": []})
    for body in (neither, both):
        refused(api, 422, "VALIDATION_FAILED", "POST", r.path + "/evidence", cid=r.cid, as_="ci", body=body)


# ---- evidence: MALFORMED_EVIDENCE, EVIDENCE_FUTURE_DATED ----------------------------------------------


@pytest.mark.parametrize(
    "xml",
    [
        '<?xml version="1.0"?><!DOCTYPE testsuite [<!ELEMENT testsuite ANY>]>'
        '<testsuite name="s"><testcase classname="a" name="t"/></testsuite>',
        '<!DOCTYPE testsuite [<!ENTITY x "boom">]>'
        '<testsuite name="&x;"><testcase classname="a" name="t"/></testsuite>',
        '<!DOCTYPE testsuite SYSTEM "http://example.invalid/junit.dtd"><testsuite name="s"/>',
        '<testsuite name="s"><testcase classname="a" name="t"></testsuite>',
        "<testsuite>" * 300 + "</testsuite>" * 300,
    ],
)
def test_dtd_or_unreadable_junit_is_malformed_evidence(api, xml) -> None:
    r = ready_candidate(api)
    refused(
        api,
        422,
        "MALFORMED_EVIDENCE",
        "POST",
        r.path + "/evidence",
        cid=r.cid,
        as_="ci",
        body=evidence(junit_xml=xml),
    )


def test_evidence_301_s_after_the_service_clock_is_future_dated_and_300_s_is_accepted(api) -> None:
    # Given the service clock at 2026-11-29T12:00:00Z
    r = ready_candidate(api)
    # When evidence is observed 301 s later / Then 422 EVIDENCE_FUTURE_DATED, not stored
    refused(
        api,
        422,
        "EVIDENCE_FUTURE_DATED",
        "POST",
        r.path + "/evidence",
        cid=r.cid,
        as_="ci",
        body=evidence(observed_at="2026-11-29T12:05:01Z"),
    )
    refused(
        api,
        422,
        "EVIDENCE_FUTURE_DATED",
        "POST",
        r.path + "/evidence",
        cid=r.cid,
        as_="ci",
        body=evidence(observed_at="2026-11-29T14:05:01+02:00"),
    )
    # When it is observed exactly 300 s later / Then it is accepted
    ok(api, "POST", r.path + "/evidence", as_="ci", body=evidence(observed_at="2026-11-29T12:05:00Z"))


# ---- PAYLOAD_TOO_LARGE --------------------------------------------------------------------------------


def _padded(body: dict[str, Any], size: int) -> str:
    """The body's JSON followed by whitespace, exactly `size` bytes."""
    text = json.dumps(body)
    assert len(text.encode()) <= size
    return text + " " * (size - len(text.encode()))


def test_evidence_over_2_mib_is_payload_too_large(api) -> None:
    r = ready_candidate(api)
    refused(
        api,
        413,
        "PAYLOAD_TOO_LARGE",
        "POST",
        r.path + "/evidence",
        cid=r.cid,
        as_="ci",
        raw=_padded(evidence(), LARGE + 1),
    )
    # And exactly 2 MiB is accepted
    status, _h, body = api.call("POST", r.path + "/evidence", as_="ci", raw=_padded(evidence(), LARGE))
    assert status == 201, body


def _invoke_base64(api, path: str, as_: str, raw: bytes) -> tuple[int, dict[str, str], Any]:
    """As the gateway invokes a handler when it passes the body base64-encoded (isBase64Encoded: true, as the
    local runner does for bytes that are not UTF-8 and API Gateway may do for a binary payload)."""
    route = route_for("POST", path)
    assert route is not None
    event = http_event(
        "POST",
        path,
        headers={"authorization": f"Bearer tok-{as_}", "content-type": "application/json"},
        route_key=f"POST {route.path}",
    )
    event["body"], event["isBase64Encoded"] = base64.b64encode(raw).decode("ascii"), True
    verdict = api.gateway.authorizer()({"headers": event["headers"]}, LambdaContext())
    with_authorizer(event, verdict["context"])
    status, headers, data = response_parts(api.gateway.handler(route.function)(event, LambdaContext()))
    return status, {k.lower(): v for k, v in headers.items()}, json.loads(data) if data else None


def test_base64_encoded_evidence_is_measured_by_its_decoded_size(api) -> None:
    # Given evidence whose JSON is exactly 2 MiB, delivered base64-encoded by the gateway
    r = ready_candidate(api)
    exact = _padded(evidence(), LARGE).encode()
    # When it is posted / Then it is within the limit (the limit is on the bytes received, not on base64 text)
    status, _h, body = _invoke_base64(api, r.path + "/evidence", "ci", exact)
    assert status == 201, body
    # And one byte more is 413 PAYLOAD_TOO_LARGE
    before = snapshot(api.world)
    status, headers, body = _invoke_base64(api, r.path + "/evidence", "ci", exact + b" ")
    assert_problem(status, headers, body, 413, "PAYLOAD_TOO_LARGE")
    assert snapshot(api.world) == before


@pytest.mark.parametrize("suffix", ["", "/{cid}/change-context"])
def test_candidate_and_change_context_over_2_mib_are_payload_too_large(api, suffix) -> None:
    cid = create(api)["candidate_id"]
    body = {"change": NEW["change"]} if suffix else dict(NEW, revision=OTHER_REV)
    refused(
        api,
        413,
        "PAYLOAD_TOO_LARGE",
        "POST",
        C + suffix.format(cid=cid),
        cid=cid,
        raw=_padded(body, LARGE + 1),
    )


def test_review_over_256_kib_is_payload_too_large(api) -> None:
    r = ready_candidate(api, approve=False)
    review = {"decision": "approve", "plan_digest": r.digest, "revision": REV}
    refused(
        api,
        413,
        "PAYLOAD_TOO_LARGE",
        "POST",
        r.path + "/reviews",
        cid=r.cid,
        as_="reviewer",
        raw=_padded(review, SMALL + 1),
    )
    # And exactly 256 KiB is accepted
    status, _h, body = api.call("POST", r.path + "/reviews", as_="reviewer", raw=_padded(review, SMALL))
    assert status == 201, body


def test_other_small_routes_over_256_kib_are_payload_too_large(api) -> None:
    r = ready_candidate(api)
    for method, path, caller in [
        ("PUT", r.path + "/plan", "requester"),
        ("POST", r.path + "/tasks/T1/reports", "requester"),
        ("POST", r.path + "/actions/A1/executions", "requester"),
        ("PUT", P + "/config", "admin"),
    ]:
        refused(
            api,
            413,
            "PAYLOAD_TOO_LARGE",
            method,
            path,
            cid=r.cid,
            as_=caller,
            raw=_padded({}, SMALL + 1),
            headers={"idempotency-key": "big"},
        )


# ---- STATE_UNAVAILABLE --------------------------------------------------------------------------------


class FailingStore:
    """The real store, except that the named operations raise StoreUnavailable (for the refs chosen)."""

    def __init__(self, inner, fail: set[str], refs=lambda _ref: True) -> None:
        self._inner = inner
        self._fail = fail
        self._refs = refs
        self.failures = 0

    def __getattr__(self, name: str):
        attr = getattr(self._inner, name)
        if name not in self._fail:
            return attr

        def failing(*args, **kwargs):
            ref = args[0] if args else None
            ref = getattr(ref, "ref", ref)  # Append and IdempotencyRecord carry their ref
            if not isinstance(ref, StreamRef) or self._refs(ref):
                self.failures += 1
                raise StoreUnavailable(f"{name} failed")
            return attr(*args, **kwargs)

        return failing


@pytest.fixture
def broken(api):
    """Swap the gate's store for a failing wrapper; the original is restored (and inspected) afterwards."""
    original = api.world.gate.store

    def swap(fail: set[str], refs=lambda _ref: True) -> FailingStore:
        api.world.gate.store = FailingStore(original, fail, refs)
        return api.world.gate.store

    yield swap
    api.world.gate.store = original


def _unavailable(
    api,
    broken,
    fail: set[str],
    method: str,
    path: str,
    *,
    cid: str | None = None,
    refs=lambda _ref: True,
    **kw: Any,
) -> dict[str, Any]:
    before = snapshot(api.world)
    lengths = (audit_length(api, cid) if cid else None, project_length(api))
    wrapper = broken(fail, refs)
    status, headers, body = api.call(method, path, **kw)
    api.world.gate.store = wrapper._inner
    assert wrapper.failures >= 1, "the store was never asked"
    assert_problem(status, headers, body, 503, "STATE_UNAVAILABLE")
    assert headers.get("retry-after"), headers
    assert snapshot(api.world) == before
    assert (audit_length(api, cid) if cid else None, project_length(api)) == lengths
    return body


def test_failed_append_is_state_unavailable_with_retry_after(api, broken) -> None:
    r = ready_candidate(api)
    _unavailable(api, broken, {"append"}, "POST", r.path + "/evidence", cid=r.cid, as_="ci", body=evidence())
    _unavailable(
        api,
        broken,
        {"append"},
        "POST",
        r.path + "/evidence",
        cid=r.cid,
        as_="ci",
        body=evidence(),
        headers={"idempotency-key": "ev-503"},
    )
    _unavailable(api, broken, {"append"}, "POST", C, cid=r.cid, body=dict(NEW, revision=OTHER_REV))
    _unavailable(
        api,
        broken,
        {"append"},
        "POST",
        r.path + "/actions/A1/executions",
        cid=r.cid,
        body={"plan_digest": r.digest, "params": A1["params"]},
        headers={"idempotency-key": "x-503"},
    )
    _unavailable(
        api, broken, {"append"}, "PUT", P + "/config", as_="admin", body=CONFIG, headers={"if-match": '"1"'}
    )
    assert api.world.store.outbox == []


@pytest.mark.parametrize(
    "method, suffix, who",
    [
        ("GET", "", "requester"),
        ("GET", "/audit", "auditor"),
        ("POST", "/reviews", "reviewer"),
        ("POST", "/evidence", "ci"),
        ("GET", "/decision", "requester"),
        ("POST", "/decisions", "requester"),
    ],
)
def test_failed_load_before_the_candidate_is_established_is_state_unavailable(
    api, broken, method, suffix, who
) -> None:
    # Given a candidate, and a store that cannot be read
    r = ready_candidate(api)
    bodies = {
        "/reviews": {"decision": "reject", "plan_digest": r.digest, "revision": REV},
        "/evidence": evidence(),
    }
    # When the route is called / Then 503 STATE_UNAVAILABLE with Retry-After (even on the decision routes:
    # the candidate was never established), and nothing changed
    _unavailable(api, broken, {"load"}, method, r.path + suffix, cid=r.cid, as_=who, body=bodies.get(suffix))


def test_recording_a_decision_for_an_unknown_candidate_on_a_failing_store_is_not_a_decision(
    api, broken
) -> None:
    # Given a store that cannot be read, and a candidate id that was never created
    cid = create(api)["candidate_id"]
    # When a decision is recorded for it / Then 503, never a decision about a candidate nobody established
    _unavailable(api, broken, {"load"}, "POST", f"{C}/cand_never_created/decisions", cid=cid)


def test_failed_idempotency_read_is_state_unavailable(api, broken) -> None:
    r = ready_candidate(api)
    _unavailable(
        api,
        broken,
        {"idempotency_get", "idempotency_begin"},
        "POST",
        r.path + "/evidence",
        cid=r.cid,
        as_="ci",
        body=evidence(),
        headers={"idempotency-key": "ev-1"},
    )


def test_decision_routes_hold_once_the_candidate_is_established(api, broken) -> None:
    # Given a candidate whose stream reads, but a project chain that cannot be read
    r = ready_candidate(api)
    before = snapshot(api.world)
    broken({"load"}, refs=lambda ref: ref.candidate_id is None)
    status, _h, body = api.call("GET", r.path + "/decision")
    # Then the decision route answers 200 hold with the STATE_UNAVAILABLE finding
    assert status == 200 and body["decision"] == "hold", body
    assert "STATE_UNAVAILABLE" in {f["code"] for f in body["findings"]}
    # And a recorded decision that cannot be written holds too, recording nothing
    broken({"append"})
    status, _h, body = api.call("POST", r.path + "/decisions")
    assert status == 200 and body["decision"] == "hold", body
    assert "STATE_UNAVAILABLE" in {f["code"] for f in body["findings"]}
    assert body["recorded"] is False and "seq" not in body, body
    api.world.gate.store = api.world.store
    assert snapshot(api.world) == before


# ---- RATE_LIMITED -------------------------------------------------------------------------------------


def test_a_caller_over_its_rate_is_refused_with_rate_limited_and_retry_after(api) -> None:
    # Given the stage throttle at two requests at once and one every ten seconds
    from sentinel_gateway.gateway import TokenBucket

    now = [0.0]
    api.gateway.throttle = TokenBucket(rate=0.1, burst=2, clock=lambda: now[0])
    # When the same caller sends three requests at once
    statuses = [api.call("GET", "/v1/whoami")[0] for _ in range(2)]
    status, headers, body = api.call("GET", "/v1/whoami")
    # Then the third is refused with RATE_LIMITED and told when to retry; another caller is not affected
    assert statuses == [200, 200]
    assert status == 429 and body["code"] == "RATE_LIMITED" and headers["retry-after"] == "10"
    assert headers["content-type"] == "application/problem+json"
    assert api.call("GET", "/v1/whoami", as_="reviewer")[0] == 200
    now[0] += 10
    assert api.call("GET", "/v1/whoami")[0] == 200
