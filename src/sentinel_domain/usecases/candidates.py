"""Candidates: created from their change (obligations derived), given more change context (obligations added,
never removed; attested by a trusted ci publisher), looked up, and shown whole."""

from collections.abc import Iterable
from typing import Any

from .. import changed_files
from ..canonical import digest
from ..derivation import MAX_OBLIGATIONS, derive
from ..errors import Refusal, StoreUnavailable
from ..forge_checks import forge_outbox
from ..models import Actor, CandidateRequest, Change, ChangeContextRequest, ProjectConfig
from ..outcomes import (
    CandidateCreated,
    CandidateListed,
    CandidateMatch,
    CandidatePage,
    CandidateView,
    ChangeContext,
    ChangeContextAdded,
    Obligation,
    RecordedDecision,
)
from ..ports import ClaimTaken, IdempotencyRecord, Stream, StreamRef
from ..records import recorded_decision
from ..state import CandidateState, ProjectState, public
from .chain import (
    Chain,
    CommitRequest,
    candidate_head,
    claim_key,
    full_revision,
    need,
    state_facts,
    unavailable,
    with_fact,
)
from .project_reads import ChainCache, held_candidate_facts

CLAIMED = "a candidate for this subject, revision and environment exists"


def _attests(actor: Actor, config: ProjectConfig) -> bool:
    return actor.kind == "ci" and "publisher" in actor.roles and actor.id in config.change_context_publishers


def _context(attested: bool) -> ChangeContext:
    return "attested" if attested else "declared"


def _obligations(derived: Iterable[dict[str, Any]]) -> list[Obligation]:
    return [Obligation.model_validate(o) for o in derived]


def _change_summary(change: Change) -> dict[str, Any]:
    """What a change context's fact keeps of its change: the changed paths, sorted, at most
    `changed_files.KEPT_PER_FACT` of them (`files_count` says how many distinct paths were sent, and is
    stored only past the bound, so a context within it is stored exactly as before), and a digest of each
    OpenAPI document."""
    files, count = changed_files.kept(change.files)
    summary: dict[str, Any] = {
        "files": files,
        "openapi": [
            {"name": d.name, "before_sha256": digest(d.before), "after_sha256": digest(d.after)}
            for d in change.openapi
        ],
    }
    if count > len(files):
        summary["files_count"] = count
    return summary


def create_candidate(
    chain: Chain,
    project: str,
    actor: Actor,
    request: CandidateRequest,
    key: str | None,
    forge: dict[str, Any] | None = None,
) -> CandidateCreated:
    """`forge`: what the forge worker (sentinel_domain.usecases.forge) knows of a forge-attested change: the
    delivery, whether the file list is complete (an incomplete one is never attested) and the requester of
    record. Only the worker passes it; no HTTP body can."""
    need(actor, "requester", "publisher")
    base = full_revision(request.base_revision, "base_revision")
    revision = full_revision(request.revision)

    def run(idem: IdempotencyRecord | None) -> CandidateCreated:
        _pstream, pstate = chain.project(project)
        config = chain.config(pstate)
        if request.environment not in config.environments:
            raise Refusal(
                "UNKNOWN_ENVIRONMENT",
                f"environment {request.environment} is not one of the "
                f"project's: {', '.join(config.environments)}",
            )
        obligations = derive(request.change, config, chain.clock.now().date())
        if len(obligations) > MAX_OBLIGATIONS:
            raise Refusal(
                "TOO_MANY_OBLIGATIONS",
                f"the change derives {len(obligations)} obligations; a "
                f"candidate holds at most {MAX_OBLIGATIONS}: split the change",
            )
        key_ = claim_key(request.subject, revision, request.environment)
        existing = chain.find_claim(project, key_)
        if existing:
            raise Refusal("CANDIDATE_EXISTS", CLAIMED, extra={"candidate_id": existing})
        candidate_id = chain.ids.new_id("cand")
        ref = StreamRef(project, candidate_id)
        attested = _attests(actor, config) and (forge is None or forge.get("complete") is True)
        fact = {
            "type": "candidate.created",
            "candidate_id": candidate_id,
            "subject": request.subject,
            "base_revision": base,
            "revision": revision,
            "environment": request.environment,
            "created_by": actor.fact(),
            "attested": attested,
            "change": _change_summary(request.change),
            "obligations_added": obligations,
            "recorded_at": chain.now(),
        }
        if forge is not None:
            # Stored only on forge-created candidates: earlier candidates replay to the same digests.
            fact["forge"] = forge
        scope = sorted({o["scope"] for o in obligations})
        try:
            return chain.commit(
                CommitRequest(
                    Stream(ref, [], {}, None),
                    actor.id,
                    fact,
                    idempotency=idem,
                    claim=(key_, candidate_id),
                    head={"plan_digest": "", "approval_valid_until": ""},
                    outbox=forge_outbox(config, project, fact),
                ),
                lambda seq: CandidateCreated(
                    candidate_id=candidate_id,
                    scope=scope,
                    obligations=_obligations(obligations),
                    change_context=_context(attested),
                    seq=seq,
                ),
            )
        except ClaimTaken as taken:
            raise Refusal("CANDIDATE_EXISTS", CLAIMED, extra={"candidate_id": taken.existing_id}) from taken

    return chain.idempotent(
        StreamRef(project), "/candidates", key, actor, request.model_dump(mode="json"), run, CandidateCreated
    )


