"""Every plan version stays readable (`GET .../candidates/{id}/plans/{version}`, any role in the project),
so a reviewer can diff the version approved against the current one; and policy ids in paths are validated
like every other id, after the caller's role."""

import pytest

from sentinel_domain.identity import IDENT
from support.api import NEW, C, P, create, ok, plan_body, snapshot
from support.world import UNIT_POLICY

ROLES = ["requester", "reviewer", "ci", "auditor", "admin"]


def two_versions(api) -> tuple[str, dict, dict]:
    """A candidate whose plan was drafted by the service (v1, the fallback) and amended by its requester
    (v2), with the candidate view."""
    created = create(api)
    cid = created["candidate_id"]
    first = ok(api, "POST", f"{C}/{cid}/proposals")
    amended = plan_body(created["obligations"][0]["obligation_id"], actions=[])
    ok(api, "PUT", f"{C}/{cid}/plan", body=amended, headers={"if-match": f'"{first["plan_digest"]}"'})
    view = ok(api, "GET", f"{C}/{cid}", 200)
    return cid, first, view


@pytest.mark.parametrize("who", ROLES)
def test_every_version_is_readable_by_any_role_in_the_project(api, who: str) -> None:
    # Given a candidate with a drafted plan (v1) and an amendment (v2)
    cid, first, view = two_versions(api)
    versions = {v["plan_version"]: v for v in view["plan_versions"]}
    assert sorted(versions) == [1, 2]
    # When any member of the project reads each version
    one = ok(api, "GET", f"{C}/{cid}/plans/1", 200, as_=who)
    status, headers, two = api.call("GET", f"{C}/{cid}/plans/2", as_=who)
    # Then each is the version as stored: its digest, its plan, when, by whom and how it came about
    assert status == 200
    assert set(one) == {"plan_version", "plan_digest", "plan", "stored_at", "stored_by", "mode"}
    assert (one["plan_version"], one["plan_digest"], one["plan"]) == (1, first["plan_digest"], first["plan"])
    assert (one["mode"], two["mode"]) == ("fallback", "submitted")
    assert (two["plan_digest"], two["plan"]) == (view["plan_digest"], view["plan"])
    assert headers["etag"] == f'"{two["plan_digest"]}"'
    for read in (one, two):
        listed = versions[read["plan_version"]]
        assert (read["stored_at"], read["stored_by"]) == (listed["recorded_at"], listed["author"])
    assert one["stored_by"]["id"] == "agent-1"


@pytest.mark.parametrize("version", ["3", "999", "1" * 30, "7" * 5000])
def test_a_version_that_does_not_exist_is_not_found(api, version: str) -> None:
    # Given a candidate with two plan versions
    cid, _first, _view = two_versions(api)
    # When a version beyond them is read (however long the number), Then 404 NOT_FOUND
    status, _h, body = api.call("GET", f"{C}/{cid}/plans/{version}", as_="reviewer")
    assert (status, body["code"]) == (404, "NOT_FOUND"), body


def test_a_candidate_without_a_plan_or_that_does_not_exist_is_not_found(api) -> None:
    cid = create(api)["candidate_id"]
    for path in (f"{C}/{cid}/plans/1", f"{C}/cand_nope/plans/1"):
        status, _h, body = api.call("GET", path, as_="auditor")
        assert (status, body["code"]) == (404, "NOT_FOUND"), (path, body)


@pytest.mark.parametrize("version", ["0", "-1", "01", "abc", "1.5", "+1", "1e3", "%201"])
def test_a_version_that_is_not_a_positive_integer_is_a_422(api, version: str) -> None:
    # Given a candidate with a plan
    cid, _first, _view = two_versions(api)
    # When a version that is not a positive integer is read, Then 422 VALIDATION_FAILED naming the version
    status, headers, body = api.call("GET", f"{C}/{cid}/plans/{version}", as_="reviewer")
    assert (status, body["code"]) == (422, "VALIDATION_FAILED"), body
    assert headers["content-type"].startswith("application/problem+json")
    assert "version" in body["detail"]


def test_the_callers_role_is_judged_before_the_version(api) -> None:
    # Given a candidate with a plan
    cid, _first, _view = two_versions(api)
    # When a principal with no role in the project reads a version, valid or not, Then 404: it learns nothing
    for version in ("1", "0"):
        status, _h, body = api.call("GET", f"{C}/{cid}/plans/{version}", as_="outsider")
        assert (status, body["code"]) == (404, "NOT_FOUND"), body
    # And a project that does not exist is 404 for a member of another
    status, _h, body = api.call("GET", "/v1/projects/nope/candidates/cand_1/plans/1", as_="auditor")
    assert (status, body["code"]) == (404, "NOT_FOUND")


