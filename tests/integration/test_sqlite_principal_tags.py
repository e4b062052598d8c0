"""The local gate's principal rows and token mappings carry a tag under the token key (sqlite_principals):
whoever can write sentinel.db but holds no key cannot relabel a token or raise a row's grants, and a row
written before schema 4 is refused until the operator tags it once (`tag_legacy_rows`)."""

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sentinel_service.adapters.principal_rules import DirectoryUnavailable, PrincipalRefused
from sentinel_service.adapters.sqlite_database import MIGRATIONS, SCHEMA_VERSION, SqliteDatabase
from sentinel_service.adapters.sqlite_principals import (
    SqlitePrincipalAdmin,
    SqlitePrincipalDirectory,
    tag_legacy_rows,
)
from sentinel_service.adapters.tokens import new_token, principal_row_tag, token_hmac

KEY = bytes(range(32))
NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
LATER = "2099-01-01T00:00:00.000000Z"


class Gate:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = SqliteDatabase(path)
        self.directory = SqlitePrincipalDirectory(self.db)
        self.admin = SqlitePrincipalAdmin(self.db, token_key=lambda: KEY)

    def raw(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """What whoever can write the file, but holds no key, can do."""
        with contextlib.closing(sqlite3.connect(self.path, isolation_level=None)) as raw:
            return raw.execute(sql, params).fetchall()

    def who(self, token: str) -> str | None:
        found = self.directory.authenticate(token, KEY, NOW)
        return None if found is None else found["id"]


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Gate]:
    made = Gate(tmp_path / "sentinel.db")
    yield made
    made.db.close()


def seed(gate: Gate) -> dict[str, str]:
    return {
        "rita": gate.admin.add("rita", "human", None, {"demo": ["reviewer"]}, None, KEY, NOW),
        "bot": gate.admin.add("bot", "agent", "rita", {"demo": ["requester"]}, None, KEY, NOW),
        "ci": gate.admin.add("ci", "ci", None, {"demo": ["publisher"]}, None, KEY, NOW),
    }


# -- a legitimate change keeps authenticating (or refusing) as before -----------------------------------


def test_added_principals_authenticate_and_every_row_and_mapping_is_tagged(gate: Gate):
    tokens = seed(gate)
    assert {name: gate.who(token) for name, token in tokens.items()} == {
        "rita": "rita",
        "bot": "bot",
        "ci": "ci",
    }
    assert all(tag for (tag,) in gate.raw("SELECT row_tag FROM principals"))
    assert all(tag for (tag,) in gate.raw("SELECT tag FROM tokens"))
    assert gate.raw("PRAGMA user_version") == [(SCHEMA_VERSION,)] and SCHEMA_VERSION == 4


def test_a_rotation_keeps_the_new_token_and_refuses_the_old(gate: Gate):
    tokens = seed(gate)
    new = gate.admin.rotate("bot", None, KEY, NOW)
    assert gate.who(new) == "bot"
    assert gate.who(tokens["bot"]) is None


def test_a_revocation_refuses_and_a_revoked_sponsor_refuses_its_agent(gate: Gate):
    tokens = seed(gate)
    gate.admin.revoke("ci", True, NOW)
    assert gate.who(tokens["ci"]) is None
    gate.admin.revoke("rita", False, NOW)
    assert gate.who(tokens["rita"]) is None and gate.who(tokens["bot"]) is None
    # the revoked rows are tagged as revoked: listings still read them
    assert {p["id"]: p["revoked"] for p in gate.admin.principals()} == {
        "bot": False,
        "ci": True,
        "rita": True,
    }


# -- a row or mapping changed outside a change is refused, as an unknown token ---------------------------


@pytest.mark.parametrize(
    ("principal", "sql", "params"),
    [
        ("bot", "UPDATE principals SET kind = 'human', sponsor = NULL WHERE id = ?", ()),
        ("ci", "UPDATE principals SET kind = 'human' WHERE id = ?", ()),
        ("bot", "UPDATE principals SET roles = ? WHERE id = ?", (json.dumps({"demo": ["reviewer"]}),)),
        ("bot", "UPDATE principals SET roles = ? WHERE id = ?", (json.dumps({"shop": ["requester"]}),)),
        ("bot", "UPDATE principals SET sponsor = NULL WHERE id = ?", ()),
        ("bot", "UPDATE principals SET token_expires_at = ? WHERE id = ?", (LATER,)),
        ("bot", "UPDATE principals SET row_tag = NULL WHERE id = ?", ()),
    ],
)
def test_a_tampered_row_is_refused(gate: Gate, principal: str, sql: str, params: tuple[Any, ...]):
    tokens = seed(gate)
    gate.raw(sql, *params, principal)
    assert gate.who(tokens[principal]) is None
    # and the admin never re-tags it by rotating it
    with pytest.raises(DirectoryUnavailable, match="no valid tag"):
        gate.admin.rotate(principal, None, KEY, NOW)


def test_a_revoked_row_set_back_to_live_is_refused(gate: Gate):
    tokens = seed(gate)
    hashed = token_hmac(KEY, tokens["ci"])
    (expires,) = gate.raw("SELECT token_expires_at FROM principals WHERE id = 'ci'")[0]
    (mapping_tag,) = gate.raw("SELECT tag FROM tokens WHERE hmac = ?", hashed)[0]
    gate.admin.revoke("ci", False, NOW)
    # Un-revoked, its token and mapping (with its genuine old tag) put back
    gate.raw("UPDATE principals SET revoked = 0, revoked_at = NULL, token_hmac = ? WHERE id = 'ci'", hashed)
    gate.raw(
        "INSERT INTO tokens (hmac, principal_id, expires_at, tag) VALUES (?, 'ci', ?, ?)",
        hashed,
        expires,
        mapping_tag,
    )
    assert gate.who(tokens["ci"]) is None