def add_change_context(
    chain: Chain,
    project: str,
    candidate_id: str,
    actor: Actor,
    request: ChangeContextRequest,
    key: str | None,
    attest: bool = True,
) -> ChangeContextAdded:
    """`attest` False: the context is recorded as declared whoever sends it (the forge worker's account of a
    file list that is or may be truncated)."""
    need(actor, "requester", "publisher")
    ref = StreamRef(project, candidate_id)

    def run(idem: IdempotencyRecord | None) -> ChangeContextAdded:
        _pstream, pstate = chain.project(project)
        config = chain.config(pstate)
        stream, state = chain.candidate(project, candidate_id)
        derived = derive(request.change, config, chain.clock.now().date())
        added = [o for o in derived if o["obligation_id"] not in state.obligations]
        if len(state.obligations) + len(added) > MAX_OBLIGATIONS:
            raise Refusal(
                "TOO_MANY_OBLIGATIONS",
                f"the candidate would hold "
                f"{len(state.obligations) + len(added)} obligations; at most {MAX_OBLIGATIONS}",
            )
        fact = {
            "type": "change_context.added",
            "actor": actor.fact(),
            "attested": attest and _attests(actor, config),
            "change": _change_summary(request.change),
            "obligations_added": added,
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
            lambda seq: ChangeContextAdded(
                added_obligations=_obligations(added),
                obligations=_obligations(after.obligations.values()),
                scope=after.scope(),
                change_context=_context(after.attested),
                seq=seq,
            ),
        )

    return chain.idempotent(
        ref,
        f"/candidates/{candidate_id}/change-context",
        key,
        actor,
        request.model_dump(mode="json"),
        run,
        ChangeContextAdded,
    )


def find_candidates(
    chain: Chain,
    project: str,
    actor: Actor,
    subject: str | None,
    revision: str | None,
    environment: str | None,
    limit: int,
    cursor: str | None,
    cache: ChainCache | None = None,
) -> CandidatePage:
    need(actor)
    chain.project(project)
    if subject and revision and environment:
        found = chain.find_claim(project, claim_key(subject, revision.lower(), environment))
        if found:
            _require_claimed(chain, project, found, (subject, revision.lower(), environment), cache)
        match = (
            CandidateMatch(
                candidate_id=found, subject=subject, revision=revision.lower(), environment=environment
            )
            if found
            else None
        )
        return CandidatePage(candidates=[match] if match else [], next_cursor=None)
    try:
        claims, next_cursor = chain.store.list_claims(project, limit, cursor)
    except StoreUnavailable as error:
        raise unavailable("the state store could not be read; retry shortly") from error
    rows = [
        CandidateListed.model_validate(c)
        for c in claims
        if (not subject or c["subject"] == subject)
        and (not revision or c["revision"] == revision.lower())
        and (not environment or c["environment"] == environment)
    ]
    return CandidatePage(candidates=list(rows), next_cursor=next_cursor)


