"""Reviews of one plan digest, and the settlement of a passed task: a human reviewer's acts (DOMAIN.md rules
11 to 15)."""

from ..errors import Refusal
from ..forge_checks import forge_outbox
from ..models import Actor, ReviewRequest, SettlementRequest
from ..outcomes import ReviewRecorded, TaskSettled
from ..ports import IdempotencyRecord, StreamRef
from ..reports import find_task
from ..reviews import excluded_approvers, reviewer_refusal
from ..times import plus_seconds
from .chain import Chain, CommitRequest, candidate_head, full_revision, with_fact

WHY_NOT_A_REVIEWER = {
    "AGENT_CANNOT_REVIEW": "agents never review; a human reviewer must",
    "REVIEWER_NOT_HUMAN": "ci principals never review; a human reviewer must",
    "FORBIDDEN_ROLE": "reviewing needs the reviewer role in this project",
}


def review(
    chain: Chain, project: str, candidate_id: str, actor: Actor, request: ReviewRequest, key: str | None
) -> ReviewRecorded:
    if not actor.roles:
        raise Refusal("NOT_FOUND", "no such project")
    refusal = reviewer_refusal(actor)
    if refusal:
        raise Refusal(refusal, WHY_NOT_A_REVIEWER[refusal])
    ref = StreamRef(project, candidate_id)

    def run(idem: IdempotencyRecord | None) -> ReviewRecorded:
        _pstream, pstate = chain.project(project)
        config = chain.config(pstate)
        stream, state = chain.candidate(project, candidate_id)
        named_exists = any(p["plan_digest"] == request.plan_digest for p in state.plans)
        if request.decision == "approve" and actor.id in excluded_approvers(
            state, request.plan_digest if named_exists else None
        ):
            raise Refusal(
                "SELF_APPROVAL",
                "you created this candidate, authored a plan version, or sponsor "
                "someone who did: ask another reviewer",
            )
        if state.plan_digest is None or request.plan_digest != state.plan_digest:
            raise Refusal(
                "DIGEST_MISMATCH",
                "the review names a plan digest that is not the current plan's"
                if state.plan_digest
                else "no plan exists to review",
            )
        if full_revision(request.revision) != state.candidate["revision"]:
            raise Refusal("REVISION_MISMATCH", "the review names a revision that is not the candidate's")
        now = chain.now()
        review_id = chain.ids.new_id("rev")
        fact = {
            "type": "review.recorded",
            "review_id": review_id,
            "reviewer": actor.fact(),
            "decision": request.decision,
            "plan_digest": request.plan_digest,
            "revision": state.candidate["revision"],
            "comment": request.comment,
            "expires_at": plus_seconds(now, config.approval_ttl_seconds),
            "recorded_at": now,
        }
        after = with_fact(state, fact, stream.seq + 1)
        return chain.commit(
            CommitRequest(
                stream,
                actor.id,
                fact,
                idempotency=idem,
                head=candidate_head(after, config),
                outbox=forge_outbox(config, project, state.candidate),
            ),
            lambda seq: ReviewRecorded(
                review_id=review_id,
                decision=request.decision,
                plan_digest=request.plan_digest,
                revision=fact["revision"],
                expires_at=fact["expires_at"],
                seq=seq,
            ),
        )

    return chain.idempotent(
        ref,
        f"/candidates/{candidate_id}/reviews",
        key,
        actor,
        request.model_dump(mode="json"),
        run,
        ReviewRecorded,
    )


def settle(
    chain: Chain,
    project: str,
    candidate_id: str,
    task_id: str,
    actor: Actor,
    request: SettlementRequest,
    key: str | None,
) -> TaskSettled:
    if not actor.roles:
        raise Refusal("NOT_FOUND", "no such project")
    refusal = reviewer_refusal(actor)
    if refusal:
        raise Refusal(refusal, "settlement is a human reviewer's act")
    ref = StreamRef(project, candidate_id)

    def run(idem: IdempotencyRecord | None) -> TaskSettled:
        _pstream, pstate = chain.project(project)
        config = chain.config(pstate)
        stream, state = chain.candidate(project, candidate_id)
        current = state.plan_digest
        if current is None or request.plan_digest != current:
            raise Refusal("DIGEST_MISMATCH", "the settlement names a plan digest that is not the current one")
        if find_task(state, task_id) is None:
            raise Refusal("NOT_FOUND", f"the current plan has no task {task_id}")
        if not state.task_passes(current, task_id):
            raise Refusal("TASK_NOT_ELIGIBLE", f"task {task_id} does not pass under this plan digest")
        fact = {
            "type": "task.settled",
            "task_id": task_id,
            "plan_digest": current,
            "settled_by": actor.fact(),
            "note": request.note,
            "recorded_at": chain.now(),
        }
        after = with_fact(state, fact, stream.seq + 1)
        return chain.commit(
            CommitRequest(
                stream,
                actor.id,
                fact,
                idempotency=idem,
                head=candidate_head(after, config),
                outbox=forge_outbox(config, project, state.candidate),
            ),
            lambda seq: TaskSettled(task_id=task_id, plan_digest=current, settled=True, seq=seq),
        )

    return chain.idempotent(
        ref,
        f"/candidates/{candidate_id}/tasks/{task_id}/settlement",
        key,
        actor,
        request.model_dump(mode="json"),
        run,
        TaskSettled,
    )
