"""One SQLite database file that the embedded state store and the principal directory share.

How it is opened, and why:
- WAL journal: readers do not block the writer and the writer does not block readers, so a read needs no lock
  of ours; `synchronous=FULL` makes SQLite sync the WAL on every commit, so a transaction that returned from
  COMMIT survives a crash of the process or of the machine, to the extent the OS and the disk honour fsync.
- `foreign_keys=ON`: events, facts and outbox items cannot name a chain that has no head.
- One connection per thread (sqlite3 connections are not shared across threads); writes run in
  `BEGIN IMMEDIATE` transactions, which take SQLite's write lock before the first read, so the conditions a
  write checks still hold when it commits. A writer that finds the lock taken waits up to the busy timeout.
- The schema's version is `PRAGMA user_version`: created on first open, migrated forward only, and a file
  written by a newer schema is refused rather than read with assumptions it does not meet.

Every sqlite3 error (locked past the busy timeout, disk full, read-only file or directory, a file that is not
a database or is corrupt) is raised as `StoreUnavailable`, with the file and the reason in the message."""

import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sentinel_domain.errors import StoreUnavailable

SCHEMA_VERSION = 4
DEFAULT_BUSY_TIMEOUT = 5.0  # seconds a writer waits for another's write lock before giving up

# Version 1. Chains use the DynamoDB partition names (`P#{project}`, `P#{project}#C#{candidate}`) as their
# key, and outbox items their sort keys (`O#{outbox_id}`), so the relay sees the same pk/sk on either store.
_SCHEMA_V1 = (
    """CREATE TABLE chain_heads (
        chain TEXT PRIMARY KEY,
        project TEXT NOT NULL,
        candidate_id TEXT,
        seq INTEGER NOT NULL CHECK (seq >= 1),
        head TEXT NOT NULL
    )""",
    """CREATE TABLE events (
        chain TEXT NOT NULL REFERENCES chain_heads (chain),
        seq INTEGER NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (chain, seq)
    ) WITHOUT ROWID""",
    """CREATE TABLE facts (
        chain TEXT NOT NULL REFERENCES chain_heads (chain),
        seq INTEGER NOT NULL,
        fact TEXT NOT NULL,
        PRIMARY KEY (chain, seq)
    ) WITHOUT ROWID""",
    """CREATE TABLE outbox (
        position INTEGER PRIMARY KEY AUTOINCREMENT,
        chain TEXT NOT NULL REFERENCES chain_heads (chain),
        sk TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        item TEXT NOT NULL,
        recorded_at TEXT NOT NULL,
        pending INTEGER NOT NULL,
        UNIQUE (chain, sk)
    )""",
    "CREATE INDEX outbox_pending ON outbox (chain, seq, sk) WHERE pending = 1",
    """CREATE TABLE claims (
        project TEXT NOT NULL,
        claim_key TEXT NOT NULL,
        candidate_id TEXT NOT NULL,
        subject TEXT NOT NULL,
        revision TEXT NOT NULL,
        environment TEXT NOT NULL,
        recorded_at TEXT NOT NULL,
        PRIMARY KEY (project, claim_key)
    ) WITHOUT ROWID""",
    """CREATE TABLE idempotency (
        chain TEXT NOT NULL,
        record_key TEXT NOT NULL,
        scope TEXT NOT NULL,
        key_sha256 TEXT NOT NULL,
        caller TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        status TEXT NOT NULL,
        claimed_at TEXT NOT NULL,
        lease_until TEXT NOT NULL,
        response_body TEXT,
        response_body_zlib BLOB,
        PRIMARY KEY (chain, record_key)
    ) WITHOUT ROWID""",
    """CREATE TABLE principals (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        sponsor TEXT,
        roles TEXT NOT NULL,
        revoked INTEGER NOT NULL,
        compromised INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        revoked_at TEXT,
        token_hmac TEXT,
        token_expires_at TEXT,
        rotated_at TEXT
    ) WITHOUT ROWID""",
    """CREATE TABLE tokens (
        hmac TEXT PRIMARY KEY,
        principal_id TEXT NOT NULL REFERENCES principals (id),
        expires_at TEXT NOT NULL
    ) WITHOUT ROWID""",
)
# Version 2: each candidate's published forge check (sentinel_domain.forge_checks.CheckRecord), keyed as in
# DynamoDB, with its version (the conditional write) and `due_at` (the sweep's index) beside the record.
_SCHEMA_V2 = (
    """CREATE TABLE forge_checks (
        record_key TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        due_at TEXT NOT NULL,
        record TEXT NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX forge_checks_due ON forge_checks (due_at, record_key) WHERE due_at != ''",
)
# Version 3: a synthetic project's side effects are marked in their row too (1), as DynamoDB marks the item
# with an attribute of its own; every row written before is 0 (no project was synthetic then).
_SCHEMA_V3 = ("ALTER TABLE outbox ADD COLUMN synthetic INTEGER NOT NULL DEFAULT 0",)
# Version 4: each principal row and each token's mapping carries a tag under the token key
# (`tokens.principal_row_tag`, `tokens.token_mapping_tag`), checked by the authorizer on every read. A row
# written before has none (NULL) and is refused until the operator runs `sentinel principals tag-legacy`
# (`sqlite_principals.tag_legacy_rows`): the schema's migration holds no key and so can vouch for nothing.
_SCHEMA_V4 = (
    "ALTER TABLE principals ADD COLUMN row_tag TEXT",
    "ALTER TABLE tokens ADD COLUMN tag TEXT",
)
# MIGRATIONS[n] takes a database from version n to n + 1.
MIGRATIONS: tuple[tuple[str, ...], ...] = (_SCHEMA_V1, _SCHEMA_V2, _SCHEMA_V3, _SCHEMA_V4)

_REASONS = (
    ("SQLITE_BUSY", "the database is locked by another connection for longer than the busy timeout"),
    ("SQLITE_LOCKED", "the database is locked by another connection for longer than the busy timeout"),
    ("SQLITE_READONLY", "the database file or its directory is read-only"),
    ("SQLITE_CANTOPEN", "the database file cannot be opened (a missing or read-only directory?)"),
    ("SQLITE_PERM", "permission denied"),
    ("SQLITE_FULL", "the disk is full"),
    ("SQLITE_NOTADB", "the file is not a SQLite database"),
    ("SQLITE_CORRUPT", "the database file is corrupt"),
    ("SQLITE_IOERR", "a disk I/O error"),
)


class NewerSchema(StoreUnavailable):
    """The file was written by a newer schema than this code knows: it is left untouched, never migrated
    backwards."""


class _Handle:
    """One thread's connection; closed when its thread ends (the thread-local drops it) or on close()."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def __del__(self) -> None:
        try:
            self.connection.close()
        except Exception:  # closing at interpreter exit or twice: nothing left to release
            pass


class SqliteDatabase:
    """The database file at `path`: created with the current schema on first open, refused when a newer
    schema wrote it. `read()` and `write()` hand out this thread's connection inside one transaction."""

    def __init__(self, path: Path, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> None:
        if busy_timeout < 0:
            raise ValueError("busy_timeout must not be negative")
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._handles: weakref.WeakSet[_Handle] = weakref.WeakSet()
        self._handles_lock = threading.Lock()
        self._closed = False
        try:
            self._open_schema()
        except BaseException:
            self.close()
            raise

    # ---- transactions -----------------------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every statement inside sees the same committed state."""
        with self._transaction("BEGIN", "read") as connection:
            yield connection

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One write transaction that every `read()` and `write()` of this thread inside it joins: all of them
        commit together when the block ends, or none when it raises (or the process dies before the end).
        The operator's principal changes use it so that a change and its chain events are never apart."""
        if getattr(self._local, "joined", False):
            raise RuntimeError("atomic() does not nest")
        with self._transaction("BEGIN IMMEDIATE", "write"):
            self._local.joined = True
            try:
                yield
            finally:
                self._local.joined = False

    def joined(self) -> bool:
        """True inside this thread's `atomic()` block: what is written now commits only when it ends."""
        return bool(getattr(self._local, "joined", False))

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, holding SQLite's write lock from its start: committed when the block ends,
        rolled back when it raises (a StoreConflict, a ClaimTaken, a ValueError pass through unchanged)."""
        with self._transaction("BEGIN IMMEDIATE", "write") as connection:
            yield connection

    def close(self) -> None:
        """Close every thread's connection. Call it once nothing uses the database any more."""
        self._closed = True
        with self._handles_lock:
            handles = list(self._handles)
            self._handles.clear()
        for handle in handles:
            try:
                handle.connection.close()
            except sqlite3.Error:
                pass

    def __enter__(self) -> "SqliteDatabase":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ---- plumbing ---------------------------------------------------------------------------------------

    @contextmanager
    def _transaction(self, begin: str, doing: str) -> Iterator[sqlite3.Connection]:
        connection = self._connection()
        if getattr(self._local, "joined", False):
            # Inside atomic(): the enclosing transaction begins, commits and rolls back; an error here
            # reaches it and undoes everything.
            try:
                yield connection
            except sqlite3.Error as error:
                raise self._unavailable(error, doing) from error
            return
        try:
            connection.execute(begin)
        except sqlite3.Error as error:
            raise self._unavailable(error, f"begin a {doing}") from error
        try:
            yield connection
        except sqlite3.Error as error:
            self._rollback(connection)
            raise self._unavailable(error, doing) from error
        except BaseException:
            self._rollback(connection)
            raise
        try:
            connection.execute("COMMIT")
        except sqlite3.Error as error:
            self._rollback(connection)
            raise self._unavailable(error, f"commit a {doing}") from error

    @staticmethod
    def _rollback(connection: sqlite3.Connection) -> None:
        try:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # SQLite rolls a failed transaction back itself when it cannot go on

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreUnavailable(f"SQLite store {self.path}: the database is closed")
        handle: _Handle | None = getattr(self._local, "handle", None)
        if handle is None:
            handle = _Handle(self._connect())
            self._local.handle = handle
            with self._handles_lock:
                self._handles.add(handle)
        return handle.connection

    def _connect(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = None
        try:
            # isolation_level=None: no implicit transactions; every transaction is begun explicitly above.
            # check_same_thread=False only so that close() may close another thread's connection.
            connection = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
            )
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            self._refuse_newer(version)
            connection.execute("PRAGMA synchronous = FULL")
            connection.execute("PRAGMA foreign_keys = ON")
            return connection
        except sqlite3.Error as error:
            if connection is not None:
                connection.close()
            raise self._unavailable(error, "open") from error
        except BaseException:
            if connection is not None:
                connection.close()
            raise

    def _open_schema(self) -> None:
        connection = self._connection()  # refuses a newer schema before anything else
        try:
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            self._refuse_foreign(connection, version)
            self._refuse_corrupt(connection)
            # WAL before any write: it is a property of the file and persists, set once, harmless again.
            mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.Error as error:
            raise self._unavailable(error, "open") from error
        if str(mode).lower() != "wal":
            raise StoreUnavailable(f"SQLite store {self.path}: the file cannot use WAL (journal mode {mode})")
        if version == SCHEMA_VERSION:
            return  # nothing to create or migrate: no write lock taken
        with self.write() as write:
            version = write.execute("PRAGMA user_version").fetchone()[0]
            self._refuse_newer(version)  # another process may have created or migrated it since
            self._refuse_foreign(write, version)
            for migration in MIGRATIONS[version:]:
                for statement in migration:
                    write.execute(statement)
            write.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _refuse_foreign(self, connection: sqlite3.Connection, version: int) -> None:
        if version == 0 and connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise StoreUnavailable(
                f"SQLite store {self.path}: the file holds tables but no schema version: "
                "not a Sentinel database"
            )

    def _refuse_corrupt(self, connection: sqlite3.Connection) -> None:
        """SQLite notices a damaged page only when a statement reads it, and may read a damaged one as empty:
        check the file's structure once on open, so a chain is never read from a damaged file as absent.
        (What lies inside a row is the audit chain's to verify: it hashes every event and fact.)"""
        found = [row[0] for row in connection.execute("PRAGMA quick_check(1)")]
        if found != ["ok"]:
            detail = " ".join(str(found[0] if found else "no answer").split())
            raise StoreUnavailable(f"SQLite store {self.path}: the database file is corrupt ({detail})")

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise NewerSchema(
                f"SQLite store {self.path}: written by schema version {version}, newer than this code's "
                f"{SCHEMA_VERSION}; upgrade Sentinel to use it (it is never migrated backwards)"
            )

    def _unavailable(self, error: sqlite3.Error, doing: str) -> StoreUnavailable:
        """A sqlite3 error as StoreUnavailable, saying which file, what was being done and why it failed."""
        name = str(getattr(error, "sqlite_errorname", "") or type(error).__name__)
        reason = next((text for prefix, text in _REASONS if name.startswith(prefix)), "SQLite failed")
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            reason += f" ({self.busy_timeout:g} s)"
        return StoreUnavailable(f"SQLite store {self.path}: {doing} failed: {reason} [{name}: {error}]")
