"""What only the embedded SQLite store has: its file, its schema version, its failures, real threads racing on
one chain, and a process dying with or without a transaction open. The contract it shares with DynamoDB is in
test_state_store_contract.py and test_state_store_records.py."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sentinel_domain.audit import AuditChain
from sentinel_domain.errors import StoreConflict, StoreUnavailable
from sentinel_domain.ports import StreamRef
from sentinel_service.adapters.sqlite_database import SCHEMA_VERSION, NewerSchema, SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore
from support.stores import CAND, PROJECT, Chain, SqliteKit, dump_sqlite, fact, record, write


@pytest.fixture
def kit(tmp_path: Path) -> Iterator[SqliteKit]:
    made = SqliteKit(tmp_path / "state.db")
    yield made
    made.close()


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """The file or directory made read-only for this process: chmod for a user, the immutable attribute for
    root (whom permissions do not stop)."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("running as root on a file system without the immutable attribute")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def unavailable(call: Any) -> str:
    with pytest.raises(StoreUnavailable) as caught:
        call()
    return str(caught.value)


# --- the file and its schema ----------------------------------------------------------------------------


def test_a_new_file_gets_the_schema_in_wal_mode_and_keeps_its_chains_across_restarts(tmp_path: Path) -> None:
    # Given a store in a new file, with a chain written
    path = tmp_path / "state.db"
    db = SqliteDatabase(path)
    a = write(SqliteStateStore(db), Chain(CAND), fact(1))
    db.close()
    # When the file is opened again (a restart)
    again = SqliteDatabase(path)
    stream = SqliteStateStore(again).load(CAND)
    # Then the chain is there, and the file carries the schema version and the WAL journal
    assert stream is not None and stream.events == [a.event] and stream.facts == {1: a.fact_text}
    with again.read() as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert connection.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert connection.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    again.close()


def test_a_file_written_by_a_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    # Given a database whose user_version is newer than this code's
    path = tmp_path / "state.db"
    SqliteDatabase(path).close()
    with contextlib.closing(sqlite3.connect(path)) as newer:
        newer.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        newer.commit()
    before = files(tmp_path)
    # When it is opened, Then it is refused with a message naming both versions, and nothing changed
    with pytest.raises(NewerSchema) as refused:
        SqliteDatabase(path)
    assert f"schema version {SCHEMA_VERSION + 1}, newer than this code's {SCHEMA_VERSION}" in str(
        refused.value
    )
    assert isinstance(refused.value, StoreUnavailable)
    assert files(tmp_path) == before


def test_a_database_of_something_else_is_refused(tmp_path: Path) -> None:
    # Given a SQLite file that holds other tables and no schema version
    path = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(path)) as other:
        other.execute("CREATE TABLE notes (text TEXT)")
        other.commit()
    before = files(tmp_path)
    # When it is opened as the store, Then it is refused and left as it was
    assert "not a Sentinel database" in unavailable(lambda: SqliteDatabase(path))
    assert files(tmp_path) == before


# --- failures are StoreUnavailable with a clear message, and change nothing -------------------------------


def test_a_file_that_is_not_a_database_is_unavailable(tmp_path: Path) -> None:
    # Given a file of garbage where the database should be
    path = tmp_path / "state.db"
    path.write_bytes(b"this is not a database, only text that looks like nothing SQLite wrote " * 64)
    before = files(tmp_path)
    # When it is opened, Then it is unavailable, saying so and naming the file, and nothing changed
    message = unavailable(lambda: SqliteDatabase(path))
    assert "not a SQLite database" in message and str(path) in message
    assert files(tmp_path) == before


def scribble(path: Path, offset: int, data: bytes) -> None:
    with path.open("r+b") as file:
        file.seek(offset)
        file.write(data)


def test_a_damaged_database_is_refused_on_open_and_left_as_it_is(kit: SqliteKit) -> None:
    # Given a store with a chain, whose file is then scribbled over past its first page
    write(kit.store, Chain(CAND), fact(1))
    kit.close()
    size = kit.path.stat().st_size
    for offset in range(4096, size, 509):
        scribble(kit.path, offset, b"\x5a" * 7)
    before = files(kit.path.parent)
    # When it is opened, Then it is unavailable, saying the file is corrupt, and nothing changed
    message = unavailable(lambda: SqliteDatabase(kit.path))
    assert "the database file is corrupt" in message and str(kit.path) in message
    assert files(kit.path.parent) == before


