"""The chain transaction every use case runs in: read a chain and check it is intact, fold its state, append
one fact with its audit event and the chain's new head in one conditional write, re-judge on a lost race, and
keep (and replay) the first success of an idempotent request.

The use cases hold the rules; this holds the plumbing, once."""

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from .. import audit
from ..canonical import canonical_text, digest
from ..errors import Refusal, StoreConflict, StoreUnavailable
from ..integrity import (
    ChainKeyUnavailable,
    ChainSeal,
    SealSource,
    checkpoint_outbox_entry,
    marked_tampered,
)
from ..models import REVISION, Actor, ProjectConfig
from ..outcomes import Outcome, Replayable
from ..ports import (
    Append,
    Clock,
    IdempotencyRecord,
    Ids,
    StateStore,
    Stream,
    StreamRef,
    Witness,
    WitnessConflict,
)
from ..reviews import approval_status
from ..state import CandidateState, ProjectState, parse_facts
from ..times import format_time, plus_seconds

RETRIES = 4
LEASE_SECONDS = 30
OPERATOR = "operator"
HEAD_OWN = frozenset({"seq", "hash", "mac"})  # what every append sets on the head itself

T = TypeVar("T", bound=Outcome)
R = TypeVar("R", bound=Replayable)


def unavailable(detail: str) -> Refusal:
    return Refusal("STATE_UNAVAILABLE", detail)


def need(actor: Actor, *roles: str) -> None:
    """No role in the project: it does not exist for you. A role, but the wrong one: 403."""
    if not actor.roles:
        raise Refusal("NOT_FOUND", "no such project")
    if roles and not set(roles) & set(actor.roles):
        raise Refusal("FORBIDDEN_ROLE", f"this needs one of the roles {', '.join(roles)} in the project")


def full_revision(value: str, field_name: str = "revision") -> str:
    if not isinstance(value, str) or not REVISION.match(value):
        raise Refusal(
            "MUTABLE_REVISION",
            f"{field_name} must be a full commit id (40 or 64 hex characters), not {str(value)[:80]!r}",
        )
    return value.lower()


def if_match_value(header: str | None) -> str | None:
    if header is None:
        return None
    value = header.strip()
    if value.startswith("W/"):
        value = value[2:]
    return value.strip('"')


def claim_key(subject: str, revision: str, environment: str) -> str:
    return digest([subject, revision, environment])


def state_facts(state: CandidateState) -> list[dict[str, Any]]:
    """The facts a state was folded from, in chain order."""
    facts = [
        *state.contexts,
        *state.plans,
        *state.reviews,
        *state.evidence,
        *state.reports,
        *state.settlements,
        *state.executions,
        *state.decisions,
    ]
    return sorted(facts, key=lambda f: int(f["_seq"]))


def with_fact(state: CandidateState, fact: dict[str, Any], seq: int) -> CandidateState:
    """The state once `fact` is appended at `seq`."""
    return CandidateState.from_facts([*state_facts(state), dict(fact, _seq=seq, _digest="")])


def candidate_head(state: CandidateState, config: ProjectConfig) -> dict[str, Any]:
    """What executions re-check inside their transaction: the plan digest and how long it is approved."""
    _code, until = approval_status(state, config, "")
    return {"plan_digest": state.plan_digest or "", "approval_valid_until": until or ""}


@dataclass
class CommitRequest:
    """One fact to append to the chain it was judged against, and what rides in the same write.

    The fact's `type` names its audit event and its `recorded_at` dates it. The write holds only while the
    chain is still at `stream.seq` (and, where named, the head still carries `require_plan_digest`, its
    approval is still valid at `require_approval_after`, and the project chain is still at
    `require_project_seq`); otherwise it is judged again from a fresh read."""

    stream: Stream
    actor_id: str
    fact: dict[str, Any]
    head: dict[str, Any] = field(default_factory=dict)  # what the new head carries besides its seq and hash
    outbox: list[dict[str, Any]] = field(default_factory=list)
    idempotency: IdempotencyRecord | None = None
    claim: tuple[str, str] | None = None  # (uniqueness key, candidate id) for a new candidate
    require_plan_digest: str | None = None
    require_approval_after: str | None = None
    require_project_seq: int | None = None


