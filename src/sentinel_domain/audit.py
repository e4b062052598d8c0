"""The hash-chained audit log (DOMAIN.md rules 24 and 25)."""

import json
from collections.abc import Callable
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, Protocol

from .canonical import digest, sha256_hex


class Seal(Protocol):
    """What verification asks of the chain key's seal (`integrity.ChainSeal`, which imports this module)."""

    def event_verifies(self, hash_: Any, mac: Any) -> bool: ...

    def head_verifies(self, project: str, candidate_id: str | None, head: Any, at: Any) -> bool: ...

    def checkpoint_verifies(self, checkpoint: Any) -> bool: ...


def genesis_hash(project: str, candidate_id: str | None) -> str:
    return digest({"project": project, "candidate_id": candidate_id})


HASHED_FIELDS = ("project", "candidate_id", "seq", "type", "actor", "at", "payload_digest", "prev_hash")
EVENT_FIELDS = frozenset((*HASHED_FIELDS, "hash"))
# A sealed event also carries `mac`, the chain key's tag over its hash (integrity.ChainSeal.event_mac): the
# only attribute outside the hash that an event may hold, and it is checked whenever the key is at hand.
SEALED_EVENT_FIELDS = frozenset((*EVENT_FIELDS, "mac"))


# The RFC 8785 form of an event's hashed fields, keys in their canonical order (UTF-16 code units), for the
# usual event: text fields (candidate_id null on a project chain) and an integer seq.
_EVENT_FORM = (
    '{"actor":%s,"at":%s,"candidate_id":%s,"payload_digest":%s,"prev_hash":%s,"project":%s,"seq":%d,'
    '"type":%s}'
)
_SAFE_INTEGER = 2**53 - 1


def event_hash(event: dict[str, Any]) -> str:
    """SHA-256 of the RFC 8785 form of the event's hashed fields, exactly as the event holds them.

    The usual event is written straight into that form from its own fields (the general canonicaliser takes
    some ten times longer, and verification hashes every event of a chain on every read); any other value,
    as a tampered event may hold, goes through the general canonicaliser. Both give the same bytes: json's
    string writer escapes exactly as RFC 8785 does (quote, backslash, and the control characters: \\b \\f
    \\n \\r \\t by name, the others as lower-case \\u00xx) and keeps everything else as it is."""
    try:
        seq, candidate_id = event["seq"], event["candidate_id"]
        if type(seq) is not int or not -_SAFE_INTEGER <= seq <= _SAFE_INTEGER:
            raise TypeError("seq")
        text = _EVENT_FORM % (
            encode_basestring(event["actor"]),
            encode_basestring(event["at"]),
            "null" if candidate_id is None else encode_basestring(candidate_id),
            encode_basestring(event["payload_digest"]),
            encode_basestring(event["prev_hash"]),
            encode_basestring(event["project"]),
            seq,
            encode_basestring(event["type"]),
        )
        return sha256_hex(text.encode("utf-8"))
    except (TypeError, UnicodeEncodeError):  # not text, or not encodable: the canonicaliser decides
        return digest({k: event[k] for k in HASHED_FIELDS})


def fact_digest(fact_text: str) -> str:
    return sha256_hex(fact_text.encode("utf-8"))


def next_event(
    project: str,
    candidate_id: str | None,
    prev_seq: int,
    prev_hash: str | None,
    type_: str,
    actor: str,
    at: str,
    fact_text: str,
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "project": project,
        "candidate_id": candidate_id,
        "seq": prev_seq + 1,
        "type": type_,
        "actor": actor,
        "at": at,
        "payload_digest": fact_digest(fact_text),
        "prev_hash": prev_hash if prev_seq else genesis_hash(project, candidate_id),
    }
    event["hash"] = event_hash(event)
    return event


@dataclass(frozen=True)
class Verification:
    valid: bool
    length: int
    head_hash: str | None
    first_bad_seq: int | None
    reason: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "length": self.length,
            "head_hash": self.head_hash,
            "first_bad_seq": self.first_bad_seq,
            "reason": self.reason,
        }


def _failure(length: int, head_hash: str | None, seq: int) -> Callable[[str], Verification]:
    return lambda reason: Verification(False, length, head_hash, seq, reason)


