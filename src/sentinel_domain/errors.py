"""Refusals: every rejected request is one of these, with a stable code from DOMAIN.md.

The core names what was refused and why; it never says how that is answered. The HTTP edge
(sentinel_service.http.problems) maps a refusal to a problem document by its code (and, where one code
answers in two ways, its reason), never by message text."""

from dataclasses import dataclass, field
from typing import Any

REFUSAL_CODES: frozenset[str] = frozenset(
    {
        "FORBIDDEN_ROLE",
        "NOT_FOUND",
        "SELF_APPROVAL",
        "REVIEWER_NOT_HUMAN",
        "AGENT_CANNOT_REVIEW",
        "DIGEST_MISMATCH",
        "REVISION_MISMATCH",
        "MUTABLE_REVISION",
        "CANDIDATE_EXISTS",
        "UNKNOWN_ENVIRONMENT",
        "PLAN_PREFLIGHT_FAILED",
        "PLAN_NOT_APPROVED",
        "ACTION_UNDECLARED",
        "ACTION_NOT_ALLOWED",
        "ACTION_PARAMS_MISMATCH",
        "ACTION_EXHAUSTED",
        "IDEMPOTENCY_KEY_REQUIRED",
        "IDEMPOTENCY_CONFLICT",
        "IDEMPOTENCY_IN_PROGRESS",
        "VERSION_CONFLICT",
        "TASK_NOT_ELIGIBLE",
        "VALIDATION_FAILED",
        "MALFORMED_EVIDENCE",
        "MALFORMED_CHANGE_CONTEXT",
        "EVIDENCE_FUTURE_DATED",
        "TOO_MANY_OBLIGATIONS",
        "PAYLOAD_TOO_LARGE",
        "RATE_LIMITED",
        "STATE_UNAVAILABLE",
        # The forge's webhook and repository index (docs/github.md, "Webhooks and who acts").
        "WEBHOOK_SIGNATURE_INVALID",
        "WEBHOOK_MALFORMED",
        "WEBHOOK_PAYLOAD_INVALID",
        "FORGE_REPOSITORY_CLAIMED",
    }
)

# VERSION_CONFLICT's two reasons: the write needed If-Match and carried none, or it named a stale version.
IF_MATCH_MISSING = "if_match_missing"
IF_MATCH_STALE = "if_match_stale"
REASONS: dict[str, frozenset[str]] = {"VERSION_CONFLICT": frozenset({IF_MATCH_MISSING, IF_MATCH_STALE})}


@dataclass
class Refusal(Exception):
    """A request the gate refuses. Nothing was changed and nothing was appended.

    `reason` tells apart what one code covers where a caller must act differently (VERSION_CONFLICT: send
    If-Match, or re-read the current version); `extra` carries fields a caller needs to recover (the existing
    candidate's id); `findings` lists every problem where there are several (preflight)."""

    code: str
    detail: str
    findings: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.code not in REFUSAL_CODES:
            raise ValueError(f"unknown refusal code {self.code}")
        if self.reason is not None and self.reason not in REASONS.get(self.code, frozenset()):
            raise ValueError(f"{self.code} has no reason {self.reason}")
        super().__init__(f"{self.code}: {self.detail}")


class StoreUnavailable(Exception):
    """The store could not be read or written (throttled, timed out, failed). Never a guess."""


class StoreConflict(Exception):
    """A conditional write lost a race: someone else changed the stream first."""
