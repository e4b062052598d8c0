"""Principals and their tokens on the embedded SQLite database: the same directory and admin as the DynamoDB
ones (`principals`), the same rules (`principal_rules`), on two tables of the same file as the state store:

  principals  id, kind, sponsor, roles (JSON: project -> [role]), revoked, compromised, created_at,
              revoked_at, token_hmac, token_expires_at, rotated_at, row_tag
  tokens      hmac, principal_id, expires_at, tag

Only the HMAC of a token is ever stored. Every write is one `BEGIN IMMEDIATE` transaction that re-checks its
conditions (the id still free, the sponsor still a live human, the token being replaced still the current
one), as the DynamoDB admin's conditional transactions do. A database that cannot answer is
DirectoryUnavailable: the authorizer refuses.

The file is shared with the chains, so whoever can write it could otherwise relabel a token (move its hash
onto another principal) or raise a row's kind or roles without any key. So each principal row carries
`row_tag` (`tokens.principal_row_tag`: id, kind, sponsor, roles, revoked, compromised, current token hash
and expiry) and each token row `tag` (`tokens.token_mapping_tag`: its hash, principal and expiry), both
HMAC-SHA256 under a key derived from the token key, written in the same transaction as every change. The
authorizer checks both on every read (and the sponsor's row's tag too): one that does not verify, or is
missing, makes the token stand for nobody, exactly as an unknown token. The admin refuses to rotate a row,
or to sponsor with one, whose tag does not verify, so that a change never re-tags a tampered row. Rows
written before schema 4 carry no tag: `tag_legacy_rows` (`sentinel principals tag-legacy`) tags them, once.
What a tag cannot catch: a row and its token put back as they were at an earlier change (a rollback to an
earlier tagged state, say to before a revocation) verifies, as its old tag is still genuine."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.times import format_time
from sentinel_service.adapters.principal_rules import (
    DirectoryUnavailable,
    PrincipalRefused,
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
from sentinel_service.adapters.tokens import (
    new_token,
    principal_row_tag,
    tag_holds,
    token_hmac,
    token_mapping_tag,
    well_formed,
)

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
    "row_tag",
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


def _row_holds(plain: Mapping[str, Any], key: bytes) -> bool:
    """The row's tag verifies under the token key: nothing the authorizer reads from it was changed outside a
    principal change."""
    return tag_holds(plain["row_tag"], principal_row_tag(key, plain))


def _mapping_holds(stored: object, hashed: str, principal_id: str, expires_at: str, key: bytes) -> bool:
    return tag_holds(stored, token_mapping_tag(key, hashed, principal_id, expires_at))


def row_untrusted(principal_id: str) -> DirectoryUnavailable:
    return DirectoryUnavailable(
        f"principal {principal_id}'s row carries no valid tag under the token key: written before schema 4 "
        "(run `sentinel principals tag-legacy` once) or changed outside Sentinel; revoke it and add a new one"
    )


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
                "SELECT principal_id, expires_at, tag FROM tokens WHERE hmac = ?", (hashed,)
            ).fetchone()
            if token_row is None or token_expired(token_row[1], now):
                return None
            if not _mapping_holds(token_row[2], hashed, token_row[0], token_row[1], key):
                return None  # a mapping moved, or written outside a change: an unknown token
            row = connection.execute(f"{_SELECT} WHERE id = ?", (token_row[0],)).fetchone()
            sponsor_row = None
            if row is not None and row[2]:
                # In the same read transaction: the sponsor as of the principal's own read.
                sponsor_row = connection.execute(f"{_SELECT} WHERE id = ?", (row[2],)).fetchone()
        if row is None:
            return None
        plain = _plain(row)
        if plain["id"] != token_row[0] or not _row_holds(plain, key):
            return None  # a row changed outside a change, or untagged: refused as an unknown token
        live = live_principal(public_view(plain), plain["token_hmac"] or "", hashed)
        if live is None or not live["sponsor"]:
            return live
        sponsor_plain = None if sponsor_row is None else _plain(sponsor_row)
        if sponsor_plain is None or not _row_holds(sponsor_plain, key):
            return None
        return live if sponsor_holds(public_view(sponsor_plain)) else None


class SqlitePrincipalAdmin:
    """Write side, for the operator's commands. `token_key` gives the token key to a change that is not
    handed one (a revocation), for the row's tag."""

    def __init__(self, db: SqliteDatabase, *, token_key: Callable[[], bytes] | None = None) -> None:
        self._db = db
        self._token_key = token_key

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
                held = connection.execute(f"{_SELECT} WHERE id = ?", (sponsor,)).fetchone()
                held_plain = None if held is None else _plain(held)
                if held_plain is None or held_plain["kind"] != "human" or held_plain["revoked"]:
                    raise sponsor_invalid(sponsor)
                if not _row_holds(held_plain, key):
                    raise row_untrusted(sponsor)
            row = {
                "id": principal_id,
                "kind": kind,
                "sponsor": sponsor,
                "roles": clean_roles,
                "revoked": False,
                "compromised": False,
                "token_hmac": hashed,
                "token_expires_at": expires_at,
            }
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
                    principal_row_tag(key, row),
                ),
            )
            connection.execute(
                "INSERT INTO tokens (hmac, principal_id, expires_at, tag) VALUES (?, ?, ?, ?)",
                (hashed, principal_id, expires_at, token_mapping_tag(key, hashed, principal_id, expires_at)),
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
            held = connection.execute(f"{_SELECT} WHERE id = ?", (principal_id,)).fetchone()
            held_plain = None if held is None else _plain(held)
            if held_plain is None or held_plain["revoked"] or held_plain["token_hmac"] != old:
                raise changed_meanwhile(principal_id)
            if not _row_holds(held_plain, key):
                raise row_untrusted(principal_id)  # never re-tag a row changed outside a change
            if connection.execute("SELECT 1 FROM tokens WHERE hmac = ?", (hashed,)).fetchone():
                raise changed_meanwhile(principal_id)
            tag = principal_row_tag(key, {**held_plain, "token_hmac": hashed, "token_expires_at": expires_at})
            connection.execute(
                "UPDATE principals SET token_hmac = ?, token_expires_at = ?, rotated_at = ?, row_tag = ? "
                "WHERE id = ?",
                (hashed, expires_at, format_time(now), tag, principal_id),
            )
            connection.execute(
                "INSERT INTO tokens (hmac, principal_id, expires_at, tag) VALUES (?, ?, ?, ?)",
                (hashed, principal_id, expires_at, token_mapping_tag(key, hashed, principal_id, expires_at)),
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
        if self._token_key is None:
            raise ValueError("the SQLite admin revokes only with the token key (to tag the revoked row)")
        key = self._token_key()
        with _directory_errors(), self._db.write() as connection:
            held = connection.execute(f"{_SELECT} WHERE id = ?", (principal_id,)).fetchone()
            if held is None or held[8] != old:
                raise changed_meanwhile(principal_id)
            # Revoking is always allowed, even on a row whose tag does not verify (a suspect principal must be
            # revocable); the revoked row is tagged as what it now is: it grants nothing.
            tag = principal_row_tag(
                key,
                {
                    **_plain(held),
                    "revoked": True,
                    "compromised": compromised,
                    "token_hmac": None,
                },
            )
            connection.execute(
                "UPDATE principals SET revoked = 1, compromised = ?, revoked_at = ?, token_hmac = NULL, "
                "row_tag = ? WHERE id = ?",
                (int(compromised), revoked_at, tag, principal_id),
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


def tag_legacy_rows(db: SqliteDatabase, key: bytes) -> dict[str, list[str]]:
    """Tag the principal rows and token mappings written before schema 4, once, in one transaction; returns
    the principals tagged and the token rows dropped.

    The operator vouches, by running it, for the rows as they stand: nothing can tell a row written before
    the upgrade from one changed meanwhile by whoever could write the file. So it runs only on a database
    where no row carries a tag yet (a database as the upgrade left it): once any row is tagged (by this or by
    any change since), an untagged row can only have been written outside Sentinel, and it stays refused.
    A token row is tagged only when it is its principal's current token, with the same expiry; any other
    (one left behind by an interrupted rotation, or a mapping that disagrees with its principal) is dropped:
    it could never authenticate anyway."""
    with _directory_errors(), db.write() as connection:
        tagged_before = connection.execute(
            "SELECT (SELECT count(*) FROM principals WHERE row_tag IS NOT NULL)"
            " + (SELECT count(*) FROM tokens WHERE tag IS NOT NULL)"
        ).fetchone()[0]
        if tagged_before:
            raise PrincipalRefused(
                "ALREADY_TAGGED",
                "this database already carries tagged principal rows: an untagged row now was written "
                "outside Sentinel and is not vouched for; revoke it and add the principal again",
            )
        rows = [_plain(row) for row in connection.execute(f"{_SELECT} ORDER BY id").fetchall()]
        current = {
            (row["token_hmac"], row["id"], row["token_expires_at"]) for row in rows if row["token_hmac"]
        }
        dropped = []
        for hashed, principal_id, expires_at in connection.execute(
            "SELECT hmac, principal_id, expires_at FROM tokens ORDER BY hmac"
        ).fetchall():
            if (hashed, principal_id, expires_at) in current:
                connection.execute(
                    "UPDATE tokens SET tag = ? WHERE hmac = ?",
                    (token_mapping_tag(key, hashed, principal_id, expires_at), hashed),
                )
            else:
                connection.execute("DELETE FROM tokens WHERE hmac = ?", (hashed,))
                dropped.append(hashed[:12])
        for row in rows:
            connection.execute(
                "UPDATE principals SET row_tag = ? WHERE id = ?", (principal_row_tag(key, row), row["id"])
            )
    return {"tagged": [row["id"] for row in rows], "dropped_tokens": dropped}
