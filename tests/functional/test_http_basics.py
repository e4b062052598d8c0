"""The gateway's own answers and the problem documents of the handlers."""

from support.world import BASE, REV

C = "/v1/projects/demo/candidates"
NEW = {
    "subject": "payments",
    "base_revision": BASE,
    "revision": REV,
    "environment": "staging",
    "change": {"files": ["services/payments/api.py"]},
}


def test_missing_token_is_401_and_a_refused_one_403(api) -> None:
    # Given no Authorization header, then a token nobody issued
    status, _h, body = api.call("GET", "/v1/whoami", as_=None)
    assert (status, body) == (401, {"message": "Unauthorized"})
    status, _h, body = api.call("GET", "/v1/whoami", as_="nobody")
    assert (status, body) == (403, {"message": "Forbidden"})


def test_health_and_openapi_are_anonymous(api) -> None:
    status, _h, body = api.call("GET", "/v1/health", as_=None)
    assert status == 200 and body["status"] == "ok" and body["runtime"] == "local"
    status, _h, doc = api.call("GET", "/v1/openapi.json", as_=None)
    assert status == 200 and "/v1/projects/{project}/candidates" in doc["paths"]


def test_create_candidate_then_conflict(api) -> None:
    status, _h, body = api.call("POST", C, body=NEW)
    assert status == 201, body
    status, _h, again = api.call("POST", C, body=NEW)
    assert (
        status == 409
        and again["code"] == "CANDIDATE_EXISTS"
        and again["candidate_id"] == body["candidate_id"]
    )


def test_identity_in_body_is_refused_as_unknown_field(api) -> None:
    status, headers, body = api.call("POST", C, body=dict(NEW, requested_by="rita-reviewer"))
    assert status == 422 and body["code"] == "VALIDATION_FAILED"
    assert headers["content-type"] == "application/problem+json"


def test_outsider_cannot_learn_the_project_exists(api) -> None:
    status, _h, body = api.call("GET", C, as_="outsider")
    assert status == 404 and body["code"] == "NOT_FOUND"


def test_malformed_json_is_a_problem(api) -> None:
    status, _h, body = api.call("POST", C, raw="{not json")
    assert status == 422 and body["code"] == "VALIDATION_FAILED"


def test_oversized_body_is_413(api) -> None:
    status, _h, body = api.call("POST", C + "/x/reviews", as_="reviewer", raw="x" * (256 * 1024 + 1))
    assert status == 413 and body["code"] == "PAYLOAD_TOO_LARGE"
