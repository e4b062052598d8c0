"""The local gate's data directory: everything `sentinel serve` needs to come back after a restart or a crash.

    <dir>/sentinel.db     the embedded store (SQLite, WAL, synchronous=FULL): chains, facts, heads,
                          idempotency records, outbox, candidate claims, principals and token hashes
    <dir>/token.key       the key token hashes are made under (0600, created on first use)
    <dir>/chain.key       the key audit events, heads and checkpoints are authenticated under (0600, created
                          with a new store only; the table never holds it)
    <dir>/receipt.key     the P-256 private key decision receipts are signed with (PEM, 0600, created on
                          first use; `sentinel keys` prints its public half)
    <dir>/witness.jsonl   the witness: every checkpoint the gate committed, appended and fsynced, never
                          rewritten (created with the chain key)
    <dir>/events.jsonl    the relay's event log: side effects, appended only
    <dir>/runner.lock     held by the one `sentinel serve` that owns the directory

The directory is created 0700 (an existing one of ours is closed to 0700; another user's is refused) and its
files 0600. Everything in it belongs to one user: the files' permissions are the store's protection, not the
API (API.md, "The local runner")."""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO

DATABASE = "sentinel.db"
TOKEN_KEY = "token.key"
CHAIN_KEY = "chain.key"
RECEIPT_KEY = "receipt.key"
WITNESS = "witness.jsonl"
EVENT_LOG = "events.jsonl"
LOCK = "runner.lock"


class DataDirUnavailable(Exception):
    """The data directory cannot be used: a clear message, and nothing was written."""


def default_data_dir(environ: os._Environ[str] | dict[str, str] | None = None) -> Path:
    """SENTINEL_DATA_DIR, else $XDG_DATA_HOME/sentinel, else ~/.local/share/sentinel (where the token key
    always lived), so the operator's commands and `sentinel serve` find the same store without an option."""
    env = os.environ if environ is None else environ
    if env.get("SENTINEL_DATA_DIR"):
        return Path(env["SENTINEL_DATA_DIR"]).expanduser()
    if env.get("XDG_DATA_HOME"):
        return Path(env["XDG_DATA_HOME"]).expanduser() / "sentinel"
    return Path.home() / ".local" / "share" / "sentinel"


@dataclass(frozen=True)
class DataDir:
    path: Path

    @property
    def database(self) -> Path:
        return self.path / DATABASE

    @property
    def token_key(self) -> Path:
        return self.path / TOKEN_KEY

    @property
    def receipt_key(self) -> Path:
        return self.path / RECEIPT_KEY

    @property
    def chain_key(self) -> Path:
        return self.path / CHAIN_KEY

    @property
    def witness(self) -> Path:
        return self.path / WITNESS

    @property
    def event_log(self) -> Path:
        return self.path / EVENT_LOG

    @property
    def lock(self) -> Path:
        return self.path / LOCK


def open_data_dir(path: Path) -> DataDir:
    """The directory, created 0700 when missing; refused when it is not a writable directory of ours. From
    here on this process creates files for its owner alone (umask 077)."""
    os.umask(0o077)
    path = path.expanduser().resolve()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise DataDirUnavailable(f"cannot create the data directory {path}: {error.strerror}") from None
    if not path.is_dir():
        raise DataDirUnavailable(f"the data directory {path} is not a directory")
    status = path.stat()
    if status.st_uid != os.geteuid():
        raise DataDirUnavailable(
            f"the data directory {path} belongs to another user: its files would be theirs to read and "
            "replace; use a directory of your own"
        )
    if status.st_mode & 0o077:
        # Ours, but open to others: close it, since the files' permissions are the store's only protection.
        path.chmod(0o700)
    if not os.access(path, os.W_OK | os.X_OK):
        raise DataDirUnavailable(
            f"the data directory {path} is not writable (a read-only mount, or another user's): "
            "choose another with --data DIR"
        )
    return DataDir(path)


class RunnerLock:
    """The one `sentinel serve` per data directory: a second one refuses to start rather than share the
    store's directory with a relay and a lock it does not know about. The operator's commands take no such
    lock: SQLite's own locking lets them write while the server runs. The lock dies with the process, so a
    crash never leaves the directory locked."""

    def __init__(self, data: DataDir) -> None:
        self.data = data
        self._handle: IO[str] | None = None

    def acquire(self) -> RunnerLock:
        try:
            handle = open(
                self.data.lock, "a+", encoding="utf-8"
            )  # held open until release: the lock lives with it
        except OSError as error:
            raise DataDirUnavailable(f"cannot open {self.data.lock}: {error.strerror}") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise DataDirUnavailable(
                f"another `sentinel serve` (pid {holder}) already serves {self.data.path}: stop it, or give "
                "this one another --data DIR"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
