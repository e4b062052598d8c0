"""An unreadable OpenAPI document in a change context, through the HTTP handlers behind the emulated gateway:
`422 MALFORMED_CHANGE_CONTEXT` as a problem document, on both routes that take a change, and nothing stored
(no fact, no audit event, no claim, no idempotency record). A readable one derives per-operation
obligations."""

import json
from typing import Any

import pytest

from support.world import BASE, REV

P = "/v1/projects/demo"
C = P + "/candidates"
DOCUMENT = {
    "openapi": "3.0.3",
    "info": {"title": "payments", "version": "1"},
    "paths": {"/pets": {"get": {"responses": {"200": {"description": "ok"}}}}},
}
ALIAS_BOMB = "openapi: 3.0.0\n" + "".join(
    f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9 if i else ['"lol"'] * 9) + "]\n" for i in range(10)
)


def candidate(after: Any, revision: str = REV) -> dict[str, Any]:
    return {
        "subject": "payments",
        "base_revision": BASE,
        "revision": revision,
        "environment": "staging",
        "change": {"openapi": [{"name": "payments-api", "before": None, "after": after}]},
    }


def stored(api) -> tuple[Any, ...]:
    store = api.world.store
    return (
        sorted(
            (ref.project, ref.candidate_id or "", len(stream.events)) for ref, stream in store.streams.items()
        ),
        len(store.outbox),
        len(store.idempotency),
        json.dumps(store.claims, sort_keys=True),
    )


@pytest.fixture
def openapi_api(api):
    """The demo project, its configuration replaced by one with a per-operation OpenAPI rule."""
    status, headers, body = api.call("GET", P + "/config", as_="admin")
    assert status == 200, body
    config = dict(
        body["config"],
        derivation_rules=[{"openapi": "payments-api", "policy_id": "unit-tests", "per": "operation"}],
    )
    status, _h, body = api.call(
        "PUT", P + "/config", as_="admin", body=config, headers={"if-match": headers["etag"]}
    )
    assert status == 201, body
    return api


@pytest.mark.parametrize(
    ("after", "why"),
    [
        (ALIAS_BOMB, "aliases expanded"),
        ("openapi: 3.0.0\npaths:\n  /a: {$ref: 'https://attacker.invalid/paths.yaml'}\n", "never fetched"),
        ("openapi: 3.0.0\npaths: {/a: [\n", "not valid YAML"),
    ],
)
def test_an_unreadable_document_refuses_the_candidate_and_the_change_context(openapi_api, after, why):
    api = openapi_api
    # Given a project with an OpenAPI rule, and an existing candidate for another revision
    status, _h, existing = api.call("POST", C, body=candidate(DOCUMENT, revision="c" * 40))
    assert status == 201, existing
    before = stored(api)
    # When a candidate, or a change context, carries an unreadable document (with an idempotency key)
    for path, body in (
        (C, candidate(after)),
        (f"{C}/{existing['candidate_id']}/change-context", {"change": candidate(after)["change"]}),
    ):
        status, headers, problem = api.call("POST", path, body=body, headers={"idempotency-key": "k-1"})
        # Then it is 422 MALFORMED_CHANGE_CONTEXT, a problem document saying why
        assert status == 422, problem
        assert headers["content-type"].startswith("application/problem+json")
        assert problem["code"] == "MALFORMED_CHANGE_CONTEXT"
        assert problem["title"] == "The change context cannot be read"
        assert '"payments-api"' in problem["detail"] and why in problem["detail"], problem["detail"]
    # And nothing was stored: no event, no claim, no outbox item, no idempotency record
    assert stored(api) == before


def test_a_readable_document_derives_one_obligation_per_operation(openapi_api):
    # Given the same project, When a candidate adds a document with one operation, as YAML text
    as_yaml = (
        "openapi: 3.0.3\ninfo: {title: payments, version: '1'}\npaths:\n  /pets:\n    get:\n"
        "      responses: {200: {description: ok}}\n"
    )
    status, _h, body = openapi_api.call("POST", C, body=candidate(as_yaml))
    # Then the operation owes the rule's policy, scoped <document>/<METHOD> <path>, with its reason
    assert status == 201, body
    assert [(o["policy_id"], o["scope"]) for o in body["obligations"]] == [
        ("unit-tests", "payments-api/GET /pets")
    ]
    assert body["scope"] == ["payments-api/GET /pets"]
    assert '"GET /pets" added' in body["obligations"][0]["reason"]
