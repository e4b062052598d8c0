"""The seal on the audit chains (DOMAIN.md rule 25): what makes a chain's newest state provable to someone who
cannot trust the table it is stored in.

A hash chain proves that its events follow one another; it cannot prove that nothing was cut from its end or
that a re-hashed tail is the one the gate wrote: whoever can write the table can write a consistent chain.
Two things close that gap:

- a chain key the table never holds: every head and checkpoint the gate writes carries an HMAC-SHA256 tag
  under it (`ChainSeal`), so a head or checkpoint written by anyone else does not verify;
- a witness the table cannot feed or rewrite (`ports.Witness`): an append-only store of checkpoints, written
  only after their tag verifies. The chain must reach the witness's newest checkpoint for it; a chain that
  ends before it (a rollback to an earlier genuine head) or differs from it was tampered with.

The key's bytes come from an adapter (a 0600 file locally, a Secrets Manager secret in AWS); this module only
computes and checks tags, so the core stays free of I/O."""

import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .audit import AuditChain, Verification
from .canonical import canonical_bytes
from .ports import StateStore, StreamRef, Witness, WitnessConflict

MIN_CHAIN_KEY_BYTES = 32
CHECKPOINT_FIELDS = ("project", "candidate_id", "seq", "hash", "at")
CHECKPOINT_KIND = "checkpoint"  # the outbox kind of a checkpoint (see `checkpoint_outbox_entry`)
_HEX64 = re.compile(r"[0-9a-f]{64}")
# HMAC's padded key blocks (RFC 2104) for SHA-256's 64-byte block.
_BLOCK = 64
_EVENT_PREFIX = b'event\n{"hash":"'


class ChainKeyUnavailable(Exception):
    """No usable chain key: nothing may be appended unauthenticated, and nothing read can be vouched for."""


@dataclass(frozen=True)
class ChainSeal:
    """Tags heads and checkpoints under the chain key, and checks them. Never logged, never serialised."""

    key: bytes = field(repr=False)
    # SHA-256 states after HMAC's inner block and the event prefix, and after its outer block: every event's
    # tag starts from copies of these, which halves its cost (verification tags every event of a chain).
    _inner: Any = field(init=False, repr=False, compare=False)
    _outer: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.key, bytes) or len(self.key) < MIN_CHAIN_KEY_BYTES:
            raise ChainKeyUnavailable(f"the chain key is shorter than {MIN_CHAIN_KEY_BYTES} bytes")
        block = (hashlib.sha256(self.key).digest() if len(self.key) > _BLOCK else self.key).ljust(
            _BLOCK, b"\0"
        )
        inner = hashlib.sha256(bytes(b ^ 0x36 for b in block) + _EVENT_PREFIX)
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_outer", hashlib.sha256(bytes(b ^ 0x5C for b in block)))

    def __repr__(self) -> str:  # the key must never reach a log line or a traceback's locals
        return "ChainSeal(<key withheld>)"

    def tag(self, purpose: str, fields: dict[str, Any]) -> str:
        """HMAC-SHA256 over the purpose and the RFC 8785 form of the fields: a tag made for one purpose
        (a head) never verifies as another (a checkpoint, an event)."""
        message = purpose.encode("ascii") + b"\n" + canonical_bytes(fields)
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def verify(self, purpose: str, fields: dict[str, Any], tag: Any) -> bool:
        return isinstance(tag, str) and hmac.compare_digest(self.tag(purpose, fields), tag)

    def checkpoint(
        self, project: str, candidate_id: str | None, seq: int, hash_: str, at: str
    ) -> dict[str, Any]:
        """The checkpoint of a head the gate is committing: what the witness keeps."""
        body = {"project": project, "candidate_id": candidate_id, "seq": seq, "hash": hash_, "at": at}
        return {**body, "mac": self.tag("checkpoint", body)}

    def event_mac(self, hash_: str) -> str:
        """The tag an event carries beside its hash (`mac`): `tag("event", {"hash": hash_})`. It proves the
        gate wrote the event, so a chain re-forged from the middle (every later hash recomputed) is named at
        its first forged event. An event's hash already covers its chain, seq and content, so the tag need
        cover only the hash."""
        if type(hash_) is not str or not _HEX64.fullmatch(hash_):
            return self.tag("event", {"hash": hash_})  # any other value: the general form, never verifying
        inner = self._inner.copy()
        inner.update(hash_.encode("ascii") + b'"}')
        outer = self._outer.copy()
        outer.update(inner.digest())
        return str(outer.hexdigest())

    def event_verifies(self, hash_: Any, mac: Any) -> bool:
        return type(mac) is str and hmac.compare_digest(self.event_mac(hash_), mac)

    def head_verifies(self, project: str, candidate_id: str | None, head: Any, at: Any) -> bool:
        """A head carries the mac of the checkpoint of the event it names (`at` is that event's time): a head
        the gate did not write does not verify. An earlier genuine head still does; only the witness can tell
        that the chain went back (a rollback)."""
        if not isinstance(head, dict):
            return False
        seq = head.get("seq")
        if type(seq) is not int or seq < 1:
            return False
        body = {
            "project": project,
            "candidate_id": candidate_id,
            "seq": seq,
            "hash": head.get("hash"),
            "at": at,
        }
        return self.verify("checkpoint", body, head.get("mac"))

    def checkpoint_verifies(self, checkpoint: Any) -> bool:
        """True only for a checkpoint this key tagged, with exactly its fields (a forged outbox item, or one
        with a field changed or added, is False)."""
        if not isinstance(checkpoint, dict) or set(checkpoint) != {*CHECKPOINT_FIELDS, "mac"}:
            return False
        body = {k: checkpoint[k] for k in CHECKPOINT_FIELDS}
        if type(body["seq"]) is not int or body["seq"] < 1:
            return False
        return self.verify("checkpoint", body, checkpoint["mac"])