class AuditChain:
    """Verifies a chain: every link, every fact against its event, the head, and the newest checkpoint; with
    the chain key's seal, every event's and the head's authentication and the checkpoint's too."""

    @staticmethod
    def verify(
        project: str,
        candidate_id: str | None,
        events: list[dict[str, Any]],
        facts: dict[int, str],
        head: dict[str, Any] | None,
        checkpoint: dict[str, Any] | None = None,
        *,
        seal: Seal | None = None,
    ) -> Verification:
        """Valid, or the first bad seq and why. Every event is read exactly as the decision reads it: its
        attributes must be the hashed ones, its hash and (sealed) `mac`, nothing else, so nothing a decision
        could read lies outside what is verified."""
        prev = genesis_hash(project, candidate_id)
        length = len(events)
        last_hash = None
        fields = SEALED_EVENT_FIELDS if seal is not None else None
        for expected_seq, event in enumerate(events, start=1):
            seq = event.get("seq")
            bad = _failure(length, last_hash, expected_seq)
            if seq != expected_seq:
                return bad(
                    f"expected seq {expected_seq}, found {seq}: an event was removed, inserted or reordered"
                )
            if event.get("project") != project or event.get("candidate_id") != candidate_id:
                return bad("event belongs to another chain")
            keys = event.keys()
            if fields is not None:
                if keys != fields:
                    return bad("the event carries no authentication, or fields outside its hash")
            elif keys != EVENT_FIELDS and keys != SEALED_EVENT_FIELDS:
                return bad("the event carries fields outside its hash")
            if event.get("prev_hash") != prev:
                return bad("prev_hash does not match the previous event")
            if event_hash(event) != event.get("hash"):
                return bad("event hash does not match its content")
            if seal is not None and not seal.event_verifies(event["hash"], event["mac"]):
                return bad("the event's authentication does not verify: the gate did not write it")
            fact = facts.get(expected_seq)
            if fact is None:
                return bad("the fact recorded by this event is missing")
            if fact_digest(fact) != event.get("payload_digest"):
                return bad("the fact no longer matches its event's payload_digest")
            prev = last_hash = event["hash"]
        extra = sorted(set(facts) - set(range(1, length + 1)))
        if extra:
            return Verification(False, length, last_hash, extra[0], "a fact exists without its audit event")
        head_failure = _against_head(project, candidate_id, events, last_hash, head, seal)
        if head_failure is not None:
            return head_failure
        if checkpoint is not None:
            return _against_checkpoint(project, candidate_id, events, last_hash, checkpoint, seal)
        return Verification(True, length, last_hash, None, None)


# The HEAD attribute where the scheduled verifier leaves its finding (AWS): every decision read gets HEAD (one
# item), so an advisory read that does not read the witness still holds from the verifier's next run on. The
# witness keeps the same finding where the table cannot undo it; a mark removed from HEAD is a change the
# verifier sees and marks again.
TAMPER_MARK = "tamper_finding"


def _against_head(
    project: str,
    candidate_id: str | None,
    events: list[dict[str, Any]],
    last_hash: str | None,
    head: dict[str, Any] | None,
    seal: Seal | None,
) -> Verification | None:
    """The head must name the last event (and, sealed, carry its checkpoint's tag); None when it does."""
    length = len(events)
    if head is not None and TAMPER_MARK in head:
        return _marked(length, last_hash, head[TAMPER_MARK])
    if head is None:
        if not length:
            return None
        # Every accepted write moves the head in the same transaction: events without one were not
        # written that way (a head deleted, or a page of it lost), so nothing vouches for where they end.
        return Verification(False, length, last_hash, length, "the chain has events but no head")
    head_seq = head.get("seq")
    if type(head_seq) is not int or head_seq < 1 or head_seq != length or head.get("hash") != last_hash:
        return Verification(
            False,
            length,
            last_hash,
            min(length + 1, head_seq if type(head_seq) is int and head_seq >= 1 else 1),
            "the chain head does not match the last event: the tail was cut or rewritten",
        )
    if seal is not None and not seal.head_verifies(project, candidate_id, head, events[-1]["at"]):
        return Verification(False, length, last_hash, length, "the head's authentication does not verify")
    return None


def _marked(length: int, last_hash: str | None, mark: Any) -> Verification:
    """A chain the scheduled verifier found tampered: failed, at the seq it named (1 if unreadable)."""
    seq, reason = 1, "unreadable"
    if isinstance(mark, str):
        try:
            finding = json.loads(mark)
        except ValueError:
            finding = None
        if isinstance(finding, dict):
            named = finding.get("first_bad_seq")
            seq = named if type(named) is int and named >= 1 else 1
            reason = str(finding.get("reason") or "")[:200]
    return Verification(
        False, length, last_hash, seq, f"the scheduled verifier found this chain tampered ({reason})"
    )


def _against_checkpoint(
    project: str,
    candidate_id: str | None,
    events: list[dict[str, Any]],
    last_hash: str | None,
    checkpoint: dict[str, Any],
    seal: Seal | None,
) -> Verification:
    """The chain must reach the checkpoint (a witness ahead of the table is a cut tail, or a rollback) and
    hold the checkpoint's hash at its seq. A checkpoint that does not verify, or names another chain, is
    tampering with the witness's input, never a pass."""
    length = len(events)
    cp_seq = checkpoint.get("seq")
    if (
        type(cp_seq) is not int
        or cp_seq < 1
        or checkpoint.get("project") not in (None, project)
        or checkpoint.get("candidate_id", candidate_id) != candidate_id
        or (seal is not None and not seal.checkpoint_verifies(checkpoint))
    ):
        return Verification(
            False, length, last_hash, 1, "the witness's newest checkpoint does not verify for this chain"
        )
    if cp_seq > length:
        return Verification(
            False,
            length,
            last_hash,
            length + 1,
            f"the newest checkpoint names seq {cp_seq}: the tail was cut or rolled back",
        )
    if events[cp_seq - 1]["hash"] != checkpoint.get("hash"):
        return Verification(False, length, last_hash, cp_seq, "the event differs from its checkpoint")
    return Verification(True, length, last_hash, None, None)
