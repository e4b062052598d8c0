"""What a run's store is backed by: the in-memory reference store, or the embedded SQLite store in a file of a
temporary directory. Either way the run goes through the same StateStore port; the harness also reads what it
must judge beside the API (every outbox item written, a snapshot of everything a request could change) and
edits the stored chains the way anyone with write access could (tampering), each backing in its own way.

`sentinel eval --store sqlite` replays the catalog on SQLite; its report, digest included, must equal the
in-memory one: the store is a detail the gate's behaviour may not depend on."""

import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from sentinel_domain.memory import MemoryStore
from sentinel_domain.ports import StateStore, Stream, StreamRef
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore
from sentinel_service.adapters.state_layout import partition

STORES = ("memory", "sqlite")


class Backing(Protocol):
    store: StateStore

    def outbox(self) -> list[dict[str, Any]]:
        """Every outbox item written so far, in the order written."""

    def snapshot(self) -> tuple[Any, ...]:
        """Everything a request could change: a refused or replayed request must leave it equal."""

    def stream(self, ref: StreamRef) -> Stream | None:
        """The chain as stored, to pick what to tamper with."""

    def remove_event(self, ref: StreamRef, seq: int) -> None:
        """Delete one audit event, leaving its fact."""

    def replace_fact(self, ref: StreamRef, seq: int, text: str) -> None:
        """Overwrite one fact's stored text."""

    def close(self) -> None: ...


class MemoryBacking:
    def __init__(self) -> None:
        self.memory = MemoryStore()
        self.store: StateStore = self.memory

    def outbox(self) -> list[dict[str, Any]]:
        return list(self.memory.outbox)

    def snapshot(self) -> tuple[Any, ...]:
        return self.memory.snapshot()

    def stream(self, ref: StreamRef) -> Stream | None:
        return self.memory.streams.get(ref)

    def remove_event(self, ref: StreamRef, seq: int) -> None:
        events = self.memory.streams[ref].events
        events[:] = [e for e in events if e.get("seq") != seq]

    def replace_fact(self, ref: StreamRef, seq: int, text: str) -> None:
        self.memory.streams[ref].facts[seq] = text

    def close(self) -> None:
        pass


class SqliteBacking:
    def __init__(self, path: Path) -> None:
        self.db = SqliteDatabase(path)
        self.store: StateStore = SqliteStateStore(self.db)

    def _rows(self, sql: str) -> list[Any]:
        with self.db.read() as connection:
            return connection.execute(sql).fetchall()

    def outbox(self) -> list[dict[str, Any]]:
        # The actions' side effects only, as MemoryStore.outbox keeps them: the checkpoint items every append
        # carries go to the witness, not to the bus, and notifications are judged by their own tests.
        return [
            json.loads(item)
            for (item,) in self._rows(
                "SELECT item FROM outbox WHERE kind NOT IN ('checkpoint', 'notification') ORDER BY position"
            )
        ]

    def snapshot(self) -> tuple[Any, ...]:
        return (
            self._rows("SELECT chain, seq, head FROM chain_heads ORDER BY chain"),
            self._rows("SELECT chain, seq FROM events ORDER BY chain, seq"),
            self._rows("SELECT chain, seq FROM facts ORDER BY chain, seq"),
            self._rows("SELECT count(*) FROM outbox WHERE kind != 'checkpoint'"),
            self._rows("SELECT chain, record_key, scope, status FROM idempotency ORDER BY chain, record_key"),
            self._rows("SELECT * FROM claims ORDER BY project, claim_key"),
        )

    def stream(self, ref: StreamRef) -> Stream | None:
        return self.store.load(ref)

    def remove_event(self, ref: StreamRef, seq: int) -> None:
        with self.db.write() as connection:
            connection.execute("DELETE FROM events WHERE chain = ? AND seq = ?", (partition(ref), seq))

    def replace_fact(self, ref: StreamRef, seq: int, text: str) -> None:
        with self.db.write() as connection:
            connection.execute(
                "UPDATE facts SET fact = ? WHERE chain = ? AND seq = ?", (text, partition(ref), seq)
            )

    def close(self) -> None:
        self.db.close()


@contextmanager
def backings(store: str) -> Iterator[Callable[[], Backing]]:
    """A maker of fresh backings, one a run; SQLite files live in a temporary directory removed at the end."""
    if store == "memory":
        yield MemoryBacking
        return
    if store != "sqlite":
        raise ValueError(f"unknown store {store!r} (one of {', '.join(STORES)})")
    with tempfile.TemporaryDirectory(prefix="sentinel-eval-") as directory:
        made = 0

        def fresh() -> Backing:
            nonlocal made
            made += 1
            return SqliteBacking(Path(directory) / f"run-{made:04d}.db")

        yield fresh
