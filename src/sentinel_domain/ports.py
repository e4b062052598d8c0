"""What the core needs from the outside world, as protocols. Adapters live in `sentinel_service.adapters`."""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class StreamRef:
    """One audit chain: the project's (candidate_id None) or one candidate's."""

    project: str
    candidate_id: str | None = None


@dataclass
class Stream:
    """Everything one strongly consistent read of a chain's partition returned."""

    ref: StreamRef
    events: list[dict[str, Any]]  # audit events, by seq
    facts: dict[int, str]  # seq -> the fact's canonical JSON text, as stored
    head: dict[str, Any] | None
    complete: bool = True  # False when the read stopped at the page budget
    pages: int = 1
    # What the witness held for the chain, read just before the chain itself (so the checkpoint of a write
    # committed after this read can never look like a cut tail): its newest checkpoint and its tamper finding.
    # `witnessed` is False when the witness was not read (an advisory read in AWS, or no witness).
    witnessed: bool = False
    checkpoint: dict[str, Any] | None = None
    tamper_mark: dict[str, Any] | None = None
    witness_fault: str | None = None  # why the witness could not be read: nothing is vouched for then

    @property
    def seq(self) -> int:
        return int(self.head["seq"]) if self.head else 0

    @property
    def head_hash(self) -> str | None:
        return self.head.get("hash") if self.head else None


@dataclass
class IdempotencyRecord:
    ref: StreamRef  # the partition the record lives in
    scope: str  # route path, or "action:<action_id>" for executions
    key: str
    caller: str
    request_hash: str
    status: str = "in_progress"  # or "completed"
    response_body: dict[str, Any] | None = (
        None  # the completed request's outcome, as JSON: what a replay answers
    )
    claimed_at: str = ""  # when this caller claimed the key; an older in-progress lease may be taken over
    lease_until: str = ""


@dataclass
class Append:
    """One accepted change: its fact, its audit event and what rides in the same transaction."""

    ref: StreamRef
    expected_seq: int  # 0 creates the chain
    event: dict[str, Any]
    fact_text: str
    head: dict[str, Any]  # the chain head after this append
    outbox: list[dict[str, Any]] = field(default_factory=list)
    idempotency: IdempotencyRecord | None = None
    claim: tuple[str, str] | None = None  # (uniqueness key, candidate id) for a new candidate
    require_plan_digest: str | None = None  # re-checked in the transaction's condition
    require_approval_after: str | None = None  # the approval must still be valid at this instant
    # The project chain must still be at this seq: configuration (the allow-list) unchanged since the check.
    require_project_seq: int | None = None


class ClaimTaken(Exception):
    def __init__(self, existing_id: str) -> None:
        super().__init__(existing_id)
        self.existing_id = existing_id


class StateStore(Protocol):
    def load(self, ref: StreamRef) -> Stream | None:
        """The whole chain (events, facts, head) in one strongly consistent read, paged up to a budget; None
        when the chain has nothing stored."""

    def load_head(self, ref: StreamRef) -> dict[str, Any] | None:
        """The chain's HEAD item alone, as `Stream.head` would carry it (`seq`, `hash` and whatever the last
        append put beside them), read strongly consistently as one item (DynamoDB: one `GetItem` of `HEAD`;
        SQL: one row by primary key); None when the chain has no head. No event or fact is read, so nothing
        here is verified: a caller trusts it only to compare with a head it verified itself. A failed read
        raises StoreUnavailable, like every other read."""

    def append(self, append: Append) -> None:
        """Write atomically; StoreConflict on a lost race, ClaimTaken, StoreUnavailable."""

    def find_claim(self, project: str, key: str) -> str | None: ...

    def list_claims(
        self, project: str, limit: int, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]: ...

    def idempotency_get(self, ref: StreamRef, scope: str, key: str) -> IdempotencyRecord | None: ...

    def idempotency_begin(self, record: IdempotencyRecord) -> bool:
        """Claim the key (False when a record exists already)."""

    def idempotency_release(self, record: IdempotencyRecord) -> None:
        """Drop an in-progress claim after a refusal: only successes are kept for replay."""


@runtime_checkable
class ForgeIndex(Protocol):
    """Which project a forge repository belongs to (`sentinel_domain.webhooks.forge_index_key`): one owner per
    key, first come. A project's configuration claims its repositories before it is written, so a second
    project naming the same repository is refused and a delivery finds exactly one project (which must still
    list the repository: the index only points, the configuration decides)."""

    def forge_claim(self, key: str, project: str) -> str:
        """Claim `key` for `project` when nobody holds it, atomically; answers the owner afterwards
        (`project`, or whoever claimed it first). StoreUnavailable when the index cannot be written."""

    def forge_owner(self, key: str) -> str | None:
        """The project that claimed `key`, read strongly consistently, or None."""


class Clock(Protocol):
    def now(self) -> datetime: ...


class Ids(Protocol):
    def new_id(self, prefix: str) -> str: ...


class Proposer(Protocol):
    """Drafts a work plan with a model (DOMAIN.md rule 23). Adapters live in
    `sentinel_service.adapters.proposers`.

    `request` is `sentinel_domain.proposals.proposal_request(...)`: the candidate's obligations, the project's
    policies, its allow-listed action types and the changed paths. An adapter shows it to the model only
    through `sentinel_domain.proposals.model_prompt` (quoted data, never instructions) and returns the model's
    plan as a JSON object, unjudged: the gate runs scope validation and preflight on it.

    To ask for the deterministic fallback, raise; an exception whose `code` is one of
    `sentinel_domain.proposals.FALLBACK_REASONS` (`ProposalFailed` carries one) names the failure class, any
    other is recorded as MODEL_ERROR. An adapter returns or raises within its own time budget, well inside API
    Gateway's 30 s, and never puts a key in an exception, a log line or its `model_id`."""

    provider: str  # "none", "bedrock", "openai": shown by the health route
    model_id: str

    def propose(self, request: dict[str, Any]) -> dict[str, Any]: ...


class Checkpoints(Protocol):
    """The event archive's newest checkpoint of a chain ({seq, hash}), or None when it holds none."""

    def newest(self, ref: StreamRef) -> dict[str, Any] | None: ...


class WitnessConflict(Exception):
    """The witness already holds a different checkpoint at that chain and seq: a fork, i.e. tampering."""


class Witness(Checkpoints, Protocol):
    """An append-only store of chain checkpoints the state table cannot feed or rewrite
    (`sentinel_domain.integrity`): locally a file in the runner's data directory, in AWS an S3 bucket under
    Object Lock in compliance mode. Adapters raise StoreUnavailable when the witness cannot be read or
    written: a caller that needs it must then hold or refuse, never go on without it.

    `newest(ref)` is the checkpoint with the highest seq for the chain (one request in S3: keys carry a
    reversed seq so the first listed is the newest), or None when the witness holds none."""

    def append(self, checkpoint: dict[str, Any]) -> bool:
        """Keep a checkpoint whose tag the caller has verified (`ChainSeal.checkpoint_verifies`); the
        adapter verifies it again when it holds the seal. Create-only: True when written, False when the very
        same checkpoint was there already (at-least-once delivery); WitnessConflict when another one was."""

    def mark_tampered(self, ref: StreamRef, finding: dict[str, Any]) -> None:
        """Record, where the table cannot undo it, that a chain failed verification (the scheduled verifier's
        finding: first bad seq, reason, when). Idempotent."""

    def tampered(self, ref: StreamRef) -> dict[str, Any] | None:
        """The first tamper finding recorded for the chain, or None."""
