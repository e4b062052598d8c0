"""The StateStore port on the embedded SQLite database (`sqlite_database.SqliteDatabase`), for one machine.

The DynamoDB store is the contract, and this one keeps it: the same conditions on every write, checked inside
one `BEGIN IMMEDIATE` transaction (so nothing can change between a check and the write it guards); the same
refusals (StoreConflict for a lost race, ClaimTaken with the winner's id, ValueError for an append no
DynamoDB transaction could hold); the same keys (`P#…` chains, `O#…` outbox items, the same claim cursors) and
the same paging, so a chain read over the page budget is incomplete here exactly as in AWS.

Tables (schema in sqlite_database.py): `chain_heads` (one row a chain), `events` and `facts` (one row a
seq each: the event's JSON, and the fact's canonical text as given), `outbox`, `claims`, `idempotency`.
Every sqlite3 failure is StoreUnavailable."""

import hashlib
import json
import sqlite3
from typing import Any

from sentinel_domain.errors import StoreConflict
from sentinel_domain.forge_checks import CheckRecord
from sentinel_domain.ports import Append, ClaimTaken, IdempotencyRecord, Stream, StreamRef
from sentinel_domain.usecases.chain import SYNTHETIC
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.state_layout import (
    OUTBOX_PREFIX,
    Pager,
    check_append,
    check_record_sk,
    check_transaction,
    claim_fields,
    decode_claim_cursor,
    encode_claim_cursor,
    idempotency_sk,
    outbox_sk,
    pack_body,
    partition,
    split_fact,
    unpack_body,
)

# A chain's events with their facts, and any fact left without its event, in seq order.
_CHAIN_ROWS = """
    SELECT seq, event, fact FROM (
        SELECT e.seq AS seq, e.event AS event, f.fact AS fact
        FROM events AS e LEFT JOIN facts AS f ON f.chain = e.chain AND f.seq = e.seq
        WHERE e.chain = :chain
        UNION ALL
        SELECT f.seq, NULL, f.fact FROM facts AS f
        WHERE f.chain = :chain
          AND NOT EXISTS (SELECT 1 FROM events AS e WHERE e.chain = f.chain AND e.seq = f.seq)
    ) ORDER BY seq
"""
FORGE_INDEX = "~forge"  # the claims "project" the forge's repository index lives under
# A claim's columns, and the names a listing shows them under.
_CLAIM_FIELDS = ("candidate_id", "subject", "revision", "environment", "recorded_at")
_CLAIM_ROW = ("candidate_id", "subject", "revision", "environment", "created_at")
_IDEMPOTENCY_COLUMNS = (
    "chain, record_key, scope, key_sha256, caller, request_hash, status, claimed_at, lease_until, "
    "response_body, response_body_zlib"
)


