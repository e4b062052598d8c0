"""The StateStore port on DynamoDB (boto3 low-level client), one state table.

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

Every failure of DynamoDB or of the transport is StoreUnavailable, never a guess; a lost conditional race
is StoreConflict (or ClaimTaken for a candidate's uniqueness claim)."""

import base64
import binascii
import hashlib
import json
import zlib
from collections import Counter
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sentinel_domain.errors import Refusal, StoreConflict, StoreUnavailable
from sentinel_domain.ports import Append, ClaimTaken, IdempotencyRecord, Stream, StreamRef
from sentinel_service.adapters.tables import PK, SK

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
# The stored record keeps the shape earlier releases wrote and replay from: `response_status` beside the body.
# Only writes that create take an Idempotency-Key and every kept answer is one, so it is always 201 (0 while in
# progress). Nothing reads it back: a replay is answered from the body by the route that created it.
REPLAY_STATUS = 201
MAX_TRANSACTION_ITEMS = 100
MAX_TRANSACTION_BYTES = 4_000_000

_EVENT_RESERVED = frozenset({PK, SK, "fact", "fact_parts"})
_HEAD_RESERVED = frozenset({PK, SK})
_CONFLICT_REASONS = frozenset({"ConditionalCheckFailed", "TransactionConflict", "None"})
_METHODS = {
    "Query": "query",
    "Scan": "scan",
    "GetItem": "get_item",
    "PutItem": "put_item",
    "DeleteItem": "delete_item",
    "UpdateItem": "update_item",
    "TransactWriteItems": "transact_write_items",
}


def partition(ref: StreamRef) -> str:
    return f"P#{ref.project}" if ref.candidate_id is None else f"P#{ref.project}#C#{ref.candidate_id}"


def event_sk(seq: int, part: int = 0) -> str:
    return f"{EVENT_PREFIX}{seq:010d}" + (f"#{part:03d}" if part else "")


def idempotency_sk(scope: str, key: str) -> str:
    return IDEMPOTENCY_PREFIX + hashlib.sha256(f"{scope}\n{key}".encode()).hexdigest()


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


def _to_attr(value: Any) -> dict[str, Any]:
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int):
        return {"N": str(value)}
    if isinstance(value, str):
        return {"S": value}
    raise ValueError(f"unsupported attribute value of type {type(value).__name__}")


def _from_attr(attr: dict[str, Any]) -> Any:
    """Any stored type comes back as something: a tampered item must reach verification, not crash the read."""
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
        return {k: _from_attr(v) for k, v in attr["M"].items()}
    if "L" in attr:
        return [_from_attr(v) for v in attr["L"]]
    if "B" in attr:
        return attr["B"]
    for set_type in ("SS", "NS", "BS"):
        if set_type in attr:
            return list(attr[set_type])
    return None


def _s(item: dict[str, Any], name: str, default: str = "") -> str:
    value = item.get(name, {})
    return value["S"] if "S" in value else default


def _n(item: dict[str, Any], name: str, default: int = 0) -> int:
    value = item.get(name, {})
    try:
        return int(value["N"]) if "N" in value else default
    except ValueError:
        return default


def _item_bytes(item: dict[str, Any]) -> int:
    return len(json.dumps(item, ensure_ascii=False, default=lambda b: "x" * len(b)).encode("utf-8"))


