"""The endpoint of every route: read the call, run one use case, return its result. Nothing else.

Each endpoint receives the composition root's services and the caller through Powertools' dependency
injection: `services` reads the provider the function's entry point put in the resolver's context, and
`caller` reads the identity the authorizer attached to the event (never a body). Tests may replace either
with `app.dependency_overrides`."""

import json
from collections.abc import Callable
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.request import Request

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.models import (
    CandidateRequest,
    ChangeContextRequest,
    EvidenceRequest,
    ExecutionRequest,
    Policy,
    ProjectConfig,
    ReportRequest,
    ReviewRequest,
    SettlementRequest,
)
from sentinel_domain.ports import StreamRef
from sentinel_domain.usecases import Result
from sentinel_service.adapters import decision_metrics
from sentinel_service.compose import Services
from sentinel_service.http.request import Call

SERVICES = "sentinel_services"  # the resolver context's key for the provider (see resolver.lambda_handler)


def services(request: Request) -> Services:
    provider = request.context[SERVICES]
    built: Services = provider()
    return built


def caller(request: Request) -> Call:
    return Call.from_event(request.resolved_event.raw_event)


# What every endpoint returns: the JSON text of one use case's result (openapi_document sets each route's schemas).
Answer = Response[Any]
Svc = Annotated[Services, Depends(services)]
Caller = Annotated[Call, Depends(caller)]
Limit = Annotated[int, Query(ge=1, le=500, description="page size, at most 500")]
Cursor = Annotated[str | None, Query(description="opaque cursor from next_cursor")]


def respond(result: Result) -> Answer:
    headers = dict(result.headers)
    if result.replayed:
        headers["Idempotent-Replay"] = "true"
    return Response(status_code=result.status, content_type="application/json",
                    body=json.dumps(result.body, ensure_ascii=False), headers=headers)


# ---- anonymous ---------------------------------------------------------------------------------------

def health(svc: Svc) -> Answer:
    s = svc.settings
    body: dict[str, Any] = {"status": "ok", "service": s.service, "version": s.version, "runtime": s.runtime,
                            "region": s.region, "model": {"provider": s.model_provider, "model_id": s.model_id},
                            "package_digest": s.package_digest}
    try:
        svc.gate.store.load(StreamRef("~health"))  # no project can have this id: a read that finds nothing
    except (StoreUnavailable, Exception):  # any store failure is a degraded service, never a crash
        return Response(status_code=503, content_type="application/json",
                        body=json.dumps(dict(body, status="degraded")), headers={"Retry-After": "5"})
    return respond(Result(200, body))


def whoami(call: Caller) -> Answer:
    me = call.actor(None)
    return respond(Result(200, {"principal_id": me.id, "kind": me.kind, "sponsor": me.sponsor,
                                "roles": call.roles_map()}))


# ---- project configuration, policies, audit ---------------------------------------------------------

def put_config(project: str, body: Annotated[ProjectConfig, Body()], svc: Svc, call: Caller) -> Answer:
    return respond(svc.gate.put_config(project, call.actor(project), body, call.header("if-match")))


def get_config(project: str, svc: Svc, call: Caller) -> Answer:
    return respond(svc.gate.get_config(project, call.actor(project)))


def put_policy(project: str, policy_id: str, body: Annotated[Policy, Body()], svc: Svc, call: Caller) -> Answer:
    return respond(svc.gate.put_policy(project, policy_id, call.actor(project), body))


def list_policies(project: str, svc: Svc, call: Caller) -> Answer:
    return respond(svc.gate.list_policies(project, call.actor(project)))


def get_policy(project: str, policy_id: str, svc: Svc, call: Caller,
               version: Annotated[int | None, Query(ge=1)] = None) -> Answer:
    return respond(svc.gate.get_policy(project, policy_id, call.actor(project), version))


def project_audit(project: str, svc: Svc, call: Caller, limit: Limit = 100, cursor: Cursor = None) -> Answer:
    return respond(svc.gate.audit(StreamRef(project), call.actor(project), limit, cursor))


# ---- candidates ---------------------------------------------------------------------------------------

def create_candidate(project: str, body: Annotated[CandidateRequest, Body()], svc: Svc, call: Caller) -> Answer:
    return respond(svc.gate.create_candidate(project, call.actor(project), body, call.idempotency_key))


