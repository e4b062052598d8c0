"""Refusals: every rejected request is one of these, with a stable code from DOMAIN.md.

The HTTP layer maps a refusal to a problem document by its code alone, never by message text."""

from dataclasses import dataclass, field
from typing import Any

# The status each refusal code answers with. A code with several possible statuses
# (VERSION_CONFLICT: 428 missing, 412 stale) passes its status explicitly.
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
}

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
}


@dataclass
class Refusal(Exception):
    """A request the gate refuses. Nothing was changed and nothing was appended."""

    code: str
    detail: str
    status: int = 0
    findings: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in REFUSAL_STATUS:
            raise ValueError(f"unknown refusal code {self.code}")
        if not self.status:
            self.status = REFUSAL_STATUS[self.code]
        super().__init__(f"{self.code}: {self.detail}")

    @property
    def title(self) -> str:
        return TITLES[self.code]


class StoreUnavailable(Exception):
    """The store could not be read or written (throttled, timed out, failed). Never a guess."""


class StoreConflict(Exception):
    """A conditional write lost a race: someone else changed the stream first."""
