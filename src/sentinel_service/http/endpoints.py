"""The endpoint of every route: read the call, run one use case, answer its outcome. Nothing else.

Each endpoint receives the composition root's services and the caller through Powertools' dependency
injection: `services` reads the provider the function's entry point put in the resolver's context, and
`caller` reads the identity the authorizer attached to the event (never a body). Tests may replace either
with `app.dependency_overrides`.

Each endpoint is annotated with the outcome it answers (`Response[Outcome]`): Powertools checks the body
against it and serialises it, and the OpenAPI document takes each route's response schema from it. The
status comes from the route table; the headers (ETag, Idempotent-Replay) from the outcome's data."""

import base64
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.request import Request
from pydantic import BaseModel, ConfigDict

from sentinel_domain.errors import Refusal, StoreUnavailable
from sentinel_domain.identity import IDENT
from sentinel_domain.models import (
    CandidateRequest,
    ChangeContextRequest,
    EvidenceRequest,
    ExecutionRequest,
    Policy,
    ProjectBundle,
    ProjectConfig,
    ReportRequest,
    ReviewRequest,
    SettlementRequest,
)
from sentinel_domain.outcomes import (
    ActionExecuted,
    AuditPage,
    BundleApplied,
    CandidateCreated,
    CandidatePage,
    CandidateView,
    ChangeContextAdded,
    ConfigVersion,
    ConfigVersionStored,
    DecisionNotRecorded,
    DecisionRecorded,
    DecisionView,
    EvidenceRecorded,
    PlanProposed,
    PlanStored,
    PlanVersionRead,
    PolicyList,
    PolicyVersion,
    PolicyVersionStored,
    Replayable,
    ReportAttempt,
    ReviewRecorded,
    TaskSettled,
)
from sentinel_domain.ports import StreamRef
from sentinel_domain.receipts import SIGNING_ALGORITHM, ReceiptSignerUnavailable
from sentinel_domain.usecases.forge import WebhookReceived
from sentinel_service.adapters import decision_metrics
from sentinel_service.compose import Services
from sentinel_service.http.request import Call
from sentinel_service.http.routes import ROUTES

SERVICES = "sentinel_services"  # the resolver context's key for the provider (see resolver.lambda_handler)
STATUS = {route.operation: route.status for route in ROUTES}  # each route's success status, from the table
# A decision the gate could not record is answered, not refused (API.md): 200 with "recorded": false.
NOT_RECORDED_STATUS = 200
# A bundle that differs in nothing from the current versions writes nothing: 200, the same body (API.md).
UNCHANGED_STATUS = 200
DEGRADED_STATUS, DEGRADED_RETRY_AFTER = 503, "5"

AnswerT = TypeVar("AnswerT", bound=BaseModel)


def services(request: Request) -> Services:
    provider = request.context[SERVICES]
    built: Services = provider()
    return built


def caller(request: Request) -> Call:
    return Call.from_event(request.resolved_event.raw_event)


Svc = Annotated[Services, Depends(services)]
Caller = Annotated[Call, Depends(caller)]
Limit = Annotated[int, Query(ge=1, le=500, description="page size, at most 500")]
Cursor = Annotated[str | None, Query(description="opaque cursor from next_cursor")]


def respond(
    operation: str, outcome: AnswerT, *, etag: str | None = None, status: int | None = None
) -> Response[AnswerT]:
    """The outcome as the route answers it: the route's status (unless the outcome says otherwise), its ETag,
    and, for a replay, `Idempotent-Replay: true` and nothing else (the first answer's status and body)."""
    headers: dict[str, str] = {}
    if isinstance(outcome, Replayable) and outcome.replayed:
        headers["Idempotent-Replay"] = "true"
    elif etag is not None:
        headers["ETag"] = f'"{etag}"'
    return Response(
        status_code=status or STATUS[operation],
        content_type="application/json",
        body=outcome,
        headers=headers,
    )


class Edge(BaseModel):
    """What only the edge answers (the service's health, the caller's identity): no use case is involved."""

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_serialization_defaults_required=True)


