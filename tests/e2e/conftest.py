"""Fixtures of the end-to-end tests: a HOME and a token file for the hook run as a subprocess (its helpers are
in support/hook_harness.py), and one synthesized stack for the acceptance emulation.

The acceptance tests use the build the infrastructure tests use (same folder, same lock: whichever worker
needs it first builds it, the others wait and reuse the zips). The stack is synthesized once, from cdk.json's
defaults as `make acceptance-local` does, under a file lock in the run's shared temporary folder; every
emulated deployment in these tests starts from that one synth and differs only where a test changes it.
"""

import json
import sys
from pathlib import Path

import pytest

from sentinel_acceptance.emulation import Synth, read_synth, synthesize
from sentinel_infra.packaging import exclusive
from sentinel_service import names
from support.paths import REPO

if str(REPO) not in sys.path:  # infra/ and app.py live at the repository root, outside the installed packages
    sys.path.insert(0, str(REPO))
STACK = names.stack_name(json.loads((REPO / "cdk.json").read_text())["context"]["stage"])


# ---- the hook ----------------------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def token_file(home: Path) -> Path:
    path = home / "token"
    path.write_text("snt_" + "A" * 49 + "\n")
    path.chmod(0o600)
    return path


# ---- the acceptance emulation ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def synthesized(built: Path, shared_dir: Path) -> Synth:
    outdir = shared_dir / "acceptance-cdk.out"
    done = shared_dir / "acceptance-synth.done"  # written last: a synth that broke off is redone, not reused
    with exclusive(shared_dir / ".acceptance-synth.lock"):
        if not done.exists():
            synthesize(built, outdir)
            done.write_text(STACK)
    return read_synth(outdir, STACK)
