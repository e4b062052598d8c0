"""The principal directories under one contract: a kit per store (the directory, the admin, and what a test
needs to look at or break underneath them), for tests/integration/test_principals_contract.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Protocol

import pytest
from botocore.exceptions import ClientError

from sentinel_service.adapters.principals import PrincipalAdmin, PrincipalDirectory
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.sqlite_principals import SqlitePrincipalAdmin, SqlitePrincipalDirectory
from sentinel_service.adapters.tables import principals_table_definition

TABLE = "sentinel-principals"


class PrincipalKit(Protocol):
    kind: str
    directory: Any
    admin: Any

    def token_hashes(self) -> list[str]:
        """The HMACs of every stored token, sorted."""

    def put_token(self, hashed: str, principal_id: str, expires_at: str) -> None:
        """Write a token row/item behind the admin's back (a partial restore, a stray write)."""

    def stored_text(self) -> str:
        """Everything stored about principals and tokens, as text."""

    def delete_principal(self, principal_id: str) -> None:
        """Remove a principal's entry behind the admin's back (a partial restore)."""

    def unreadable(self) -> tuple[Any, Any]:
        """A directory and an admin over a store that cannot be read."""

    def fail_writes(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """From now on every write fails in the store (not on a condition)."""

    def close(self) -> None: ...


class DynamoPrincipals:
    kind = "dynamodb"

    def __init__(self, client: Any) -> None:
        self.client = client
        client.create_table(**principals_table_definition(TABLE))
        self.directory = PrincipalDirectory(client, TABLE)
        self.admin = PrincipalAdmin(client, TABLE)

    def _items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.client.scan(TableName=TABLE, ConsistentRead=True)["Items"]
        return items

    def token_hashes(self) -> list[str]:
        return sorted(i["pk"]["S"][6:] for i in self._items() if i["pk"]["S"].startswith("TOKEN#"))

    def put_token(self, hashed: str, principal_id: str, expires_at: str) -> None:
        self.client.put_item(
            TableName=TABLE,
            Item={
                "pk": {"S": "TOKEN#" + hashed},
                "principal_id": {"S": principal_id},
                "expires_at": {"S": expires_at},
            },
        )

    def stored_text(self) -> str:
        return json.dumps(self._items())

    def delete_principal(self, principal_id: str) -> None:
        self.client.delete_item(TableName=TABLE, Key={"pk": {"S": "PRINCIPAL#" + principal_id}})

    def unreadable(self) -> tuple[Any, Any]:
        return PrincipalDirectory(self.client, "missing-table"), PrincipalAdmin(self.client, "missing-table")

    def fail_writes(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def throttled(**_: Any) -> Any:
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException"}}, "TransactWriteItems"
            )

        monkeypatch.setattr(self.client, "transact_write_items", throttled)

    def close(self) -> None:
        self.client.delete_table(TableName=TABLE)


class SqlitePrincipals:
    kind = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = SqliteDatabase(path, busy_timeout=0.1)
        self.directory = SqlitePrincipalDirectory(self.db)
        # The contract's tests use one token key, bytes(range(32)): the revoked row is tagged under it.
        self.admin = SqlitePrincipalAdmin(self.db, token_key=lambda: bytes(range(32)))
        self._holder: sqlite3.Connection | None = None

    def _raw(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, isolation_level=None)

    def token_hashes(self) -> list[str]:
        raw = self._raw()
        try:
            return sorted(row[0] for row in raw.execute("SELECT hmac FROM tokens"))
        finally:
            raw.close()

    def put_token(self, hashed: str, principal_id: str, expires_at: str) -> None:
        raw = self._raw()
        try:
            raw.execute(
                "INSERT INTO tokens (hmac, principal_id, expires_at) VALUES (?, ?, ?)",
                (hashed, principal_id, expires_at),
            )
        finally:
            raw.close()

    def stored_text(self) -> str:
        raw = self._raw()
        try:
            rows = [*raw.execute("SELECT * FROM principals"), *raw.execute("SELECT * FROM tokens")]
            files = [self.path, self.path.with_name(self.path.name + "-wal")]  # every byte on disk too
            return json.dumps(rows) + "".join(f.read_bytes().decode("latin-1") for f in files if f.exists())
        finally:
            raw.close()

    def delete_principal(self, principal_id: str) -> None:
        raw = self._raw()
        try:
            raw.execute("DELETE FROM principals WHERE id = ?", (principal_id,))
        finally:
            raw.close()

    def unreadable(self) -> tuple[Any, Any]:
        closed = SqliteDatabase(self.path.with_name("closed.db"))
        closed.close()
        return SqlitePrincipalDirectory(closed), SqlitePrincipalAdmin(closed)

    def fail_writes(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # Another connection holds the write lock for longer than the busy timeout.
        self._holder = self._raw()
        self._holder.execute("BEGIN IMMEDIATE")

    def close(self) -> None:
        if self._holder is not None:
            self._holder.execute("ROLLBACK")
            self._holder.close()
        self.db.close()
