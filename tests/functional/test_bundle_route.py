"""`PUT /v1/projects/{project}/bundle`: the configuration and policies as one accepted write, through the
handlers behind the emulated gateway. Refusals change nothing; a store that fails mid-write leaves nothing."""

import json
from typing import Any

import pytest

from sentinel_domain.errors import StoreUnavailable
from sentinel_gateway.gateway import LocalGateway
from support.api import P, project_length, snapshot
from support.world import CONFIG, LINT_POLICY, UNIT_POLICY

B = P + "/bundle"
STRICTER_UNIT = dict(UNIT_POLICY, min_tests=5)
CONTRACT = dict(UNIT_POLICY, command="schemathesis run {scope}")
NEW_CONFIG = dict(
    CONFIG,
    derivation_rules=[*CONFIG["derivation_rules"], {"files": ["api/**"], "policy_id": "api-contract"}],
)
CURRENT = {"config": CONFIG, "policies": {"unit-tests": UNIT_POLICY, "lint": LINT_POLICY}}


def events(api) -> list[dict[str, Any]]:
    status, _h, body = api.call("GET", P + "/audit", as_="admin", query={"limit": "500"})
    assert status == 200, body
    return list(body["events"])


def problem(api, status: int, code: str, *args: Any, **kw: Any) -> dict[str, Any]:
    """The call is refused with a problem document and changes nothing."""
    before, length = snapshot(api.world), project_length(api)
    got, headers, body = api.call(*args, **kw)
    assert (got, body.get("code")) == (status, code), body
    assert headers["content-type"].startswith("application/problem+json")
    assert snapshot(api.world) == before and project_length(api) == length
    return body


def test_a_bundle_is_one_accepted_write(api) -> None:
    # Given the demo project (configuration version 1, two policies)
    length = project_length(api)
    # When an admin applies a new configuration with a new policy, a changed one and an unchanged one
    body = {"config": NEW_CONFIG, "policies": {"api-contract": CONTRACT, "unit-tests": STRICTER_UNIT}}
    body["policies"]["lint"] = LINT_POLICY
    status, headers, answer = api.call("PUT", B, as_="admin", body=body, headers={"if-match": '"1"'})
    # Then 201 with every named policy's version, what changed, the new seq, and the config version as ETag
    assert status == 201, answer
    assert answer == {
        "config_version": 2,
        "policies": {"api-contract": 1, "lint": 1, "unit-tests": 2},
        "changed": {"config": True, "policies": ["api-contract", "unit-tests"]},
        "seq": length + 1,
    }
    assert headers["etag"] == '"2"'
    # And the project chain grew by exactly one event, a bundle
    assert project_length(api) == length + 1
    assert events(api)[-1]["type"] == "bundle.set"
    # And the reads show the new versions
    config = api.call("GET", P + "/config", as_="requester")
    assert (config[0], config[1]["etag"], config[2]["config"]["derivation_rules"][-1]["policy_id"]) == (
        200,
        '"2"',
        "api-contract",
    )
    listed = api.call("GET", P + "/policies", as_="requester")[2]["policies"]
    assert {p["policy_id"]: p["version"] for p in listed} == {"api-contract": 1, "lint": 1, "unit-tests": 2}
    old = api.call("GET", P + "/policies/unit-tests", as_="requester", query={"version": "1"})[2]
    assert old["policy"] == UNIT_POLICY


def test_a_bundle_that_differs_in_nothing_is_200_and_writes_nothing(api) -> None:
    before, length = snapshot(api.world), project_length(api)
    status, headers, answer = api.call("PUT", B, as_="admin", body=CURRENT, headers={"if-match": '"1"'})
    assert status == 200, answer
    assert answer == {
        "config_version": 1,
        "policies": {"lint": 1, "unit-tests": 1},
        "changed": {"config": False, "policies": []},
        "seq": length,
    }
    assert headers["etag"] == '"1"'
    assert snapshot(api.world) == before


def test_a_policy_left_out_of_the_bundle_is_left_as_it_is(api) -> None:
    status, _h, answer = api.call(
        "PUT",
        B,
        as_="admin",
        body={"config": CONFIG, "policies": {"unit-tests": STRICTER_UNIT}},
        headers={"if-match": "1"},
    )
    assert status == 201 and answer["changed"] == {"config": False, "policies": ["unit-tests"]}
    assert answer["config_version"] == 1
    lint = api.call("GET", P + "/policies/lint", as_="requester")[2]
    assert (lint["version"], lint["policy"]) == (1, LINT_POLICY)


