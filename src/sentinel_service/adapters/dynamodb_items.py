"""The items of the state table, and their attribute values: what `DynamoStateStore` writes and reads back.

Layout (see `sentinel_service.adapters.tables` for the key schema):

| item | pk | sk |
|---|---|---|
| chain head | `P#{project}` or `P#{project}#C#{candidate_id}` | `HEAD` |
| audit event + its fact (first chunk) | chain partition | `E#{seq:010d}` |
| further chunks of a large fact | chain partition | `E#{seq:010d}#{part:03d}` (part from 1) |
| idempotency record | partition of the record's ref | `I#` + sha256(scope + "\\n" + key) |
| outbox item | chain partition | `O#{outbox_id}` (`outbox_pending` = "1" until relayed) |
| candidate claim | project partition | `U#{claim_key}` |

`"E#" < "E#…#001" < "E#next" < "HEAD" < "I#" < "O#" < "U#"`, so one Query with `sk BETWEEN "E#" AND "HEAD"`
reads a chain's events, facts and head and nothing else. HEAD sorts last: a read cut by the page budget
never holds the head, so a write judged from it (expected_seq 0) can only fail its condition.

Only shapes and values live here; the conditions a write carries and the calls that make it are the store's
(dynamodb_store.py). The keys, limits, fact parts and cursors every state store shares are in state_layout."""

import hashlib
import json
from typing import Any

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.ports import Append, IdempotencyRecord, Stream, StreamRef
from sentinel_domain.usecases.chain import SYNTHETIC
from sentinel_service.adapters.state_layout import (
    CLAIM_PREFIX,
    EVENT_PREFIX,
    EVENT_RESERVED,
    HEAD_RESERVED,
    HEAD_SK,
    claim_fields,
    decode_claim_cursor,
    encode_claim_cursor,
    event_sk,
    idempotency_sk,
    outbox_sk,
    pack_body,
    partition,
    split_fact,
    unpack_body,
)
from sentinel_service.adapters.tables import PK, SK
from sentinel_service.names import (
    NOTIFICATION_EVENT_ATTRIBUTE,
    NOTIFICATION_TEXT_ATTRIBUTE,
    OUTBOX_KIND_NOTIFICATION,
    OUTBOX_SYNTHETIC_ATTRIBUTE,
)

# The stored record keeps the shape earlier releases wrote and replay from: `response_status` beside the body.
# Only writes that create take an Idempotency-Key and every kept answer is one, so it is always 201 (0 while
# in progress). Nothing reads it back: a replay is answered from the body by the route that created it.
REPLAY_STATUS = 201


# ---- attribute values -------------------------------------------------------------------------------------


def to_attr(value: Any) -> dict[str, Any]:
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int):
        return {"N": str(value)}
    if isinstance(value, str):
        return {"S": value}
    raise ValueError(f"unsupported attribute value of type {type(value).__name__}")


def from_attr(attr: dict[str, Any]) -> Any:
    """Any stored type comes back as something: a tampered item must reach verification, not crash the
    read."""
    if "S" in attr:
        return attr["S"]
    if "N" in attr:
        text = attr["N"]
        try:
            return int(text)
        except ValueError:
            return float(text)
    if "NULL" in attr:
        return None
    if "BOOL" in attr:
        return attr["BOOL"]
    if "M" in attr:
        return {k: from_attr(v) for k, v in attr["M"].items()}
    if "L" in attr:
        return [from_attr(v) for v in attr["L"]]
    if "B" in attr:
        return attr["B"]
    for set_type in ("SS", "NS", "BS"):
        if set_type in attr:
            return list(attr[set_type])
    return None


def text_of(item: dict[str, Any], name: str, default: str = "") -> str:
    value = item.get(name, {})
    return value["S"] if "S" in value else default


def number_of(item: dict[str, Any], name: str, default: int = 0) -> int:
    value = item.get(name, {})
    try:
        return int(value["N"]) if "N" in value else default
    except ValueError:
        return default


