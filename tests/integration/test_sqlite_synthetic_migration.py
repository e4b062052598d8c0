"""Schema 3 of the SQLite store: the outbox row's `synthetic` flag. A file written by schema 2 is migrated in
place when opened; its pending rows read back as not synthetic (no project was synthetic then)."""

import contextlib
import sqlite3
from pathlib import Path

from sentinel_service.adapters.sqlite_database import MIGRATIONS, SCHEMA_VERSION, SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore


def test_a_schema_2_file_is_migrated_and_its_pending_items_read_as_not_synthetic(tmp_path: Path) -> None:
    # Given a file at schema 2 holding one pending outbox item
    path = tmp_path / "state.db"
    with contextlib.closing(sqlite3.connect(path)) as old:
        for migration in MIGRATIONS[:2]:
            for statement in migration:
                old.execute(statement)
        old.execute("PRAGMA user_version = 2")
        old.execute(
            "INSERT INTO chain_heads (chain, project, candidate_id, seq, head) "
            "VALUES ('P#demo', 'demo', NULL, 1, '{}')"
        )
        old.execute(
            "INSERT INTO outbox (chain, sk, seq, kind, item, recorded_at, pending) "
            "VALUES ('P#demo', 'O#1', 1, 'action', '{\"kind\": \"action\"}', 't', 1)"
        )
        old.commit()
    # When this code opens it
    db = SqliteDatabase(path)
    # Then it is at the current schema, and the old item is pending and not synthetic
    with db.read() as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 3
    assert SqliteStateStore(db).pending_outbox() == [
        {"pk": "P#demo", "sk": "O#1", "kind": "action", "item": {"kind": "action"}, "synthetic": False}
    ]
    db.close()