class ModelInfo(Edge):
    """The model proposals are drafted with (provider "none": the deterministic fallback only)."""

    provider: str
    model_id: str


class Health(Edge):
    status: Literal["ok", "degraded"]  # degraded: the store cannot be reached
    service: str
    version: str
    runtime: str
    region: str
    model: ModelInfo
    package_digest: str


class PublicKey(Edge):
    """A key decision receipts are signed with: a receipt's signature names it by `key_id`."""

    key_id: str
    algorithm: Literal["ECDSA_P256_SHA256"]
    public_key: str  # SubjectPublicKeyInfo, PEM


class Keys(Edge):
    """The receipt signing keys (none when the gate has no key: it then records no `ready` decision)."""

    keys: list[PublicKey]


class Identity(Edge):
    principal_id: str
    kind: str
    sponsor: str | None
    roles: dict[str, list[str]]


# ---- anonymous ---------------------------------------------------------------------------------------


def health(svc: Svc) -> Response[Health]:
    s = svc.settings
    answer = Health(
        status="ok",
        service=s.service,
        version=s.version,
        runtime=s.runtime,
        region=s.region,
        model=ModelInfo(provider=s.model_provider, model_id=s.model_id),
        package_digest=s.package_digest,
    )
    try:
        svc.gate.store.load(StreamRef("~health"))  # no project can have this id: a read that finds nothing
    except (StoreUnavailable, Exception):  # any store failure is a degraded service, never a crash
        return Response(
            status_code=DEGRADED_STATUS,
            content_type="application/json",
            body=answer.model_copy(update={"status": "degraded"}),
            headers={"Retry-After": DEGRADED_RETRY_AFTER},
        )
    return respond("health", answer)


def raw_event(request: Request) -> dict[str, Any]:
    event: dict[str, Any] = request.resolved_event.raw_event
    return event


Raw = Annotated[dict[str, Any], Depends(raw_event)]
DUPLICATE_STATUS = 200  # a delivery recorded before: answered, nothing written


def github_webhook(svc: Svc, event: Raw) -> Response[WebhookReceived]:
    """Anonymous: GitHub's signature over the exact bytes received is the only credential."""
    call = Call.from_event(event)
    body = event.get("body") or ""
    raw = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode("utf-8")
    outcome = svc.gate.receive_webhook(
        svc.webhook_secret,
        call.header("x-github-event"),
        call.header("x-github-delivery"),
        call.header("x-hub-signature-256"),
        raw,
    )
    return respond(
        "github_webhook", outcome, status=DUPLICATE_STATUS if outcome.status == "duplicate" else None
    )


def keys(svc: Svc) -> Response[Keys]:
    signer = svc.receipt_signer
    if signer is None:
        return respond("keys", Keys(keys=[]))
    try:
        entry = PublicKey(
            key_id=signer.key_id, algorithm=SIGNING_ALGORITHM, public_key=signer.public_key_pem()
        )
    except ReceiptSignerUnavailable as error:
        raise Refusal("STATE_UNAVAILABLE", f"the receipt key cannot be read: {error}") from None
    return respond("keys", Keys(keys=[entry]))


def whoami(call: Caller) -> Response[Identity]:
    me = call.actor(None)
    return respond(
        "whoami", Identity(principal_id=me.id, kind=me.kind, sponsor=me.sponsor, roles=call.roles_map())
    )


# ---- project configuration, policies, audit ---------------------------------------------------------


def put_config(
    project: str, body: Annotated[ProjectConfig, Body()], svc: Svc, call: Caller
) -> Response[ConfigVersionStored]:
    stored = svc.gate.put_config(project, call.actor(project), body, call.header("if-match"))
    return respond("put_config", stored, etag=str(stored.version))


def put_bundle(
    project: str, body: Annotated[ProjectBundle, Body()], svc: Svc, call: Caller
) -> Response[BundleApplied]:
    applied = svc.gate.put_bundle(project, call.actor(project), body, call.header("if-match"))
    status = None if applied.wrote else UNCHANGED_STATUS
    return respond("put_bundle", applied, etag=str(applied.config_version), status=status)


