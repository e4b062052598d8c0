"""Fixtures more than one layer shares: the one build, and the run's shared folder it lives in, that the
infrastructure and end-to-end acceptance tests reuse."""

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sentinel_infra.packaging import exclusive
from support.bytecode import NO_BYTECODE

if TYPE_CHECKING:
    from support.fake_github import FakeGitHub


def pytest_configure(config: pytest.Config) -> None:
    """No test reaches the user's own data directory: a server or an operator command that a test starts
    without --data lands in a directory of this run (each xdist worker its own), never ~/.local/share."""
    os.environ["SENTINEL_DATA_DIR"] = tempfile.mkdtemp(prefix="sentinel-test-data-")


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    # xdist workers' basetemps sit side by side in the run's own folder (pytest removes old ones); without
    # xdist there is one process and its basetemp will do.
    base = tmp_path_factory.getbasetemp()
    return (base if worker_id == "master" else base.parent) / "sentinel-infra"


@pytest.fixture(scope="session")
def built(shared_dir: Path) -> Path:
    """One build/-like folder (the three zips and digests.json) for the infrastructure and acceptance tests;
    whichever worker needs it first builds it, the others wait and reuse it (wheels cache in build/cache/).

    With the pinned CPython 3.13 (TOOLCHAIN.md: pyenv's, on these machines) the packages carry bytecode as
    `make build` makes them. Without it the build here goes on without bytecode, knowingly: every other test
    of the packages and the stack still runs, and the bytecode tests skip saying why (`requires_bytecode`)."""
    from sentinel_infra import packaging

    out = shared_dir / "build"
    with exclusive(shared_dir / ".build.lock"):
        if not (out / packaging.DIGESTS_FILE).exists():
            try:
                packaging.find_bytecode_python()
                bytecode = True
            except packaging.BytecodeUnavailable as why:
                (shared_dir / NO_BYTECODE).write_text(str(why))
                bytecode = False
            packaging.build(out, bytecode=bytecode)
    return out


@pytest.fixture
def fake_github() -> Iterator["FakeGitHub"]:
    """A fake GitHub on loopback that checks every request against GitHub's REST description (and its own
    answers and webhooks against the published schemas); any violation left unclaimed fails the test at
    teardown. Skips, saying why, when node_modules lacks the descriptions, except under CI=true."""
    from support.fake_github import running_fake

    with running_fake() as fake:
        yield fake
