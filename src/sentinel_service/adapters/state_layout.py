"""What every state store shares, whatever it is built on: the keys a chain, an outbox item, an idempotency
record and a claim are known by, the limits of one append, how a large fact is cut into parts, how a kept
response body is packed, and how a chain read is paged against its budget.

DynamoDB (`dynamodb_store`) is the contract; the embedded SQLite store (`sqlite_store`) keeps the same keys,
limits and paging so that a chain, an append or a cursor behaves the same on one machine as in AWS: what is
refused locally is refused in production, and the other way round. Standard library only."""

import base64
import hashlib
import json
import zlib
from dataclasses import dataclass
from typing import Any

from sentinel_domain.errors import Refusal, StoreUnavailable
from sentinel_domain.ports import Append, StreamRef
from sentinel_service.names import PK, SK

HEAD_SK = "HEAD"
EVENT_PREFIX = "E#"
IDEMPOTENCY_PREFIX = "I#"
OUTBOX_PREFIX = "O#"
CLAIM_PREFIX = "U#"

# A DynamoDB item is at most 400 KB; a fact chunk leaves room for the event's own attributes. Counted in
# UTF-8 bytes (canonical JSON keeps non-ASCII characters as they are), so it also holds for non-ASCII text.
FACT_CHUNK_BYTES = 350_000
# A response body above this is stored zlib-compressed (a 2,000-obligation candidate's body can pass 400 KB).
BODY_COMPRESS_BYTES = 64_000
BODY_MAX_BYTES = 350_000
# One TransactWriteItems holds at most 100 items and 4 MB; every store refuses a larger append the same way.
MAX_TRANSACTION_ITEMS = 100
MAX_TRANSACTION_BYTES = 4_000_000
# A Query page holds at most 1 MB of items (DynamoDB's own limit); a chain is read in at most `page_budget`.
PAGE_BYTES = 1_000_000

EVENT_RESERVED = frozenset({PK, SK, "fact", "fact_parts"})
HEAD_RESERVED = frozenset({PK, SK})


# ---- keys -------------------------------------------------------------------------------------------------


def partition(ref: StreamRef) -> str:
    return f"P#{ref.project}" if ref.candidate_id is None else f"P#{ref.project}#C#{ref.candidate_id}"


def event_sk(seq: int, part: int = 0) -> str:
    return f"{EVENT_PREFIX}{seq:010d}" + (f"#{part:03d}" if part else "")


def idempotency_sk(scope: str, key: str) -> str:
    return IDEMPOTENCY_PREFIX + hashlib.sha256(f"{scope}\n{key}".encode()).hexdigest()


def outbox_sk(seq: int, index: int, entry: dict[str, Any]) -> str:
    return OUTBOX_PREFIX + str(entry.get("outbox_id") or f"{seq:010d}-{index}")


CHECK_RECORDS_PK = "FORGE#CHECKS"  # the partition of every published forge check's record


def check_record_sk(project: str, candidate_id: str) -> str:
    return partition(StreamRef(project, candidate_id))


# ---- one append -------------------------------------------------------------------------------------------


def check_append(a: Append) -> int:
    """The append's seq, once its event, head and expected seq agree and no reserved name is used: a
    programming error is a ValueError before anything is written, in every store."""
    seq = a.event.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ValueError("the event needs an integer seq of at least 1")
    if seq != a.expected_seq + 1 or a.head.get("seq") != seq:
        raise ValueError("event seq, head seq and expected_seq disagree")
    if EVENT_RESERVED & set(a.event) or HEAD_RESERVED & set(a.head):
        raise ValueError("event or head uses a reserved attribute name")
    for value in (*a.event.values(), *a.head.values()):
        if value is not None and not isinstance(value, str | int):  # bool is an int
            raise ValueError(f"unsupported attribute value of type {type(value).__name__}")
    return seq


def check_transaction(items: int, size: int) -> None:
    if items > MAX_TRANSACTION_ITEMS:
        raise ValueError(
            f"the append needs {items} items; a transaction holds at most {MAX_TRANSACTION_ITEMS}"
        )
    if size > MAX_TRANSACTION_BYTES:
        raise ValueError(f"the append needs about {size} bytes; a transaction holds at most 4 MB")


