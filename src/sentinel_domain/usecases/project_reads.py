"""The chains a decision read (`GET .../decision`) takes, held per process while their heads are
unchanged: the project's folded configuration, policies and revocations, and the candidate's parsed facts,
each from a chain that verified complete.

A hook polls its candidate's decision, many times between two changes of either chain. So once a whole chain
has been read and verified, a decision read compares only its HEAD (one strongly consistent item, one read
unit in DynamoDB whatever the chain's size) with the head that chain had, and reuses what it held while the
two are equal. The decision itself is judged afresh on every read (at the service clock: evidence expires);
only the verified facts are reused. Nothing is held until a decision read has read a chain in full; after
that:

- a head with another seq or hash (a newer append, or one that moved backwards, or another hash at the same
  seq) reads and verifies the whole chain and replaces what is held;
- a project HEAD that cannot be read, or is missing, is STATE_UNAVAILABLE (the held chain stays held, and is
  used again only once a HEAD equal to its head is read): nothing held is ever used without a head that equals
  it; a candidate's such HEAD reads the candidate in full, which answers as a read always did (503 when the
  store fails, NOT_FOUND without facts, STATE_TAMPERED for events left without a head);
- where the witness is read (every read locally, release paths everywhere), a checkpoint the held chain does
  not contain (a newer seq, or another hash at its seq), or a tamper finding, reads and verifies in full,
  which names the cut.

What this gives up, deliberately: an event or fact edited behind an unchanged head is not seen by decision
reads that reuse what is held; but what they reuse is what the chain held when it verified at that very head,
so the edit changes no answer either. A rollback to an earlier genuine head is a changed head: read in full.
Checking whole, unchanged chains is the write paths' job (every route that appends, recorded decisions
included, reads and verifies its chains in full and refuses on a chain that fails) and the scheduled
verifier's. Only chains that verified complete are held; a chain that fails is read again each time. A
recorded decision never uses what is held."""

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from .. import audit
from ..decision import Finding, finding
from ..errors import StoreUnavailable
from ..ports import Stream, StreamRef
from ..state import ProjectState
from .chain import Chain

MAX_CHAINS = 256


@dataclass(frozen=True)
class HeldChain:
    """A chain that verified complete: its head, every event's hash (what a checkpoint is compared with) and
    its facts, parsed (shared read-only by every decision that reuses them)."""

    seq: int
    hash: str
    hashes: tuple[str, ...]
    facts: list[dict[str, Any]]

    def same_head(self, head: dict[str, Any]) -> bool:
        """Equal seq and hash, exactly: anything else (a later, an earlier or a rewritten head, a value of
        another type) is a change."""
        seq = head.get("seq")
        return (
            type(seq) is int
            and seq == self.seq
            and head.get("hash") == self.hash
            and audit.TAMPER_MARK not in head  # the verifier marked it: read in full, which fails
        )

    def contains(self, checkpoint: dict[str, Any]) -> bool:
        """The checkpoint names an event of this chain, at its seq and with its hash."""
        try:
            seq = int(checkpoint["seq"])
        except (KeyError, TypeError, ValueError):
            return False
        return 1 <= seq <= len(self.hashes) and self.hashes[seq - 1] == checkpoint.get("hash")


class ChainCache:
    """The verified chains (projects' and candidates') a process holds for its decision reads, the least
    recently used dropped beyond `max_chains`. One per process (a Lambda container, a local server), built by
    the composition root and handed to the gate; safe to share between threads."""

    def __init__(self, max_chains: int = MAX_CHAINS) -> None:
        if max_chains < 1:
            raise ValueError("max_chains must be at least 1")
        self.max_chains = max_chains
        self._held: OrderedDict[StreamRef, HeldChain] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, ref: StreamRef) -> HeldChain | None:
        with self._lock:
            held = self._held.get(ref)
            if held is not None:
                self._held.move_to_end(ref)
            return held

    def put(self, ref: StreamRef, held: HeldChain) -> None:
        with self._lock:
            self._held[ref] = held
            self._held.move_to_end(ref)
            while len(self._held) > self.max_chains:
                self._held.popitem(last=False)

    def drop(self, ref: StreamRef) -> None:
        with self._lock:
            self._held.pop(ref, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)


def _unavailable(project: str) -> tuple[ProjectState, list[Finding]]:
    return ProjectState(project, []), [
        finding("STATE_UNAVAILABLE", "the project's configuration could not be read")
    ]


