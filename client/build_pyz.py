"""Build the single-file client: `python client/build_pyz.py OUT.pyz` (what `make client-zipapp` runs).

The archive holds client/src/sentinel_client's sources and nothing else (no bytecode, no __pycache__), and
runs with any Python 3.11+ and its standard library alone:

    python sentinel-client.pyz whoami ...        # `sentinel ...`
    python sentinel-client.pyz hook ...          # `sentinel-hook ...`

It is reproducible: the same sources give the same bytes (entries sorted, every timestamp SOURCE_DATE_EPOCH
or 1980-01-01, every mode 0644, no compression since zlib builds differ), so a published archive can be
rebuilt and compared.
The zip is written here with fixed entries, then handed to the standard library's `zipapp` for the shebang
(its own directory walk stamps each file's mtime and the current time on `__main__.py`)."""

from __future__ import annotations

import io
import os
import sys
import time
import zipapp
import zipfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent / "src" / "sentinel_client"
INTERPRETER = "/usr/bin/env python3"
MAIN = """# The single-file Sentinel client: `hook ...` is sentinel-hook, anything else is sentinel.
import sys

from sentinel_client.__main__ import main

sys.exit(main())
"""
EARLIEST_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def _stamp() -> tuple[int, int, int, int, int, int]:
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not epoch:
        return EARLIEST_ZIP_TIME
    stamp = time.gmtime(max(int(epoch), 315532800))  # a zip cannot say a time before 1980
    return (stamp.tm_year, stamp.tm_mon, stamp.tm_mday, stamp.tm_hour, stamp.tm_min, stamp.tm_sec)


def sources(package: Path = PACKAGE) -> list[tuple[str, bytes]]:
    """(name in the archive, content) of every module of the package, sorted by name."""
    found = [
        (path.relative_to(package.parent).as_posix(), path.read_bytes())
        for path in package.rglob("*.py")
        if "__pycache__" not in path.parts
    ]
    return sorted([*found, ("__main__.py", MAIN.encode("utf-8"))])


def build(target: Path, package: Path = PACKAGE) -> Path:
    stamp = _stamp()
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        for name, content in sources(package):
            entry = zipfile.ZipInfo(name, date_time=stamp)
            # Stored, not deflated: compressed bytes depend on the zlib build (zlib-ng's differ), and the
            # archive must be the same wherever it is rebuilt. It is a few hundred kilobytes either way.
            entry.compress_type = zipfile.ZIP_STORED
            entry.external_attr = 0o100644 << 16
            entry.create_system = 3  # Unix, whatever the building machine: the mode above means the same
            zipped.writestr(entry, content)
    archive.seek(0)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A path given as str: zipapp marks only such a target executable.
    zipapp.create_archive(archive, str(target), interpreter=INTERPRETER)
    return target


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python client/build_pyz.py OUT.pyz")
    print(build(Path(sys.argv[1])))