ANSWER_TAG = "_tag"  # where a completed idempotency record keeps its answer's tag (and an outbox item its)
# The key a synthetic project's side effects carry (`true`), and nobody else's: the stores lift it to an
# attribute of their own (outbox_synthetic), which every consumer rule excludes and the local relay honours.
SYNTHETIC = "synthetic"


def marked_side_effects(outbox: list[dict[str, Any]], synthetic: bool) -> list[dict[str, Any]]:
    """The outbox as the project's nature says, whatever a use case (or a request body it copied) put there:
    `synthetic: true` on every entry of a synthetic project, and the key on no entry of any other."""
    marked = []
    for entry in outbox:
        body = {k: v for k, v in entry.items() if k != SYNTHETIC}
        marked.append({**body, SYNTHETIC: True} if synthetic else body)
    return marked


def first_fact_synthetic(facts: dict[int, str], fact: dict[str, Any]) -> bool:
    """Whether a project chain holding `facts` (about to append `fact`) is synthetic: its first fact says."""
    first = json.loads(facts[min(facts)]) if facts else fact
    return first.get("type") == "project.created" and first.get(SYNTHETIC) is True


def side_effect_fields(ref: StreamRef, entry: dict[str, Any]) -> dict[str, Any]:
    return {"project": ref.project, "candidate_id": ref.candidate_id, "entry": entry}


def seal_side_effect(seal: ChainSeal, ref: StreamRef, entry: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in entry.items() if k != ANSWER_TAG}
    return {**body, ANSWER_TAG: seal.tag("outbox", side_effect_fields(ref, body))}


def side_effect_verifies(seal: ChainSeal, ref: StreamRef, entry: Any) -> bool:
    """An outbox item the gate wrote for this chain, unchanged."""
    if not isinstance(entry, dict):
        return False
    body = {k: v for k, v in entry.items() if k != ANSWER_TAG}
    return seal.verify("outbox", side_effect_fields(ref, body), entry.get(ANSWER_TAG))


def _answer_fields(record: IdempotencyRecord, body: dict[str, Any]) -> dict[str, Any]:
    """What a stored answer's tag covers: where and to whom it answers, the request, and the answer."""
    return {
        "project": record.ref.project,
        "candidate_id": record.ref.candidate_id,
        "scope": record.scope,
        "key": record.key,
        "caller": record.caller,
        "request_hash": record.request_hash,
        "body": body,
    }