def _require_claimed(
    chain: Chain, project: str, candidate_id: str, wanted: tuple[str, str, str], cache: ChainCache | None
) -> None:
    """A claim row is plain table data: the candidate it names must have been created for exactly this
    subject, revision and environment (its sealed `candidate.created` fact), or the lookup would hand one
    environment's decision to another. A mismatch is tampering: refused, never answered. Where the
    process holds the candidate's verified chain for its unchanged HEAD (Lambda), one item is read."""
    held = held_candidate_facts(chain, StreamRef(project, candidate_id), cache)
    if held is not None:
        created = next(f for f in held if f["type"] == "candidate.created")
    else:
        try:
            _stream, state = chain.candidate(project, candidate_id)
        except Refusal as refusal:
            if refusal.code == "NOT_FOUND":
                raise unavailable("a candidate claim names a candidate that does not exist") from refusal
            raise
        created = state.candidate
    if (created["subject"], str(created["revision"]).lower(), created["environment"]) != wanted:
        raise unavailable(
            "the claim for this subject, revision and environment names a candidate created for another: "
            "the store was tampered with; nothing is answered"
        )


def get_candidate(chain: Chain, project: str, candidate_id: str, actor: Actor) -> CandidateView:
    need(actor)
    stream, state = chain.candidate(project, candidate_id)
    return candidate_view(state, stream.seq, _last_decision(chain, project, state))


def _last_decision(chain: Chain, project: str, state: CandidateState) -> RecordedDecision | None:
    """The newest recorded decision, its findings recomputed from the facts as of its position: that needs
    the project's facts too (read, and verified, only then)."""
    if not state.decisions:
        return None
    fact = state.decisions[-1]
    project_state = chain.project(project)[1] if "findings_digest" in fact else ProjectState(project, [])
    return recorded_decision(fact, state_facts(state), project_state)


def candidate_view(state: CandidateState, seq: int, last_decision: RecordedDecision | None) -> CandidateView:
    c = state.candidate
    digest_ = state.plan_digest
    tasks = []
    for task in state.plan["plan"]["tasks"] if state.plan else []:
        attempts = [public(r) for r in state.reports_for(digest_ or "", task["task_id"])]
        tasks.append(
            {
                "task_id": task["task_id"],
                "attempts": attempts,
                "passes": state.task_passes(digest_ or "", task["task_id"]),
                "settled": state.task_settled(digest_ or "", task["task_id"]),
            }
        )
    return CandidateView.model_validate(
        {
            "candidate_id": c["candidate_id"],
            "subject": c["subject"],
            "base_revision": c["base_revision"],
            "revision": c["revision"],
            "environment": c["environment"],
            "created_by": c["created_by"],
            "created_at": c["recorded_at"],
            "scope": state.scope(),
            "obligations": list(state.obligations.values()),
            "change_context": _context(state.attested),
            "changed_files": changed_files.view(state.contexts),
            "plan_versions": [
                {
                    "plan_version": p["plan_version"],
                    "plan_digest": p["plan_digest"],
                    "mode": p["mode"],
                    "author": p["author"],
                    "recorded_at": p["recorded_at"],
                }
                for p in state.plans
            ],
            "plan": state.plan["plan"] if state.plan else None,
            "plan_digest": digest_,
            "reviews": [public(r) for r in state.reviews],
            "evidence": [
                {
                    k: e[k]
                    for k in (
                        "evidence_id",
                        "check_id",
                        "kind",
                        "outcome",
                        "trust",
                        "counts",
                        "observed_at",
                        "recorded_at",
                        "raw_sha256",
                        "binding",
                        "scope",
                    )
                }
                | {"publisher": e["publisher"]["id"]}
                | evidence_extras(e)
                for e in state.evidence
            ],
            "tasks": tasks,
            "executions": [public(e) for e in state.executions],
            "last_decision": last_decision,
            "seq": seq,
        }
    )


def evidence_extras(e: dict[str, Any]) -> dict[str, Any]:
    """What a reviewer reads of a piece of evidence beyond its verdict: the run the publisher named (as
    published: the service never fetches its url) and the tests that failed, by `classname.name` (the first
    sentinel_domain.junit.FAILING_NAMES) with how many failed in all. Evidence recorded before failing names
    were kept shows none."""
    failing = e.get("failing_tests") or {}
    names = [n for n in failing.get("names") or [] if isinstance(n, str)]
    count = failing.get("count")
    return {
        "source": e.get("source"),
        "failing_tests": names,
        "failing_tests_count": count if isinstance(count, int) else len(names),
    }
