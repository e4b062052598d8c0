"""The Witness port on a JSON-lines file: the local runner's witness (`witness.jsonl` in its data directory).

Each line is one record, appended and fsynced, never rewritten:

    {"checkpoint": {"project", "candidate_id", "seq", "hash", "at", "mac"}}
    {"tampered": {"project", "candidate_id", "finding": {"first_bad_seq", "reason", "at"}}}

A checkpoint is written only when its tag verifies under the chain key (`integrity.WitnessBook`), so a forged
outbox item never reaches the file; one read back that does not verify (written behind the gate's back) is
passed over. Several processes may append (the server, and the operator's commands writing the project
chain): each append holds an exclusive `flock` on the file and first reads what the others appended, and
every read picks up the lines appended since the last one. A crash can leave the last line cut short: it is
never parsed, and the next append starts on a line of its own.

The file, the chain key and the database share one owner: this detects tampering by whoever can write the
database but not the key or this file (docs/failing-closed.md). The file is created with the key, for a new
store only; a witness that is missing, belongs to another user or is open to others' writes is
StoreUnavailable, never an empty witness (an empty one would vouch for any rollback)."""

import fcntl
import json
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.integrity import ChainSeal, CheckpointForged, SealSource, WitnessBook
from sentinel_domain.ports import StreamRef, WitnessConflict

WITNESS_FILE = "witness.jsonl"


