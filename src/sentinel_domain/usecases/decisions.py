"""Decisions: evaluated on a read (at the service clock, or a caller's what-if instant), or evaluated at the
service clock and recorded on the candidate's chain. Once the caller's role and the candidate are
established, nothing the gate cannot establish refuses: it is a finding, and the decision holds."""

from typing import Any, NamedTuple

from .. import notifications
from ..canonical import digest
from ..decision import Decision, Finding, decide, finding, findings_digest, hold
from ..errors import Refusal, StoreConflict, StoreUnavailable
from ..forge_checks import forge_outbox
from ..models import Actor
from ..outcomes import DecisionNotRecorded, DecisionRecorded, DecisionView, decision_view
from ..ports import IdempotencyRecord, Stream, StreamRef
from ..receipts import DEFAULT_MAX_SECONDS, ReceiptSigner, ReceiptSignerUnavailable, envelope, statement
from ..receipts import statement_digest as receipt_digest
from ..records import decision_fact
from ..state import CandidateState, ProjectState, parse_facts
from ..times import format_time, parse_time
from .chain import Chain, CommitRequest, need, unavailable
from .project_reads import ChainCache, held_candidate_facts, hold_candidate, project_for_decision

# A read finding that means the chains could not be vouched for: a decision is never recorded on them.
UNVERIFIED = frozenset({"STATE_TAMPERED", "STATE_UNAVAILABLE"})


def evaluate(
    chain: Chain, project: str, candidate_id: str, actor: Actor, as_of: str | None = None
) -> Decision:
    return _evaluate(chain, project, candidate_id, actor, as_of)[0]


def judged(
    chain: Chain, project: str, candidate_id: str, actor: Actor, *, release: bool = False
) -> tuple[Decision, Stream | None, "Basis"]:
    """The read-only evaluation at the service clock (what `GET .../decision` answers), with what it was
    judged from: the forge check publisher shows both. `release`: read as a release path does (both chains
    compared with the witness, in AWS too), for a caller whose answer lets a change advance."""
    return _evaluate(chain, project, candidate_id, actor, None, release=release)


def hold_unreadable(detail: str, as_of: str) -> Decision:
    """The hold for a candidate whose chain cannot be read at all (a store fault)."""
    return hold([finding("STATE_UNAVAILABLE", detail)], as_of, digest(detail))


class Basis(NamedTuple):
    """What a decision was judged from, beyond the facts' own chain: what a recorded decision keeps of it."""

    state: CandidateState | None  # None when a stored fact could not be read
    project: ProjectState
    project_seq: int
    read_findings: list[Finding]  # the read's own findings (store, paging, tampering), not the facts'


def _evaluate(
    chain: Chain,
    project: str,
    candidate_id: str,
    actor: Actor,
    as_of: str | None,
    stream: Stream | None = None,
    cache: ChainCache | None = None,
    release: bool = False,
) -> tuple[Decision, Stream | None, Basis]:
    """Never raises once the caller's role and the candidate are established: anything the gate
    cannot establish is a finding, and the decision holds. One read of the candidate's partition and
    one of the project's feed it; with a `cache` (decision reads only), a read of each one's HEAD while the
    chain held for it is unchanged (see project_reads), and then no stream is returned."""
    need(actor)
    ref = StreamRef(project, candidate_id)
    when = as_of or chain.now()
    facts = held_candidate_facts(chain, ref, cache) if stream is None else None
    read_findings: list[Finding] = []
    if facts is None:
        if stream is None:
            stream = chain.load(ref, release=release)
        if stream is None or not stream.facts:
            raise Refusal("NOT_FOUND", "no such candidate")
        read_findings = _read_findings(chain, stream)
    pstate, project_findings = project_for_decision(chain, project, cache, release)
    extra = [*read_findings, *project_findings]
    project_seq = max((f["_seq"] for f in pstate.facts), default=0)  # the position judged from
    try:
        if facts is None and stream is not None:
            facts = parse_facts(stream.facts)
            hold_candidate(cache, stream, facts, read_findings)
        state = CandidateState.from_facts(facts or [], when)
        return decide(state, pstate, when, extra), stream, Basis(state, pstate, project_seq, list(extra))
    except Exception as error:  # an unreadable fact is tampering or corruption; never a pass
        basis = Basis(None, pstate, project_seq, list(extra))
        extra.append(finding("STATE_TAMPERED", f"a stored fact cannot be read: {type(error).__name__}"))
        return hold(extra, when, findings_digest(extra)), stream, basis


def _read_findings(chain: Chain, stream: Stream) -> list[Finding]:
    """What reading the candidate's chain in full found: pages beyond the budget, a chain that fails."""
    found: list[Finding] = []
    if not stream.complete:
        found.append(
            finding(
                "EVIDENCE_QUERY_INCOMPLETE",
                f"the candidate's state took more than "
                f"{stream.pages} pages to read; nothing unread may count",
            )
        )
    try:
        verification = chain.verify(stream)
    except StoreUnavailable as error:  # no chain key, or no witness: nothing read can be vouched for
        found.append(finding("STATE_UNAVAILABLE", f"the candidate's audit chain cannot be verified: {error}"))
        return found
    if not verification.valid:
        found.append(
            finding(
                "STATE_TAMPERED",
                f"the candidate's audit chain fails at seq "
                f"{verification.first_bad_seq}: {verification.reason}",
            )
        )
    return found


