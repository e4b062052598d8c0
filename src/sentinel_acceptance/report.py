"""Evidence of every attempt: one JSON file per run, numbered, never overwriting an earlier one.

The number is claimed before any check runs, by creating `attempt-NNNN.json` with O_EXCL: two runs started at
once get two numbers, and a run that dies half-way leaves its claim (status "running") on record. Only the
run that claimed a file rewrites it (atomically, through a temporary file and rename), so a failed attempt
stays next to the later passing one.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]  # src/<package>/<module>.py
DEFAULT_REPORTS = REPO / "build" / "acceptance-reports"
ATTEMPT = re.compile(r"^attempt-(\d{4,})\.json$")
SCHEMA = "sentinel.acceptance.attempt/1"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class AttemptReport:
    """The report of one run. `claim()` takes the next number; `write()` records the current state."""

    def __init__(self, directory: Path = DEFAULT_REPORTS) -> None:
        self.directory = Path(directory)
        self.path: Path | None = None
        self.attempt = 0

    def claim(self, header: Mapping[str, Any]) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        number = 1 + max(
            (int(m.group(1)) for p in self.directory.iterdir() if (m := ATTEMPT.match(p.name))), default=0
        )
        while True:
            candidate = self.directory / f"attempt-{number:04d}.json"
            try:
                descriptor = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                number += 1  # another run claimed it between the listing and the open
                continue
            self.path, self.attempt = candidate, number
            with os.fdopen(descriptor, "w", encoding="utf-8") as out:
                out.write(_dump({"schema": SCHEMA, "attempt": number, "status": "running", **header}))
            return candidate

    def write(self, body: Mapping[str, Any]) -> Path:
        if self.path is None:
            raise RuntimeError("claim() the attempt before writing it")
        handle, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.directory)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(_dump({"schema": SCHEMA, "attempt": self.attempt, **body}))
            os.chmod(temporary, 0o644)
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return self.path


def attempts(directory: Path = DEFAULT_REPORTS) -> list[Path]:
    """Every attempt report in a folder, oldest first."""
    if not Path(directory).is_dir():
        return []
    found = [(int(m.group(1)), p) for p in Path(directory).iterdir() if (m := ATTEMPT.match(p.name))]
    return [p for _, p in sorted(found)]


def _dump(body: Mapping[str, Any]) -> str:
    return json.dumps(body, indent=2, sort_keys=False, default=str) + "\n"
