"""The entry point of one function: the guards that run before Powertools parses a body (size, then the
caller's roles, then media type and encoding), then the function's resolver, whose endpoints receive the
services the entry point was given."""

import base64
import json
from collections.abc import Callable
from typing import Any

from sentinel_service.compose import ServicesProvider
from sentinel_service.http.admission import admission_refusal
from sentinel_service.http.endpoints import ENDPOINTS, SERVICES
from sentinel_service.http.openapi_document import openapi
from sentinel_service.http.problems import problem_body, problem_response
from sentinel_service.http.resolver import build_resolver
from sentinel_service.http.routes import Route, route_for

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def _early_problem(status: int, code: str, title: str, detail: str) -> dict[str, Any]:
    """A refusal answered before the resolver runs (its own parsers would fail on what follows)."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/problem+json"},
        "body": json.dumps(problem_body(code, status, title, detail)),
        "isBase64Encoded": False,
    }


def _refused(route: Route | None, event: dict[str, Any]) -> dict[str, Any] | None:
    """The caller's roles, judged before anything about the body (admission.py)."""
    refusal = admission_refusal(route, event) if route is not None else None
    if refusal is None:
        return None
    response = problem_response(refusal)
    return {
        "statusCode": response.status_code,
        "headers": {"Content-Type": "application/problem+json", **(response.headers or {})},
        "body": response.body,
        "isBase64Encoded": False,
    }


def _unreadable_body(event: dict[str, Any], body: str) -> dict[str, Any] | None:
    """Bodies are JSON in UTF-8. A declared media type that is not JSON is 415; bytes that are not UTF-8 are
    422. Both would otherwise reach parsers that raise instead of refusing."""
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    media = headers.get("content-type", "").split(";")[0].strip().lower()
    if media and media != "application/json" and not media.endswith("+json"):
        return _early_problem(
            415, "VALIDATION_FAILED", "The request is not valid", "send the body as application/json"
        )
    if event.get("isBase64Encoded"):
        try:
            base64.b64decode(body, validate=True).decode("utf-8")
        except ValueError:
            return _early_problem(
                422, "VALIDATION_FAILED", "The request is not valid", "the body is not UTF-8 JSON"
            )
    return None


def _decoded_size(body: str) -> int:
    try:
        return len(base64.b64decode(body, validate=True))
    except ValueError:
        return len(body)  # not base64 after all: judge the text as sent


def _too_large(route: Route | None, event: dict[str, Any], body: str) -> dict[str, Any] | None:
    size = _decoded_size(body) if event.get("isBase64Encoded") else len(body.encode("utf-8"))
    if route is not None and size > route.body_limit:
        return _early_problem(
            413,
            "PAYLOAD_TOO_LARGE",
            "The body is too large",
            f"this route accepts at most {route.body_limit} bytes",
        )
    return None


def lambda_handler(function: str, services: ServicesProvider) -> Handler:
    """The entry point of one function: the body guards, then the resolver, whose endpoints receive what
    `services` provides (the composition root's product: the Lambda container's, or the local runner's)."""
    app = build_resolver(function, {**ENDPOINTS, "openapi": openapi})

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        body = event.get("body") or ""
        route = route_for(
            event.get("requestContext", {}).get("http", {}).get("method", ""), event.get("rawPath", "")
        )
        if route is not None and route.function != function:
            route = None  # not this function's: the resolver answers 404 as for any unknown route
        # Size first (nothing is read), then who may call, then what the body is.
        refusal = (
            _too_large(route, event, body)
            or _refused(route, event)
            or (_unreadable_body(event, body) if body else None)
        )
        if refusal:
            return refusal
        app.append_context(**{SERVICES: services})
        return app.resolve(event, context)

    return handler
