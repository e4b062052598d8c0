"""What the fuzzer found, each reproduced deterministically and kept visible as a strict xfail until fixed.

The fuzzer (test_openapi_fuzz.py) steps around exactly these inputs (`known_bug`) so it keeps guarding the
rest of the API; a fix turns the matching test here into an XPASS, which fails the run until the xfail mark
and the fuzzer's step-around are removed together."""

import json
from typing import Any

import pytest

from sentinel_gateway.gateway import LocalGateway
from support.world import BASE, REV, World

P = "/v1/projects/demo"
CALLERS = {
    "requester": {
        "principal_id": "agent-1",
        "kind": "agent",
        "sponsor": "hank-human",
        "roles": {"demo": ["requester"]},
    },
    "ci": {
        "principal_id": "ci-bot",
        "kind": "ci",
        "sponsor": "",
        "roles": {"demo": ["publisher", "requester"]},
    },
    "reviewer": {
        "principal_id": "rita-reviewer",
        "kind": "human",
        "sponsor": "",
        "roles": {"demo": ["reviewer"]},
    },
}


def authorizer(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    caller = CALLERS.get(event["headers"].get("authorization", "").removeprefix("Bearer "))
    if caller is None:
        return {"isAuthorized": False}
    return {"isAuthorized": True, "context": dict(caller, roles=json.dumps(caller["roles"]))}


@pytest.fixture
def gateway():
    world = World()
    world.candidate()
    return LocalGateway(lambda: world.services, authorizer)


def send(
    gateway: LocalGateway,
    method: str,
    path: str,
    body: Any = None,
    *,
    as_: str = "requester",
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], Any]:
    data = body if isinstance(body, bytes | str) or body is None else json.dumps(body)
    status, out, raw = gateway.invoke(
        method,
        path,
        {"authorization": f"Bearer {as_}", "content-type": content_type, **(headers or {})},
        data,
        query,
    )
    return status, {k.lower(): v for k, v in out.items()}, json.loads(raw) if raw else None


def assert_refused(status: int, headers: dict[str, str], body: Any, *statuses: int) -> None:
    """A refusal is a problem document with a documented 4xx status, never the gateway's bare 500."""
    assert status in statuses, (status, body)
    assert headers.get("content-type") == "application/problem+json"
    assert body["status"] == status and body["code"]


def evidence(**over: Any) -> dict[str, Any]:
    return {
        "check_id": "C1",
        "subject": "payments",
        "revision": REV,
        "environment": "staging",
        "scope": ["payments-api"],
        "observed_at": "2026-11-29T11:59:00Z",
        "source": {"system": "ci"},
        "junit_xml": '<testsuite><testcase name="t"/></testsuite>',
        **over,
    }


CAND = P + "/candidates/cand_00000001"


def test_multipart_without_a_boundary_is_refused_not_500(gateway) -> None:
    # Given a review body sent as multipart/form-data without a boundary
    # When it is posted
    status, headers, body = send(
        gateway,
        "POST",
        CAND + "/reviews",
        {"decision": "approve"},
        as_="reviewer",
        content_type="multipart/form-data",
    )
    # Then a 415 (or 422) problem document, as for any other media type the route does not take
    assert_refused(status, headers, body, 415, 422)


def test_a_body_that_is_not_utf8_is_refused_not_500(gateway) -> None:
    # Given bytes that are not UTF-8 as a JSON body
    # When they are posted
    status, headers, body = send(gateway, "POST", P + "/candidates", b"\xff\xfe{")
    # Then a 422 (or 415) problem document
    assert_refused(status, headers, body, 415, 422)


@pytest.mark.parametrize("as_of", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_an_as_of_that_overflows_utc_is_refused_not_500(gateway, as_of: str) -> None:
    # Given a what-if instant that exists with its offset but not in UTC
    # When a decision is read at it
    status, headers, body = send(gateway, "GET", CAND + "/decision", query={"as_of": as_of})
    # Then 422 VALIDATION_FAILED
    assert_refused(status, headers, body, 422)


@pytest.mark.parametrize("observed_at", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_an_observed_at_that_overflows_utc_is_refused_not_500(gateway, observed_at: str) -> None:
    # Given evidence observed at an instant that does not exist in UTC
    # When it is posted
    status, headers, body = send(
        gateway, "POST", CAND + "/evidence", evidence(observed_at=observed_at), as_="ci"
    )
    # Then 422 (VALIDATION_FAILED), never stored
    assert_refused(status, headers, body, 422)


def test_evidence_observed_before_year_1000_is_refused_not_500(gateway) -> None:
    # Given evidence observed in the year 7
    # When it is posted
    status, headers, body = send(
        gateway, "POST", CAND + "/evidence", evidence(observed_at="0007-03-13T09:55:32Z"), as_="ci"
    )
    # Then a 4xx problem document (422), never a crash
    assert_refused(status, headers, body, 422)


def test_a_what_if_before_year_1000_sees_no_later_fact(gateway) -> None:
    """Found by the fuzzer: an unpadded year 999 sorted after 2026 as text, so later facts counted (rule 2).
    Stored instants are now kept to the years 1970..9999, where text order is time order."""
    # Given a candidate created in 2026
    # When its decision is read as of the year 999, and as of 1970
    status, _headers, body = send(gateway, "GET", CAND + "/decision", query={"as_of": "0999-12-31T23:59:59Z"})
    early = send(gateway, "GET", CAND + "/decision", query={"as_of": "1970-01-01T00:00:00Z"})
    # Then the year 999 is refused as a time the gate cannot order, and 1970 holds with nothing recorded yet
    assert status == 422 and body["code"] == "VALIDATION_FAILED"
    assert early[0] == 200 and early[2]["decision"] == "hold"
    assert "NO_OBLIGATIONS" in {f["code"] for f in early[2]["findings"]}


@pytest.mark.parametrize("route", ["execution params", "openapi document", "NaN literal"])
def test_json_that_rfc8785_cannot_canonicalise_is_refused_not_500(gateway, route: str) -> None:
    """Found by the fuzzer (integers beyond 2**53 in an idempotent request: 500), fixed in Gate.idempotent;
    kept as the regression guard."""
    # Given a request with an Idempotency-Key whose free-form JSON holds a number RFC 8785 cannot represent
    big = 2**60
    if route == "execution params":
        path, body, headers = (
            CAND + "/actions/A1/executions",
            {"plan_digest": "x", "params": {"n": big}},
            {"idempotency-key": "k-big"},
        )
    elif route == "openapi document":
        path, headers = P + "/candidates", {"idempotency-key": "k-doc"}
        body = {
            "subject": "s",
            "base_revision": BASE,
            "revision": "c" * 40,
            "environment": "staging",
            "change": {"files": ["x"], "openapi": [{"name": "n", "before": {"a": big}}]},
        }
    else:
        path, headers = CAND + "/actions/A1/executions", {"idempotency-key": "k-nan"}
        body = '{"plan_digest": "x", "params": {"n": NaN}}'
    # When it is posted
    status, out, problem = send(gateway, "POST", path, body, headers=headers)
    # Then a 4xx problem document (422 VALIDATION_FAILED where the number reaches the request hash)
    assert_refused(status, out, problem, 409, 422)


def test_a_foreign_listing_cursor_is_refused_by_the_reference_store(gateway) -> None:
    # Given a cursor this service never issued
    # When candidates are listed from it
    status, headers, body = send(gateway, "GET", P + "/candidates", query={"cursor": "FALSE"})
    # Then 422 VALIDATION_FAILED, as the DynamoDB store answers
    assert_refused(status, headers, body, 422)
