"""The resolver of each function: the route table's operations bound to their endpoints, and the refusals
turned into problem documents, by type, in one place."""

import functools
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)

from sentinel_domain.errors import Refusal, StoreUnavailable
from sentinel_service.http.problems import problem_body, problem_response
from sentinel_service.http.routes import ROUTES, route_for

Endpoints = Mapping[str, Callable[..., Any]]
# How an outcome's JSON becomes the body's text: as the problem documents are written (UTF-8 kept as it is).
SERIALIZE = functools.partial(json.dumps, ensure_ascii=False)


def _problem(
    status: int, code: str, title: str, detail: str, findings: list[dict[str, Any]] | None = None
) -> Response[str]:
    return Response(
        status_code=status,
        content_type="application/problem+json",
        body=json.dumps(problem_body(code, status, title, detail, findings), ensure_ascii=False),
    )


def _validation_findings(error: RequestValidationError) -> list[dict[str, Any]]:
    out = []
    for e in error.errors():
        loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "(body)"
        msg = (
            "unknown field (identity comes only from your credential)"
            if e.get("type") == "extra_forbidden"
            else e.get("msg", "invalid")
        )
        out.append({"code": "VALIDATION_FAILED", "detail": f"{loc}: {msg}"})
    return out


def _summary(findings: list[dict[str, Any]], shown: int = 5) -> str:
    """The problem's detail: every finding's, or the first `shown` and how many more the findings list."""
    details = "; ".join(f["detail"] for f in findings[:shown])
    more = len(findings) - shown
    return details + (f"; and {more} more (see findings)" if more > 0 else "")


def _invalid_body_code(app: APIGatewayHttpResolver) -> str:
    route = route_for(app.current_event.http_method, app.current_event.path)
    return route.invalid_body if route else "VALIDATION_FAILED"


def build_resolver(function: str | None, endpoints: Endpoints) -> APIGatewayHttpResolver:
    """The resolver of one function (None: every route, as the OpenAPI document sees it), each route answered
    by the endpoint its operation names in `endpoints`."""
    app = APIGatewayHttpResolver(enable_validation=True, serializer=SERIALIZE)

    @app.exception_handler(Refusal)
    def refused(error: Refusal) -> Response[str]:
        return problem_response(error)

    @app.exception_handler(RequestValidationError)
    def invalid(error: RequestValidationError) -> Response[str]:
        findings = _validation_findings(error)
        if _invalid_body_code(app) == "PLAN_PREFLIGHT_FAILED":
            # Preflight's first stage: a plan that is not a JSON object is a schema finding, nothing stored.
            for f in findings:
                f["code"] = "PLAN_SCHEMA_INVALID"
            return _problem(
                422,
                "PLAN_PREFLIGHT_FAILED",
                "The plan failed preflight",
                "the plan is not a JSON object; nothing was stored",
                findings,
            )
        return _problem(422, "VALIDATION_FAILED", "The request is not valid", _summary(findings), findings)

    @app.exception_handler(RecursionError)
    def too_deep(_error: RecursionError) -> Response[str]:
        # json (and anything that walks the value after it) gives up on nesting deeper than the
        # interpreter's recursion limit, about a thousand levels: the body is refused as unreadable.
        findings = [{"code": "VALIDATION_FAILED", "detail": "(body): nested too deeply to be read"}]
        if _invalid_body_code(app) == "PLAN_PREFLIGHT_FAILED":
            findings[0]["code"] = "PLAN_SCHEMA_INVALID"
            return _problem(
                422, "PLAN_PREFLIGHT_FAILED", "The plan failed preflight", _summary(findings), findings
            )
        return _problem(422, "VALIDATION_FAILED", "The request is not valid", _summary(findings), findings)

    @app.exception_handler(RequestUnsupportedContentType)
    def unsupported(_error: RequestUnsupportedContentType) -> Response[str]:
        return _problem(
            415, "VALIDATION_FAILED", "The request is not valid", "send the body as application/json"
        )

    @app.exception_handler(StoreUnavailable)
    def unavailable(_error: StoreUnavailable) -> Response[str]:
        response = _problem(
            503,
            "STATE_UNAVAILABLE",
            "The state store cannot be read or written right now",
            "retry shortly; nothing was changed",
        )
        response.headers["Retry-After"] = "1"
        return response

    @app.not_found
    def not_found(_error: NotFoundError) -> Response[str]:
        return _problem(404, "NOT_FOUND", "Not found", "no such route")

    for route in ROUTES:
        if function is None or route.function == function:
            rule = re.sub(r"\{([a-z_]+)\}", r"<\1>", route.path)
            app.route(
                rule,
                route.method,
                summary=route.summary,
                description=f"Role: {route.roles}.",
                operation_id=route.operation,
                status_code=route.status,
                tags=[route.function],
            )(endpoints[route.operation])
    return app