def add_change_context(project: str, candidate_id: str, body: Annotated[ChangeContextRequest, Body()], svc: Svc,
                       call: Caller) -> Answer:
    return respond(svc.gate.add_change_context(project, candidate_id, call.actor(project), body,
                                               call.idempotency_key))


def find_candidates(project: str, svc: Svc, call: Caller, subject: Annotated[str | None, Query()] = None,
                    revision: Annotated[str | None, Query()] = None,
                    environment: Annotated[str | None, Query()] = None,
                    limit: Limit = 100, cursor: Cursor = None) -> Answer:
    return respond(svc.gate.find_candidates(project, call.actor(project), subject, revision, environment,
                                            limit, cursor))


def get_candidate(project: str, candidate_id: str, svc: Svc, call: Caller) -> Answer:
    return respond(svc.gate.get_candidate(project, candidate_id, call.actor(project)))


def candidate_audit(project: str, candidate_id: str, svc: Svc, call: Caller, limit: Limit = 100,
                    cursor: Cursor = None) -> Answer:
    return respond(svc.gate.audit(StreamRef(project, candidate_id), call.actor(project), limit, cursor))


# ---- plans --------------------------------------------------------------------------------------------

def propose(project: str, candidate_id: str, svc: Svc, call: Caller) -> Answer:
    return respond(svc.gate.propose(project, candidate_id, call.actor(project), call.header("if-match"),
                                    call.idempotency_key))


def put_plan(project: str, candidate_id: str, body: Annotated[dict[str, Any], Body()], svc: Svc,
             call: Caller) -> Answer:
    # The plan is judged by preflight, not by the route's validation: every problem is one finding.
    return respond(svc.gate.put_plan(project, candidate_id, call.actor(project), body, call.header("if-match")))


# ---- reviews ------------------------------------------------------------------------------------------

def review(project: str, candidate_id: str, body: Annotated[ReviewRequest, Body()], svc: Svc,
           call: Caller) -> Answer:
    return respond(svc.gate.review(project, candidate_id, call.actor(project), body, call.idempotency_key))


def settle(project: str, candidate_id: str, task_id: str, body: Annotated[SettlementRequest, Body()], svc: Svc,
           call: Caller) -> Answer:
    return respond(svc.gate.settle(project, candidate_id, task_id, call.actor(project), body,
                                   call.idempotency_key))


# ---- actions, evidence, reports, decisions ------------------------------------------------------------

def execute(project: str, candidate_id: str, action_id: str, body: Annotated[ExecutionRequest, Body()], svc: Svc,
            call: Caller) -> Answer:
    return respond(svc.gate.execute(project, candidate_id, action_id, call.actor(project), body,
                                    call.idempotency_key))


def post_evidence(project: str, candidate_id: str, body: Annotated[EvidenceRequest, Body()], svc: Svc,
                  call: Caller) -> Answer:
    return respond(svc.gate.post_evidence(project, candidate_id, call.actor(project), body, call.idempotency_key))


def report(project: str, candidate_id: str, task_id: str, body: Annotated[ReportRequest, Body()], svc: Svc,
           call: Caller) -> Answer:
    return respond(svc.gate.report(project, candidate_id, task_id, call.actor(project), body,
                                   call.idempotency_key))


def get_decision(project: str, candidate_id: str, svc: Svc, call: Caller,
                 as_of: Annotated[str | None, Query()] = None) -> Answer:
    result = svc.gate.decision(project, candidate_id, call.actor(project), as_of)
    decision_metrics.emit(result.body, False, svc.settings.runtime)
    return respond(result)


def record_decision(project: str, candidate_id: str, svc: Svc, call: Caller) -> Answer:
    result = svc.gate.record_decision(project, candidate_id, call.actor(project), call.idempotency_key)
    if not result.replayed:
        decision_metrics.emit(result.body, result.status == 201, svc.settings.runtime)
    return respond(result)


# Every operation of the route table but the OpenAPI document's own (openapi_document.openapi), by name.
ENDPOINTS: dict[str, Callable[..., Answer]] = {
    f.__name__: f for f in (
        health, whoami, put_config, get_config, put_policy, list_policies, get_policy, project_audit,
        create_candidate, add_change_context, find_candidates, get_candidate, candidate_audit, propose, put_plan,
        review, settle, execute, post_evidence, report, get_decision, record_decision)
}