def _compare(chain: Chain, ref: StreamRef, held: HeldChain, release: bool = False) -> str:
    """What the chain's HEAD says of the held chain: "same", "changed", "missing" or "unreadable". Where the
    witness is read (locally, and on release paths), it is read before HEAD, so a checkpoint of a write
    committed in between is never mistaken for one the held chain lacks; a tamper finding is a change."""
    checkpoint = None
    if chain.witness is not None and (release or chain.reads_witness):
        try:
            if chain.witness.tampered(ref) is not None:
                return "changed"  # read in full: the verification names the finding
            checkpoint = chain.witness.newest(ref)
        except Exception:  # a witness that cannot answer: never answered from what is held
            return "unreadable"
    try:
        head = chain.store.load_head(ref)
    except StoreUnavailable:
        return "unreadable"
    if head is None:
        return "missing"
    if not held.same_head(head):
        return "changed"
    if checkpoint is not None and not held.contains(checkpoint):
        return "changed"
    return "same"


def project_for_decision(
    chain: Chain, project: str, cache: ChainCache | None, release: bool = False
) -> tuple[ProjectState, list[Finding]]:
    """The project's state for a decision read, with the findings of reading it (never a refusal). Without a
    cache, or with nothing held for the project, the whole chain is read and verified; with a held chain, its
    HEAD first (see the module's docstring). `release`: the witness is read wherever the gate runs."""
    ref = StreamRef(project)
    held = cache.get(ref) if cache is not None else None
    if cache is not None and held is not None:
        head = _compare(chain, ref, held, release)
        if head == "same":
            # A fresh state over the shared facts: its memos belong to this one decision.
            state = ProjectState(project, held.facts)
            chain.remember(state)
            return state, []
        if head != "changed":  # a HEAD that cannot be read or is missing: never answered from what is held
            return _unavailable(project)
    try:
        stream = chain.read(ref, release=release)
    except StoreUnavailable:
        stream = None
    if stream is None or not stream.facts:
        if cache is not None:
            cache.drop(ref)
        return _unavailable(project)
    state = ProjectState.from_facts(project, stream.facts)
    findings: list[Finding] = []
    if not stream.complete:
        findings.append(
            finding(
                "EVIDENCE_QUERY_INCOMPLETE",
                "the project's configuration and policies took "
                "more pages to read than the budget allows; nothing unread may count",
            )
        )
    try:
        check = chain.verify(stream)
    except StoreUnavailable as error:
        findings.append(
            finding("STATE_UNAVAILABLE", f"the project's audit chain cannot be verified: {error}")
        )
    else:
        if not check.valid:
            findings.append(
                finding(
                    "STATE_TAMPERED",
                    f"the project's audit chain fails at seq {check.first_bad_seq}: {check.reason}",
                )
            )
    if cache is not None:
        _hold(cache, stream, state.facts, findings)
    if not findings:
        chain.remember(state)  # verified: what its writes' side effects are (Chain.synthetic)
    return state, findings


def _hold(cache: ChainCache, stream: Stream, facts: list[dict[str, Any]], findings: list[Finding]) -> None:
    """Hold a chain that was read complete and verified (no finding), else drop whatever was held for it."""
    head_hash = stream.head_hash
    if findings or stream.head is None or not isinstance(head_hash, str):
        cache.drop(stream.ref)
    else:
        hashes = tuple(str(event["hash"]) for event in stream.events)
        cache.put(stream.ref, HeldChain(stream.seq, head_hash, hashes, facts))


def held_candidate_facts(
    chain: Chain, ref: StreamRef, cache: ChainCache | None
) -> list[dict[str, Any]] | None:
    """The candidate's parsed facts as held for its unchanged HEAD, or None when they must be read in full
    (nothing held, or any other head, or a HEAD that could not be read or is missing)."""
    held = cache.get(ref) if cache is not None else None
    if held is None or _compare(chain, ref, held) != "same":
        return None
    return held.facts


def hold_candidate(
    cache: ChainCache | None, stream: Stream, facts: list[dict[str, Any]], findings: list[Finding]
) -> None:
    """After a candidate was read in full for a decision read: held when complete and verified (no read
    finding), dropped otherwise."""
    if cache is not None:
        _hold(cache, stream, facts, findings)
