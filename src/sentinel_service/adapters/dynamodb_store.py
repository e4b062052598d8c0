"""The StateStore port on DynamoDB (boto3 low-level client), one state table.

The items it writes and reads back, their keys and layout, are in `dynamodb_items`; here are the calls that
write and read them and the conditions each write carries. A chain is read with one Query over its events,
facts and head (`sk BETWEEN "E#" AND "HEAD"`), its head alone with one GetItem of `HEAD`.

Every failure of DynamoDB or of the transport is StoreUnavailable, never a guess; a lost conditional race
is StoreConflict (or ClaimTaken for a candidate's uniqueness claim)."""

import base64
import hashlib
import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sentinel_domain.audit import TAMPER_MARK
from sentinel_domain.canonical import canonical_text
from sentinel_domain.errors import StoreConflict, StoreUnavailable
from sentinel_domain.forge_checks import CheckRecord
from sentinel_domain.ports import Append, ClaimTaken, IdempotencyRecord, Stream, StreamRef
from sentinel_service.adapters.dynamodb_items import (
    assemble_stream,
    chain_head_row,
    claim_cursor,
    claim_item,
    claim_row,
    claim_start_key,
    event_items,
    head_fields,
    head_item,
    idempotency_item,
    idempotency_record,
    item_bytes,
    number_of,
    outbox_item,
    outbox_row,
    text_of,
)
from sentinel_service.adapters.state_layout import (
    CHECK_RECORDS_PK,
    CLAIM_PREFIX,
    EVENT_PREFIX,
    HEAD_SK,
    OUTBOX_PREFIX,
    check_append,
    check_record_sk,
    check_transaction,
    idempotency_sk,
    partition,
)
from sentinel_service.adapters.tables import PK, SK