def item_bytes(item: dict[str, Any]) -> int:
    return len(json.dumps(item, ensure_ascii=False, default=lambda b: "x" * len(b)).encode("utf-8"))


# ---- chains: head, events, facts in chunks ----------------------------------------------------------------


def head_item(pk: str, head: dict[str, Any]) -> dict[str, Any]:
    return {PK: {"S": pk}, SK: {"S": HEAD_SK}, **{k: to_attr(v) for k, v in head.items()}}


def head_fields(item: dict[str, Any]) -> dict[str, Any]:
    """A HEAD item read back as `Stream.head`: every attribute but the keys."""
    return {k: from_attr(v) for k, v in item.items() if k not in HEAD_RESERVED}


def event_items(pk: str, seq: int, event: dict[str, Any], fact_text: str) -> list[dict[str, Any]]:
    """The event with its fact's first chunk, then one item per further chunk."""
    parts = split_fact(fact_text)
    event_item = {
        PK: {"S": pk},
        SK: {"S": event_sk(seq)},
        **{k: to_attr(v) for k, v in event.items()},
        "fact": {"S": parts[0]},
        "fact_parts": {"N": str(len(parts))},
    }
    return [
        event_item,
        *(
            {PK: {"S": pk}, SK: {"S": event_sk(seq, number)}, "fact": {"S": chunk}}
            for number, chunk in enumerate(parts[1:], start=1)
        ),
    ]


def assemble_stream(ref: StreamRef, items: list[dict[str, Any]], complete: bool, pages: int) -> Stream:
    """A chain read back from its items, in sk order (an event, then its parts, ..., then HEAD)."""
    head: dict[str, Any] | None = None
    events: list[tuple[int, dict[str, Any]]] = []
    chunks: dict[int, list[str]] = {}
    wanted: dict[int, int] = {}
    for item in items:  # in sk order: an event, then its parts, ..., then HEAD
        sk = text_of(item, SK)
        if sk == HEAD_SK:
            head = head_fields(item)
            continue
        if not sk.startswith(EVENT_PREFIX):
            continue
        seq_text, _, part = sk[len(EVENT_PREFIX) :].partition("#")
        try:
            seq = int(seq_text)
        except ValueError:
            continue
        if part:
            chunks.setdefault(seq, []).append(text_of(item, "fact"))
            continue
        events.append((seq, {k: from_attr(v) for k, v in item.items() if k not in EVENT_RESERVED}))
        if "fact" in item:
            chunks[seq] = [text_of(item, "fact")]
            wanted[seq] = number_of(item, "fact_parts", 1)
    facts: dict[int, str] = {}
    for seq, parts in chunks.items():
        if seq not in wanted:
            continue  # parts without their event item: the event is gone; verification reports it
        if len(parts) < wanted[seq] and not complete and events and seq == events[-1][0]:
            events.pop()  # the page budget cut this event's fact: leave the event unread, like the rest
            continue
        facts[seq] = "".join(parts)  # a missing part fails the payload digest: STATE_TAMPERED, never a pass
    return Stream(ref, [event for _seq, event in events], facts, head, complete=complete, pages=pages)


# ---- outbox -----------------------------------------------------------------------------------------------


def outbox_item(pk: str, seq: int, index: int, entry: dict[str, Any], at: Any) -> dict[str, Any]:
    item = {
        PK: {"S": pk},
        SK: {"S": outbox_sk(seq, index, entry)},
        "item": {"S": json.dumps(entry, sort_keys=True, separators=(",", ":"))},
        "outbox_kind": {"S": str(entry.get("kind", ""))},
        "outbox_pending": {"S": "1"},
        "seq": {"N": str(seq)},
        "recorded_at": {"S": str(at)},
    }
    if entry.get("kind") == OUTBOX_KIND_NOTIFICATION:
        # Beside the item's JSON, as attributes of their own: the relayed stream record carries `item` as a
        # string, and an EventBridge rule can neither parse it nor route on what is inside it
        # (sentinel_infra/constructs/notifications.py reads these two).
        item[NOTIFICATION_EVENT_ATTRIBUTE] = {"S": str(entry.get("event", ""))}
        item[NOTIFICATION_TEXT_ATTRIBUTE] = {"S": str(entry.get("text", ""))}
    if entry.get(SYNTHETIC) is True:
        # A top-level attribute, because the bus's rules see the stream image, not inside `item`; absent
        # (never "0") otherwise: the rules match on its absence (`exists: false` on its `S` leaf).
        item[OUTBOX_SYNTHETIC_ATTRIBUTE] = {"S": "1"}
    return item


