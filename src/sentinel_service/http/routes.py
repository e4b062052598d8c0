"""The one route table: every route, the roles it admits, the function that serves it. The resolvers of
every function and the OpenAPI document are built from it."""

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)

from sentinel_domain.errors import Refusal, StoreUnavailable
from sentinel_domain.models import Plan
from sentinel_service.http import endpoints as ep
from sentinel_service.http.problems import problem_body, problem_response
from sentinel_service.http.request import CURRENT, Call

SMALL_BODY = 256 * 1024
LARGE_BODY = 2 * 1024 * 1024
P = "/v1/projects/{project}"
C = P + "/candidates/{candidate_id}"


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    function: str  # the Lambda function that serves it (infra reads this table's function names too)
    roles: str
    summary: str
    endpoint: Callable[..., Response]
    status: int = 200
    public: bool = False

    @property
    def body_limit(self) -> int:
        return LARGE_BODY if self.path.endswith(("/evidence", "/candidates", "/change-context")) else SMALL_BODY


ROUTES: tuple[Route, ...] = (
    Route("GET", "/v1/health", "health", "anonymous", "Service health", ep.health, public=True),
    Route("GET", "/v1/openapi.json", "health", "anonymous", "This OpenAPI document", lambda: openapi_response(),
          public=True),
    Route("GET", "/v1/whoami", "gating", "any", "The caller's identity and roles", ep.whoami),
    Route("PUT", P + "/config", "gating", "admin", "Set the project configuration (a new version)", ep.put_config,
          201),
    Route("GET", P + "/config", "gating", "any", "Read the project configuration", ep.get_config),
    Route("PUT", P + "/policies/{policy_id}", "gating", "admin", "Create or amend a policy", ep.put_policy, 201),
    Route("GET", P + "/policies", "gating", "any", "List policies", ep.list_policies),
    Route("GET", P + "/policies/{policy_id}", "gating", "any", "Read one policy version", ep.get_policy),
    Route("GET", P + "/audit", "gating", "admin, auditor", "The project chain with verification",
          ep.project_audit),
    Route("POST", P + "/candidates", "gating", "requester, publisher", "Create a candidate from its change",
          ep.create_candidate, 201),
    Route("GET", P + "/candidates", "gating", "any", "Look candidates up", ep.find_candidates),
    Route("GET", C, "gating", "any", "The candidate's whole state", ep.get_candidate),
    Route("POST", C + "/change-context", "gating", "requester, publisher", "Add change context",
          ep.add_change_context, 201),
    Route("GET", C + "/decision", "gating", "any", "Evaluate without recording", ep.get_decision),
    Route("POST", C + "/decisions", "gating", "any", "Evaluate at the service clock and record",
          ep.record_decision, 201),
    Route("GET", C + "/audit", "gating", "any", "The candidate chain with verification", ep.candidate_audit),
    Route("POST", C + "/proposals", "plans", "requester", "Draft a plan (model or fallback)", ep.propose, 201),
    Route("PUT", C + "/plan", "plans", "requester", "Submit or amend the plan", ep.put_plan, 201),
    Route("POST", C + "/reviews", "review", "reviewer (human)", "Approve or reject one plan digest", ep.review,
          201),
    Route("POST", C + "/tasks/{task_id}/settlement", "review", "reviewer (human)", "Settle a passed task",
          ep.settle, 201),
    Route("POST", C + "/actions/{action_id}/executions", "actions", "requester", "Execute a declared action",
          ep.execute, 201),
    Route("POST", C + "/evidence", "evidence", "publisher, requester", "Post evidence for a check",
          ep.post_evidence, 201),
    Route("POST", C + "/tasks/{task_id}/reports", "evidence", "requester", "Report a task (the report writer)",
          ep.report, 201),
)

FUNCTIONS: tuple[str, ...] = tuple(sorted({r.function for r in ROUTES}))
_PATTERNS = [(r, re.compile("^" + re.sub(r"\{[a-z_]+\}", "[^/]+", r.path) + "$")) for r in ROUTES]


def route_for(method: str, path: str) -> Route | None:
    for route, pattern in _PATTERNS:
        if route.method == method and pattern.match(path):
            return route
    return None


def _problem(status: int, code: str, title: str, detail: str, findings: list[dict[str, Any]] | None = None
             ) -> Response:
    return Response(status_code=status, content_type="application/problem+json",
                    body=json.dumps(problem_body(code, status, title, detail, findings), ensure_ascii=False))


def _validation_findings(error: RequestValidationError) -> list[dict[str, Any]]:
    out = []
    for e in error.errors():
        loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "(body)"
        msg = "unknown field (identity comes only from your credential)" if e.get("type") == "extra_forbidden" \
            else e.get("msg", "invalid")
        out.append({"code": "VALIDATION_FAILED", "detail": f"{loc}: {msg}"})
    return out


