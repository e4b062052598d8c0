"""`make demo` on a machine whose default data directory was written by an older version: the demo runs in a
fresh directory and says why, rather than failing on principals the operator has not vouched for yet."""

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from sentinel_runner.demo import _untagged_principals


def database(path: Path, *statements: str) -> Path:
    with closing(sqlite3.connect(path)) as db:
        for statement in statements:
            db.execute(statement)
        db.commit()
    return path


@pytest.mark.parametrize(
    ("statements", "untagged"),
    [
        # Given a store from before schema 4 (no tag column) holding a principal: untagged
        (["CREATE TABLE principals (id TEXT)", "INSERT INTO principals VALUES ('rita')"], True),
        # Given a migrated store whose row has no tag yet: untagged
        (
            [
                "CREATE TABLE principals (id TEXT, row_tag TEXT)",
                "INSERT INTO principals VALUES ('rita', NULL)",
            ],
            True,
        ),
        # Given every row tagged, or no principal at all, or no principals table: nothing to avoid
        (
            [
                "CREATE TABLE principals (id TEXT, row_tag TEXT)",
                "INSERT INTO principals VALUES ('rita', 'ab')",
            ],
            False,
        ),
        (["CREATE TABLE principals (id TEXT)"], False),
        (["CREATE TABLE other (id TEXT)"], False),
    ],
)
def test_a_store_with_principals_nobody_vouched_for_is_avoided(
    tmp_path: Path, statements: list[str], untagged: bool
) -> None:
    assert _untagged_principals(database(tmp_path / "sentinel.db", *statements)) is untagged


def test_a_file_that_is_not_a_database_is_left_for_the_server_to_refuse(tmp_path: Path) -> None:
    (tmp_path / "sentinel.db").write_bytes(b"not sqlite at all" * 100)
    assert _untagged_principals(tmp_path / "sentinel.db") is False
