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
from dataclasses import dataclass
from typing import Any

from .audit import AuditChain, Verification
from .canonical import canonical_bytes
from .ports import StateStore, StreamRef, Witness

MIN_CHAIN_KEY_BYTES = 32
CHECKPOINT_FIELDS = ("project", "candidate_id", "seq", "hash", "at")


class ChainKeyUnavailable(Exception):
    """No usable chain key: nothing may be appended unauthenticated, and nothing read can be vouched for."""


@dataclass(frozen=True)
class ChainSeal:
    """Tags heads and checkpoints under the chain key, and checks them. Never logged, never serialised."""

    key: bytes

    def __post_init__(self) -> None:
        if len(self.key) < MIN_CHAIN_KEY_BYTES:
            raise ChainKeyUnavailable(f"the chain key is shorter than {MIN_CHAIN_KEY_BYTES} bytes")

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

    def checkpoint_verifies(self, checkpoint: Any) -> bool:
        """True only for a checkpoint this key tagged, with exactly its fields (a forged outbox item, or one
        with a field changed or added, is False)."""
        if not isinstance(checkpoint, dict) or set(checkpoint) != {*CHECKPOINT_FIELDS, "mac"}:
            return False
        body = {k: checkpoint[k] for k in CHECKPOINT_FIELDS}
        if type(body["seq"]) is not int or body["seq"] < 1:
            return False
        return self.verify("checkpoint", body, checkpoint["mac"])


def verify_against_witness(store: StateStore, witness: Witness, ref: StreamRef) -> Verification:
    """The whole chain checked against the witness's newest checkpoint for it (`audit.Verification`): what
    every release path and the scheduled verifier run. A chain that the witness knows but the table has lost
    entirely is a failure too (a deleted partition). Raises StoreUnavailable when either cannot be read."""
    checkpoint = witness.newest(ref)
    stream = store.load(ref)
    if stream is None:
        if checkpoint is None:
            return Verification(True, 0, None, None, None)
        return Verification(False, 0, None, 1, "the witness holds a checkpoint of a chain the table lost")
    return AuditChain.verify(
        ref.project, ref.candidate_id, stream.events, stream.facts, stream.head, checkpoint
    )
