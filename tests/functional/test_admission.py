"""Who may call a route is judged before its body is read (sentinel_service.http.admission): a caller with no
role in the project learns only that it does not exist for it, one with the wrong role that it may not; a body
nested too deeply to read is a 422 problem, never a 500; a 422's detail accounts for every finding."""

import pytest

from support.api import NEW, C, P, snapshot

INVALID = {"subject": 1, "unknown": True}


@pytest.mark.parametrize(
    ("caller", "method", "path", "status", "code"),
    [
        ("outsider", "POST", C, 404, "NOT_FOUND"),  # no role in the project
        ("reviewer", "POST", C, 403, "FORBIDDEN_ROLE"),  # a role, not one the route admits
        ("auditor", "PUT", P + "/config", 403, "FORBIDDEN_ROLE"),
        ("requester", "PUT", P + "/policies/unit-tests", 403, "FORBIDDEN_ROLE"),
        ("requester", "POST", C + "/cand_00000001/reviews", 403, "AGENT_CANNOT_REVIEW"),  # kind first
        ("ci", "POST", C + "/cand_00000001/reviews", 403, "REVIEWER_NOT_HUMAN"),
        ("admin", "POST", C + "/cand_00000001/reviews", 403, "FORBIDDEN_ROLE"),
        ("requester", "POST", "/v1/projects/nope/candidates", 404, "NOT_FOUND"),  # no such project
    ],
)
def test_the_callers_roles_are_judged_before_its_body(api, caller, method, path, status, code) -> None:
    # Given a body that would fail validation
    before = snapshot(api.world)
    # When a caller the route does not admit sends it
    got, headers, body = api.call(method, path, as_=caller, body=INVALID)
    # Then the answer is about the caller, not the body, and nothing changed
    assert (got, body["code"]) == (status, code), body
    assert headers["content-type"].startswith("application/problem+json")
    assert snapshot(api.world) == before


def test_a_caller_the_route_admits_still_gets_the_bodys_422(api) -> None:
    status, _h, body = api.call("POST", C, as_="requester", body=INVALID)
    assert (status, body["code"]) == (422, "VALIDATION_FAILED")


@pytest.mark.parametrize("depth", [1_000, 100_000])
@pytest.mark.parametrize(
    ("path", "code"), [(C, "VALIDATION_FAILED"), (C + "/{cid}/plan", "PLAN_PREFLIGHT_FAILED")]
)
def test_a_body_nested_too_deeply_is_a_422_problem(api, depth: int, path: str, code: str) -> None:
    # Given a candidate, and a JSON body nested deeper than the parser reads
    cid = api.call("POST", C, body=NEW)[2]["candidate_id"]
    before = snapshot(api.world)
    deep = "[" * depth + "]" * depth
    method = "PUT" if path.endswith("/plan") else "POST"
    # When it is sent
    status, headers, body = api.call(
        method, path.format(cid=cid), raw='{"tasks":' + deep + "}", headers={"if-match": '"x"'}
    )
    # Then a 422 problem document with the route's refusal code, and nothing changed
    assert (status, body["code"]) == (422, code), body
    assert headers["content-type"].startswith("application/problem+json")
    assert "nested too deeply" in body["detail"]
    assert snapshot(api.world) == before


def test_a_422_detail_accounts_for_every_finding(api) -> None:
    # Given a candidate body with six problems
    status, _h, body = api.call("POST", C, body={"bad": 1})
    # Then the detail names the first five and how many more the findings list
    assert status == 422 and len(body["findings"]) == 6
    assert body["detail"].endswith("; and 1 more (see findings)")
    for finding in body["findings"][:5]:
        assert finding["detail"] in body["detail"]
    # And with five or fewer, the detail names them all
    status, _h, body = api.call("POST", C, body={**NEW, "bad": 1})
    assert status == 422 and [f["detail"] for f in body["findings"]] == [body["detail"]]