def get_config(project: str, svc: Svc, call: Caller) -> Response[ConfigVersion]:
    current = svc.gate.get_config(project, call.actor(project))
    return respond("get_config", current, etag=str(current.version))


# A policy id in a path is an id like any other (identity.IDENT): a bad one is 422, after the role check.
PolicyId = Annotated[str, Path(pattern=IDENT, description="a policy id")]


def put_policy(
    project: str, policy_id: PolicyId, body: Annotated[Policy, Body()], svc: Svc, call: Caller
) -> Response[PolicyVersionStored]:
    return respond("put_policy", svc.gate.put_policy(project, policy_id, call.actor(project), body))


def list_policies(project: str, svc: Svc, call: Caller) -> Response[PolicyList]:
    return respond("list_policies", svc.gate.list_policies(project, call.actor(project)))


def get_policy(
    project: str,
    policy_id: PolicyId,
    svc: Svc,
    call: Caller,
    version: Annotated[int | None, Query(ge=1)] = None,
) -> Response[PolicyVersion]:
    return respond("get_policy", svc.gate.get_policy(project, policy_id, call.actor(project), version))


def project_audit(
    project: str, svc: Svc, call: Caller, limit: Limit = 100, cursor: Cursor = None
) -> Response[AuditPage]:
    return respond("project_audit", svc.gate.audit(StreamRef(project), call.actor(project), limit, cursor))


# ---- candidates ---------------------------------------------------------------------------------------


def create_candidate(
    project: str, body: Annotated[CandidateRequest, Body()], svc: Svc, call: Caller
) -> Response[CandidateCreated]:
    return respond(
        "create_candidate",
        svc.gate.create_candidate(project, call.actor(project), body, call.idempotency_key),
    )


def add_change_context(
    project: str, candidate_id: str, body: Annotated[ChangeContextRequest, Body()], svc: Svc, call: Caller
) -> Response[ChangeContextAdded]:
    return respond(
        "add_change_context",
        svc.gate.add_change_context(project, candidate_id, call.actor(project), body, call.idempotency_key),
    )