def _json_text(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _object(text: str | None, fallback: dict[str, Any]) -> dict[str, Any]:
    """A stored JSON object; anything else (edited behind the store's back) reads as `fallback`, so that a
    tampered row reaches verification instead of crashing the read."""
    try:
        value = json.loads(text) if text is not None else None
    except ValueError:
        return fallback
    return value if isinstance(value, dict) else fallback


def _item_sizes(event: str | None, fact: str | None) -> list[int]:
    """What one event and its fact weigh as DynamoDB items: the event with the fact's first part, then one
    item per further part (a fact left without its event: its parts alone)."""
    parts = [len(part.encode("utf-8")) for part in split_fact(fact or "")]
    if event is not None:
        parts[0] += len(event.encode("utf-8"))
    return parts


class SqliteStateStore:
    """StateStore on one SQLite database; `page_budget` and `page_size` as DynamoStateStore's."""

    def __init__(self, db: SqliteDatabase, page_budget: int = 50, page_size: int | None = None) -> None:
        if page_budget < 1:
            raise ValueError("page_budget must be at least 1")
        if page_size is not None and page_size < 1:
            raise ValueError("page_size must be at least 1")
        self.db = db
        self.page_budget = page_budget
        self.page_size = page_size

    def deferring(self) -> bool:
        """True inside the database's `atomic()` block: an append made now commits only when it ends."""
        return self.db.joined()

    # ---- chains -----------------------------------------------------------------------------------------

    def load(self, ref: StreamRef) -> Stream | None:
        """One read transaction over the chain, counted in pages as DynamoDB would page it."""
        chain = partition(ref)
        pager = Pager(self.page_budget, self.page_size)
        events: list[dict[str, Any]] = []
        facts: dict[int, str] = {}
        head: dict[str, Any] | None = None
        complete = True
        with self.db.read() as connection:
            for seq, event, fact in connection.execute(_CHAIN_ROWS, {"chain": chain}):
                if not all(pager.take(size) for size in _item_sizes(event, fact)):
                    complete = False  # the budget ends inside or before this event: it stays unread
                    break
                if event is not None:
                    events.append(_object(event, {"seq": seq}))
                if fact is not None:
                    facts[seq] = fact
            row = connection.execute("SELECT seq, head FROM chain_heads WHERE chain = ?", (chain,)).fetchone()
        if complete and row is not None:
            if pager.take(len(row[1].encode("utf-8"))):
                head = _object(row[1], {"seq": row[0]})
            else:
                complete = False  # the head is the last item: a read cut before it never holds it
        if not events and not facts and head is None:
            return None if complete else Stream(ref, [], {}, None, complete=False, pages=pager.pages)
        return Stream(ref, events, facts, head, complete=complete, pages=pager.pages)

    def load_head(self, ref: StreamRef) -> dict[str, Any] | None:
        """The chain's HEAD alone, as `load` would return it in `Stream.head` (None: no chain)."""
        with self.db.read() as connection:
            row = connection.execute(
                "SELECT seq, head FROM chain_heads WHERE chain = ?", (partition(ref),)
            ).fetchone()
        return None if row is None else _object(row[1], {"seq": row[0]})

    def append(self, a: Append) -> None:
        """One write transaction: every condition checked, then head, event, fact, outbox, idempotency
        completion and claim written together, or nothing."""
        seq = check_append(a)
        chain = partition(a.ref)
        outbox = [(outbox_sk(seq, index, entry), entry) for index, entry in enumerate(a.outbox)]
        if len({sk for sk, _entry in outbox}) != len(outbox):
            raise ValueError("the append writes one item twice (a repeated outbox id?)")
        event_text, head_text = _json_text(a.event), _json_text(a.head)
        outbox_texts = [json.dumps(entry, sort_keys=True, separators=(",", ":")) for _sk, entry in outbox]
        body: tuple[str | None, bytes | None] = (None, None)
        if a.idempotency is not None and a.idempotency.response_body is not None:
            body = pack_body(a.idempotency.response_body)
        parts = len(split_fact(a.fact_text))
        items = 1 + parts + len(outbox) + (a.idempotency is not None) + (a.claim is not None)
        items += a.require_project_seq is not None
        size = sum(len(text.encode("utf-8")) for text in (event_text, head_text, a.fact_text, *outbox_texts))
        check_transaction(items, size + len(body[0] or "") + len(body[1] or b""))
        claim = (a.claim[0], *(claim_fields(a)[name] for name in _CLAIM_FIELDS)) if a.claim else None
        with self.db.write() as connection:
            self._check_conditions(connection, a, chain, seq, [sk for sk, _entry in outbox])
            if a.expected_seq == 0:
                connection.execute(
                    "INSERT INTO chain_heads (chain, project, candidate_id, seq, head) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (chain, a.ref.project, a.ref.candidate_id, seq, head_text),
                )
            else:
                connection.execute(
                    "UPDATE chain_heads SET seq = ?, head = ? WHERE chain = ?", (seq, head_text, chain)
                )
            connection.execute(
                "INSERT INTO events (chain, seq, event) VALUES (?, ?, ?)", (chain, seq, event_text)
            )
            connection.execute(
                "INSERT INTO facts (chain, seq, fact) VALUES (?, ?, ?)", (chain, seq, a.fact_text)
            )
            at = str(a.event.get("at", ""))
            connection.executemany(
                "INSERT INTO outbox (chain, sk, seq, kind, item, recorded_at, pending, synthetic) "
                "VALUES (?, ?, ?, ?, ?, ?, 1, ?)",
                [
                    (chain, sk, seq, str(entry.get("kind", "")), text, at, int(entry.get(SYNTHETIC) is True))
                    for (sk, entry), text in zip(outbox, outbox_texts, strict=True)
                ],
            )
            if a.idempotency is not None:
                self._put_idempotency(connection, a.idempotency, "completed", body)
            if claim is not None:
                connection.execute(
                    "INSERT INTO claims (project, claim_key, candidate_id, subject, revision, environment, "
                    "recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (a.ref.project, *claim),
                )

    def _check_conditions(
        self, connection: sqlite3.Connection, a: Append, chain: str, seq: int, outbox: list[str]
    ) -> None:
        """Inside the write transaction: ClaimTaken when the claim is held (whatever else failed, as DynamoDB
        reports it), else StoreConflict naming every condition that failed."""
        if a.claim is not None:
            held = connection.execute(
                "SELECT candidate_id FROM claims WHERE project = ? AND claim_key = ?",
                (a.ref.project, a.claim[0]),
            ).fetchone()
            if held is not None:
                raise ClaimTaken(held[0])
        row = connection.execute("SELECT seq, head FROM chain_heads WHERE chain = ?", (chain,)).fetchone()
        head = _object(row[1], {}) if row is not None else None
        failed = []
        if (row[0] if row is not None else 0) != a.expected_seq:  # a head's seq is at least 1
            failed.append("head seq")
        if a.require_plan_digest is not None and (head or {}).get("plan_digest") != a.require_plan_digest:
            failed.append("plan digest")
        if a.require_approval_after is not None:
            until = (head or {}).get("approval_valid_until")
            if not (isinstance(until, str) and until > a.require_approval_after):  # fixed-width UTC text
                failed.append("approval expiry")
        if a.require_project_seq is not None:
            project = connection.execute(
                "SELECT seq FROM chain_heads WHERE chain = ?", (partition(StreamRef(a.ref.project)),)
            ).fetchone()
            if project is None or project[0] != a.require_project_seq:
                failed.append("project seq")
        if a.idempotency is not None and not self._holds_claim(connection, a.idempotency):
            failed.append("idempotency claim")
        if connection.execute(
            "SELECT 1 FROM events WHERE chain = :c AND seq = :s UNION ALL "
            "SELECT 1 FROM facts WHERE chain = :c AND seq = :s",
            {"c": chain, "s": seq},
        ).fetchone():
            failed.append("event exists")
        placeholders = ", ".join("?" * len(outbox))
        if (
            outbox
            and connection.execute(
                f"SELECT 1 FROM outbox WHERE chain = ? AND sk IN ({placeholders})", (chain, *outbox)
            ).fetchone()
        ):
            failed.append("outbox item exists")
        if failed:
            raise StoreConflict(f"append to {chain} at seq {seq} lost a race: {failed}")

    # ---- the forge's repository index ---------------------------------------------------------------------
    # Rows of the claims table under FORGE_INDEX, a name no project can have (project ids start with a letter
    # or a digit): the claim key is the repository's, `candidate_id` the owning project. No schema change.

    def forge_claim(self, key: str, project: str) -> str:
        with self.db.write() as connection:
            connection.execute(
                "INSERT OR IGNORE INTO claims (project, claim_key, candidate_id, subject, revision, "
                "environment, recorded_at) VALUES (?, ?, ?, '', '', '', '')",
                (FORGE_INDEX, key, project),
            )
            row = connection.execute(
                "SELECT candidate_id FROM claims WHERE project = ? AND claim_key = ?", (FORGE_INDEX, key)
            ).fetchone()
        return str(row[0])

    def forge_owner(self, key: str) -> str | None:
        return self.find_claim(FORGE_INDEX, key)

    # ---- candidate claims -------------------------------------------------------------------------------

    def find_claim(self, project: str, key: str) -> str | None:
        with self.db.read() as connection:
            row = connection.execute(
                "SELECT candidate_id FROM claims WHERE project = ? AND claim_key = ?", (project, key)
            ).fetchone()
        return (str(row[0]) or None) if row is not None else None

    def list_claims(
        self, project: str, limit: int, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        pk = partition(StreamRef(project))
        limit = max(1, limit)
        after = decode_claim_cursor(cursor, pk) if cursor else None
        with self.db.read() as connection:
            rows = connection.execute(
                f"SELECT claim_key, {', '.join(_CLAIM_FIELDS)} FROM claims "
                "WHERE project = ? AND (? IS NULL OR claim_key > ?) ORDER BY claim_key LIMIT ?",
                (project, after, after, limit + 1),  # one more than asked: is anything left?
            ).fetchall()
        claims = [dict(zip(_CLAIM_ROW, row[1:], strict=True)) for row in rows[:limit]]
        return claims, (encode_claim_cursor(pk, rows[limit - 1][0]) if len(rows) > limit else None)

    # ---- forge check records (sentinel_domain.forge_checks) ------------------------------------------

    def check_record(self, project: str, candidate_id: str) -> CheckRecord | None:
        with self.db.read() as connection:
            row = connection.execute(
                "SELECT record FROM forge_checks WHERE record_key = ?",
                (check_record_sk(project, candidate_id),),
            ).fetchone()
        return CheckRecord.from_item(json.loads(row[0])) if row is not None else None

    def put_check_record(self, record: CheckRecord) -> bool:
        key = check_record_sk(record.project, record.candidate_id)
        with self.db.write() as connection:
            row = connection.execute(
                "SELECT version FROM forge_checks WHERE record_key = ?", (key,)
            ).fetchone()
            if (int(row[0]) if row is not None else 0) != record.version - 1:
                return False
            connection.execute(
                "INSERT OR REPLACE INTO forge_checks (record_key, version, due_at, record) "
                "VALUES (?, ?, ?, ?)",
                (key, record.version, record.due_at, json.dumps(record.as_item(), sort_keys=True)),
            )
        return True

    def check_records_due(
        self, before: str, limit: int, cursor: str | None
    ) -> tuple[list[CheckRecord], str | None]:
        limit = max(1, limit)
        with self.db.read() as connection:
            rows = connection.execute(
                "SELECT record_key, record FROM forge_checks WHERE due_at != '' AND due_at <= ? "
                "AND (? IS NULL OR record_key > ?) ORDER BY record_key LIMIT ?",
                (before, cursor, cursor, limit + 1),
            ).fetchall()
        records = [CheckRecord.from_item(json.loads(row[1])) for row in rows[:limit]]
        return records, (str(rows[limit - 1][0]) if len(rows) > limit else None)

    # ---- idempotency ------------------------------------------------------------------------------------

    @staticmethod
    def _holds_claim(connection: sqlite3.Connection, record: IdempotencyRecord) -> bool:
        """This caller's own in-progress claim is the one held (its completion may replace it)."""
        row = connection.execute(
            "SELECT status, caller, claimed_at FROM idempotency WHERE chain = ? AND record_key = ?",
            (partition(record.ref), idempotency_sk(record.scope, record.key)),
        ).fetchone()
        return row is not None and tuple(row) == ("in_progress", record.caller, record.claimed_at)

    @staticmethod
    def _put_idempotency(
        connection: sqlite3.Connection,
        record: IdempotencyRecord,
        status: str,
        body: tuple[str | None, bytes | None],
    ) -> None:
        connection.execute(
            f"INSERT OR REPLACE INTO idempotency ({_IDEMPOTENCY_COLUMNS}) VALUES ({', '.join('?' * 11)})",
            (
                partition(record.ref),
                idempotency_sk(record.scope, record.key),
                record.scope,
                hashlib.sha256(record.key.encode()).hexdigest(),  # never the key itself
                record.caller,
                record.request_hash,
                status,
                record.claimed_at,
                record.lease_until,
                *body,
            ),
        )

    def idempotency_get(self, ref: StreamRef, scope: str, key: str) -> IdempotencyRecord | None:
        with self.db.read() as connection:
            row = connection.execute(
                "SELECT caller, request_hash, status, claimed_at, lease_until, response_body, "
                "response_body_zlib FROM idempotency WHERE chain = ? AND record_key = ?",
                (partition(ref), idempotency_sk(scope, key)),
            ).fetchone()
        if row is None:
            return None
        caller, request_hash, status, claimed_at, lease_until, text, packed = row
        return IdempotencyRecord(
            ref=ref,
            scope=scope,
            key=key,
            caller=caller,
            request_hash=request_hash,
            status=status,
            response_body=unpack_body(text, packed),
            claimed_at=claimed_at,
            lease_until=lease_until,
        )

    def idempotency_begin(self, record: IdempotencyRecord) -> bool:
        """Claim the key when it is free or its in-progress lease has lapsed at record.claimed_at."""
        body = pack_body(record.response_body) if record.response_body is not None else (None, None)
        with self.db.write() as connection:
            held = connection.execute(
                "SELECT status, lease_until FROM idempotency WHERE chain = ? AND record_key = ?",
                (partition(record.ref), idempotency_sk(record.scope, record.key)),
            ).fetchone()
            if held is not None and not (held[0] == "in_progress" and held[1] <= record.claimed_at):
                return False
            self._put_idempotency(connection, record, "in_progress", body)
        return True

    def idempotency_release(self, record: IdempotencyRecord) -> None:
        """Drop this caller's own in-progress claim; a completed record or another's claim stays."""
        with self.db.write() as connection:
            connection.execute(
                "DELETE FROM idempotency WHERE chain = ? AND record_key = ? AND status = 'in_progress' "
                "AND caller = ? AND claimed_at = ?",
                (
                    partition(record.ref),
                    idempotency_sk(record.scope, record.key),
                    record.caller,
                    record.claimed_at,
                ),
            )

    # ---- relay helpers (the local runner's relay) ---------------------------------------------------------

    def pending_outbox(self, limit: int = 100) -> list[dict[str, Any]]:
        """Outbox items not yet relayed: [{pk, sk, kind, item, synthetic}], oldest chain position first per
        chain."""
        with self.db.read() as connection:
            rows = connection.execute(
                "SELECT chain, sk, kind, item, synthetic FROM outbox WHERE pending = 1 "
                "ORDER BY chain, seq, sk LIMIT ?",
                (limit,),
            ).fetchall()
        return [
            {"pk": pk, "sk": sk, "kind": kind, "item": _object(item, {}), "synthetic": bool(synthetic)}
            for pk, sk, kind, item, synthetic in rows
        ]

    def mark_relayed(self, pk: str, sk: str) -> bool:
        """Clear the pending flag; False when no such outbox item exists (nothing is created)."""
        if not sk.startswith(OUTBOX_PREFIX):
            return False
        with self.db.write() as connection:
            changed = connection.execute(
                "UPDATE outbox SET pending = 0 WHERE chain = ? AND sk = ?", (pk, sk)
            ).rowcount
        return changed > 0

    def project_heads(self) -> list[dict[str, Any]]:
        """Every project chain's head (the operator's project listing): [{project, seq, hash}], by project."""
        return [
            {"project": h["project"], "seq": h["seq"], "hash": h["hash"]}
            for h in self.chain_heads()
            if h["candidate_id"] is None and h["pk"] == partition(StreamRef(h["project"]))
        ]

    def chain_heads(self) -> list[dict[str, Any]]:
        """Every chain's head, for checkpoints: [{pk, project, candidate_id, seq, hash}]."""
        with self.db.read() as connection:
            rows = connection.execute(
                "SELECT chain, project, candidate_id, seq, head FROM chain_heads"
            ).fetchall()
        heads = []
        for chain, project, candidate_id, seq, head in rows:
            hash_ = _object(head, {}).get("hash")
            heads.append(
                {
                    "pk": chain,
                    "project": project,
                    "candidate_id": candidate_id or None,
                    "seq": seq,
                    "hash": hash_ if isinstance(hash_, str) and hash_ else None,
                }
            )
        return sorted(heads, key=lambda h: h["pk"])