def decision(
    chain: Chain,
    project: str,
    candidate_id: str,
    actor: Actor,
    as_of: str | None,
    cache: ChainCache | None = None,
) -> DecisionView:
    if as_of is not None:
        try:
            as_of = format_time(parse_time(as_of))
        except (ValueError, OverflowError) as error:
            raise Refusal(
                "VALIDATION_FAILED",
                "as_of must be an RFC 3339 time with an offset, between the years 1970 and 9999",
            ) from error
    verdict = _evaluate(chain, project, candidate_id, actor, as_of, cache=cache)[0]
    return decision_view(verdict, "caller" if as_of else "service")


def _receipt(
    verdict: Decision, basis: Basis, signer: ReceiptSigner | None, max_seconds: int
) -> tuple[dict[str, Any], str]:
    """The signed receipt of a `ready` decision and its statement's digest. Fails closed: no signer, or one
    that cannot sign, is STATE_UNAVAILABLE before anything is appended, so `ready` is never recorded (nor
    answered) without its receipt."""
    if signer is None:
        raise unavailable(
            "no receipt signing key is configured (SENTINEL_RECEIPT_KEY_ID or SENTINEL_RECEIPT_KEY_FILE): "
            "a ready decision is never recorded without its signed receipt; nothing was recorded"
        )
    if basis.state is None:  # ready is judged from a readable state only; never guess one
        raise unavailable("the candidate's state was not read; nothing was recorded")
    claims = statement(verdict, basis.state, basis.project, max_seconds)
    try:
        return envelope(claims, signer), receipt_digest(claims)
    except ReceiptSignerUnavailable as error:
        raise unavailable(
            f"{error}; a ready decision is never recorded without it: nothing was recorded"
        ) from None


def record_decision(
    chain: Chain,
    project: str,
    candidate_id: str,
    actor: Actor,
    key: str | None,
    signer: ReceiptSigner | None = None,
    receipt_max_seconds: int = DEFAULT_MAX_SECONDS,
) -> DecisionRecorded | DecisionNotRecorded:
    """Recorded (with its seq), or, when the store fails once the candidate is established, a hold that says
    it was not recorded. A `ready` one carries its signed receipt (`receipts`), signed before the write: a
    signer that fails is answered as a store failure is, a hold that was not recorded."""
    need(actor)
    ref = StreamRef(project, candidate_id)
    # Until the candidate is established a store failure is a 503, not a decision. Recording is a release
    # path: both chains are compared with the witness's newest checkpoints, wherever the gate runs.
    established = chain.load(ref, release=True)
    if established is None or not established.facts:
        raise Refusal("NOT_FOUND", "no such candidate")
    fresh = [established]
    refused: list[DecisionNotRecorded] = []

    def run(idem: IdempotencyRecord | None) -> DecisionRecorded:
        # The read that established the candidate serves the first attempt; a retry reads afresh.
        verdict, stream, basis = _evaluate(
            chain, project, candidate_id, actor, None, fresh.pop() if fresh else None, release=True
        )
        if stream is None:  # only a decision read (with a cache) reuses held facts; this one read in full
            raise unavailable("the candidate's chain was not read")
        if not stream.complete:
            raise unavailable("the candidate's chain is larger than one read may page through")
        unverified = {f.code for f in basis.read_findings} & UNVERIFIED
        if "STATE_TAMPERED" in unverified:
            # Verification before every append: a chain that fails it is refused like every other write
            # (503), nothing recorded; the hold's findings say why.
            raise Refusal(
                "STATE_UNAVAILABLE",
                "the audit chain fails verification; nothing was recorded: an operator must restore it",
                findings=[f.model_dump() for f in verdict.findings],
            )
        if unverified:
            # A chain that cannot be checked right now (a key or witness unreadable): answered as a store
            # failure is, a hold that says it was not recorded.
            refused.append(DecisionNotRecorded(**dict(verdict), as_of_source="service"))
            raise unavailable("the audit chain cannot be verified right now; nothing was recorded")
        # Digests, counts and positions, not the findings' prose: bounded whatever the findings (records.py).
        fact = decision_fact(
            verdict,
            basis.state,
            basis.project,
            basis.read_findings,
            stream.seq,
            basis.project_seq,
            actor.fact(),
        )
        receipt = None
        if verdict.decision == "ready":
            receipt, fact["receipt_digest"] = _receipt(verdict, basis, signer, receipt_max_seconds)
        if stream.seq and stream.events and stream.events[-1]["at"] > verdict.as_of:
            raise StoreConflict()  # a write landed after our clock reading: judge again
        head = {k: v for k, v in (stream.head or {}).items() if k not in ("seq", "hash")}
        outbox = (
            forge_outbox(basis.project.config(verdict.as_of), project, basis.state.candidate)
            if basis.state is not None
            else []
        )
        # Announced in the same write as the fact: a replay, which writes nothing, announces nothing.
        if chain.notify:
            outbox += notifications.for_recorded_decision(project, basis.state, verdict, stream.seq + 1)
        return chain.commit(
            CommitRequest(stream, actor.id, fact, idempotency=idem, head=head, outbox=outbox),
            lambda seq: DecisionRecorded(**dict(verdict), as_of_source="service", seq=seq, receipt=receipt),
        )

    try:
        return chain.idempotent(
            ref, f"/candidates/{candidate_id}/decisions", key, actor, {}, run, DecisionRecorded
        )
    except Refusal as refusal:
        if refusal.code != "STATE_UNAVAILABLE" or refusal.findings:
            raise
        if refused:
            return refused[-1]
        verdict = hold([finding("STATE_UNAVAILABLE", refusal.detail)], chain.now(), digest(refusal.detail))
        return DecisionNotRecorded(**dict(verdict), as_of_source="service")