def test_a_tampered_sponsor_row_refuses_its_agent(gate: Gate):
    tokens = seed(gate)
    gate.admin.revoke("rita", False, NOW)
    gate.raw("UPDATE principals SET revoked = 0 WHERE id = 'rita'")
    assert gate.who(tokens["bot"]) is None
    with pytest.raises(DirectoryUnavailable, match="no valid tag"):
        gate.admin.add("bot-2", "agent", "rita", {"demo": ["requester"]}, None, KEY, NOW)


def test_a_token_moved_to_another_principal_is_refused(gate: Gate):
    tokens = seed(gate)
    hashed = token_hmac(KEY, tokens["bot"])
    # the mapping alone
    gate.raw("UPDATE tokens SET principal_id = 'rita' WHERE hmac = ?", hashed)
    assert gate.who(tokens["bot"]) is None
    # the mapping and the other principal's current token (the red team's move)
    gate.raw("UPDATE principals SET token_hmac = ? WHERE id = 'rita'", hashed)
    assert gate.who(tokens["bot"]) is None


def test_a_token_moved_with_the_other_principals_tag_is_refused(gate: Gate):
    tokens = seed(gate)
    hashed = token_hmac(KEY, tokens["bot"])
    # rita's row made to carry bot's token, and bot's mapping's tag put on a mapping to rita: neither verifies
    (tag,) = gate.raw("SELECT tag FROM tokens WHERE hmac = ?", hashed)[0]
    gate.raw("UPDATE tokens SET principal_id = 'rita', tag = ? WHERE hmac = ?", tag, hashed)
    assert gate.who(tokens["bot"]) is None


def test_an_inserted_mapping_without_a_tag_is_refused(gate: Gate):
    seed(gate)
    forged = new_token()
    hashed = token_hmac(b"x" * 32, forged)  # no key: whatever hash the writer picks
    gate.raw(
        "INSERT INTO tokens (hmac, principal_id, expires_at) VALUES (?, 'rita', ?)",
        hashed,
        LATER,
    )
    gate.raw("UPDATE principals SET token_hmac = ? WHERE id = 'rita'", hashed)
    assert gate.who(forged) is None


# -- rows written before schema 4 ------------------------------------------------------------------------


def schema_3_file(path: Path) -> dict[str, str]:
    """A data directory's database as schema 3 wrote it: principals and their tokens, no tags."""
    tokens = {"rita": new_token(), "bot": new_token()}
    rows = [
        ("rita", "human", None, {"demo": ["reviewer"]}),
        ("bot", "agent", "rita", {"demo": ["requester"]}),
    ]
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as old:
        for migration in MIGRATIONS[:3]:
            for statement in migration:
                old.execute(statement)
        old.execute("PRAGMA user_version = 3")
        for principal_id, kind, sponsor, roles in rows:
            hashed = token_hmac(KEY, tokens[principal_id])
            old.execute(
                "INSERT INTO principals VALUES (?, ?, ?, ?, 0, 0, 't', NULL, ?, ?, NULL)",
                (principal_id, kind, sponsor, json.dumps(roles), hashed, LATER),
            )
            old.execute("INSERT INTO tokens VALUES (?, ?, ?)", (hashed, principal_id, LATER))
        # a token left behind by an interrupted rotation
        old.execute("INSERT INTO tokens VALUES ('stale', 'bot', ?)", (LATER,))
    return tokens


def test_rows_from_schema_3_are_refused_until_the_operator_tags_them_once(tmp_path: Path):
    path = tmp_path / "sentinel.db"
    tokens = schema_3_file(path)
    gate = Gate(path)
    try:
        # migrated to schema 4, its rows untagged: refused, but still listed
        assert gate.raw("PRAGMA user_version") == [(4,)]
        assert gate.who(tokens["rita"]) is None and gate.who(tokens["bot"]) is None
        assert [p["id"] for p in gate.admin.principals()] == ["bot", "rita"]
        # the operator's one-time tagging
        assert tag_legacy_rows(gate.db, KEY) == {"tagged": ["bot", "rita"], "dropped_tokens": ["stale"]}
        assert gate.who(tokens["rita"]) == "rita" and gate.who(tokens["bot"]) == "bot"
        (row,) = gate.raw(
            "SELECT id, kind, sponsor, roles, revoked, compromised, token_hmac, token_expires_at, "
            "row_tag FROM principals WHERE id = 'bot'"
        )
        fields = dict(
            zip(
                (
                    "id",
                    "kind",
                    "sponsor",
                    "roles",
                    "revoked",
                    "compromised",
                    "token_hmac",
                    "token_expires_at",
                ),
                row[:8],
                strict=True,
            )
        )
        assert row[8] == principal_row_tag(KEY, {**fields, "roles": json.loads(fields["roles"])})
        # once only: an untagged row now was written outside Sentinel, and nothing vouches for it again
        gate.raw("UPDATE principals SET row_tag = NULL, kind = 'human', sponsor = NULL WHERE id = 'bot'")
        with pytest.raises(PrincipalRefused) as refused:
            tag_legacy_rows(gate.db, KEY)
        assert refused.value.code == "ALREADY_TAGGED"
        assert gate.who(tokens["bot"]) is None
    finally:
        gate.db.close()


def test_an_expired_tokens_mapping_extended_is_refused(gate: Gate):
    tokens = seed(gate)
    later = datetime(2027, 6, 1, tzinfo=UTC)  # past the agent's 90 days
    assert gate.directory.authenticate(tokens["bot"], KEY, later) is None
    gate.raw("UPDATE tokens SET expires_at = ? WHERE principal_id = 'bot'", LATER)
    assert gate.directory.authenticate(tokens["bot"], KEY, later) is None
