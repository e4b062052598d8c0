"""The state stores under one contract: a kit per store (the store, another view of the same data with its own
page budget, and a raw dump of everything stored) and the builders of real appends the contract suite writes
(tests/integration/test_state_store_*.py, fixtures `kit` and `store` in tests/integration/conftest.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Protocol

from sentinel_domain.audit import next_event
from sentinel_domain.canonical import canonical_text
from sentinel_domain.ports import Append, IdempotencyRecord, StreamRef
from sentinel_service.adapters.dynamodb_store import DynamoStateStore
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore
from sentinel_service.adapters.tables import ensure_tables
from support.moto_world import scan

STATE = "sentinel-state"
PRINCIPALS = "sentinel-principals"
PROJECT = "demo"
T0 = "2026-11-29T12:00:00.000000Z"
T1 = "2026-11-29T12:05:00.000000Z"
T2 = "2026-11-29T12:10:00.000000Z"
CAND = StreamRef(PROJECT, "cand_00000001")
STORES = ("sqlite", "dynamodb")


class StoreKit(Protocol):
    kind: str
    store: Any

    def make(self, page_budget: int = 50, page_size: int | None = None) -> Any:
        """Another store over the same data."""

    def dump(self) -> list[Any]:
        """Everything stored, raw, in a stable order: equal dumps mean nothing was written."""

    def close(self) -> None: ...


class DynamoKit:
    kind = "dynamodb"

    def __init__(self, client: Any) -> None:
        self.client = client
        ensure_tables(client, STATE, PRINCIPALS)
        self.store = DynamoStateStore(client, STATE)

    def make(self, page_budget: int = 50, page_size: int | None = None) -> DynamoStateStore:
        return DynamoStateStore(self.client, STATE, page_budget=page_budget, page_size=page_size)

    def dump(self) -> list[Any]:
        return scan(self.client, STATE)

    def close(self) -> None:
        for name in (STATE, PRINCIPALS):
            self.client.delete_table(TableName=name)


class SqliteKit:
    kind = "sqlite"

    def __init__(self, path: Path, busy_timeout: float = 5.0) -> None:
        self.path = path
        self.db = SqliteDatabase(path, busy_timeout=busy_timeout)
        self.store = SqliteStateStore(self.db)

    def make(self, page_budget: int = 50, page_size: int | None = None) -> SqliteStateStore:
        return SqliteStateStore(self.db, page_budget=page_budget, page_size=page_size)

    def dump(self) -> list[Any]:
        return dump_sqlite(self.path)

    def close(self) -> None:
        self.db.close()


def dump_sqlite(path: Path) -> list[Any]:
    """Every row of every table and the schema version, read through a connection of its own."""
    connection = sqlite3.connect(path)
    try:
        tables = [
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        rows: list[Any] = [("user_version", connection.execute("PRAGMA user_version").fetchone()[0])]
        for table in tables:
            rows.append((table, sorted(connection.execute(f"SELECT * FROM {table}").fetchall(), key=repr)))
        return rows
    finally:
        connection.close()


# ---- appends and records ----------------------------------------------------------------------------------


class Chain:
    """Builds real audit events for one chain, tracking seq and hash locally (no reads)."""

    def __init__(self, ref: StreamRef) -> None:
        self.ref = ref
        self.seq = 0
        self.hash: str | None = None

    def next(self, fact: dict[str, Any], *, head: dict[str, Any] | None = None, **extra: Any) -> Append:
        text = canonical_text(fact)
        event = next_event(
            self.ref.project,
            self.ref.candidate_id,
            self.seq,
            self.hash,
            fact["type"],
            "alice",
            fact["recorded_at"],
            text,
        )
        return Append(
            self.ref,
            self.seq,
            event,
            text,
            {"seq": event["seq"], "hash": event["hash"], **(head or {})},
            **extra,
        )

    def done(self, a: Append) -> Append:
        self.seq, self.hash = a.event["seq"], a.event["hash"]
        return a


def fact(n: int = 1, **more: Any) -> dict[str, Any]:
    return {"type": "evidence.recorded", "n": n, "recorded_at": T0, **more}


def created(candidate_id: str, subject: str = "payments") -> dict[str, Any]:
    return {
        "type": "candidate.created",
        "candidate_id": candidate_id,
        "subject": subject,
        "revision": "a" * 40,
        "environment": "staging",
        "recorded_at": T0,
    }


def write(store: Any, chain: Chain, f: dict[str, Any], **kwargs: Any) -> Append:
    a = chain.next(f, **kwargs)
    store.append(a)
    return chain.done(a)


def record(
    caller: str = "alice",
    claimed_at: str = T0,
    lease_until: str = T1,
    ref: StreamRef = CAND,
    key: str = "key-1",
) -> IdempotencyRecord:
    return IdempotencyRecord(
        ref,
        "/candidates/cand_00000001/evidence",
        key,
        caller,
        "req-hash",
        claimed_at=claimed_at,
        lease_until=lease_until,
    )


def completed(rec: IdempotencyRecord, body: dict[str, Any]) -> IdempotencyRecord:
    rec.status, rec.response_body = "completed", body
    return rec
