"""API fuzzing: schemathesis over the OpenAPI document, in-process against the real handlers.

Every request goes through the emulated API Gateway (`sentinel_gateway.gateway.LocalGateway`: route match,
authorizer, handler) behind a small WSGI adapter, over the in-memory store of the shared test world. A fake
authorizer stands in for the token table (the real one is exercised in tests/integration/security). Each
operation is fuzzed three ways: as a human holding every human role, as the trusted ci publisher, and
anonymously.

Checks: schemathesis' default set, so: no 5xx, every status documented, every body and header as the
document declares, schema-violating input refused, schema-valid input not refused without a reason. Two
settings say where the gate legitimately answers differently, each with its reason next to it. Generation is
deterministic (Hypothesis derandomised, no example database), so a strict xfail cannot flake; set
SENTINEL_FUZZ_RANDOM=1 to explore with fresh randomness locally.

Budget: 25 examples per operation (10 for the plan) plus the coverage phase for the privileged caller, 8 for
the publisher, 5 anonymous (MAX_EXAMPLES, PLAN_EXAMPLES): about 14 s of CPU in all.
"""

import http
import json
import os
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck
from schemathesis.config import SchemathesisConfig

from sentinel_domain.models import (
    ChangeContextRequest,
    EvidenceRequest,
    ReviewRequest,
)
from sentinel_gateway.gateway import LocalGateway
from sentinel_service.http.openapi_document import openapi_document
from support.world import BASE, CI, PROJECT, REQUESTER, REV, REVIEWER, World

RANDOM = os.environ.get("SENTINEL_FUZZ_RANDOM") == "1"
MAX_EXAMPLES = {"human": 25, "ci": 8, "anonymous": 5}
PLAN_EXAMPLES = 10  # the plan's nested schema makes each example costly
FILES = ["services/payments/api.py", "docs/guide.md"]
JUNIT = (
    '<testsuite name="s"><testcase classname="a" name="t1"/><testcase classname="a" name="t2"/></testsuite>'
)

# The callers the fake authorizer knows. The human holds every role a human may hold, so every route is
# reachable; the ci principal is the project's trusted publisher.
CALLERS = {
    "tok-human": {
        "principal_id": "hilda-all-roles",
        "kind": "human",
        "sponsor": "",
        "roles": {PROJECT: ["admin", "auditor", "requester", "reviewer"]},
    },
    "tok-ci": {"principal_id": CI.id, "kind": "ci", "sponsor": "", "roles": {PROJECT: list(CI.roles)}},
}