def outbox_row(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "pk": text_of(item, PK),
        "sk": text_of(item, SK),
        "kind": text_of(item, "outbox_kind"),
        "item": json.loads(text_of(item, "item", "{}")),
        "synthetic": OUTBOX_SYNTHETIC_ATTRIBUTE in item,
    }


def chain_head_row(item: dict[str, Any]) -> dict[str, Any]:
    pk = text_of(item, PK)
    project, _, candidate_id = pk[2:].partition("#C#")
    return {
        "pk": pk,
        "project": project,
        "candidate_id": candidate_id or None,
        "seq": number_of(item, "seq"),
        "hash": text_of(item, "hash") or None,
    }


# ---- candidate claims -------------------------------------------------------------------------------------


def claim_item(a: Append) -> dict[str, Any]:
    assert a.claim is not None
    return {
        PK: {"S": partition(StreamRef(a.ref.project))},
        SK: {"S": CLAIM_PREFIX + a.claim[0]},
        **{name: {"S": value} for name, value in claim_fields(a).items()},
    }


def claim_row(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "candidate_id": text_of(item, "candidate_id"),
        "subject": text_of(item, "subject"),
        "revision": text_of(item, "revision"),
        "environment": text_of(item, "environment"),
        "created_at": text_of(item, "recorded_at"),
    }


def claim_cursor(item: dict[str, Any]) -> str:
    return encode_claim_cursor(text_of(item, PK), text_of(item, SK)[len(CLAIM_PREFIX) :])


def claim_start_key(cursor: str, pk: str) -> dict[str, Any]:
    """The ExclusiveStartKey a cursor stands for; a foreign or garbled cursor is refused."""
    return {PK: {"S": pk}, SK: {"S": CLAIM_PREFIX + decode_claim_cursor(cursor, pk)}}


# ---- idempotency records ----------------------------------------------------------------------------------


def idempotency_item(record: IdempotencyRecord, status: str) -> dict[str, Any]:
    item: dict[str, Any] = {
        PK: {"S": partition(record.ref)},
        SK: {"S": idempotency_sk(record.scope, record.key)},
        "scope": {"S": record.scope},
        "key_sha256": {"S": hashlib.sha256(record.key.encode()).hexdigest()},  # never the key itself
        "caller": {"S": record.caller},
        "request_hash": {"S": record.request_hash},
        "status": {"S": status},
        "response_status": {"N": str(REPLAY_STATUS if status == "completed" else 0)},
        "claimed_at": {"S": record.claimed_at},
        "lease_until": {"S": record.lease_until},
    }
    if record.response_body is not None:
        text, packed = pack_body(record.response_body)
        if packed is not None:
            item["response_body_zlib"] = {"B": packed}
        else:
            item["response_body"] = {"S": text}
    return item


def idempotency_record(ref: StreamRef, scope: str, key: str, item: dict[str, Any]) -> IdempotencyRecord:
    try:
        packed = item["response_body_zlib"]["B"] if "response_body_zlib" in item else None
        text = item["response_body"]["S"] if "S" in item.get("response_body", {}) else None
    except (KeyError, TypeError) as error:
        raise StoreUnavailable("a stored idempotency record cannot be read") from error
    body = unpack_body(text, packed)
    return IdempotencyRecord(
        ref=ref,
        scope=scope,
        key=key,
        caller=text_of(item, "caller"),
        request_hash=text_of(item, "request_hash"),
        status=text_of(item, "status"),
        response_body=body,
        claimed_at=text_of(item, "claimed_at"),
        lease_until=text_of(item, "lease_until"),
    )
