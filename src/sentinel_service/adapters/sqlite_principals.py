"""Principals and their tokens on the embedded SQLite database: the same directory and admin as the DynamoDB
ones (`principals`), the same rules (`principal_rules`), on two tables of the same file as the state store:

  principals  id, kind, sponsor, roles (JSON: project -> [role]), revoked, compromised, created_at,
              revoked_at, token_hmac, token_expires_at, rotated_at
  tokens      hmac, principal_id, expires_at

Only the HMAC of a token is ever stored. Every write is one `BEGIN IMMEDIATE` transaction that re-checks its
conditions (the id still free, the sponsor still a live human, the token being replaced still the current
one), as the DynamoDB admin's conditional transactions do. A database that cannot answer is
DirectoryUnavailable: the authorizer refuses."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.times import format_time
from sentinel_service.adapters.principal_rules import (
    DirectoryUnavailable,
    changed_meanwhile,
    check_addition,
    check_rotation,
    check_sponsor,
    expiry,
    live_principal,
    not_found,
    principal_exists,
    public_view,
    revocation,
    sponsor_checkable,
    sponsor_holds,
    sponsor_invalid,
    token_expired,
)
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.tokens import new_token, token_hmac, well_formed

_COLUMNS = (
    "id",
    "kind",
    "sponsor",
    "roles",
    "revoked",
    "compromised",
    "created_at",
    "revoked_at",
    "token_hmac",
    "token_expires_at",
)
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM principals"


@contextmanager
def _directory_errors() -> Iterator[None]:
    try:
        yield
    except StoreUnavailable as error:
        raise DirectoryUnavailable(f"principals unavailable: {error}") from error


def _plain(row: Sequence[Any]) -> dict[str, Any]:
    """A principal row as plain values; a row that cannot be read is DirectoryUnavailable, never a guess."""
    plain = dict(zip(_COLUMNS, row, strict=True))
    try:
        roles = json.loads(plain["roles"])
    except (TypeError, ValueError) as error:
        raise DirectoryUnavailable("a principal row is malformed") from error
    if not isinstance(roles, dict):
        raise DirectoryUnavailable("a principal row is malformed")
    return {
        **plain,
        "roles": roles,
        "revoked": bool(plain["revoked"]),
        "compromised": bool(plain["compromised"]),
    }


def _no_extra_items(extra_items: Sequence[dict[str, Any]]) -> None:
    """DynamoDB transaction items have no meaning here: the chain events join a change through
    `SqliteDatabase.atomic()` instead (see `principal_changes`)."""
    if extra_items:
        raise ValueError("the SQLite admin takes no DynamoDB transaction items")


class SqlitePrincipalDirectory:
    """Read side, used by the authorizer."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    def authenticate(self, token: str, key: bytes, now: datetime) -> dict[str, Any] | None:
        """The principal a token stands for, or None if it stands for nobody now.

        Raises DirectoryUnavailable when the database cannot answer; the caller refuses in that case too.
        """
        if not well_formed(token):
            return None  # no store read for garbage
        hashed = token_hmac(key, token)
        with _directory_errors(), self._db.read() as connection:
            token_row = connection.execute(
                "SELECT principal_id, expires_at FROM tokens WHERE hmac = ?", (hashed,)
            ).fetchone()
            if token_row is None or token_expired(token_row[1], now):
                return None
            row = connection.execute(f"{_SELECT} WHERE id = ?", (token_row[0],)).fetchone()
            sponsor_row = None
            if row is not None and row[2]:
                # In the same read transaction: the sponsor as of the principal's own read.
                sponsor_row = connection.execute(f"{_SELECT} WHERE id = ?", (row[2],)).fetchone()
        if row is None:
            return None
        plain = _plain(row)
        live = live_principal(public_view(plain), plain["token_hmac"] or "", hashed)
        if live is None or not live["sponsor"]:
            return live
        sponsor = None if sponsor_row is None else public_view(_plain(sponsor_row))
        return live if sponsor_holds(sponsor) else None


