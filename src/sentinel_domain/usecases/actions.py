"""Executions of a plan's declared actions: only under the current, approved plan digest, with exactly the
declared params, at most max_executions times, and only through the outbox written with the fact."""

from typing import Any

from ..canonical import digest
from ..errors import Refusal
from ..forge_checks import forge_outbox
from ..models import Actor, ExecutionRequest
from ..outcomes import ActionExecuted, SideEffect
from ..ports import IdempotencyRecord, StreamRef
from ..reviews import approval_status
from .chain import Chain, CommitRequest, need


def execute(
    chain: Chain,
    project: str,
    candidate_id: str,
    action_id: str,
    actor: Actor,
    request: ExecutionRequest,
    key: str | None,
) -> ActionExecuted:
    need(actor, "requester")
    if not key:
        raise Refusal("IDEMPOTENCY_KEY_REQUIRED", "executions need an Idempotency-Key header")
    ref = StreamRef(project, candidate_id)

    def run(idem: IdempotencyRecord | None) -> ActionExecuted:
        pstream, pstate = chain.project(project)
        config = chain.config(pstate)
        stream, state = chain.candidate(project, candidate_id)
        now = chain.now()
        digest_ = state.plan_digest
        if state.plan is None or digest_ is None or request.plan_digest != digest_:
            raise Refusal("DIGEST_MISMATCH", "the execution names a plan digest that is not the current one")
        # An approval by a reviewer revoked as compromised makes nothing executable (rule 26).
        code, valid_until = approval_status(state, config, now, pstate.compromised(now))
        if code:
            raise Refusal("PLAN_NOT_APPROVED", f"the current plan is not approved ({code})")
        declared = next((a for a in state.plan["plan"]["actions"] if a["action_id"] == action_id), None)
        if declared is None:
            raise Refusal("ACTION_UNDECLARED", f"the current plan declares no action {action_id}")
        if declared["type"] not in config.allowed_action_types:
            raise Refusal("ACTION_NOT_ALLOWED", f"action type {declared['type']} is not allow-listed")
        if request.params != declared["params"]:
            raise Refusal("ACTION_PARAMS_MISMATCH", "params must equal the declared ones exactly")
        done = [e for e in state.executions if e["plan_digest"] == digest_ and e["action_id"] == action_id]
        if len(done) >= declared["max_executions"]:
            raise Refusal(
                "ACTION_EXHAUSTED",
                f"action {action_id} ran {len(done)} of "
                f"{declared['max_executions']} time(s) under this plan digest",
            )
        stored_until = str((stream.head or {}).get("approval_valid_until", ""))
        execution_id = chain.ids.new_id("exe")
        side_effect: dict[str, Any] = {
            "type": declared["type"],
            "params": declared["params"],
            "delivery": "outbox",
            "outbox_id": f"{candidate_id}/{execution_id}",
        }
        fact = {
            "type": "action.executed",
            "execution_id": execution_id,
            "action_id": action_id,
            "action_type": declared["type"],
            "plan_digest": digest_,
            "params": declared["params"],
            "executor": actor.fact(),
            "idempotency_key_sha256": digest(key),
            "side_effect": side_effect,
            "recorded_at": now,
        }
        outbox = [
            {
                "outbox_id": side_effect["outbox_id"],
                "kind": "action",
                "project": project,
                "candidate_id": candidate_id,
                "execution_id": execution_id,
                "action_id": action_id,
                "action_type": declared["type"],
                "params": declared["params"],
                "plan_digest": digest_,
                "recorded_at": now,
            },
            *forge_outbox(config, project, state.candidate),
        ]
        if stored_until == (valid_until or ""):
            approval_check: str | None = chain.now()  # the write's condition re-checks the expiry
        else:
            # The head predates a configuration change (approvals_required lowered): its stored validity is
            # stale, so the approval is judged here, on a fresh clock reading, and the write refreshes it.
            if not valid_until or valid_until <= chain.now():
                raise Refusal("PLAN_NOT_APPROVED", "the approval of the current plan has expired")
            approval_check = None
        return chain.commit(
            CommitRequest(
                stream,
                actor.id,
                fact,
                idempotency=idem,
                outbox=outbox,
                head={"plan_digest": digest_, "approval_valid_until": valid_until or ""},
                require_plan_digest=digest_,
                require_approval_after=approval_check,
                require_project_seq=pstream.seq,
            ),
            lambda seq: ActionExecuted(
                execution_id=execution_id,
                action_id=action_id,
                plan_digest=digest_,
                side_effect=SideEffect.model_validate(side_effect),
                seq=seq,
            ),
        )

    return chain.idempotent(
        ref, f"action:{action_id}", key, actor, request.model_dump(mode="json"), run, ActionExecuted
    )
