"""Whether the run's shared build carries bytecode: it does wherever the pinned CPython 3.13 is found (see
sentinel_infra.packaging.find_bytecode_python); where none is, the build goes on without it and the tests of
the bytecode skip saying why, so a machine without 3.13 still runs every other test of the packages."""

from pathlib import Path

import pytest

NO_BYTECODE = "no-bytecode.txt"  # beside the shared build folder: why it carries no bytecode


def requires_bytecode(built: Path) -> None:
    """Skip, saying why, when the run's build could not compile bytecode."""
    why = built.parent / NO_BYTECODE
    if why.exists():
        pytest.skip(f"the packages were built without bytecode: {why.read_text()}")