# ---- policy ids in paths ---------------------------------------------------------------------------------

BAD_POLICY_IDS = ["-lead", ".hidden", "a%20b", "a$b", "x" * 129, "caf%C3%A9"]


@pytest.mark.parametrize("policy_id", BAD_POLICY_IDS)
def test_a_bad_policy_id_in_a_path_is_a_422_and_nothing_is_stored(api, policy_id: str) -> None:
    # Given the project as it stands
    before = snapshot(api.world)
    # When an admin puts a policy under an id no configuration could name, and an auditor reads one
    put = api.call("PUT", f"{P}/policies/{policy_id}", as_="admin", body=UNIT_POLICY)
    get = api.call("GET", f"{P}/policies/{policy_id}", as_="auditor")
    # Then both are 422 VALIDATION_FAILED about the policy id, and nothing changed
    for status, _h, body in (put, get):
        assert (status, body["code"]) == (422, "VALIDATION_FAILED"), body
        assert "policy_id" in body["detail"]
    assert snapshot(api.world) == before


def test_the_role_check_comes_before_the_policy_id(api) -> None:
    # Given a bad policy id, When a requester puts it, Then 403 (its role), when an outsider reads it, 404
    status, _h, body = api.call("PUT", f"{P}/policies/-lead", as_="requester", body=UNIT_POLICY)
    assert (status, body["code"]) == (403, "FORBIDDEN_ROLE")
    status, _h, body = api.call("GET", f"{P}/policies/-lead", as_="outsider")
    assert (status, body["code"]) == (404, "NOT_FOUND")


@pytest.mark.parametrize("policy_id", ["unit-tests", "a", "Team.lint:v2", "x" * 128])
def test_a_good_policy_id_is_accepted(api, policy_id: str) -> None:
    ok(api, "PUT", f"{P}/policies/{policy_id}", as_="admin", body=UNIT_POLICY)
    assert ok(api, "GET", f"{P}/policies/{policy_id}", 200, as_="auditor")["policy_id"] == policy_id


def test_a_policy_of_free_text_check_type_is_refused(api) -> None:
    status, _h, body = api.call(
        "PUT", f"{P}/policies/unit-tests", as_="admin", body=dict(UNIT_POLICY, check_type="unit")
    )
    assert (status, body["code"]) == (422, "VALIDATION_FAILED"), body
    assert "check_type" in body["detail"]


def test_the_candidate_view_lists_changed_files(api) -> None:
    cid = create(api)["candidate_id"]
    view = ok(api, "GET", f"{C}/{cid}", 200, as_="reviewer")
    assert view["changed_files"] == {"files": NEW["change"]["files"], "count": 1, "truncated": False}


def test_the_document_declares_what_a_version_and_a_policy_id_may_be(api) -> None:
    # Given the published OpenAPI document
    doc = ok(api, "GET", "/v1/openapi.json", 200, as_=None)

    def pattern(path: str, name: str) -> str:
        params = doc["paths"][path]["get"]["parameters"]
        return next(p["schema"]["pattern"] for p in params if p["name"] == name)

    # Then the path parameters carry the patterns the edge validates
    assert pattern("/v1/projects/{project}/candidates/{candidate_id}/plans/{version}", "version") == (
        "^[1-9][0-9]*$"
    )
    assert pattern("/v1/projects/{project}/policies/{policy_id}", "policy_id") == IDENT
    # And the plan version's answer names its plan schema
    read = doc["components"]["schemas"]["PlanVersionRead"]
    assert read["properties"]["plan"] == {"$ref": "#/components/schemas/Plan"}
    assert set(read["required"]) == {"plan_version", "plan_digest", "plan", "stored_at", "stored_by", "mode"}


@pytest.mark.parametrize(
    ("stored", "min_tests", "reads_as"), [("unit", 1, "junit"), ("junit", 0, "exit_code")]
)
def test_a_policy_stored_before_the_enumeration_reads_over_http(api, stored, min_tests, reads_as) -> None:
    # Given a policy.set fact written before check_type was an enumeration
    policy = dict(UNIT_POLICY, check_type=stored, min_tests=min_tests)
    api.world.gate.record_project_event(
        "demo", "policy.set", {"policy_id": "legacy", "version": 1, "policy": policy, "actor": None}
    )
    # When it is read and listed over HTTP, Then it answers with the kind its minimum demands
    assert ok(api, "GET", f"{P}/policies/legacy", 200, as_="auditor")["policy"]["check_type"] == reads_as
    listed = ok(api, "GET", f"{P}/policies", 200, as_="auditor")["policies"]
    assert {p["policy_id"]: p["policy"]["check_type"] for p in listed}["legacy"] == reads_as