SealSource = Callable[[], ChainSeal]
"""Where a gate gets its seal: called on every use, so a key that could not be read is tried again next time
(raising ChainKeyUnavailable meanwhile: writes are refused and reads hold, never unauthenticated)."""


def checkpoint_outbox_entry(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The outbox entry that carries a checkpoint out of the transaction that committed its head: the
    checkpoint's own fields and `kind: "checkpoint"` (the stores file it by kind, `outbox_kind` in
    DynamoDB). `checkpoint_from_outbox` takes it back."""
    return {"kind": CHECKPOINT_KIND, **checkpoint}


def checkpoint_from_outbox(entry: Any) -> dict[str, Any] | None:
    """The checkpoint an outbox entry of kind `checkpoint` carries (with or without its `kind`: the stores
    file the kind apart too), or None for an entry of another kind or no object at all. Nothing here vouches
    for it: whoever can write the table can write an outbox item, so a relay or the witness writer keeps it
    only when `ChainSeal.checkpoint_verifies` says the gate wrote it."""
    if not isinstance(entry, dict) or entry.get("kind", CHECKPOINT_KIND) != CHECKPOINT_KIND:
        return None
    return {k: v for k, v in entry.items() if k != "kind"}


def verify_against_witness(
    store: StateStore, witness: Witness, ref: StreamRef, seal: ChainSeal | None = None
) -> Verification:
    """The whole chain checked against the witness's newest checkpoint for it (`audit.Verification`): what
    every release path and the scheduled verifier run. With the seal, every event's and the head's
    authentication is checked too. A chain that the witness knows but the table has lost entirely is a
    failure too (a deleted partition), and so is a chain the witness has marked tampered. Raises
    StoreUnavailable when either cannot be read."""
    checkpoint = witness.newest(ref)
    marked = witness.tampered(ref)
    stream = store.load(ref)
    if stream is None:
        if checkpoint is None and marked is None:
            return Verification(True, 0, None, None, None)
        return Verification(False, 0, None, 1, "the witness holds a checkpoint of a chain the table lost")
    found = AuditChain.verify(
        ref.project, ref.candidate_id, stream.events, stream.facts, stream.head, checkpoint, seal=seal
    )
    if found.valid and marked is not None:
        return marked_tampered(found, marked)
    return found


def marked_tampered(found: Verification, marked: dict[str, Any]) -> Verification:
    """A chain the witness holds a tamper finding for fails from then on, whatever it reads like now (it may
    have been put back to look whole): the finding's first bad seq and reason are named."""
    seq = marked.get("first_bad_seq")
    reason = marked.get("reason")
    return Verification(
        False,
        found.length,
        found.head_hash,
        seq if type(seq) is int and seq >= 1 else 1,
        f"the witness records this chain as tampered: {reason if isinstance(reason, str) else 'no reason'}",
    )


