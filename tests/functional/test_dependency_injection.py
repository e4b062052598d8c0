"""The endpoints' seams: services and the caller arrive through Powertools' Depends, replaceable per
resolver."""

import json

from sentinel_domain.ports import StreamRef
from sentinel_gateway.events import http_event, with_authorizer
from sentinel_service.http import endpoints
from sentinel_service.http.endpoints import ENDPOINTS, SERVICES
from sentinel_service.http.openapi_document import openapi
from sentinel_service.http.request import Call
from sentinel_service.http.resolver import build_resolver
from support.world import World


def test_a_resolver_serves_the_services_and_caller_its_dependency_overrides_name() -> None:
    # Given the gating function's resolver whose services and caller are overridden
    world = World()
    app = build_resolver("gating", {**ENDPOINTS, "openapi": openapi})
    app.dependency_overrides[endpoints.services] = lambda: world.services
    app.dependency_overrides[endpoints.caller] = lambda: Call(
        {}, {"principal_id": "aud", "kind": "human", "roles": json.dumps({"demo": ["auditor"]})}
    )
    # When the project chain is read with no authorizer context on the event at all
    answer = app.resolve(http_event("GET", "/v1/projects/demo/audit"), None)
    # Then the overridden caller was the one judged, against the overridden services' store
    body = json.loads(answer["body"])
    assert answer["statusCode"] == 200
    assert len(body["events"]) == len(world.store.load(StreamRef("demo")).events)


def test_without_an_override_the_caller_is_only_what_the_authorizer_put_on_the_event() -> None:
    # Given the gating function's resolver serving a world, with the services provider in its context
    world = World()
    app = build_resolver("gating", {**ENDPOINTS, "openapi": openapi})
    event = with_authorizer(
        http_event("GET", "/v1/whoami", headers={"x-principal": "alice-admin"}),
        {"principal_id": "eve", "kind": "human", "sponsor": "", "roles": "{}"},
    )
    app.append_context(**{SERVICES: lambda: world.services})
    # When whoami is asked with a header that claims another identity
    answer = app.resolve(event, None)
    # Then the answer names the authorizer's principal and nothing the request said of itself
    assert json.loads(answer["body"])["principal_id"] == "eve"