def build_resolver(function: str | None) -> APIGatewayHttpResolver:
    """The resolver of one function (None: every route, as the local runner and the OpenAPI document see it)."""
    app = APIGatewayHttpResolver(enable_validation=True)

    def capture(app: APIGatewayHttpResolver, next_middleware: Callable[..., Response]) -> Response:
        token = CURRENT.set(Call.from_event(app.current_event.raw_event))
        try:
            return next_middleware(app)
        finally:
            CURRENT.reset(token)

    app.use([capture])

    @app.exception_handler(Refusal)
    def refused(error: Refusal) -> Response:
        return problem_response(error)

    @app.exception_handler(RequestValidationError)
    def invalid(error: RequestValidationError) -> Response:
        findings = _validation_findings(error)
        event = app.current_event
        if event.http_method == "PUT" and event.path.endswith("/plan"):
            # Preflight's first stage: a plan that is not a JSON object is a schema finding, nothing stored.
            for f in findings:
                f["code"] = "PLAN_SCHEMA_INVALID"
            return _problem(422, "PLAN_PREFLIGHT_FAILED", "The plan failed preflight",
                            "the plan is not a JSON object; nothing was stored", findings)
        return _problem(422, "VALIDATION_FAILED", "The request is not valid",
                        "; ".join(f["detail"] for f in findings[:5]), findings)

    @app.exception_handler(RequestUnsupportedContentType)
    def unsupported(_error: RequestUnsupportedContentType) -> Response:
        return _problem(415, "VALIDATION_FAILED", "The request is not valid",
                        "send the body as application/json")

    @app.exception_handler(StoreUnavailable)
    def unavailable(_error: StoreUnavailable) -> Response:
        response = _problem(503, "STATE_UNAVAILABLE", "The state store cannot be read or written right now",
                            "retry shortly; nothing was changed")
        response.headers["Retry-After"] = "1"
        return response

    @app.not_found
    def not_found(_error: NotFoundError) -> Response:
        return _problem(404, "NOT_FOUND", "Not found", "no such route")

    for route in ROUTES:
        if function is None or route.function == function:
            rule = re.sub(r"\{([a-z_]+)\}", r"<\1>", route.path)
            app.route(rule, route.method, summary=route.summary, description=f"Role: {route.roles}.",
                      operation_id=route.endpoint.__name__ if route.endpoint.__name__ != "<lambda>" else "openapi",
                      status_code=route.status, tags=[route.function])(route.endpoint)
    return app


def _early_problem(status: int, code: str, title: str, detail: str) -> dict[str, Any]:
    """A refusal answered before the resolver runs (its own parsers would fail on what follows)."""
    return {"statusCode": status, "headers": {"Content-Type": "application/problem+json"},
            "body": json.dumps(problem_body(code, status, title, detail)), "isBase64Encoded": False}


def _unreadable_body(event: dict[str, Any], body: str) -> dict[str, Any] | None:
    """Bodies are JSON in UTF-8. A declared media type that is not JSON is 415; bytes that are not UTF-8 are
    422. Both would otherwise reach parsers that raise instead of refusing."""
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    media = headers.get("content-type", "").split(";")[0].strip().lower()
    if media and media != "application/json" and not media.endswith("+json"):
        return _early_problem(415, "VALIDATION_FAILED", "The request is not valid",
                              "send the body as application/json")
    if event.get("isBase64Encoded"):
        try:
            base64.b64decode(body, validate=True).decode("utf-8")
        except ValueError:
            return _early_problem(422, "VALIDATION_FAILED", "The request is not valid",
                                  "the body is not UTF-8 JSON")
    return None


def _decoded_size(body: str) -> int:
    try:
        return len(base64.b64decode(body, validate=True))
    except ValueError:
        return len(body)  # not base64 after all: judge the text as sent


