"""Evidence, judged and bound at write time (DOMAIN.md rules 7 to 10), and task reports, judged by the report
writer against that evidence (rules 19 to 22)."""

from ..errors import Refusal
from ..evidence import EvidenceRefused, bind_evidence, evidence_response
from ..forge_checks import forge_outbox
from ..models import Actor, EvidenceRequest, ReportRequest
from ..outcomes import EvidenceRecorded, ReportAttempt
from ..ports import IdempotencyRecord, StreamRef
from ..reports import ReportWriter
from .chain import Chain, CommitRequest, candidate_head, full_revision, need, with_fact


def post_evidence(
    chain: Chain, project: str, candidate_id: str, actor: Actor, request: EvidenceRequest, key: str | None
) -> EvidenceRecorded:
    need(actor, "publisher", "requester")
    full_revision(request.revision)
    ref = StreamRef(project, candidate_id)

    def run(idem: IdempotencyRecord | None) -> EvidenceRecorded:
        _pstream, pstate = chain.project(project)
        config = chain.config(pstate)
        stream, state = chain.candidate(project, candidate_id)
        try:
            fact = bind_evidence(state, pstate, request, actor, chain.ids.new_id("ev"), chain.now())
        except EvidenceRefused as error:
            raise Refusal(error.code, error.detail) from error
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
            lambda seq: EvidenceRecorded.model_validate({**evidence_response(fact), "seq": seq}),
        )

    return chain.idempotent(
        ref,
        f"/candidates/{candidate_id}/evidence",
        key,
        actor,
        request.model_dump(mode="json"),
        run,
        EvidenceRecorded,
    )


def report(
    chain: Chain,
    project: str,
    candidate_id: str,
    task_id: str,
    actor: Actor,
    request: ReportRequest,
    key: str | None,
) -> ReportAttempt:
    need(actor, "requester")
    ref = StreamRef(project, candidate_id)

    def run(idem: IdempotencyRecord | None) -> ReportAttempt:
        _pstream, pstate = chain.project(project)
        config = chain.config(pstate)
        stream, state = chain.candidate(project, candidate_id)
        fact = ReportWriter.write(state, pstate, task_id, request, actor, chain.now())
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
            lambda seq: ReportAttempt(
                attempt=fact["attempt"],
                recorded_status=fact["recorded_status"],
                passes=fact["passes"],
                findings=fact["findings"],
                seq=seq,
            ),
        )

    return chain.idempotent(
        ref,
        f"/candidates/{candidate_id}/tasks/{task_id}/reports",
        key,
        actor,
        request.model_dump(mode="json"),
        run,
        ReportAttempt,
    )
