"""The forge check records (sentinel_domain.forge_checks.CheckRecords), once on each store and on the
in-memory reference: a record is written only over the version it read, reads back whole, lives apart from
every chain, and the sweep's listing returns exactly the records due by an instant, across projects, paged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sentinel_domain.forge_checks import CheckRecord
from sentinel_domain.memory import MemoryStore
from sentinel_domain.ports import StreamRef
from support.stores import PROJECT, STORES, T0, T1, T2, DynamoKit, SqliteKit


def record(candidate_id: str = "cand_1", project: str = PROJECT, **fields: Any) -> CheckRecord:
    return CheckRecord(project, candidate_id, "acme/payments", "a" * 40, "sentinel/staging", **fields)


@pytest.fixture(params=["memory", *STORES])
def records(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        yield MemoryStore()
        return
    made = (
        SqliteKit(tmp_path / "state.db")
        if request.param == "sqlite"
        else DynamoKit(request.getfixturevalue("moto"))
    )
    yield made.store
    made.close()


def test_a_record_is_written_only_over_the_version_it_read(records: Any) -> None:
    # Given no record: only version 1 may be written
    assert records.check_record(PROJECT, "cand_1") is None
    assert not records.put_check_record(record(version=2))
    first = record(version=1, claimed_at=T0)
    assert records.put_check_record(first)
    assert records.check_record(PROJECT, "cand_1") == first
    # When two publishers both read version 1 and write version 2, Then only the first write holds
    mine = first.next(check_run_id="41", conclusion="success", digest="d1", due_at=T1, claimed_at="")
    theirs = first.next(check_run_id="42", conclusion="failure", digest="d2")
    assert records.put_check_record(mine)
    assert not records.put_check_record(theirs)
    assert records.check_record(PROJECT, "cand_1") == mine
    # And a second version 1 never replaces the record
    assert not records.put_check_record(record(version=1))


def test_due_records_are_listed_by_instant_across_projects_and_paged(records: Any) -> None:
    # Given records due at T0, T1 and T2, in two projects, and one with nothing due
    for i, (project, due) in enumerate([(PROJECT, T0), ("other", T1), (PROJECT, T2), (PROJECT, "")]):
        assert records.put_check_record(record(f"cand_{i}", project, version=1, due_at=due))
    # When the sweep lists what is due by T1, a page of one at a time
    found, cursor, pages = [], None, 0
    while True:
        page, cursor = records.check_records_due(T1, 1, cursor)
        found += page
        pages += 1
        if cursor is None or pages > 10:
            break
    # Then exactly the two due by then came back, and no record twice
    assert sorted((r.project, r.candidate_id) for r in found) == [("demo", "cand_0"), ("other", "cand_1")]


def test_a_record_is_no_part_of_any_chain(records: Any) -> None:
    assert records.put_check_record(record(version=1))
    assert records.load(StreamRef(PROJECT, "cand_1")) is None
    assert records.load(StreamRef(PROJECT)) is None
