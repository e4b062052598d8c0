"""Reviews and approvals (DOMAIN.md rules 11 to 15, and 26 for reviewers revoked as compromised)."""

from collections.abc import Mapping
from typing import Any

from .models import Actor, ProjectConfig
from .state import CandidateState


def reviewer_refusal(actor: Actor) -> str | None:
    """Kind before role: an agent, then a ci principal, then a human without the reviewer role."""
    if actor.kind == "agent":
        return "AGENT_CANNOT_REVIEW"
    if actor.kind == "ci":
        return "REVIEWER_NOT_HUMAN"
    if "reviewer" not in actor.roles:
        return "FORBIDDEN_ROLE"
    return None


def excluded_approvers(state: CandidateState, digest: str | None) -> set[str]:
    """Nobody who created the candidate or authored a plan version up to the digest, nor their sponsors; nor
    the requester of record a forge named (the pull request's mapped author: the app created the candidate
    for them), nor whoever the forge says pushed its head to that pull request."""
    people = [state.candidate["created_by"], *state.plan_authors(digest)]
    excluded = set()
    for requester in (requester_of_record(state), pushed_by(state)):
        for who in ("principal", "sponsor"):
            if requester is not None and requester.get(who):
                excluded.add(str(requester[who]))
    for person in people:
        excluded.add(person["id"])
        if person.get("sponsor"):
            excluded.add(person["sponsor"])
    return excluded


def pushed_by(state: CandidateState) -> dict[str, Any] | None:
    """`{login, principal}` of whoever pushed a forge-created candidate's head to someone else's pull request
    (GitHub's `sender` of a `synchronize`), when that is not the author."""
    forge = state.candidate.get("forge")
    found = forge.get("pushed_by") if isinstance(forge, dict) else None
    return found if isinstance(found, dict) else None


def requester_of_record(state: CandidateState) -> dict[str, Any] | None:
    """`{login, principal}` of a forge-created candidate (principal None when the login maps to nobody)."""
    forge = state.candidate.get("forge")
    found = forge.get("requester_of_record") if isinstance(forge, dict) else None
    return found if isinstance(found, dict) else None


def withdrawn_approvers(state: CandidateState, compromised: Mapping[str, str]) -> list[str]:
    """The reviewers revoked as compromised whose approvals of the current plan digest no longer count."""
    digest = state.plan_digest
    return sorted(
        {
            r["reviewer"]["id"]
            for r in state.reviews
            if r["plan_digest"] == digest
            and r["decision"] == "approve"
            and r["reviewer"]["id"] in compromised
        }
    )


def approval_status(
    state: CandidateState, config: ProjectConfig, at: str, compromised: Mapping[str, str] | None = None
) -> tuple[str | None, str | None]:
    """(the finding code that blocks approval, or None; the instant the approval stops being valid).

    An approval by a reviewer in `compromised` (revoked as compromised, as the project chain says at `at`)
    does not count, whenever it was given; when the others are not enough, the code is APPROVAL_REVOKED. A
    rejection by such a reviewer still stands: it can only hold, never release."""
    digest = state.plan_digest
    if digest is None:
        return "PLAN_MISSING", None
    current = [r for r in state.reviews if r["plan_digest"] == digest]
    if any(r["decision"] == "reject" for r in current):
        return "REVIEW_REJECTED", None
    revoked = compromised or {}
    approvals = [r for r in current if r["decision"] == "approve"]
    withdrawn = [r for r in approvals if r["reviewer"]["id"] in revoked]
    approvals = [r for r in approvals if r["reviewer"]["id"] not in revoked]
    newest_expiry: dict[str, str] = {}
    for review in approvals:
        reviewer = review["reviewer"]["id"]
        newest_expiry[reviewer] = max(newest_expiry.get(reviewer, ""), review["expires_at"])
    # Exactly at expiry an approval is expired.
    valid = sorted((e for e in newest_expiry.values() if at < e), reverse=True)
    if len(valid) >= config.approvals_required:
        return None, valid[config.approvals_required - 1]
    if withdrawn:
        return "APPROVAL_REVOKED", None
    if len(newest_expiry) > len(valid):
        return "REVIEW_EXPIRED", None
    if any(r["decision"] == "approve" and r["plan_digest"] != digest for r in state.reviews):
        return "REVIEW_STALE", None
    return "REVIEW_MISSING", None