def test_damage_found_while_in_use_is_unavailable(kit: SqliteKit) -> None:
    # Given an open store with a chain, whose chain heads' root page is then damaged behind its back
    write(kit.store, Chain(CAND), fact(1))
    with contextlib.closing(sqlite3.connect(kit.path)) as raw:
        root = raw.execute("SELECT rootpage FROM sqlite_master WHERE name = 'chain_heads'").fetchone()[0]
        page_size = raw.execute("PRAGMA page_size").fetchone()[0]
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()  # every page in the main file
    scribble(kit.path, (root - 1) * page_size, b"\x00")  # no such b-tree page type
    results: list[str] = []

    def use() -> None:  # a thread of its own: a connection of its own, with nothing cached
        for call in (
            lambda: kit.store.load(CAND),
            lambda: kit.store.append(Chain(CAND).next(fact(1))),
            lambda: kit.store.chain_heads(),
        ):
            results.append(unavailable(call))

    worker = threading.Thread(target=use)
    worker.start()
    worker.join(timeout=30)
    # Then reads and writes that reach the damaged page are unavailable, saying the file is corrupt
    assert len(results) == 3 and all("the database file is corrupt" in r for r in results), results


def test_a_read_only_directory_is_unavailable_and_nothing_is_created(tmp_path: Path) -> None:
    # Given a read-only directory, empty, and another holding a database
    empty, full = tmp_path / "empty", tmp_path / "full"
    empty.mkdir()
    full.mkdir()
    SqliteDatabase(full / "state.db").close()
    before = files(full)
    with read_only(empty), read_only(full):
        # When a store is opened in either, Then it is unavailable and says why
        for path in (empty / "state.db", full / "state.db"):
            message = unavailable(lambda p=path: SqliteDatabase(p))
            assert "cannot be opened" in message and str(path) in message
    # And nothing was created or changed
    assert list(empty.iterdir()) == [] and files(full) == before


def test_a_read_only_file_reads_but_every_write_is_unavailable_and_changes_nothing(kit: SqliteKit) -> None:
    # Given a store with a chain and a claimed key, whose file is then made read-only
    chain = Chain(CAND)
    write(kit.store, chain, fact(1), outbox=[{"outbox_id": "o-1", "kind": "action"}])
    assert kit.store.idempotency_begin(record())
    kit.close()
    before = dump_sqlite(kit.path)
    with read_only(kit.path):
        db = SqliteDatabase(kit.path)
        store = SqliteStateStore(db)
        # When it is read, Then the chain is there
        loaded = store.load(CAND)
        assert loaded is not None and loaded.seq == 1
        # When anything is written, Then it is unavailable: the file is read-only
        for call in (
            lambda: store.append(chain.next(fact(2))),
            lambda: store.idempotency_begin(record(key="key-2")),
            lambda: store.idempotency_release(record()),
            lambda: store.mark_relayed("P#demo#C#cand_00000001", "O#o-1"),
        ):
            assert "read-only" in unavailable(call)
        db.close()
    # And nothing changed
    assert dump_sqlite(kit.path) == before


