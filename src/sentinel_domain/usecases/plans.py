"""Plans: submitted or amended by a requester, or drafted by the service (the model, or the deterministic
fallback: DOMAIN.md rule 23); judged by preflight; stored as the candidate's next version."""

from collections.abc import Callable
from typing import Any, TypeVar

from .. import notifications, proposals
from ..errors import IF_MATCH_MISSING, IF_MATCH_STALE, Refusal
from ..forge_checks import forge_outbox
from ..models import Actor, ProjectConfig
from ..outcomes import PlanProposed, PlanStored, PlanVersionRead
from ..plans import fallback_plan, plan_digest, preflight
from ..ports import IdempotencyRecord, Proposer, StreamRef
from ..state import CandidateState, ProjectState
from .chain import Chain, CommitRequest, candidate_head, if_match_value, need, with_fact

# A draft: the plan, how it came about ("submitted", "model" or "fallback") and why it fell back.
Draft = tuple[dict[str, Any], str, str | None]
Drafter = Callable[[CandidateState, ProjectState, ProjectConfig], Draft]
P = TypeVar("P", bound=PlanStored)


def _check_if_match(state: CandidateState, if_match: str | None) -> None:
    wanted = if_match_value(if_match)
    current = state.plan_digest
    if current is None:
        if wanted is not None:
            raise Refusal(
                "VERSION_CONFLICT",
                "no plan exists yet: the first submission carries no If-Match",
                reason=IF_MATCH_STALE,
            )
        return
    if wanted is None:
        raise Refusal(
            "VERSION_CONFLICT",
            "amending the plan needs If-Match with the current plan digest",
            reason=IF_MATCH_MISSING,
        )
    if wanted != current:
        raise Refusal(
            "VERSION_CONFLICT",
            "If-Match names a plan digest that is not the current one",
            reason=IF_MATCH_STALE,
        )


def _store_plan(
    chain: Chain,
    project: str,
    candidate_id: str,
    actor: Actor,
    if_match: str | None,
    draft: Drafter,
    idem: IdempotencyRecord | None,
    answers: type[P],
) -> P:
    _pstream, pstate = chain.project(project)
    config = chain.config(pstate)
    stream, state = chain.candidate(project, candidate_id)
    _check_if_match(state, if_match)
    plan, mode, reason = draft(state, pstate, config)
    normalised, findings = preflight(plan, state.obligations, pstate.policies(), config)
    if normalised is None:
        raise Refusal(
            "PLAN_PREFLIGHT_FAILED",
            f"the plan failed preflight with {len(findings)} finding(s); nothing was stored",
            findings=findings,
        )
    version = len(state.plans) + 1
    digest_ = plan_digest(project, candidate_id, state.candidate["revision"], normalised)
    fact = {
        "type": "plan.stored",
        "plan_version": version,
        "plan_digest": digest_,
        "plan": normalised,
        "author": actor.fact(),
        "mode": mode,
        "fallback_reason": reason,
        "recorded_at": chain.now(),
    }
    after = with_fact(state, fact, stream.seq + 1)

    def outcome(seq: int) -> P:
        shown: dict[str, Any] = {
            "plan_version": version,
            "plan_digest": digest_,
            "plan": normalised,
            "seq": seq,
        }
        if issubclass(answers, PlanProposed):  # the service drafted it: say how, and why it fell back
            shown.update(mode=mode, fallback_reason=reason)
        return answers.model_validate(shown)

    # Every stored version needs approvals of its own digest: ask for them in the same write.
    outbox = (
        notifications.review_requested(
            project, state.candidate, fact, config.approvals_required, stream.seq + 1
        )
        if chain.notify
        else []
    )
    return chain.commit(
        CommitRequest(
            stream,
            actor.id,
            fact,
            idempotency=idem,
            head=candidate_head(after, config),
            outbox=[*forge_outbox(config, project, state.candidate), *outbox],
        ),
        outcome,
    )


def put_plan(
    chain: Chain, project: str, candidate_id: str, actor: Actor, raw_plan: Any, if_match: str | None
) -> PlanStored:
    need(actor, "requester")

    def submitted(_state: CandidateState, _project: ProjectState, _config: ProjectConfig) -> Draft:
        return raw_plan, "submitted", None

    return chain.retrying(
        lambda: _store_plan(chain, project, candidate_id, actor, if_match, submitted, None, PlanStored)
    )


def propose(
    chain: Chain,
    proposer: Proposer | None,
    project: str,
    candidate_id: str,
    actor: Actor,
    if_match: str | None,
    key: str | None,
) -> PlanProposed:
    """Rule 23: the model drafts, preflight and scope judge, and any failure stores the fallback instead."""
    need(actor, "requester")
    # The model is asked at most once per request: a lost race re-judges the same answer against the fresh
    # state rather than spending a second model call (and the gateway's 30 s) on it.
    asked: list[tuple[Any, str | None]] = []

    def draft(state: CandidateState, pstate: ProjectState, config: ProjectConfig) -> Draft:
        policies = pstate.policies()
        known = {k: v for k, v in state.obligations.items() if v["policy_id"] in policies}
        fallback = fallback_plan(known, policies)
        if not known:  # nothing to plan: the fallback's own preflight refuses it, no model call needed
            return fallback, "fallback", "MODEL_NOT_CONFIGURED"
        if not asked:
            asked.append(
                proposals.ask(
                    proposer,
                    proposals.proposal_request(
                        project, state.candidate, state.contexts, state.obligations, policies, config
                    ),
                )
            )
        raw, failure = asked[0]
        if failure is not None:
            return fallback, "fallback", failure
        plan, reason, _findings = proposals.judge_proposal(raw, state.obligations, policies, config)
        if plan is None:
            return fallback, "fallback", reason
        return plan, "model", None

    return chain.idempotent(
        StreamRef(project, candidate_id),
        f"/candidates/{candidate_id}/proposals",
        key,
        actor,
        {"if_match": if_match},
        lambda idem: _store_plan(chain, project, candidate_id, actor, if_match, draft, idem, PlanProposed),
        PlanProposed,
    )


PLAN_MODES = ("model", "fallback", "submitted")


def get_plan_version(
    chain: Chain, project: str, candidate_id: str, actor: Actor, version: int
) -> PlanVersionRead:
    """One stored plan version, whole: versions are never edited, so each stays readable (any role in the
    project, like the candidate itself)."""
    need(actor)
    _stream, state = chain.candidate(project, candidate_id)
    found = next((p for p in state.plans if p.get("plan_version") == version), None)
    if found is None:
        stored = len(state.plans)
        raise Refusal(
            "NOT_FOUND",
            f"no plan version {version}: this candidate has "
            + (f"versions 1 to {stored}" if stored else "no plan yet"),
        )
    mode = found.get("mode")
    return PlanVersionRead.model_validate(
        {
            "plan_version": found["plan_version"],
            "plan_digest": found["plan_digest"],
            "plan": found["plan"],
            "stored_at": found["recorded_at"],
            "stored_by": found["author"],
            "mode": mode if mode in PLAN_MODES else None,
        }
    )