class CheckpointForged(ValueError):
    """A checkpoint whose tag does not verify under the chain key: it never reaches the witness."""


def _chain_of(value: Any) -> tuple[str, str | None] | None:
    if not isinstance(value, dict):
        return None
    project, candidate_id = value.get("project"), value.get("candidate_id")
    if not isinstance(project, str) or not (candidate_id is None or isinstance(candidate_id, str)):
        return None
    return project, candidate_id


class WitnessBook:
    """What a witness holds, and how it admits a checkpoint: the rule every witness adapter shares (the local
    file keeps its lines in one; tests and the evaluation harness keep one in memory, `MemoryWitness`).

    A checkpoint is admitted only when the seal verifies it (CheckpointForged otherwise); the very same
    checkpoint again is not admitted twice (at-least-once delivery); another checkpoint at a seq already held
    is a fork (WitnessConflict). Tamper findings: the first one recorded for a chain stays."""

    def __init__(self, seal: ChainSeal | None) -> None:
        self.seal = seal
        self._checkpoints: dict[tuple[str, str | None], dict[int, dict[str, Any]]] = {}
        self._newest: dict[tuple[str, str | None], int] = {}
        self._marks: dict[tuple[str, str | None], dict[str, Any]] = {}

    def check(self, checkpoint: Any) -> tuple[tuple[str, str | None], dict[str, Any], bool]:
        """The chain, the checkpoint to keep and whether the very same one is held already; raises
        CheckpointForged (its tag does not verify, or it names no chain) or WitnessConflict (a fork)."""
        if self.seal is not None and not self.seal.checkpoint_verifies(checkpoint):
            raise CheckpointForged("the checkpoint's tag does not verify under the chain key")
        chain = _chain_of(checkpoint)
        seq = checkpoint.get("seq") if isinstance(checkpoint, dict) else None
        if chain is None or type(seq) is not int:
            raise CheckpointForged("the checkpoint names no chain")
        held = self._checkpoints.get(chain, {}).get(seq)
        if held is not None and held != checkpoint:
            raise WitnessConflict(f"another checkpoint is held at seq {seq}")
        return chain, dict(checkpoint), held is not None

    def keep(self, chain: tuple[str, str | None], checkpoint: dict[str, Any]) -> None:
        self._checkpoints.setdefault(chain, {})[checkpoint["seq"]] = checkpoint
        if checkpoint["seq"] > self._newest.get(chain, 0):
            self._newest[chain] = checkpoint["seq"]

    def keep_mark(self, ref: StreamRef, finding: dict[str, Any]) -> bool:
        """False when the chain already has a finding (the first one stays)."""
        chain = (ref.project, ref.candidate_id)
        if chain in self._marks:
            return False
        self._marks[chain] = dict(finding)
        return True

    def newest(self, ref: StreamRef) -> dict[str, Any] | None:
        chain = (ref.project, ref.candidate_id)
        seq = self._newest.get(chain)
        return dict(self._checkpoints[chain][seq]) if seq is not None else None

    def tampered(self, ref: StreamRef) -> dict[str, Any] | None:
        mark = self._marks.get((ref.project, ref.candidate_id))
        return dict(mark) if mark is not None else None

    def chains(self) -> list[StreamRef]:
        return [
            StreamRef(project, candidate_id)
            for project, candidate_id in sorted(self._checkpoints, key=lambda c: (c[0], c[1] or ""))
        ]

    def checkpoints(self, ref: StreamRef) -> list[dict[str, Any]]:
        held = self._checkpoints.get((ref.project, ref.candidate_id), {})
        return [dict(held[seq]) for seq in sorted(held)]