def test_a_database_locked_past_the_busy_timeout_is_unavailable_and_changes_nothing(tmp_path: Path) -> None:
    # Given a store waiting at most 0.2 s for the write lock, and another connection holding it
    kit = SqliteKit(tmp_path / "state.db", busy_timeout=0.2)
    chain = Chain(CAND)
    write(kit.store, chain, fact(1))
    before = kit.dump()
    holder = sqlite3.connect(kit.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        # When it writes, Then after waiting out the timeout it is unavailable, and says the file is locked
        started = time.monotonic()
        message = unavailable(lambda: kit.store.append(chain.next(fact(2))))
        assert time.monotonic() - started >= 0.2
        assert "locked by another connection for longer than the busy timeout (0.2 s)" in message
        assert "locked" in unavailable(lambda: kit.store.idempotency_begin(record()))
        # And reads still go on beside the writer (WAL)
        assert kit.store.load(CAND).seq == 1
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # And nothing changed; once the lock is gone the same write lands
    assert kit.dump() == before
    write(kit.store, chain, fact(2))
    assert kit.store.load(CAND).seq == 2
    kit.close()


# --- threads and processes ----------------------------------------------------------------------------


def test_threads_racing_on_one_chain_leave_exactly_one_winner_per_seq(kit: SqliteKit) -> None:
    # Given six threads, each with its own store view (its own connection), all appending at the same seq
    threads, rounds = 6, 8
    start = threading.Barrier(threads)
    winners: dict[int, list[int]] = {seq: [] for seq in range(1, rounds + 1)}
    errors: list[BaseException] = []

    def writer(me: int) -> None:
        store = kit.make()
        try:
            for seq in range(1, rounds + 1):
                stream = store.load(CAND)
                chain = Chain(CAND)
                chain.seq, chain.hash = (stream.seq, stream.head_hash) if stream else (0, None)
                assert chain.seq == seq - 1
                start.wait()  # every thread has read seq - 1 before any tries seq
                try:
                    store.append(chain.next(fact(seq, writer=me), outbox=[{"outbox_id": f"{seq}-{me}"}]))
                    winners[seq].append(me)
                except StoreConflict:
                    pass
                start.wait()  # every thread has tried before any reads again
        except BaseException as error:  # reported below; a broken barrier releases the others
            errors.append(error)
            start.abort()

    pool = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=60)
    # Then every round had exactly one winner, whose fact and outbox item alone were stored
    assert not errors, errors
    assert all(len(w) == 1 for w in winners.values()), winners
    stream = kit.store.load(CAND)
    assert stream is not None and [e["seq"] for e in stream.events] == list(range(1, rounds + 1))
    assert [f'"writer":{winners[s][0]}' in stream.facts[s] for s in range(1, rounds + 1)] == [True] * rounds
    assert len(kit.store.pending_outbox(limit=1000)) == rounds
    assert AuditChain.verify(PROJECT, CAND.candidate_id, stream.events, stream.facts, stream.head).valid


CHILD = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore
from support.stores import CAND, Chain, fact, write

store = SqliteStateStore(SqliteDatabase(Path(sys.argv[1])))
chain = Chain(CAND)
write(store, chain, fact(1))
if sys.argv[3] == "mid-transaction":
    with store.db.write() as connection:
        connection.execute("UPDATE chain_heads SET seq = 2")
        connection.execute("INSERT INTO events VALUES ('P#demo#C#cand_00000001', 2, '{}')")
        os.kill(os.getpid(), signal.SIGKILL)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("moment", ["after-commit", "mid-transaction"])
def test_a_killed_process_leaves_its_committed_appends_and_nothing_else(tmp_path: Path, moment: str) -> None:
    # Given a process that appends one event and is killed (SIGKILL) after it, or inside a second write
    path = tmp_path / "state.db"
    tests = Path(__file__).resolve().parents[1]
    child = subprocess.run([sys.executable, "-c", CHILD, str(path), str(tests), moment], timeout=60)
    assert child.returncode == -9
    # When the file is opened again
    db = SqliteDatabase(path)
    stream = SqliteStateStore(db).load(CAND)
    db.close()
    # Then the committed append is there, whole, and the interrupted one left no trace
    assert stream is not None and stream.seq == 1 and [e["seq"] for e in stream.events] == [1]
    assert AuditChain.verify(PROJECT, CAND.candidate_id, stream.events, stream.facts, stream.head).valid


def test_each_thread_uses_its_own_connection_and_close_ends_them_all(kit: SqliteKit) -> None:
    # Given connections taken by this thread and by another
    seen: list[Any] = []
    with kit.db.read() as mine:
        seen.append(mine)

    def read_elsewhere() -> None:
        with kit.db.read() as theirs:
            seen.append(theirs)

    other = threading.Thread(target=read_elsewhere)
    other.start()
    other.join()
    # Then they differ, and after close() the store is unavailable rather than half-open
    assert seen[0] is not seen[1]
    kit.db.close()
    assert "closed" in unavailable(lambda: kit.store.load(StreamRef(PROJECT)))