def split_fact(text: str, limit: int = FACT_CHUNK_BYTES) -> list[str]:
    """Chunks of at most `limit` UTF-8 bytes each, never splitting a character; "" is one empty chunk."""
    data = text.encode("utf-8")
    chunks: list[str] = []
    start = 0
    while True:
        end = min(start + limit, len(data))
        while end < len(data) and (data[end] & 0xC0) == 0x80:  # a continuation byte: back off to a boundary
            end -= 1
        chunks.append(data[start:end].decode("utf-8"))
        start = end
        if start >= len(data):
            return chunks


# ---- paging a chain read ----------------------------------------------------------------------------------


@dataclass
class Pager:
    """Counts a chain read in pages the way a paged DynamoDB Query does: a page ends after `page_size` items
    (when set) or before the item that would take it past PAGE_BYTES; a read needing more than `budget` pages
    stops there, incomplete."""

    budget: int
    page_size: int | None = None
    pages: int = 1
    _items: int = 0
    _bytes: int = 0

    def take(self, size: int) -> bool:
        """Count one more item of `size` bytes; False when it lies beyond the budget (the read stops)."""
        full = (self.page_size is not None and self._items >= self.page_size) or (
            self._items > 0 and self._bytes + size > PAGE_BYTES
        )
        if full:
            if self.pages >= self.budget:
                return False
            self.pages += 1
            self._items = self._bytes = 0
        self._items += 1
        self._bytes += size
        return True


# ---- kept response bodies ---------------------------------------------------------------------------------


def pack_body(body: dict[str, Any]) -> tuple[str | None, bytes | None]:
    """(JSON text, None) for a small body, (None, zlib bytes) for a large one; ValueError when even the
    compressed body is too large to keep."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    data = text.encode("utf-8")
    if len(data) <= BODY_COMPRESS_BYTES:
        return text, None
    packed = zlib.compress(data, 9)
    if len(packed) > BODY_MAX_BYTES:
        raise ValueError("the response body is too large to keep for replay")
    return None, packed


def unpack_body(text: str | None, packed: bytes | None) -> dict[str, Any] | None:
    try:
        if packed is not None:
            body: dict[str, Any] = json.loads(zlib.decompress(packed))
            return body
        return json.loads(text) if text is not None else None
    except (ValueError, zlib.error) as error:
        raise StoreUnavailable("a stored idempotency record cannot be read") from error


# ---- claim cursors ----------------------------------------------------------------------------------------


def encode_claim_cursor(pk: str, claim_key: str) -> str:
    """The opaque cursor after one claim: the same text whichever store issued it."""
    key = {PK: {"S": pk}, SK: {"S": CLAIM_PREFIX + claim_key}}
    return base64.urlsafe_b64encode(json.dumps(key, sort_keys=True).encode()).decode()


def decode_claim_cursor(cursor: str, pk: str) -> str:
    """The claim key a cursor points after; only a cursor issued for this project's claims is accepted."""
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if not (
            isinstance(key, dict)
            and set(key) == {PK, SK}
            and key[PK] == {"S": pk}
            and isinstance(key[SK], dict)
            and set(key[SK]) == {"S"}
            and isinstance(key[SK]["S"], str)
            and key[SK]["S"].startswith(CLAIM_PREFIX)
        ):
            raise ValueError("foreign cursor")
        return str(key[SK]["S"][len(CLAIM_PREFIX) :])
    except Exception as error:  # any undecodable or foreign cursor is the caller's mistake
        raise Refusal("VALIDATION_FAILED", "cursor is not one this service issued") from error


def claim_fields(a: Append) -> dict[str, str]:
    """What a new candidate's uniqueness claim records beside its candidate id."""
    assert a.claim is not None
    fact = json.loads(a.fact_text)
    return {
        "candidate_id": a.claim[1],
        "subject": str(fact["subject"]),
        "revision": str(fact["revision"]),
        "environment": str(fact["environment"]),
        "recorded_at": str(fact.get("recorded_at") or a.event.get("at", "")),
    }