class DynamoStateStore:
    """StateStore on one DynamoDB table. `calls` counts the operations issued, page by page."""

    def __init__(
        self, client: Any, table_name: str, page_budget: int = 50, page_size: int | None = None
    ) -> None:
        if page_budget < 1:
            raise ValueError("page_budget must be at least 1")
        if page_size is not None and page_size < 1:
            raise ValueError("page_size must be at least 1")
        self.client = client
        self.table_name = table_name
        self.page_budget = page_budget
        self.page_size = page_size
        self.calls: Counter[str] = Counter()

    # ---- plumbing ---------------------------------------------------------------------------------------

    def _call(self, operation: str, expected: tuple[str, ...] = (), **kwargs: Any) -> dict[str, Any]:
        """Issue one operation. A ClientError whose code is in `expected` is re-raised for the caller to
        judge; every other failure, of DynamoDB or of the transport, is StoreUnavailable."""
        self.calls[operation] += 1
        method = getattr(self.client, _METHODS[operation])
        if operation != "TransactWriteItems":
            kwargs["TableName"] = self.table_name
        try:
            answer: dict[str, Any] = method(**kwargs)
            return answer
        except ClientError as error:
            if _code(error) in expected:
                raise
            raise StoreUnavailable(f"{operation} failed: {_code(error)}") from error
        except BotoCoreError as error:
            raise StoreUnavailable(f"{operation} failed: {type(error).__name__}") from error

    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        response = self._call("GetItem", Key={PK: {"S": pk}, SK: {"S": sk}}, ConsistentRead=True)
        return response.get("Item")

    # ---- chains -----------------------------------------------------------------------------------------

    def load(self, ref: StreamRef) -> Stream | None:
        """One strongly consistent Query over the chain (paged up to `page_budget` pages)."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :lo AND :hi",
            "ExpressionAttributeNames": {"#pk": PK, "#sk": SK},
            "ExpressionAttributeValues": {
                ":pk": {"S": partition(ref)},
                ":lo": {"S": EVENT_PREFIX},
                ":hi": {"S": HEAD_SK},
            },
            "ConsistentRead": True,
        }
        if self.page_size is not None:
            kwargs["Limit"] = self.page_size
        items: list[dict[str, Any]] = []
        pages = 0
        complete = True
        while True:
            response = self._call("Query", **kwargs)
            pages += 1
            items.extend(response.get("Items", []))
            last = response.get("LastEvaluatedKey")
            if not last:
                break
            if pages >= self.page_budget:
                complete = False
                break
            kwargs["ExclusiveStartKey"] = last
        if not items:
            return None if complete else Stream(ref, [], {}, None, complete=False, pages=pages)
        return self._assemble(ref, items, complete, pages)

    @staticmethod
    def _assemble(ref: StreamRef, items: list[dict[str, Any]], complete: bool, pages: int) -> Stream:
        head: dict[str, Any] | None = None
        events: list[tuple[int, dict[str, Any]]] = []
        chunks: dict[int, list[str]] = {}
        wanted: dict[int, int] = {}
        for item in items:  # in sk order: an event, then its parts, ..., then HEAD
            sk = _s(item, SK)
            if sk == HEAD_SK:
                head = {k: _from_attr(v) for k, v in item.items() if k not in _HEAD_RESERVED}
                continue
            if not sk.startswith(EVENT_PREFIX):
                continue
            seq_text, _, part = sk[len(EVENT_PREFIX) :].partition("#")
            try:
                seq = int(seq_text)
            except ValueError:
                continue
            if part:
                chunks.setdefault(seq, []).append(_s(item, "fact"))
                continue
            events.append((seq, {k: _from_attr(v) for k, v in item.items() if k not in _EVENT_RESERVED}))
            if "fact" in item:
                chunks[seq] = [_s(item, "fact")]
                wanted[seq] = _n(item, "fact_parts", 1)
        facts: dict[int, str] = {}
        for seq, parts in chunks.items():
            if seq not in wanted:
                continue  # parts without their event item: the event is gone; verification reports it
            if len(parts) < wanted[seq] and not complete and events and seq == events[-1][0]:
                events.pop()  # the page budget cut this event's fact: leave the event unread, like the rest
                continue
            facts[seq] = "".join(
                parts
            )  # a missing part fails the payload digest: STATE_TAMPERED, never a pass
        return Stream(ref, [event for _seq, event in events], facts, head, complete=complete, pages=pages)

    def append(self, a: Append) -> None:
        """One TransactWriteItems: head, event, fact parts, outbox, idempotency completion, claim."""
        pk = partition(a.ref)
        seq = a.event.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
            raise ValueError("the event needs an integer seq of at least 1")
        if seq != a.expected_seq + 1 or a.head.get("seq") != seq:
            raise ValueError("event seq, head seq and expected_seq disagree")
        if _EVENT_RESERVED & set(a.event) or _HEAD_RESERVED & set(a.head):
            raise ValueError("event or head uses a reserved attribute name")
        items: list[dict[str, Any]] = [self._head_put(pk, a)]
        parts = split_fact(a.fact_text)
        event_item = {
            PK: {"S": pk},
            SK: {"S": event_sk(seq)},
            **{k: _to_attr(v) for k, v in a.event.items()},
            "fact": {"S": parts[0]},
            "fact_parts": {"N": str(len(parts))},
        }
        items.append(self._put_new(event_item))
        for number, chunk in enumerate(parts[1:], start=1):
            items.append(
                self._put_new({PK: {"S": pk}, SK: {"S": event_sk(seq, number)}, "fact": {"S": chunk}})
            )
        for index, entry in enumerate(a.outbox):
            outbox_id = str(entry.get("outbox_id") or f"{seq:010d}-{index}")
            items.append(
                self._put_new(
                    {
                        PK: {"S": pk},
                        SK: {"S": OUTBOX_PREFIX + outbox_id},
                        "item": {"S": json.dumps(entry, sort_keys=True, separators=(",", ":"))},
                        "outbox_kind": {"S": str(entry.get("kind", ""))},
                        "outbox_pending": {"S": "1"},
                        "seq": {"N": str(seq)},
                        "recorded_at": {"S": str(a.event.get("at", ""))},
                    }
                )
            )
        if a.idempotency is not None:
            items.append(self._idempotency_complete(a.idempotency))
        claim_index = None
        if a.claim is not None:
            claim_index = len(items)
            items.append(self._claim_put(a))
        if a.require_project_seq is not None:
            # The project's configuration (its allow-list) must be the one the write was judged against.
            items.append(
                {
                    "ConditionCheck": {
                        "TableName": self.table_name,
                        "Key": {PK: {"S": partition(StreamRef(a.ref.project))}, SK: {"S": HEAD_SK}},
                        "ConditionExpression": "#seq = :project_seq",
                        "ExpressionAttributeNames": {"#seq": "seq"},
                        "ExpressionAttributeValues": {":project_seq": {"N": str(a.require_project_seq)}},
                    }
                }
            )
        keys = [(op["Put"]["Item"][PK]["S"], op["Put"]["Item"][SK]["S"]) for op in items if "Put" in op]
        if len(set(keys)) != len(keys):
            raise ValueError("the append writes one item twice (a repeated outbox id?)")
        if len(items) > MAX_TRANSACTION_ITEMS:
            raise ValueError(
                f"the append needs {len(items)} items; a transaction holds at most {MAX_TRANSACTION_ITEMS}"
            )
        size = sum(_item_bytes(item) for item in items)
        if size > MAX_TRANSACTION_BYTES:
            raise ValueError(f"the append needs about {size} bytes; a transaction holds at most 4 MB")
        # The same token for the same write: a retry by botocore after a lost response succeeds instead of
        # failing its own conditions (DynamoDB keeps tokens for 10 minutes).
        token = hashlib.sha256(
            json.dumps(items, sort_keys=True, default=lambda b: base64.b64encode(b).decode()).encode()
        ).hexdigest()[:36]
        try:
            self._call(
                "TransactWriteItems",
                expected=("TransactionCanceledException",),
                TransactItems=items,
                ClientRequestToken=token,
            )
        except ClientError as error:
            cancelled = error.response.get("CancellationReasons", [])
            reasons = [r.get("Code", "None") for r in cancelled]
            if (
                claim_index is not None
                and len(reasons) > claim_index
                and reasons[claim_index] == "ConditionalCheckFailed"
            ):
                assert a.claim is not None
                old = cancelled[claim_index].get("Item", {})  # ALL_OLD: the claim that won
                raise self._claim_taken(a.ref.project, a.claim[0], _s(old, "candidate_id")) from error
            if reasons and all(r in _CONFLICT_REASONS for r in reasons) and set(reasons) - {"None"}:
                raise StoreConflict(f"append to {pk} at seq {seq} lost a race: {reasons}") from error
            raise StoreUnavailable(f"TransactWriteItems cancelled: {reasons or _code(error)}") from error

    def _put_new(self, item: dict[str, Any]) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self.table_name,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": PK},
            }
        }

    def _head_put(self, pk: str, a: Append) -> dict[str, Any]:
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        if a.expected_seq == 0:
            conditions = ["attribute_not_exists(#pk)"]
            names["#pk"] = PK
        else:
            conditions = ["#seq = :expected"]
            names["#seq"] = "seq"
            values[":expected"] = {"N": str(a.expected_seq)}
        if a.require_plan_digest is not None:
            conditions.append("#plan_digest = :digest")
            names["#plan_digest"] = "plan_digest"
            values[":digest"] = {"S": a.require_plan_digest}
        if a.require_approval_after is not None:
            conditions.append("#approval_valid_until > :after")  # fixed-width UTC text sorts as time
            names["#approval_valid_until"] = "approval_valid_until"
            values[":after"] = {"S": a.require_approval_after}
        put: dict[str, Any] = {
            "TableName": self.table_name,
            "Item": {PK: {"S": pk}, SK: {"S": HEAD_SK}, **{k: _to_attr(v) for k, v in a.head.items()}},
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names,
        }
        if values:
            put["ExpressionAttributeValues"] = values
        return {"Put": put}

    def _claim_put(self, a: Append) -> dict[str, Any]:
        assert a.claim is not None
        key, candidate_id = a.claim
        fact = json.loads(a.fact_text)
        item = {
            PK: {"S": partition(StreamRef(a.ref.project))},
            SK: {"S": CLAIM_PREFIX + key},
            "candidate_id": {"S": candidate_id},
            "subject": {"S": str(fact["subject"])},
            "revision": {"S": str(fact["revision"])},
            "environment": {"S": str(fact["environment"])},
            "recorded_at": {"S": str(fact.get("recorded_at") or a.event.get("at", ""))},
        }
        put = self._put_new(item)
        put["Put"]["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return put

    def _claim_taken(self, project: str, key: str, existing: str) -> Exception:
        if not existing:  # no old image came back: read the claim
            try:
                existing = self.find_claim(project, key) or ""
            except StoreUnavailable as error:
                return error
        return ClaimTaken(existing) if existing else StoreConflict("the claim vanished after a conflict")

    # ---- candidate claims -------------------------------------------------------------------------------

    def find_claim(self, project: str, key: str) -> str | None:
        item = self._get(partition(StreamRef(project)), CLAIM_PREFIX + key)
        return _s(item, "candidate_id") or None if item else None

    def list_claims(
        self, project: str, limit: int, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        pk = partition(StreamRef(project))
        limit = max(1, limit)
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
            "ExpressionAttributeNames": {"#pk": PK, "#sk": SK},
            "ExpressionAttributeValues": {":pk": {"S": pk}, ":prefix": {"S": CLAIM_PREFIX}},
            "ConsistentRead": True,
            "Limit": limit + 1,  # one more than asked: a next page exists only when something is left
        }
        if cursor:
            kwargs["ExclusiveStartKey"] = _decode_claim_cursor(cursor, pk)
        items = self._call("Query", **kwargs).get("Items", [])
        rows = [
            {
                "candidate_id": _s(i, "candidate_id"),
                "subject": _s(i, "subject"),
                "revision": _s(i, "revision"),
                "environment": _s(i, "environment"),
                "created_at": _s(i, "recorded_at"),
            }
            for i in items[:limit]
        ]
        next_cursor = None
        if len(items) > limit:
            last = items[limit - 1]
            next_cursor = base64.urlsafe_b64encode(
                json.dumps({PK: last[PK], SK: last[SK]}, sort_keys=True).encode()
            ).decode()
        return rows, next_cursor

    # ---- idempotency ------------------------------------------------------------------------------------

    def _idempotency_item(self, record: IdempotencyRecord, status: str) -> dict[str, Any]:
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
            body = json.dumps(record.response_body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            data = body.encode("utf-8")
            if len(data) > BODY_COMPRESS_BYTES:
                packed = zlib.compress(data, 9)
                if len(packed) > BODY_MAX_BYTES:
                    raise ValueError("the response body is too large to keep for replay")
                item["response_body_zlib"] = {"B": packed}
            else:
                item["response_body"] = {"S": body}
        return item

    def _idempotency_complete(self, record: IdempotencyRecord) -> dict[str, Any]:
        """Put the completed record, only over this caller's own in-progress claim."""
        return {
            "Put": {
                "TableName": self.table_name,
                "Item": self._idempotency_item(record, "completed"),
                "ConditionExpression": "attribute_exists(#pk) AND #status = :ip AND #caller = :caller "
                "AND #claimed_at = :claimed_at",
                "ExpressionAttributeNames": {
                    "#pk": PK,
                    "#status": "status",
                    "#caller": "caller",
                    "#claimed_at": "claimed_at",
                },
                "ExpressionAttributeValues": {
                    ":ip": {"S": "in_progress"},
                    ":caller": {"S": record.caller},
                    ":claimed_at": {"S": record.claimed_at},
                },
            }
        }

    def idempotency_get(self, ref: StreamRef, scope: str, key: str) -> IdempotencyRecord | None:
        item = self._get(partition(ref), idempotency_sk(scope, key))
        if item is None:
            return None
        body: dict[str, Any] | None = None
        try:
            if "response_body_zlib" in item:
                body = json.loads(zlib.decompress(item["response_body_zlib"]["B"]))
            elif "S" in item.get("response_body", {}):
                body = json.loads(item["response_body"]["S"])
        except (ValueError, zlib.error, binascii.Error, KeyError) as error:
            raise StoreUnavailable("a stored idempotency record cannot be read") from error
        return IdempotencyRecord(
            ref=ref,
            scope=scope,
            key=key,
            caller=_s(item, "caller"),
            request_hash=_s(item, "request_hash"),
            status=_s(item, "status"),
            response_body=body,
            claimed_at=_s(item, "claimed_at"),
            lease_until=_s(item, "lease_until"),
        )

    def idempotency_begin(self, record: IdempotencyRecord) -> bool:
        """Claim the key when it is free or its in-progress lease has lapsed at record.claimed_at."""
        try:
            self._call(
                "PutItem",
                expected=("ConditionalCheckFailedException",),
                Item=self._idempotency_item(record, "in_progress"),
                ConditionExpression="attribute_not_exists(#pk) OR "
                "(#status = :ip AND #lease_until <= :claimed_at)",
                ExpressionAttributeNames={"#pk": PK, "#status": "status", "#lease_until": "lease_until"},
                ExpressionAttributeValues={
                    ":ip": {"S": "in_progress"},
                    ":claimed_at": {"S": record.claimed_at},
                },
            )
        except ClientError:
            return False
        return True

    def idempotency_release(self, record: IdempotencyRecord) -> None:
        """Drop this caller's own in-progress claim; a completed record or another's claim stays."""
        try:
            self._call(
                "DeleteItem",
                expected=("ConditionalCheckFailedException",),
                Key={PK: {"S": partition(record.ref)}, SK: {"S": idempotency_sk(record.scope, record.key)}},
                ConditionExpression="#status = :ip AND #caller = :caller AND #claimed_at = :claimed_at",
                ExpressionAttributeNames={
                    "#status": "status",
                    "#caller": "caller",
                    "#claimed_at": "claimed_at",
                },
                ExpressionAttributeValues={
                    ":ip": {"S": "in_progress"},
                    ":caller": {"S": record.caller},
                    ":claimed_at": {"S": record.claimed_at},
                },
            )
        except ClientError:
            pass

    # ---- relay helpers (local runner; on AWS the relay reads the table's stream) -------------------------

    def _scan(self, limit: int | None = None, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while limit is None or len(items) < limit:
            response = self._call("Scan", ConsistentRead=True, **kwargs)
            items.extend(response.get("Items", []))
            last = response.get("LastEvaluatedKey")
            if not last:
                break
            kwargs["ExclusiveStartKey"] = last
        return items if limit is None else items[:limit]

    def pending_outbox(self, limit: int = 100) -> list[dict[str, Any]]:
        """Outbox items not yet relayed: [{pk, sk, kind, item}], oldest chain position first per chain."""
        items = self._scan(
            limit,
            FilterExpression="attribute_exists(#pending)",
            ExpressionAttributeNames={"#pending": "outbox_pending"},
        )
        return [
            {
                "pk": _s(i, PK),
                "sk": _s(i, SK),
                "kind": _s(i, "outbox_kind"),
                "item": json.loads(_s(i, "item", "{}")),
            }
            for i in sorted(items, key=lambda i: (_s(i, PK), _n(i, "seq"), _s(i, SK)))
        ]

    def mark_relayed(self, pk: str, sk: str) -> bool:
        """Remove the pending flag; False when no such outbox item exists (nothing is created)."""
        try:
            self._call(
                "UpdateItem",
                expected=("ConditionalCheckFailedException",),
                Key={PK: {"S": pk}, SK: {"S": sk}},
                UpdateExpression="REMOVE #pending",
                ConditionExpression="attribute_exists(#pk) AND begins_with(#sk, :outbox)",
                ExpressionAttributeNames={"#pending": "outbox_pending", "#pk": PK, "#sk": SK},
                ExpressionAttributeValues={":outbox": {"S": OUTBOX_PREFIX}},
            )
        except ClientError:
            return False
        return True

    def chain_heads(self) -> list[dict[str, Any]]:
        """Every chain's head, for checkpoints: [{pk, project, candidate_id, seq, hash}]."""
        items = self._scan(
            FilterExpression="#sk = :head",
            ExpressionAttributeNames={"#sk": SK},
            ExpressionAttributeValues={":head": {"S": HEAD_SK}},
        )
        heads = []
        for item in items:
            pk = _s(item, PK)
            project, _, candidate_id = pk[2:].partition("#C#")
            heads.append(
                {
                    "pk": pk,
                    "project": project,
                    "candidate_id": candidate_id or None,
                    "seq": _n(item, "seq"),
                    "hash": _s(item, "hash") or None,
                }
            )
        return sorted(heads, key=lambda h: h["pk"])


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", "Unknown"))


def _decode_claim_cursor(cursor: str, pk: str) -> dict[str, Any]:
    """Only a cursor this store issued for this project's claims is accepted."""
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
        return key
    except Exception as error:  # any undecodable or foreign cursor is the caller's mistake
        raise Refusal("VALIDATION_FAILED", "cursor is not one this service issued") from error