def create_witness_file(path: Path) -> bool:
    """An empty witness at `path`, mode 0600, unless one exists (False)."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return False
    except OSError as error:
        raise StoreUnavailable(f"cannot create the witness {path}: {error.strerror}") from None
    os.fsync(descriptor)
    os.close(descriptor)
    return True


class FileWitness:
    """Witness on one JSON-lines file; `seal` verifies what is appended and what is read back."""

    def __init__(self, path: Path, seal: ChainSeal | SealSource) -> None:
        self.path = Path(path)
        self._seal = seal
        self._book: WitnessBook | None = None
        self._offset = 0
        self._lock = threading.Lock()
        self.refused = 0  # forged checkpoints refused by this process (for the relay's report)

    # ---- the file ---------------------------------------------------------------------------------------

    def _open(self, flags: int) -> int:
        try:
            descriptor = os.open(self.path, flags | os.O_NOFOLLOW)
        except OSError as error:
            raise StoreUnavailable(f"the witness {self.path} cannot be opened: {error.strerror}") from None
        status = os.fstat(descriptor)
        problem = None
        if not stat.S_ISREG(status.st_mode):
            problem = "is not a regular file"
        elif status.st_uid != os.geteuid():
            problem = "belongs to another user"
        elif status.st_mode & 0o022:
            problem = "is writable by group or others"
        if problem is not None:
            os.close(descriptor)
            raise StoreUnavailable(f"the witness {self.path} {problem}: it cannot vouch for the chains")
        return descriptor

    @contextmanager
    def _locked(self, exclusive: bool) -> Iterator[int]:
        """The file open (append-only when exclusive), under a flock shared with every other process."""
        descriptor = self._open(os.O_RDWR | os.O_APPEND if exclusive else os.O_RDONLY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield descriptor
        finally:
            os.close(descriptor)  # closing releases the flock

    def _seal_now(self) -> ChainSeal:
        from sentinel_domain.integrity import ChainKeyUnavailable

        try:
            return self._seal if isinstance(self._seal, ChainSeal) else self._seal()
        except ChainKeyUnavailable as error:
            raise StoreUnavailable(f"the witness cannot check checkpoints: {error}") from None

    def _refresh(self, descriptor: int) -> WitnessBook:
        """Read the lines appended since the last read (by any process) into the book."""
        if self._book is None:
            self._book, self._offset = WitnessBook(self._seal_now()), 0
        book = self._book
        size = os.fstat(descriptor).st_size
        if size < self._offset:  # the file shrank: it was rewritten, which a witness never is
            raise StoreUnavailable(f"the witness {self.path} was truncated: it cannot vouch for the chains")
        if size == self._offset:
            return book
        data = os.pread(descriptor, size - self._offset, self._offset)
        end = data.rfind(b"\n") + 1  # only whole lines: a line cut short by a crash is never parsed
        for line in data[:end].splitlines():
            self._take(book, line)
        self._offset += end
        return book

    @staticmethod
    def _take(book: WitnessBook, line: bytes) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            return  # a fragment a crash left before the newline that ended it
        if not isinstance(record, dict):
            return
        if "checkpoint" in record:
            try:
                chain, kept, duplicate = book.check(record["checkpoint"])
            except CheckpointForged:
                return  # never written by the gate: vouches for nothing
            except WitnessConflict:
                cp = record["checkpoint"]
                book.keep_mark(
                    StreamRef(cp["project"], cp["candidate_id"]),
                    {
                        "first_bad_seq": cp["seq"],
                        "reason": "the witness holds two checkpoints at this seq: the chain forked",
                        "at": cp.get("at"),
                    },
                )
                return
            if not duplicate:
                book.keep(chain, kept)
        elif isinstance(record.get("tampered"), dict):
            mark = record["tampered"]
            project, candidate_id, finding = (
                mark.get("project"),
                mark.get("candidate_id"),
                mark.get("finding"),
            )
            if isinstance(project, str) and (candidate_id is None or isinstance(candidate_id, str)):
                book.keep_mark(StreamRef(project, candidate_id), finding if isinstance(finding, dict) else {})

    def _write(self, descriptor: int, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True, separators=(",", ":")).encode("utf-8") + b"\n"
        size = os.fstat(descriptor).st_size
        if size and os.pread(descriptor, 1, size - 1) != b"\n":
            line = b"\n" + line  # after a fragment a crash left: a line of its own
        try:
            os.write(descriptor, line)
            os.fsync(descriptor)  # on disk before the answer, or before the relay marks the item relayed
        except OSError as error:
            raise StoreUnavailable(f"the witness {self.path} cannot be written: {error.strerror}") from None
        self._offset = size + len(line)

    # ---- the port ---------------------------------------------------------------------------------------

    def newest(self, ref: StreamRef) -> dict[str, Any] | None:
        with self._lock, self._locked(exclusive=False) as descriptor:
            return self._refresh(descriptor).newest(ref)

    def tampered(self, ref: StreamRef) -> dict[str, Any] | None:
        with self._lock, self._locked(exclusive=False) as descriptor:
            return self._refresh(descriptor).tampered(ref)

    def append(self, checkpoint: dict[str, Any]) -> bool:
        with self._lock, self._locked(exclusive=True) as descriptor:
            book = self._refresh(descriptor)
            try:
                chain, kept, duplicate = book.check(checkpoint)
            except CheckpointForged:
                self.refused += 1
                raise
            if duplicate:
                return False
            self._write(descriptor, {"checkpoint": kept})
            book.keep(chain, kept)
            return True

    def mark_tampered(self, ref: StreamRef, finding: dict[str, Any]) -> None:
        with self._lock, self._locked(exclusive=True) as descriptor:
            book = self._refresh(descriptor)
            if book.tampered(ref) is not None:
                return
            record = {"project": ref.project, "candidate_id": ref.candidate_id, "finding": dict(finding)}
            self._write(descriptor, {"tampered": record})
            book.keep_mark(ref, finding)

    # ---- for the audit commands -------------------------------------------------------------------------

    def chains(self) -> list[StreamRef]:
        with self._lock, self._locked(exclusive=False) as descriptor:
            return self._refresh(descriptor).chains()

    def checkpoints(self, ref: StreamRef) -> list[dict[str, Any]]:
        with self._lock, self._locked(exclusive=False) as descriptor:
            return self._refresh(descriptor).checkpoints(ref)