_CONFLICT_REASONS = frozenset({"ConditionalCheckFailed", "TransactionConflict", "None"})
FORGE_INDEX_PK = "FORGE#github"  # the repository index's partition (never a chain's `P#...`)
_METHODS = {
    "Query": "query",
    "Scan": "scan",
    "GetItem": "get_item",
    "PutItem": "put_item",
    "DeleteItem": "delete_item",
    "UpdateItem": "update_item",
    "TransactWriteItems": "transact_write_items",
}


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
        self._staging = threading.local()

    @contextmanager
    def staged(self) -> Iterator[list[dict[str, Any]]]:
        """Appends made by this thread inside the block are not written: their TransactWriteItems entries are
        collected in the list it yields, for the caller to write inside a transaction of its own (the
        operator's principal changes, with the principal's items: `PrincipalAdmin(extra_items=...)`). Every
        read still reads the table."""
        staged: list[dict[str, Any]] = []
        self._staging.items = staged
        try:
            yield staged
        finally:
            self._staging.items = None

    def deferring(self) -> bool:
        """True inside `staged()`: an append made now is not written yet (the caller writes it, or not)."""
        return getattr(self._staging, "items", None) is not None

    # ---- plumbing ---------------------------------------------------------------------------------------

    def _call(self, operation: str, expected: tuple[str, ...] = (), **kwargs: Any) -> dict[str, Any]:
        """Issue one operation. A ClientError whose code is in `expected` is re-raised for the caller to
        judge; every other failure, of DynamoDB or of the transport, is StoreUnavailable."""
        staging = getattr(self._staging, "items", None)
        if operation == "TransactWriteItems" and staging is not None:
            staging.extend(kwargs["TransactItems"])  # written by the caller of staged(), or not at all
            return {}
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
        return assemble_stream(ref, items, complete, pages)

    def load_head(self, ref: StreamRef) -> dict[str, Any] | None:
        """One strongly consistent GetItem of the chain's HEAD item (1 RRU while it stays under 4 KB)."""
        item = self._get(partition(ref), HEAD_SK)
        return head_fields(item) if item is not None else None

    def mark_head_tampered(self, ref: StreamRef, finding: dict[str, Any]) -> bool:
        """Put the scheduled verifier's finding on the chain's HEAD item (`audit.TAMPER_MARK`), where every
        decision read sees it with the GetItem it makes anyway; False when the chain has no HEAD (the witness
        keeps the finding regardless). The next accepted write would replace HEAD, but none is accepted on a
        chain the witness marked."""
        try:
            self._call(
                "UpdateItem",
                ("ConditionalCheckFailedException",),
                Key={PK: {"S": partition(ref)}, SK: {"S": HEAD_SK}},
                UpdateExpression="SET #mark = :mark",
                ConditionExpression="attribute_exists(#pk)",
                ExpressionAttributeNames={"#mark": TAMPER_MARK, "#pk": PK},
                ExpressionAttributeValues={":mark": {"S": canonical_text(finding)}},
            )
        except ClientError:
            return False
        return True

    def append(self, a: Append) -> None:
        """One TransactWriteItems: head, event, fact parts, outbox, idempotency completion, claim."""
        pk = partition(a.ref)
        seq = check_append(a)
        items: list[dict[str, Any]] = [self._head_put(pk, a)]
        items.extend(self._put_new(item) for item in event_items(pk, seq, a.event, a.fact_text))
        for index, entry in enumerate(a.outbox):
            items.append(self._put_new(outbox_item(pk, seq, index, entry, a.event.get("at", ""))))
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
        check_transaction(len(items), sum(item_bytes(item) for item in items))
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
                raise self._claim_taken(a.ref.project, a.claim[0], text_of(old, "candidate_id")) from error
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
            "Item": head_item(pk, a.head),
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names,
        }
        if values:
            put["ExpressionAttributeValues"] = values
        return {"Put": put}

    def _claim_put(self, a: Append) -> dict[str, Any]:
        put = self._put_new(claim_item(a))
        put["Put"]["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return put

    def _claim_taken(self, project: str, key: str, existing: str) -> Exception:
        if not existing:  # no old image came back: read the claim
            try:
                existing = self.find_claim(project, key) or ""
            except StoreUnavailable as error:
                return error
        return ClaimTaken(existing) if existing else StoreConflict("the claim vanished after a conflict")

    # ---- the forge's repository index ---------------------------------------------------------------------
    # One item per repository key in a partition no chain can have (chains are `P#...`): its `project` is the
    # owner. A conditional put claims it; a lost race answers the winner from the old image.

    def forge_claim(self, key: str, project: str) -> str:
        try:
            self._call(
                "PutItem",
                expected=("ConditionalCheckFailedException",),
                Item={PK: {"S": FORGE_INDEX_PK}, SK: {"S": key}, "project": {"S": project}},
                ConditionExpression="attribute_not_exists(#pk) OR #project = :project",
                ExpressionAttributeNames={"#pk": PK, "#project": "project"},
                ExpressionAttributeValues={":project": {"S": project}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            old = text_of(getattr(error, "response", {}).get("Item") or {}, "project")
            return old or self.forge_owner(key) or project
        return project

    def forge_owner(self, key: str) -> str | None:
        item = self._get(FORGE_INDEX_PK, key)
        return (text_of(item, "project") or None) if item else None

    # ---- candidate claims -------------------------------------------------------------------------------

    def find_claim(self, project: str, key: str) -> str | None:
        item = self._get(partition(StreamRef(project)), CLAIM_PREFIX + key)
        return text_of(item, "candidate_id") or None if item else None

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
            kwargs["ExclusiveStartKey"] = claim_start_key(cursor, pk)
        items = self._call("Query", **kwargs).get("Items", [])
        rows = [claim_row(i) for i in items[:limit]]
        next_cursor = claim_cursor(items[limit - 1]) if len(items) > limit else None
        return rows, next_cursor

    # ---- forge check records (sentinel_domain.forge_checks) ------------------------------------------
    # One partition, `FORGE#CHECKS`, apart from every chain (a chain's Query never reads a record): the
    # publisher's only write is there, so its IAM grant is conditioned on that leading key.

    def check_record(self, project: str, candidate_id: str) -> CheckRecord | None:
        item = self._get(CHECK_RECORDS_PK, check_record_sk(project, candidate_id))
        return CheckRecord.from_item(json.loads(text_of(item, "record"))) if item else None

    def put_check_record(self, record: CheckRecord) -> bool:
        item = {
            PK: {"S": CHECK_RECORDS_PK},
            SK: {"S": check_record_sk(record.project, record.candidate_id)},
            "version": {"N": str(record.version)},
            "record": {"S": json.dumps(record.as_item(), sort_keys=True, separators=(",", ":"))},
        }
        if record.due_at:
            item["due_at"] = {"S": record.due_at}  # sparse: a record with nothing due has none
        condition: dict[str, Any] = (
            {"ConditionExpression": "attribute_not_exists(#pk)", "ExpressionAttributeNames": {"#pk": PK}}
            if record.version == 1
            else {
                "ConditionExpression": "#version = :previous",
                "ExpressionAttributeNames": {"#version": "version"},
                "ExpressionAttributeValues": {":previous": {"N": str(record.version - 1)}},
            }
        )
        try:
            self._call("PutItem", expected=("ConditionalCheckFailedException",), Item=item, **condition)
        except ClientError:
            return False
        return True

    def check_records_due(
        self, before: str, limit: int, cursor: str | None
    ) -> tuple[list[CheckRecord], str | None]:
        """One Query of the records' partition, filtered on `due_at` (a filter still reads every record of
        the partition: fine for thousands of open checks; a sparse index on `due_at` is the next step)."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "#pk = :pk",
            "FilterExpression": "#due <= :before",
            "ExpressionAttributeNames": {"#pk": PK, "#due": "due_at"},
            "ExpressionAttributeValues": {":pk": {"S": CHECK_RECORDS_PK}, ":before": {"S": before}},
            "ConsistentRead": True,
            "Limit": max(1, limit),
        }
        if cursor:
            kwargs["ExclusiveStartKey"] = {PK: {"S": CHECK_RECORDS_PK}, SK: {"S": cursor}}
        response = self._call("Query", **kwargs)
        records = [CheckRecord.from_item(json.loads(text_of(i, "record"))) for i in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        return records, (text_of(last, SK) if last else None)

    # ---- idempotency ------------------------------------------------------------------------------------

    def _idempotency_complete(self, record: IdempotencyRecord) -> dict[str, Any]:
        """Put the completed record, only over this caller's own in-progress claim."""
        return {
            "Put": {
                "TableName": self.table_name,
                "Item": idempotency_item(record, "completed"),
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
        return idempotency_record(ref, scope, key, item)

    def idempotency_begin(self, record: IdempotencyRecord) -> bool:
        """Claim the key when it is free or its in-progress lease has lapsed at record.claimed_at."""
        try:
            self._call(
                "PutItem",
                expected=("ConditionalCheckFailedException",),
                Item=idempotency_item(record, "in_progress"),
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
        """Outbox items not yet relayed: [{pk, sk, kind, item, synthetic}], oldest chain position first per
        chain."""
        items = self._scan(
            limit,
            FilterExpression="attribute_exists(#pending)",
            ExpressionAttributeNames={"#pending": "outbox_pending"},
        )
        return [
            outbox_row(i)
            for i in sorted(items, key=lambda i: (text_of(i, PK), number_of(i, "seq"), text_of(i, SK)))
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

    def project_heads(self) -> list[dict[str, Any]]:
        """Every project chain's head (the operator's project listing): [{project, seq, hash}], by project. A
        scan, filtered to project chains' heads: an operator's read, never a request's."""
        items = self._scan(
            FilterExpression="#sk = :head AND begins_with(#pk, :project) AND NOT contains(#pk, :candidate)",
            ExpressionAttributeNames={"#sk": SK, "#pk": PK},
            ExpressionAttributeValues={
                ":head": {"S": HEAD_SK},
                ":project": {"S": "P#"},
                ":candidate": {"S": "#C#"},
            },
        )
        rows = [chain_head_row(item) for item in items]
        return sorted(
            ({"project": r["project"], "seq": r["seq"], "hash": r["hash"]} for r in rows),
            key=lambda r: r["project"],
        )

    def chain_heads(self) -> list[dict[str, Any]]:
        """Every chain's head, for checkpoints: [{pk, project, candidate_id, seq, hash}]."""
        items = self._scan(
            FilterExpression="#sk = :head",
            ExpressionAttributeNames={"#sk": SK},
            ExpressionAttributeValues={":head": {"S": HEAD_SK}},
        )
        heads = [chain_head_row(item) for item in items]
        return sorted(heads, key=lambda h: h["pk"])


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", "Unknown"))