def find_candidates(
    project: str,
    svc: Svc,
    call: Caller,
    subject: Annotated[str | None, Query()] = None,
    revision: Annotated[str | None, Query()] = None,
    environment: Annotated[str | None, Query()] = None,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> Response[CandidatePage]:
    return respond(
        "find_candidates",
        svc.gate.find_candidates(project, call.actor(project), subject, revision, environment, limit, cursor),
    )


def get_candidate(project: str, candidate_id: str, svc: Svc, call: Caller) -> Response[CandidateView]:
    view = svc.gate.get_candidate(project, candidate_id, call.actor(project))
    return respond("get_candidate", view, etag=view.plan_digest)


# A plan version is a positive integer, written without sign, spaces or leading zeros.
PlanVersion = Annotated[str, Path(pattern=r"^[1-9][0-9]*$", description="a plan version: 1, 2, ...")]
# A number longer than this names no version any candidate holds (and is never parsed whole).
VERSION_DIGITS = 18


def get_plan(
    project: str, candidate_id: str, version: PlanVersion, svc: Svc, call: Caller
) -> Response[PlanVersionRead]:
    number = int(version) if len(version) <= VERSION_DIGITS else 10**VERSION_DIGITS
    read = svc.gate.get_plan_version(project, candidate_id, call.actor(project), number)
    return respond("get_plan", read, etag=read.plan_digest)


def candidate_audit(
    project: str, candidate_id: str, svc: Svc, call: Caller, limit: Limit = 100, cursor: Cursor = None
) -> Response[AuditPage]:
    return respond(
        "candidate_audit",
        svc.gate.audit(StreamRef(project, candidate_id), call.actor(project), limit, cursor),
    )


# ---- plans --------------------------------------------------------------------------------------------


def propose(project: str, candidate_id: str, svc: Svc, call: Caller) -> Response[PlanProposed]:
    stored = svc.gate.propose(
        project, candidate_id, call.actor(project), call.header("if-match"), call.idempotency_key
    )
    return respond("propose", stored, etag=stored.plan_digest)


def put_plan(
    project: str, candidate_id: str, body: Annotated[dict[str, Any], Body()], svc: Svc, call: Caller
) -> Response[PlanStored]:
    # The plan is judged by preflight, not by the route's validation: every problem is one finding.
    stored = svc.gate.put_plan(project, candidate_id, call.actor(project), body, call.header("if-match"))
    return respond("put_plan", stored, etag=stored.plan_digest)


# ---- reviews ------------------------------------------------------------------------------------------


def review(
    project: str, candidate_id: str, body: Annotated[ReviewRequest, Body()], svc: Svc, call: Caller
) -> Response[ReviewRecorded]:
    return respond(
        "review", svc.gate.review(project, candidate_id, call.actor(project), body, call.idempotency_key)
    )


def settle(
    project: str,
    candidate_id: str,
    task_id: str,
    body: Annotated[SettlementRequest, Body()],
    svc: Svc,
    call: Caller,
) -> Response[TaskSettled]:
    return respond(
        "settle",
        svc.gate.settle(project, candidate_id, task_id, call.actor(project), body, call.idempotency_key),
    )


# ---- actions, evidence, reports, decisions ------------------------------------------------------------


def execute(
    project: str,
    candidate_id: str,
    action_id: str,
    body: Annotated[ExecutionRequest, Body()],
    svc: Svc,
    call: Caller,
) -> Response[ActionExecuted]:
    return respond(
        "execute",
        svc.gate.execute(project, candidate_id, action_id, call.actor(project), body, call.idempotency_key),
    )


def post_evidence(
    project: str, candidate_id: str, body: Annotated[EvidenceRequest, Body()], svc: Svc, call: Caller
) -> Response[EvidenceRecorded]:
    return respond(
        "post_evidence",
        svc.gate.post_evidence(project, candidate_id, call.actor(project), body, call.idempotency_key),
    )


def report(
    project: str,
    candidate_id: str,
    task_id: str,
    body: Annotated[ReportRequest, Body()],
    svc: Svc,
    call: Caller,
) -> Response[ReportAttempt]:
    return respond(
        "report",
        svc.gate.report(project, candidate_id, task_id, call.actor(project), body, call.idempotency_key),
    )


def get_decision(
    project: str, candidate_id: str, svc: Svc, call: Caller, as_of: Annotated[str | None, Query()] = None
) -> Response[DecisionView]:
    view = svc.gate.decision(project, candidate_id, call.actor(project), as_of)
    decision_metrics.emit(view, False, svc.settings.runtime)
    return respond("get_decision", view)


def record_decision(
    project: str, candidate_id: str, svc: Svc, call: Caller
) -> Response[DecisionRecorded | DecisionNotRecorded]:
    outcome = svc.gate.record_decision(project, candidate_id, call.actor(project), call.idempotency_key)
    if isinstance(outcome, DecisionNotRecorded):
        decision_metrics.emit(outcome, False, svc.settings.runtime)
        return respond("record_decision", outcome, status=NOT_RECORDED_STATUS)
    if not outcome.replayed:
        decision_metrics.emit(outcome, True, svc.settings.runtime)
    return respond("record_decision", outcome)


# Every operation of the route table but the OpenAPI document's own (openapi_document.openapi), by name.
ENDPOINTS: dict[str, Callable[..., Response[Any]]] = {
    f.__name__: f
    for f in (
        health,
        github_webhook,
        keys,
        whoami,
        put_config,
        put_bundle,
        get_config,
        put_policy,
        list_policies,
        get_policy,
        project_audit,
        create_candidate,
        add_change_context,
        find_candidates,
        get_candidate,
        get_plan,
        candidate_audit,
        propose,
        put_plan,
        review,
        settle,
        execute,
        post_evidence,
        report,
        get_decision,
        record_decision,
    )
}
