"""The endpoint of every route: read the call, run one use case, return its result. Nothing else."""

import json
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

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
from sentinel_service.compose import gate, settings
from sentinel_service.http.request import current

Limit = Annotated[int, Query(ge=1, le=500, description="page size, at most 500")]
Cursor = Annotated[str | None, Query(description="opaque cursor from next_cursor")]


def respond(result: Result) -> Response:
    headers = dict(result.headers)
    if result.replayed:
        headers["Idempotent-Replay"] = "true"
    return Response(status_code=result.status, content_type="application/json",
                    body=json.dumps(result.body, ensure_ascii=False), headers=headers)


def _idem() -> str | None:
    return current().header("idempotency-key")


def _if_match() -> str | None:
    return current().header("if-match")


# ---- anonymous ---------------------------------------------------------------------------------------

def health():
    s = settings()
    body: dict[str, Any] = {"status": "ok", "service": s.service, "version": s.version, "runtime": s.runtime,
                            "region": s.region, "model": {"provider": s.model_provider, "model_id": s.model_id},
                            "package_digest": s.package_digest}
    try:
        gate().store.load(StreamRef("~health"))  # no project can have this id: a read that finds nothing
    except (StoreUnavailable, Exception):  # any store failure is a degraded service, never a crash
        return Response(status_code=503, content_type="application/json",
                        body=json.dumps(dict(body, status="degraded")), headers={"Retry-After": "5"})
    return respond(Result(200, body))


def whoami():
    call = current()
    me = call.actor(None)
    return respond(Result(200, {"principal_id": me.id, "kind": me.kind, "sponsor": me.sponsor,
                                "roles": call.roles_map()}))


# ---- project configuration, policies, audit ---------------------------------------------------------

def put_config(project: str, body: Annotated[ProjectConfig, Body()]):
    return respond(gate().put_config(project, current().actor(project), body, _if_match()))


def get_config(project: str):
    return respond(gate().get_config(project, current().actor(project)))


def put_policy(project: str, policy_id: str, body: Annotated[Policy, Body()]):
    return respond(gate().put_policy(project, policy_id, current().actor(project), body))


def list_policies(project: str):
    return respond(gate().list_policies(project, current().actor(project)))


def get_policy(project: str, policy_id: str, version: Annotated[int | None, Query(ge=1)] = None):
    return respond(gate().get_policy(project, policy_id, current().actor(project), version))


def project_audit(project: str, limit: Limit = 100, cursor: Cursor = None):
    return respond(gate().audit(StreamRef(project), current().actor(project), limit, cursor))


# ---- candidates ---------------------------------------------------------------------------------------

def create_candidate(project: str, body: Annotated[CandidateRequest, Body()]):
    return respond(gate().create_candidate(project, current().actor(project), body, _idem()))


def add_change_context(project: str, candidate_id: str, body: Annotated[ChangeContextRequest, Body()]):
    return respond(gate().add_change_context(project, candidate_id, current().actor(project), body, _idem()))


def find_candidates(project: str, subject: Annotated[str | None, Query()] = None,
                    revision: Annotated[str | None, Query()] = None,
                    environment: Annotated[str | None, Query()] = None,
                    limit: Limit = 100, cursor: Cursor = None):
    return respond(gate().find_candidates(project, current().actor(project), subject, revision, environment,
                                          limit, cursor))


def get_candidate(project: str, candidate_id: str):
    return respond(gate().get_candidate(project, candidate_id, current().actor(project)))


def candidate_audit(project: str, candidate_id: str, limit: Limit = 100, cursor: Cursor = None):
    return respond(gate().audit(StreamRef(project, candidate_id), current().actor(project), limit, cursor))


# ---- plans --------------------------------------------------------------------------------------------

def propose(project: str, candidate_id: str):
    return respond(gate().propose(project, candidate_id, current().actor(project), _if_match(), _idem()))


def put_plan(project: str, candidate_id: str, body: Annotated[dict[str, Any], Body()]):
    # The plan is judged by preflight, not by the route's validation: every problem is one finding.
    return respond(gate().put_plan(project, candidate_id, current().actor(project), body, _if_match()))


# ---- reviews ------------------------------------------------------------------------------------------

def review(project: str, candidate_id: str, body: Annotated[ReviewRequest, Body()]):
    return respond(gate().review(project, candidate_id, current().actor(project), body, _idem()))


def settle(project: str, candidate_id: str, task_id: str, body: Annotated[SettlementRequest, Body()]):
    return respond(gate().settle(project, candidate_id, task_id, current().actor(project), body, _idem()))


# ---- actions, evidence, reports, decisions ------------------------------------------------------------

def execute(project: str, candidate_id: str, action_id: str, body: Annotated[ExecutionRequest, Body()]):
    return respond(gate().execute(project, candidate_id, action_id, current().actor(project), body, _idem()))


def post_evidence(project: str, candidate_id: str, body: Annotated[EvidenceRequest, Body()]):
    return respond(gate().post_evidence(project, candidate_id, current().actor(project), body, _idem()))


def report(project: str, candidate_id: str, task_id: str, body: Annotated[ReportRequest, Body()]):
    return respond(gate().report(project, candidate_id, task_id, current().actor(project), body, _idem()))


def get_decision(project: str, candidate_id: str, as_of: Annotated[str | None, Query()] = None):
    result = gate().decision(project, candidate_id, current().actor(project), as_of)
    decision_metrics.emit(result.body, False, settings().runtime)
    return respond(result)


def record_decision(project: str, candidate_id: str):
    result = gate().record_decision(project, candidate_id, current().actor(project), _idem())
    if not result.replayed:
        decision_metrics.emit(result.body, result.status == 201, settings().runtime)
    return respond(result)