def lambda_handler(function: str) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The Lambda entry point of one function: the body limit, then the resolver."""
    app = build_resolver(function)

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        body = event.get("body") or ""
        route = route_for(event.get("requestContext", {}).get("http", {}).get("method", ""),
                          event.get("rawPath", ""))
        size = _decoded_size(body) if event.get("isBase64Encoded") else len(body.encode("utf-8"))
        if route is not None and size > route.body_limit:
            return _early_problem(413, "PAYLOAD_TOO_LARGE", "The body is too large",
                                  f"this route accepts at most {route.body_limit} bytes")
        if body:
            refusal = _unreadable_body(event, body)
            if refusal:
                return refusal
        return app.resolve(event, context)

    return handler


_OPENAPI: str | None = None


def openapi_document() -> dict[str, Any]:
    global _OPENAPI
    if _OPENAPI is None:
        _OPENAPI = build_resolver(None).get_openapi_json_schema(
            title="Sentinel", version="1.0.0",
            description="A fail-closed readiness gate for changes made by coding agents. Every route but "
                        "/v1/health and /v1/openapi.json needs `Authorization: Bearer <token>`.")
    doc: dict[str, Any] = _document(json.loads(_OPENAPI))
    return doc


PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "RFC 9457 problem document; `code` is stable (DOMAIN.md)",
    "required": ["type", "title", "status", "detail", "code"],
    "properties": {"type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
                   "detail": {"type": "string"}, "code": {"type": "string"},
                   "findings": {"type": "array", "items": {"type": "object"}}},
}
GATEWAY_SCHEMA: dict[str, Any] = {"type": "object", "required": ["message"],
                                  "properties": {"message": {"type": "string"}}}
REFUSAL_DESCRIPTIONS = {
    400: "IDEMPOTENCY_KEY_REQUIRED", 403: "FORBIDDEN_ROLE and the reviewer/action refusals",
    404: "NOT_FOUND: no such object, or no role in the project", 409: "conflicts (digest, idempotency, task, "
    "candidate exists, actions)", 412: "VERSION_CONFLICT: If-Match is stale", 413: "PAYLOAD_TOO_LARGE",
    415: "VALIDATION_FAILED: the body is not JSON", 422: "VALIDATION_FAILED and the other 422 codes",
    428: "VERSION_CONFLICT: If-Match is required", 429: "RATE_LIMITED", 503: "STATE_UNAVAILABLE",
}


def _statuses(route: Route) -> list[int]:
    if route.public:
        return [429, 503]
    out = [404, 403, 422, 429, 503]
    if route.method in ("POST", "PUT"):
        out += [409, 413, 415]
    if route.path.endswith(("/plan", "/config", "/proposals")):
        out += [412, 428]
    if route.path.endswith("/executions"):
        out += [400]
    return sorted(set(out))


def _document(doc: dict[str, Any]) -> dict[str, Any]:
    """The generated document, told what the gateway and the problem documents really answer."""
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    schemas["Problem"] = PROBLEM_SCHEMA
    schemas["GatewayMessage"] = GATEWAY_SCHEMA
    doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer",
                                                        "description": "snt_ token, checked by the authorizer"}}
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    gateway = {"application/json": {"schema": {"$ref": "#/components/schemas/GatewayMessage"}}}
    for route in ROUTES:
        operation = doc["paths"][route.path][route.method.lower()]
        success = {"description": route.summary, "content": {"application/json": {"schema": {"type": "object"}}}}
        responses: dict[str, Any] = {str(route.status): success}
        if route.path.endswith("/decisions"):
            responses["200"] = dict(success, description="hold with STATE_UNAVAILABLE: nothing was recorded")
        for status in _statuses(route):
            responses[str(status)] = {"description": REFUSAL_DESCRIPTIONS[status], "content": problem}
        if route.path == "/v1/health":
            responses["503"] = {"description": "degraded: the store cannot be reached", "content": {
                "application/json": {"schema": {"type": "object"}}}}
        if not route.public:
            responses["401"] = {"description": "no Authorization header (answered by the gateway)",
                                "content": gateway}
            responses["403"] = {"description": "a refused token (answered by the gateway), or "
                                "FORBIDDEN_ROLE and the other 403 codes", "content": {**gateway, **problem}}
            operation["security"] = [{"bearer": []}]
        else:
            operation["security"] = []
        operation["responses"] = responses
        headers = []
        if route.method == "POST":
            headers.append({"name": "Idempotency-Key", "in": "header", "required": route.path.endswith("/executions"),
                            "schema": {"type": "string", "minLength": 1, "maxLength": 255},
                            "description": "replays the first success of the same request; see DOMAIN.md rule 17"})
        if route.path.endswith(("/plan", "/config", "/proposals")):
            headers.append({"name": "If-Match", "in": "header", "required": False, "schema": {"type": "string"},
                            "description": "the current ETag; required to replace an existing version"})
        if headers:
            operation["parameters"] = [*operation.get("parameters", []), *headers]
    plan = Plan.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(plan.pop("$defs", {}))
    schemas["Plan"] = plan
    put_plan = doc["paths"][C + "/plan"]["put"]["requestBody"]["content"]["application/json"]
    put_plan["schema"] = {"$ref": "#/components/schemas/Plan"}
    return doc


def openapi_response() -> Response:
    return Response(status_code=200, content_type="application/json", body=json.dumps(openapi_document()))
