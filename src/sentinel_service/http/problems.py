"""Refusals to RFC 9457 problem documents, in one place: the status, the title and the headers of every
refusal code (and, where one code answers in two ways, of its reason). Never by message text."""

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response

from sentinel_domain.errors import IF_MATCH_MISSING, Refusal

PROBLEM_TYPE = "https://sentinel.dev/problems/"

# The status each refusal code answers with.
REFUSAL_STATUS: dict[str, int] = {
    "FORBIDDEN_ROLE": 403,
    "NOT_FOUND": 404,
    "SELF_APPROVAL": 403,
    "REVIEWER_NOT_HUMAN": 403,
    "AGENT_CANNOT_REVIEW": 403,
    "DIGEST_MISMATCH": 409,
    "REVISION_MISMATCH": 409,
    "MUTABLE_REVISION": 422,
    "CANDIDATE_EXISTS": 409,
    "UNKNOWN_ENVIRONMENT": 422,
    "PLAN_PREFLIGHT_FAILED": 422,
    "PLAN_NOT_APPROVED": 403,
    "ACTION_UNDECLARED": 403,
    "ACTION_NOT_ALLOWED": 403,
    "ACTION_PARAMS_MISMATCH": 409,
    "ACTION_EXHAUSTED": 409,
    "IDEMPOTENCY_KEY_REQUIRED": 400,
    "IDEMPOTENCY_CONFLICT": 409,
    "IDEMPOTENCY_IN_PROGRESS": 409,
    "VERSION_CONFLICT": 412,
    "TASK_NOT_ELIGIBLE": 409,
    "VALIDATION_FAILED": 422,
    "MALFORMED_EVIDENCE": 422,
    "MALFORMED_CHANGE_CONTEXT": 422,
    "EVIDENCE_FUTURE_DATED": 422,
    "TOO_MANY_OBLIGATIONS": 422,
    "PAYLOAD_TOO_LARGE": 413,
    "RATE_LIMITED": 429,
    "STATE_UNAVAILABLE": 503,
    "WEBHOOK_SIGNATURE_INVALID": 401,
    "WEBHOOK_MALFORMED": 400,
    "WEBHOOK_PAYLOAD_INVALID": 422,
    "FORGE_REPOSITORY_CLAIMED": 409,
}
# Where a reason answers otherwise than its code: a missing If-Match is 428 Precondition Required, a stale one
# 412 Precondition Failed (both VERSION_CONFLICT).
REASON_STATUS: dict[tuple[str, str], int] = {("VERSION_CONFLICT", IF_MATCH_MISSING): 428}
# The refusals a caller should simply retry, and after how many seconds.
RETRY_AFTER: dict[str, str] = {"STATE_UNAVAILABLE": "1", "IDEMPOTENCY_IN_PROGRESS": "1"}

TITLES: dict[str, str] = {
    "FORBIDDEN_ROLE": "Your role in this project does not allow this",
    "NOT_FOUND": "Not found",
    "SELF_APPROVAL": "You cannot approve a change you created, planned or sponsor",
    "REVIEWER_NOT_HUMAN": "Only a human can review",
    "AGENT_CANNOT_REVIEW": "An agent cannot review",
    "DIGEST_MISMATCH": "The plan digest is not the current one",
    "REVISION_MISMATCH": "The revision is not the candidate's",
    "MUTABLE_REVISION": "A revision must be a full commit id",
    "CANDIDATE_EXISTS": "A candidate for this subject, revision and environment exists",
    "UNKNOWN_ENVIRONMENT": "The project does not list this environment",
    "PLAN_PREFLIGHT_FAILED": "The plan failed preflight",
    "PLAN_NOT_APPROVED": "The current plan holds no valid approval",
    "ACTION_UNDECLARED": "The current plan does not declare this action",
    "ACTION_NOT_ALLOWED": "The project does not allow this action type",
    "ACTION_PARAMS_MISMATCH": "The params differ from the declared ones",
    "ACTION_EXHAUSTED": "The action reached its max_executions",
    "IDEMPOTENCY_KEY_REQUIRED": "An Idempotency-Key header is required",
    "IDEMPOTENCY_CONFLICT": "The idempotency key was used for another request",
    "IDEMPOTENCY_IN_PROGRESS": "A request with this idempotency key is in progress",
    "VERSION_CONFLICT": "The version you named is not the current one",
    "TASK_NOT_ELIGIBLE": "The task is not eligible",
    "VALIDATION_FAILED": "The request is not valid",
    "MALFORMED_EVIDENCE": "The evidence cannot be read",
    "MALFORMED_CHANGE_CONTEXT": "The change context cannot be read",
    "EVIDENCE_FUTURE_DATED": "The evidence is dated in the future",
    "TOO_MANY_OBLIGATIONS": "Too many obligations",
    "PAYLOAD_TOO_LARGE": "The body is too large",
    "RATE_LIMITED": "Too many requests",
    "STATE_UNAVAILABLE": "The state store cannot be read or written right now",
    "WEBHOOK_SIGNATURE_INVALID": "The delivery's signature does not verify",
    "WEBHOOK_MALFORMED": "The delivery cannot be read",
    "WEBHOOK_PAYLOAD_INVALID": "The delivery lacks a field Sentinel needs",
    "FORGE_REPOSITORY_CLAIMED": "Another project takes this repository",
}


def refusal_status(refusal: Refusal) -> int:
    if refusal.reason is not None and (refusal.code, refusal.reason) in REASON_STATUS:
        return REASON_STATUS[(refusal.code, refusal.reason)]
    return REFUSAL_STATUS[refusal.code]


def refusal_headers(refusal: Refusal) -> dict[str, str]:
    return {"Retry-After": RETRY_AFTER[refusal.code]} if refusal.code in RETRY_AFTER else {}


def problem_body(
    code: str,
    status: int,
    title: str,
    detail: str,
    findings: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE + code.lower().replace("_", "-"),
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if findings:
        body["findings"] = findings
    body.update(extra or {})
    return body


def problem_response(refusal: Refusal) -> Response[Any]:
    status = refusal_status(refusal)
    body = problem_body(
        refusal.code, status, TITLES[refusal.code], refusal.detail, refusal.findings, refusal.extra
    )
    return Response(
        status_code=status,
        content_type="application/problem+json",
        body=json.dumps(body, ensure_ascii=False),
        headers=refusal_headers(refusal),
    )