def fake_authorizer(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    header = event["headers"].get("authorization", "")
    caller = CALLERS.get(header.removeprefix("Bearer ")) if header.startswith("Bearer ") else None
    if caller is None:
        return {"isAuthorized": False}
    return {"isAuthorized": True, "context": dict(caller, roles=json.dumps(caller["roles"]))}


# The world the fixture below serves: the gateway's handlers reach its services through this holder.
SERVED: dict[str, World] = {}
GATEWAY = LocalGateway(lambda: SERVED["world"].services, fake_authorizer)


def wsgi_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """WSGI in, API Gateway event out. The path is passed on as sent (percent-encoded), like rawPath."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else None
    headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = environ["CONTENT_TYPE"]
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    path = urlsplit(raw).path if raw else environ.get("PATH_INFO", "")
    query = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)) or None
    status, out_headers, data = GATEWAY.invoke(environ["REQUEST_METHOD"], path, headers, body, query)
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    start_response(f"{status} {reason}", [*out_headers.items(), ("Content-Length", str(len(data)))])
    return [data]


def seeded_world() -> tuple[World, dict[str, str]]:
    """The demo project with one candidate taken as far as an approved plan with evidence, so fuzzed requests
    that name real objects reach the deep rules. Ids and digests are deterministic (fixed clock and ids)."""
    world = World()
    gate = world.gate
    cid = world.candidate(files=FILES)["candidate_id"]
    gate.add_change_context(
        PROJECT, cid, CI, ChangeContextRequest.model_validate({"change": {"files": FILES}}), None
    )
    proposal = gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()
    checks = [c["check_id"] for t in proposal["plan"]["tasks"] for c in t["checks"]]
    plan = dict(
        proposal["plan"],
        actions=[
            {"action_id": "A1", "type": "dispatch_checks", "params": {"checks": checks}, "max_executions": 2}
        ],
    )
    digest = gate.put_plan(PROJECT, cid, REQUESTER, plan, proposal["plan_digest"]).plan_digest
    gate.review(
        PROJECT, cid, REVIEWER, ReviewRequest(decision="approve", plan_digest=digest, revision=REV), None
    )
    evidence = gate.post_evidence(
        PROJECT,
        cid,
        CI,
        EvidenceRequest.model_validate(
            {
                "check_id": "C1",
                "subject": "payments",
                "revision": REV,
                "environment": "staging",
                "scope": ["payments-api"],
                "observed_at": "2026-11-29T11:59:00Z",
                "source": {"system": "ci"},
                "junit_xml": JUNIT,
            }
        ),
        None,
    ).as_json()
    return world, {"candidate_id": cid, "plan_digest": digest, "evidence_id": evidence["evidence_id"]}


_, KNOWN = seeded_world()


def config(caller: str) -> SchemathesisConfig:
    """The default checks, with the two places where the gate answers for a documented reason."""
    return SchemathesisConfig.from_dict(
        {
            "dictionaries": {
                "project": {"values": [PROJECT]},
                "candidate": {"values": [KNOWN["candidate_id"]]},
                "task": {"values": ["T1", "T2"]},
                "action": {"values": ["A1"]},
                "policy": {"values": ["unit-tests", "lint"]},
                "digest": {"values": [KNOWN["plan_digest"]]},
                "revision": {"values": [REV, REV.upper()]},
                "base": {"values": [BASE]},
                "environment": {"values": ["staging", "production"]},
                "check": {"values": ["C1", "C2"]},
                "evidence": {"values": [KNOWN["evidence_id"]]},
            },
            # Real objects most of the time, random ids (which must be 404 or refused) the rest.
            "parameters": {
                "path.project": {"dictionary": "project", "probability": 0.85},
                "path.candidate_id": {"dictionary": "candidate", "probability": 0.8},
                "path.task_id": {"dictionary": "task", "probability": 0.8},
                "path.action_id": {"dictionary": "action", "probability": 0.8},
                "path.policy_id": {"dictionary": "policy", "probability": 0.7},
                "body.plan_digest": {"dictionary": "digest", "probability": 0.7},
                "body.revision": {"dictionary": "revision", "probability": 0.7},
                "body.base_revision": {"dictionary": "base", "probability": 0.7},
                "body.environment": {"dictionary": "environment", "probability": 0.7},
                "body.check_id": {"dictionary": "check", "probability": 0.7},
                "body.checks[*].evidence_id": {"dictionary": "evidence", "probability": 0.7},
            },
            "generation": {"deterministic": not RANDOM, "with-security-parameters": caller == "anonymous"},
            # The coverage phase (boundary values, wrong types, odd media types for every parameter) runs
            # once, for the caller who reaches every handler; for the others it would mostly repeat the same
            # refusals.
            "phases": {"coverage": {"enabled": caller == "human"}},
            "operations": [{"include-path-regex": "/plan$", "generation": {"max-examples": PLAN_EXAMPLES}}],
            "checks": {
                # A body over the route's limit is refused before it is read: 413 PAYLOAD_TOO_LARGE is the
                # documented answer to a schema-violating body too large to parse (API.md, Conventions). A
                # plan is judged by preflight only after its If-Match precondition, so a stale one answers 412
                # first.
                "negative_data_rejection": {
                    "expected-statuses": [
                        400,
                        401,
                        403,
                        404,
                        405,
                        406,
                        409,
                        412,
                        413,
                        415,
                        422,
                        428,
                        429,
                        "5xx",
                    ]
                },
                # A gate judges content the schema cannot express (full commit ids, plan preflight, JUnit that
                # must parse, the service clock, object state), so a schema-valid request may be refused with
                # a documented 4xx problem. 5xx stays a failure through not_a_server_error.
                "positive_data_acceptance": {
                    "expected-statuses": ["2xx", 400, 401, 403, 404, 409, 412, 413, 422, 428, 429, "5xx"]
                },
                # Checked on its own below (test_undeclared_methods_answer_405), as an xfail with its reason.
                "unsupported_method": {"enabled": False},
            },
        }
    )


def load(caller: str) -> Any:
    schema = schemathesis.openapi.from_dict(openapi_document(), config=config(caller))
    schema.app = wsgi_app
    return schema


HUMAN, PUBLISHER, ANONYMOUS = load("human"), load("ci"), load("anonymous")


def budget(caller: str) -> hypothesis.settings:
    return hypothesis.settings(
        max_examples=MAX_EXAMPLES[caller],
        deadline=None,
        database=None,
        derandomize=not RANDOM,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
        ],
    )


@pytest.fixture
def served_world():
    """A fresh seeded world for each operation, so one operation's writes never steer another's."""
    world, known = seeded_world()
    assert known == KNOWN, "the seeded world is no longer deterministic: fuzzed ids would all be 404"
    SERVED["world"] = world
    yield world
    SERVED.clear()


def known_bug(case: Any) -> str | None:
    """Inputs that trip a product bug reproduced by a strict xfail in
    tests/functional/fuzzing/test_fuzz_findings.py; the fuzzer steps around them so it keeps guarding
    everything else. Remove an entry with its fix."""
    content_type = (case.headers or {}).get("Content-Type", "")
    if content_type.startswith("multipart/form-data") and "boundary=" not in content_type:
        return "multipart/form-data without a boundary answers 500"
    if isinstance(case.body, bytes):
        try:
            case.body.decode("utf-8")
        except UnicodeDecodeError:
            return "a body that is not UTF-8 answers 500"
    # Query values may come as lists (the coverage phase repeats parameters).
    query = {k: v if isinstance(v, list) else [v] for k, v in (case.query or {}).items()}
    instants = list(query.get("as_of", []))
    if isinstance(case.body, dict):
        instants.append(case.body.get("observed_at"))
    for value in instants:
        if isinstance(value, str) and (value[:2] in ("00", "99") or value[:1] == "0"):
            return "an instant before year 1000, or one that overflows once moved to UTC, answers 500"
    cursors = [c for c in query.get("cursor", []) if c is not None]
    if case.operation.path.endswith("/candidates") and any(not str(c).isdigit() for c in cursors):
        return "MemoryStore.list_claims answers a foreign cursor with 500 (the DynamoDB store refuses it)"
    return None


def fuzz(case: Any, token: str | None) -> None:
    if known_bug(case):
        return
    headers = {"Authorization": f"Bearer {token}"} if token else None
    case.call_and_validate(headers=headers)


@HUMAN.parametrize()
@budget("human")
def test_a_privileged_human_gets_only_documented_answers(case: Any, served_world: World) -> None:
    # Given the seeded project, When any generated request is sent by a human with every human role,
    # Then no 5xx, every status documented, every response as the document declares
    fuzz(case, "tok-human")


@PUBLISHER.parametrize()
@budget("ci")
def test_the_trusted_publisher_gets_only_documented_answers(case: Any, served_world: World) -> None:
    # Given the seeded project, When any generated request is sent by the trusted ci publisher, Then the same
    fuzz(case, "tok-ci")


@ANONYMOUS.parametrize()
@budget("anonymous")
def test_an_anonymous_caller_gets_only_documented_answers(case: Any, served_world: World) -> None:
    # Given no credential (or a generated, refused one), When any request is sent, Then the gateway answers
    # 401/403 before any handler, or the anonymous routes answer as documented
    fuzz(case, None)
    if case.operation.path not in ("/v1/health", "/v1/openapi.json"):
        # And no write reached the store: the world is exactly as seeded
        assert served_world.store.outbox == []


@pytest.mark.xfail(
    strict=True,
    reason=(
        "schemathesis' unsupported_method check wants 405 Method Not Allowed for a method the document does "
        "not list on a path; the gateway answers 404 {'message': 'Not Found'} as API Gateway HTTP APIs do "
        "for an unmatched route. To pass, the route table must add a catch-all (ANY) route per path "
        "answering 405 with Allow, and the document declare 405 there; until then this stays visible."
    ),
)
def test_undeclared_methods_answer_405(served_world: World) -> None:
    # Given a path the document lists with GET only
    # When it is called with a method the document does not list
    status, _headers, _body = GATEWAY.invoke("DELETE", "/v1/whoami", {"authorization": "Bearer tok-human"})
    # Then 405 Method Not Allowed
    assert status == 405