class Chain:
    """Reads and writes of the audit chains, on the store, the clock and the ids the gate was built with, and
    the seal and witness that keep the chains tamper-evident (sentinel_domain.integrity).

    - `seal`: the chain key's seal, or where to get it. Every append carries its event's tag, the head's and
      the checkpoint of the head it creates; every verification checks them. A key that cannot be read
      refuses every write and holds every decision with STATE_UNAVAILABLE. None is the unsealed core: only
      the core's own tests of the rules build one; the composition root always gives a seal.
    - `witness`: the checkpoints the table cannot feed. Every write, and every release path (recording a
      decision, executing an action), compares its chains with the witness's newest checkpoints before it
      appends, wherever the gate runs. `reads_witness` (the local runner): every read does too; otherwise
      (AWS) advisory reads (a decision read, the audit route) check the hash chain and the head's
      authentication only, and the scheduled verifier compares them with the witness.
      `appends_witness` (the local runner): each checkpoint goes to the witness as soon as its write is
      committed, before the answer, so a rollback is seen by the very next read; otherwise the outbox
      carries it (in AWS, to the witness writer)."""

    def __init__(
        self,
        store: StateStore,
        clock: Clock,
        ids: Ids,
        witness: Witness | None = None,
        seal: ChainSeal | SealSource | None = None,
        *,
        reads_witness: bool = True,
        appends_witness: bool = False,
        notify: bool = True,
    ) -> None:
        self.store = store
        # Whether writes carry notification items (sentinel_domain.notifications): each is one more item in
        # the transaction, so a deployment that routes none of them does not pay for them.
        self.notify = notify
        self.clock = clock
        self.ids = ids
        self.witness = witness
        self.seal = seal
        self.reads_witness = reads_witness
        self.appends_witness = appends_witness
        # Checkpoints held back while an append is part of a larger transaction, per thread.
        self._deferred: dict[int, list[tuple[StreamRef, dict[str, Any]]]] = {}
        # Whether each project is synthetic, learned from its verified chain only (`project`). It is fixed by
        # the project's first fact, so a value once read stays true for the life of this gate.
        self._synthetic: dict[str, bool] = {}

    def now(self) -> str:
        return format_time(self.clock.now())

    def sealer(self) -> ChainSeal | None:
        """The seal, or None for the unsealed core; raises ChainKeyUnavailable when the key cannot be read."""
        if self.seal is None or isinstance(self.seal, ChainSeal):
            return self.seal
        return self.seal()

    # ---- reads ---------------------------------------------------------------------------------------

    def read(self, ref: StreamRef, *, release: bool = False) -> Stream | None:
        """One chain as the store holds it, with what the witness holds for it read first (where the witness
        is read: every read locally, writes and release paths everywhere). Raises StoreUnavailable when the
        store cannot be read; a witness that cannot be read is noted on the stream (`witness_fault`), so
        that verification fails closed (a decision holds with STATE_UNAVAILABLE, a write is refused)."""
        checkpoint = mark = fault = None
        witnessed = self.witness is not None and (release or self.reads_witness)
        if witnessed:
            assert self.witness is not None
            try:
                mark = self.witness.tampered(ref)
                checkpoint = self.witness.newest(ref)
            except StoreUnavailable as error:
                fault = f"the witness cannot be read: {error}"
            except Exception as error:  # any witness that cannot answer is a store fault, never a pass
                fault = f"the witness cannot be read: {type(error).__name__}"
        stream = self.store.load(ref)
        if stream is None and (checkpoint, mark, fault) != (None, None, None):
            # Nothing stored, but the witness knows the chain (or cannot say): a lost partition, never a
            # chain free to be created again.
            stream = Stream(ref, [], {}, None)
        if stream is not None and witnessed:
            stream.witnessed, stream.checkpoint, stream.tamper_mark = True, checkpoint, mark
            stream.witness_fault = fault
        return stream

    def verify(self, stream: Stream) -> audit.Verification:
        """The whole chain, its facts and head, their authentication under the chain key, and (where the
        witness was read with the chain) its newest checkpoint and tamper finding. Raises StoreUnavailable
        when the chain key cannot be read: nothing is vouched for without it."""
        if stream.witness_fault is not None:
            raise StoreUnavailable(stream.witness_fault)
        try:
            seal = self.sealer()
        except ChainKeyUnavailable as error:
            raise StoreUnavailable(f"the chain key cannot be read: {error}") from None
        found = audit.AuditChain.verify(
            stream.ref.project,
            stream.ref.candidate_id,
            stream.events,
            stream.facts,
            stream.head,
            stream.checkpoint,
            seal=seal,
        )
        if found.valid and stream.tamper_mark is not None:
            return marked_tampered(found, stream.tamper_mark)
        return found

    def load(self, ref: StreamRef, *, release: bool = False) -> Stream | None:
        try:
            return self.read(ref, release=release)
        except StoreUnavailable as error:
            raise unavailable("the state store could not be read; retry shortly") from error

    def find_claim(self, project: str, key: str) -> str | None:
        try:
            return self.store.find_claim(project, key)
        except StoreUnavailable as error:
            raise unavailable("the state store could not be read; retry shortly") from error

    def project(self, project: str) -> tuple[Stream, ProjectState]:
        """The project's chain, verified against the witness wherever the gate runs: every route that appends
        reads its chains this way (an advisory read in AWS uses `load`, which skips the witness there)."""
        stream = self.load(StreamRef(project), release=True)
        if stream is None or not stream.facts:
            raise Refusal("NOT_FOUND", "no such project")
        if not stream.complete:
            raise unavailable(
                "the project's chain is larger than one read may page through; nothing was changed"
            )
        self.require_intact(stream)
        try:
            state = ProjectState.from_facts(project, stream.facts)
        except (ValueError, KeyError, TypeError) as error:
            raise unavailable("a stored fact of the project cannot be read; nothing was changed") from error
        self.remember(state)
        return stream, state

    def remember(self, state: ProjectState) -> None:
        """Note whether a project is synthetic, from a state its caller read complete and verified (`project`,
        and the decision reads): a later write on its candidates then needs no read of its own to know."""
        self._synthetic[state.project] = state.synthetic

    def candidate(
        self, project: str, candidate_id: str, as_of: str | None = None
    ) -> tuple[Stream, CandidateState]:
        """The candidate's chain, verified against the witness wherever the gate runs (see `project`)."""
        stream = self.load(StreamRef(project, candidate_id), release=True)
        if stream is None or not stream.facts:
            raise Refusal("NOT_FOUND", "no such candidate")
        if not stream.complete:
            raise unavailable(
                "the candidate's chain is larger than one read may page through; nothing was changed"
            )
        self.require_intact(stream)
        try:
            return stream, CandidateState.from_facts(parse_facts(stream.facts), as_of)
        except (ValueError, KeyError, TypeError, LookupError) as error:
            raise unavailable("a stored fact of the candidate cannot be read; nothing was changed") from error

    def require_intact(self, stream: Stream) -> None:
        """Nothing is judged from facts the chain no longer vouches for: a tampered chain refuses every write
        (and every read that would act on it) until an operator restores it; decisions hold with
        STATE_TAMPERED. A chain key or witness that cannot be read refuses too."""
        try:
            verification = self.verify(stream)
        except StoreUnavailable as error:
            raise unavailable(f"{error}; nothing was changed") from error
        if not verification.valid:
            raise unavailable(
                f"the audit chain fails verification at seq {verification.first_bad_seq} "
                f"({verification.reason}); nothing was changed: an operator must restore it"
            )

    @staticmethod
    def config(project_state: ProjectState, as_of: str | None = None) -> ProjectConfig:
        config = project_state.config(as_of)
        if config is None:
            raise Refusal(
                "VALIDATION_FAILED", "the project has no configuration yet: an admin must PUT .../config"
            )
        return config

    # ---- the write -----------------------------------------------------------------------------------

    def synthetic(self, stream: Stream, fact: dict[str, Any]) -> bool:
        """Whether the chain's project is synthetic, from its verified project chain: the project chain itself
        (its first fact, or the fact creating it), else what `project` read (every use case that appends
        reads it first), else a verified read of it now. Never from a request."""
        if stream.ref.candidate_id is None:
            # Not remembered: a project this write creates exists only once the write commits.
            return first_fact_synthetic(stream.facts, fact)
        if stream.ref.project not in self._synthetic:
            self.project(stream.ref.project)
        return self._synthetic[stream.ref.project]

    def commit(self, request: CommitRequest, outcome: Callable[[int], T]) -> T:
        """Append the fact, its event and the new head in one write; the outcome names the new seq. An
        idempotent request's record completes in the same write, keeping the outcome for replay. With the
        seal, the event carries its tag, the head the tag of its checkpoint, and the checkpoint itself rides
        in the outbox of the same write; a key that cannot be read appends nothing."""
        stream, fact = request.stream, request.fact
        try:
            seal = self.sealer()
        except ChainKeyUnavailable as error:
            raise unavailable(
                f"the chain key cannot be read ({error}): nothing is appended unauthenticated"
            ) from None
        fact_text = canonical_text(fact)
        event = audit.next_event(
            stream.ref.project,
            stream.ref.candidate_id,
            stream.seq,
            stream.head_hash,
            fact["type"],
            request.actor_id,
            fact["recorded_at"],
            fact_text,
        )
        answer = outcome(event["seq"])
        idem = request.idempotency
        if idem is not None:
            body = answer.as_json()
            if seal is not None:
                # The stored answer is table data that a replay hands back as the gate's: tagged, so a row
                # written by anyone else is refused rather than replayed (a forged "ready" on a release path).
                body[ANSWER_TAG] = seal.tag("idempotency", _answer_fields(idem, body))
            idem.status, idem.response_body = "completed", body
        new_head = {
            "seq": event["seq"],
            "hash": event["hash"],
            **{k: v for k, v in request.head.items() if k not in HEAD_OWN},
        }
        # Marked in one place for every use case: a synthetic project's side effects reach the event log and
        # the archive and no consumer (docs/deploy.md, "The acceptance project"). Checkpoints are not side
        # effects: the witness needs them whatever the project.
        outbox = marked_side_effects(request.outbox, self.synthetic(stream, fact)) if request.outbox else []
        checkpoint = None
        if seal is not None:
            # A side effect leaves through the outbox only with a tag the relay checks: an item written into
            # the table by anyone else is never published (local relay; docs/failing-closed.md for AWS).
            outbox = [seal_side_effect(seal, stream.ref, entry) for entry in outbox]
            event["mac"] = seal.event_mac(event["hash"])
            checkpoint = seal.checkpoint(
                stream.ref.project, stream.ref.candidate_id, event["seq"], event["hash"], event["at"]
            )
            new_head["mac"] = checkpoint["mac"]
            outbox.append(checkpoint_outbox_entry(checkpoint))
        try:
            self.store.append(
                Append(
                    stream.ref,
                    stream.seq,
                    event,
                    fact_text,
                    new_head,
                    outbox,
                    idem,
                    request.claim,
                    request.require_plan_digest,
                    request.require_approval_after,
                    request.require_project_seq,
                )
            )
        except StoreUnavailable as error:
            raise unavailable(
                "the change could not be written; nothing was changed, retry shortly"
            ) from error
        if checkpoint is not None:
            self._witness_now(stream.ref, checkpoint)
        return answer

    def deferred_checkpoints(self, *, deliver: bool) -> None:
        """This thread's checkpoints held back inside a larger transaction: appended to the witness once it
        has committed (`deliver`), or dropped when it did not (they were never the table's)."""
        held = self._deferred.pop(threading.get_ident(), [])
        if deliver and self.witness is not None:
            for ref, checkpoint in held:
                self._append_to_witness(ref, checkpoint)

    def _witness_now(self, ref: StreamRef, checkpoint: dict[str, Any]) -> None:
        """Locally, the checkpoint reaches the witness before the answer does, so the next read already
        compares with it. A witness that fails here loses nothing: the checkpoint waits in the outbox for the
        relay (a witness behind the table is lag, not tampering). A witness holding another checkpoint at
        this seq means the chain was rolled back under this very write: it is marked tampered."""
        if not self.appends_witness or self.witness is None:
            return
        deferring = getattr(self.store, "deferring", None)
        if callable(deferring) and deferring():
            # The append is part of a larger transaction that has not committed yet (an operator's principal
            # change with its chain events): a witness ahead of the table would be taken for a rollback. It
            # is delivered once that transaction has committed (`deferred_checkpoints`), or by the relay.
            self._deferred.setdefault(threading.get_ident(), []).append((ref, checkpoint))
            return
        self._append_to_witness(ref, checkpoint)

    def _append_to_witness(self, ref: StreamRef, checkpoint: dict[str, Any]) -> None:
        assert self.witness is not None
        try:
            self.witness.append(checkpoint)
        except WitnessConflict:
            finding = {
                "first_bad_seq": checkpoint["seq"],
                "reason": "the witness holds another checkpoint at this seq: the chain was rolled back",
                "at": checkpoint["at"],
            }
            try:
                self.witness.mark_tampered(ref, finding)
            except Exception:  # the conflict itself is refused below either way
                pass
            raise unavailable(
                f"the audit chain forks from the witness at seq {checkpoint['seq']}: "
                "an operator must restore it"
            ) from None
        except Exception:  # the relay delivers it from the outbox (at least once)
            pass

    def retrying(self, attempt: Callable[[], T]) -> T:
        """A lost race re-reads and re-judges; nothing is written from stale reads."""
        for _ in range(RETRIES):
            try:
                return attempt()
            except StoreConflict:
                continue
        raise unavailable("the candidate changed concurrently too often; retry shortly")

    def idempotent(
        self,
        ref: StreamRef,
        scope: str,
        key: str | None,
        actor: Actor,
        request: Any,
        run: Callable[[IdempotencyRecord | None], R],
        answers: type[R],
    ) -> R:
        """Rule 17: the same key, caller and request replays the first success and appends nothing. The
        stored success is read back as the `answers` outcome it was, marked replayed."""
        if key is None:
            return self.retrying(lambda: run(None))
        if not 1 <= len(key) <= 255:
            raise Refusal("VALIDATION_FAILED", "Idempotency-Key must be 1 to 255 characters")
        try:
            request_hash = digest(request)
        except (ValueError, TypeError, OverflowError) as error:  # e.g. an integer JSON cannot carry exactly
            raise Refusal("VALIDATION_FAILED", f"the request cannot be canonicalised: {error}") from error
        now = self.now()
        record = IdempotencyRecord(
            ref,
            scope,
            key,
            actor.id,
            request_hash,
            claimed_at=now,
            lease_until=plus_seconds(now, LEASE_SECONDS),
        )
        for _ in range(RETRIES):
            try:
                existing = self.store.idempotency_get(ref, scope, key)
                if existing is None or (existing.status == "in_progress" and existing.lease_until <= now):
                    if self.store.idempotency_begin(record):
                        break
                    continue
            except StoreUnavailable as error:
                raise unavailable("the idempotency record could not be read; retry shortly") from error
            if existing.caller != actor.id or existing.request_hash != request_hash:
                raise Refusal(
                    "IDEMPOTENCY_CONFLICT",
                    "this Idempotency-Key was used by another caller or with another request; use a new key",
                )
            if existing.status == "completed" and existing.response_body is not None:
                return self._replay(self._authentic(existing), answers)
            raise Refusal(
                "IDEMPOTENCY_IN_PROGRESS", "a request with this Idempotency-Key is still in progress"
            )
        else:
            raise Refusal("IDEMPOTENCY_IN_PROGRESS", "the key is contended; retry shortly")
        try:
            return self.retrying(lambda: run(record))
        except BaseException:
            try:
                self.store.idempotency_release(record)
            except StoreUnavailable:
                pass  # the lease lapses by itself
            raise

    def _authentic(self, record: IdempotencyRecord) -> dict[str, Any]:
        """The stored answer without its tag, once the tag verifies under the chain key (a sealed gate only
        replays what it wrote itself)."""
        body = dict(record.response_body or {})
        tag = body.pop(ANSWER_TAG, None)
        try:
            seal = self.sealer()
        except ChainKeyUnavailable as error:
            raise unavailable(f"the chain key cannot be read ({error}); nothing was replayed") from None
        if seal is not None and not seal.verify("idempotency", _answer_fields(record, body), tag):
            raise unavailable(
                "the stored answer to this Idempotency-Key was not written by the gate: the store was "
                "tampered with; nothing was replayed"
            )
        return body

    @staticmethod
    def _replay(stored: dict[str, Any], answers: type[R]) -> R:
        try:
            first = answers.model_validate(stored)
        except (
            ValidationError
        ) as error:  # a record this release cannot read is never answered as something else
            raise unavailable("the stored answer to this Idempotency-Key cannot be read") from error
        return first.model_copy(update={"replayed": True})
