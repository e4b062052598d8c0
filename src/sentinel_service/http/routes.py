"""The one route table: every route, the roles it admits, the function that serves it and the endpoint (by
operation name) that answers it. Data only, standard library only: infra, the local gateway, acceptance and
evaluation read it without loading Powertools or a single use case. The resolver (`resolver.py`) binds each
operation name to its endpoint; the OpenAPI document (`openapi_document.py`) is generated from both."""

import re
from dataclasses import dataclass

SMALL_BODY = 256 * 1024
LARGE_BODY = 2 * 1024 * 1024
# GitHub caps a delivery at 25 MB, but the events the webhook takes are small: a pull_request payload is tens
# of KB, its largest part the pull request's description (at most 65,536 characters, up to 6 bytes each once
# JSON escapes it). 1 MiB holds any of them with room; anything larger is refused before it is even signed
# over.
WEBHOOK_BODY = 1024 * 1024
P = "/v1/projects/{project}"
C = P + "/candidates/{candidate_id}"


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    operation: str  # the endpoint's name in endpoints.py, and the document's operationId
    function: str  # the Lambda function that serves it (infra reads this table's function names too)
    roles: str
    summary: str
    status: int = 200
    public: bool = False
    # How a body that fails the route's validation is refused: a plan is judged by preflight, whose first
    # finding for a body that is not a JSON object is PLAN_SCHEMA_INVALID; everything else is
    # VALIDATION_FAILED.
    invalid_body: str = "VALIDATION_FAILED"
    max_body: int | None = None  # the route's own body limit, when the path does not say it

    @property
    def body_limit(self) -> int:
        if self.max_body is not None:
            return self.max_body
        return (
            LARGE_BODY if self.path.endswith(("/evidence", "/candidates", "/change-context")) else SMALL_BODY
        )


# One row per route, read as a table: the formatter leaves it as written.
# fmt: off
ROUTES: tuple[Route, ...] = (
    Route("GET", "/v1/health", "health", "health", "anonymous", "Service health", public=True),
    Route("GET", "/v1/openapi.json", "openapi", "health", "anonymous", "This OpenAPI document", public=True),
    # No bearer token: GitHub signs each delivery (X-Hub-Signature-256), and the forge function checks it.
    Route("POST", "/v1/forge/github/webhook", "github_webhook", "forge", "anonymous (signed by GitHub)",
          "Receive a GitHub webhook delivery", 202, public=True, max_body=WEBHOOK_BODY),
    Route("GET", "/v1/keys", "keys", "health", "anonymous",
          "The public keys decision receipts are signed with", public=True),
    Route("GET", "/v1/whoami", "whoami", "gating", "any", "The caller's identity and roles"),
    Route("PUT", P + "/config", "put_config", "gating", "admin",
          "Set the project configuration (a new version)", 201),
    Route("GET", P + "/config", "get_config", "gating", "any", "Read the project configuration"),
    Route("PUT", P + "/bundle", "put_bundle", "gating", "admin",
          "Set the configuration and policies together (one write; 200 when nothing differs)", 201),
    Route("PUT", P + "/policies/{policy_id}", "put_policy", "gating", "admin",
          "Create or amend a policy", 201),
    Route("GET", P + "/policies", "list_policies", "gating", "any", "List policies"),
    Route("GET", P + "/policies/{policy_id}", "get_policy", "gating", "any", "Read one policy version"),
    Route("GET", P + "/audit", "project_audit", "gating", "admin, auditor",
          "The project chain with verification"),
    Route("POST", P + "/candidates", "create_candidate", "gating", "requester, publisher",
          "Create a candidate from its change", 201),
    Route("GET", P + "/candidates", "find_candidates", "gating", "any", "Look candidates up"),
    Route("GET", C, "get_candidate", "gating", "any", "The candidate's whole state"),
    Route("GET", C + "/plans/{version}", "get_plan", "gating", "any", "Read one stored plan version"),
    Route("POST", C + "/change-context", "add_change_context", "gating", "requester, publisher",
          "Add change context", 201),
    Route("GET", C + "/decision", "get_decision", "gating", "any", "Evaluate without recording"),
    Route("POST", C + "/decisions", "record_decision", "gating", "any",
          "Evaluate at the service clock and record", 201),
    Route("GET", C + "/audit", "candidate_audit", "gating", "any", "The candidate chain with verification"),
    Route("POST", C + "/proposals", "propose", "plans", "requester", "Draft a plan (model or fallback)", 201),
    Route("PUT", C + "/plan", "put_plan", "plans", "requester", "Submit or amend the plan", 201,
          invalid_body="PLAN_PREFLIGHT_FAILED"),
    Route("POST", C + "/reviews", "review", "review", "reviewer (human)",
          "Approve or reject one plan digest", 201),
    Route("POST", C + "/tasks/{task_id}/settlement", "settle", "review", "reviewer (human)",
          "Settle a passed task", 201),
    Route("POST", C + "/actions/{action_id}/executions", "execute", "actions", "requester",
          "Execute a declared action", 201),
    Route("POST", C + "/evidence", "post_evidence", "evidence", "publisher, requester",
          "Post evidence for a check", 201),
    Route("POST", C + "/tasks/{task_id}/reports", "report", "evidence", "requester",
          "Report a task (the report writer)", 201),
)
# fmt: on

FUNCTIONS: tuple[str, ...] = tuple(sorted({r.function for r in ROUTES}))
_PATTERNS = [(r, re.compile("^" + re.sub(r"\{[a-z_]+\}", "[^/]+", r.path) + "$")) for r in ROUTES]
_NAMED = {r: re.compile("^" + re.sub(r"\{([a-z_]+)\}", r"(?P<\1>[^/]+)", r.path) + "$") for r in ROUTES}


def path_params(route: Route, path: str) -> dict[str, str]:
    """The route's path parameters as the path names them ({} when the path is not the route's)."""
    found = _NAMED[route].match(path)
    return found.groupdict() if found else {}


def route_for(method: str, path: str) -> Route | None:
    for route, pattern in _PATTERNS:
        if route.method == method and pattern.match(path):
            return route
    return None