@pytest.mark.parametrize(("headers", "status"), [({}, 428), ({"if-match": '"9"'}, 412)])
def test_a_bundle_names_the_current_configuration_version(api, headers, status) -> None:
    body = {"config": CONFIG, "policies": {"unit-tests": STRICTER_UNIT}}
    problem(api, status, "VERSION_CONFLICT", "PUT", B, as_="admin", body=body, headers=headers)


@pytest.mark.parametrize(
    ("caller", "path", "status", "code"),
    [
        ("auditor", B, 403, "FORBIDDEN_ROLE"),
        ("requester", B, 403, "FORBIDDEN_ROLE"),
        ("outsider", B, 404, "NOT_FOUND"),
        ("admin", "/v1/projects/nope/bundle", 404, "NOT_FOUND"),
    ],
)
def test_the_caller_is_judged_before_the_body(api, caller, path, status, code) -> None:
    # Given a body that would fail validation: the answer is about the caller, never the body
    problem(api, status, code, "PUT", path, as_=caller, body={"config": {"bad": 1}})


@pytest.mark.parametrize(
    "body",
    [
        {"config": CONFIG, "policies": {}, "extra": 1},  # an unknown field
        {"policies": {}},  # no configuration
        {"config": CONFIG, "policies": {"Not An Id": UNIT_POLICY}},  # a policy id that is not an id
        {"config": CONFIG, "policies": {"unit-tests": dict(UNIT_POLICY, min_tests="1")}},  # a bad policy
        {"config": NEW_CONFIG, "policies": {}},  # names a policy that does not exist and does not come
        {"config": dict(CONFIG, derivation_rules=[{"files": ["a"], "openapi": "b", "policy_id": "lint"}])},
    ],
)
def test_an_invalid_bundle_is_422_and_writes_nothing(api, body) -> None:
    # Given a bundle with one problem beside a valid policy change
    body = {**body, "policies": {**body.get("policies", {}), "lint": dict(LINT_POLICY, min_tests=2)}}
    found = problem(
        api, 422, "VALIDATION_FAILED", "PUT", B, as_="admin", body=body, headers={"if-match": "1"}
    )
    assert found["detail"]


def test_the_first_bundle_of_a_new_project_needs_no_if_match(api) -> None:
    # Given a project without configuration or policies, where the admin holds the admin role
    api.world.gate.create_project("fresh")

    demo_only = api.gateway.authorizer()

    def both_projects(event: dict[str, Any], context: Any) -> dict[str, Any]:
        answer = demo_only(event, context)
        if answer.get("isAuthorized"):
            roles = json.loads(answer["context"]["roles"])
            answer["context"]["roles"] = json.dumps({**roles, "fresh": roles.get("demo", [])})
        return answer

    api.gateway = LocalGateway(lambda: api.world.services, both_projects)
    # When its first bundle arrives without If-Match
    status, headers, answer = api.call("PUT", "/v1/projects/fresh/bundle", as_="admin", body=CURRENT)
    # Then everything is version 1, and the ETag says so
    assert status == 201, answer
    assert (answer["config_version"], answer["policies"], headers["etag"]) == (
        1,
        {"lint": 1, "unit-tests": 1},
        '"1"',
    )


class FailingAppend:
    """The store, except that every append fails: the write of the one transaction never happens."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.appends = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def append(self, *_args: Any, **_kw: Any) -> None:
        self.appends += 1
        raise StoreUnavailable("append failed")


def test_a_store_that_fails_the_write_leaves_nothing_half_applied(api) -> None:
    # Given a store whose transaction fails
    original = api.world.gate.store
    failing = FailingAppend(original)
    before = snapshot(api.world)
    body = {"config": NEW_CONFIG, "policies": {"api-contract": CONTRACT, "unit-tests": STRICTER_UNIT}}
    try:
        api.world.gate.store = failing
        status, headers, answer = api.call("PUT", B, as_="admin", body=body, headers={"if-match": "1"})
    finally:
        api.world.gate.store = original
    # Then 503, with Retry-After, after one attempted write, and nothing changed: not a policy, not the config
    assert (status, answer["code"], failing.appends) == (503, "STATE_UNAVAILABLE", 1)
    assert "retry-after" in headers
    assert snapshot(api.world) == before
    listed = api.call("GET", P + "/policies", as_="requester")[2]["policies"]
    assert {p["policy_id"]: p["version"] for p in listed} == {"lint": 1, "unit-tests": 1}


def test_the_route_is_documented_with_its_answers() -> None:
    from sentinel_service.http.openapi_document import openapi_document

    operation = openapi_document()["paths"]["/v1/projects/{project}/bundle"]["put"]
    assert {"200", "201", "403", "404", "412", "422", "428"} <= set(operation["responses"])
    assert any(p["name"] == "If-Match" for p in operation["parameters"])
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/ProjectBundle"}