class SqlitePrincipalAdmin:
    """Write side, for the operator's commands."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    @property
    def db(self) -> SqliteDatabase:
        """The database it writes: a change joins its chain events there (`principal_changes`)."""
        return self._db

    # -- reads -----------------------------------------------------------------------------------

    def _get_item(self, principal_id: str) -> dict[str, Any] | None:
        with _directory_errors(), self._db.read() as connection:
            row = connection.execute(f"{_SELECT} WHERE id = ?", (principal_id,)).fetchone()
        return None if row is None else _plain(row)

    def get(self, principal_id: str) -> dict[str, Any] | None:
        item = self._get_item(principal_id)
        return None if item is None else public_view(item)

    def principals(self) -> list[dict[str, Any]]:
        with _directory_errors(), self._db.read() as connection:
            rows = connection.execute(_SELECT).fetchall()
        return sorted((public_view(_plain(row)) for row in rows), key=lambda principal: principal["id"])

    # -- writes ----------------------------------------------------------------------------------

    def add(
        self,
        principal_id: str,
        kind: str,
        sponsor: str | None,
        roles: Mapping[str, Sequence[str]],
        ttl_seconds: int | None,
        key: bytes,
        now: datetime,
        *,
        extra_items: Sequence[dict[str, Any]] = (),
    ) -> str:
        """Create a principal and return its first token (the only time it exists in clear)."""
        _no_extra_items(extra_items)
        clean_roles, ttl = check_addition(principal_id, kind, sponsor, roles, ttl_seconds)
        if sponsor is not None:
            self._check_sponsor(sponsor)
        if self._get_item(principal_id) is not None:
            raise principal_exists(principal_id)
        token = new_token()
        hashed = token_hmac(key, token)
        expires_at = expiry(now, ttl)
        with _directory_errors(), self._db.write() as connection:
            # Checked again inside the transaction, in the DynamoDB admin's order: the id, the token, the
            # sponsor (a sponsor revoked meanwhile must not slip through).
            if connection.execute("SELECT 1 FROM principals WHERE id = ?", (principal_id,)).fetchone():
                raise principal_exists(principal_id)
            if connection.execute("SELECT 1 FROM tokens WHERE hmac = ?", (hashed,)).fetchone():
                raise changed_meanwhile()
            if sponsor is not None:
                held = connection.execute(
                    "SELECT kind, revoked FROM principals WHERE id = ?", (sponsor,)
                ).fetchone()
                if held is None or held[0] != "human" or held[1]:
                    raise sponsor_invalid(sponsor)
            connection.execute(
                f"INSERT INTO principals ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                (
                    principal_id,
                    kind,
                    sponsor,
                    json.dumps(clean_roles, sort_keys=True),
                    0,
                    0,
                    format_time(now),
                    None,
                    hashed,
                    expires_at,
                ),
            )
            connection.execute(
                "INSERT INTO tokens (hmac, principal_id, expires_at) VALUES (?, ?, ?)",
                (hashed, principal_id, expires_at),
            )
        return token

    def rotate(
        self,
        principal_id: str,
        ttl_seconds: int | None,
        key: bytes,
        now: datetime,
        *,
        extra_items: Sequence[dict[str, Any]] = (),
    ) -> str:
        """Issue a new token and void the old one, in one transaction."""
        _no_extra_items(extra_items)
        item = self._existing(principal_id)
        view = public_view(item)
        ttl = check_rotation(principal_id, view, ttl_seconds)
        if view["sponsor"]:
            # A token for a principal whose sponsor no longer stands would be refused at every use.
            self._check_sponsor(view["sponsor"])
        old = item["token_hmac"]
        token = new_token()
        hashed = token_hmac(key, token)
        expires_at = expiry(now, ttl)
        with _directory_errors(), self._db.write() as connection:
            # Optimistic: two rotations racing must not both win and leave two live tokens.
            held = connection.execute(
                "SELECT revoked, token_hmac FROM principals WHERE id = ?", (principal_id,)
            ).fetchone()
            if held is None or held[0] or held[1] != old:
                raise changed_meanwhile(principal_id)
            if connection.execute("SELECT 1 FROM tokens WHERE hmac = ?", (hashed,)).fetchone():
                raise changed_meanwhile(principal_id)
            connection.execute(
                "UPDATE principals SET token_hmac = ?, token_expires_at = ?, rotated_at = ? WHERE id = ?",
                (hashed, expires_at, format_time(now), principal_id),
            )
            connection.execute(
                "INSERT INTO tokens (hmac, principal_id, expires_at) VALUES (?, ?, ?)",
                (hashed, principal_id, expires_at),
            )
            if old:
                connection.execute("DELETE FROM tokens WHERE hmac = ?", (old,))
        return token

    def revoke(
        self,
        principal_id: str,
        compromised: bool,
        now: datetime,
        *,
        extra_items: Sequence[dict[str, Any]] = (),
    ) -> dict[str, Any]:
        """Revoke for good (ids are never reused). Revoking again may only add `compromised`."""
        _no_extra_items(extra_items)
        item = self._existing(principal_id)
        view = public_view(item)
        old = item["token_hmac"]
        compromised, revoked_at = revocation(view, compromised, now)
        with _directory_errors(), self._db.write() as connection:
            held = connection.execute(
                "SELECT token_hmac FROM principals WHERE id = ?", (principal_id,)
            ).fetchone()
            if held is None or held[0] != old:
                raise changed_meanwhile(principal_id)
            connection.execute(
                "UPDATE principals SET revoked = 1, compromised = ?, revoked_at = ?, token_hmac = NULL "
                "WHERE id = ?",
                (int(compromised), revoked_at, principal_id),
            )
            if old:
                connection.execute("DELETE FROM tokens WHERE hmac = ?", (old,))
        return {**view, "revoked": True, "compromised": compromised, "revoked_at": revoked_at}

    # -- internals -------------------------------------------------------------------------------

    def _existing(self, principal_id: str) -> dict[str, Any]:
        item = self._get_item(principal_id) if isinstance(principal_id, str) else None
        if item is None:
            raise not_found(principal_id)
        return item

    def _check_sponsor(self, sponsor: str) -> None:
        item = self._get_item(sponsor) if sponsor_checkable(sponsor) else None
        check_sponsor(sponsor, None if item is None else public_view(item))
