"""One build and one synthesized stack for the whole run, shared by the test workers.

The build is the one the infrastructure tests use (same folder, same lock: whichever worker needs it first
builds it, the others wait and reuse the zips). The stack is synthesized once, from cdk.json's defaults as
`make acceptance-local` does, under a file lock in the run's shared temporary folder; every emulated
deployment in these tests starts from that one synth and differs only where a test changes it.
"""

import json
import sys
from pathlib import Path

import pytest

from sentinel_acceptance.emulation import Synth, read_synth, synthesize
from sentinel_infra.packaging import exclusive
from sentinel_service import names

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # infra/ and app.py live at the repository root, outside the installed packages
    sys.path.insert(0, str(REPO))
STACK = names.stack_name(json.loads((Path(__file__).resolve().parents[2] / "cdk.json").read_text())
                         ["context"]["stage"])








@pytest.fixture(scope="session")
def synthesized(built: Path, shared_dir: Path) -> Synth:
    outdir = shared_dir / "acceptance-cdk.out"
    done = shared_dir / "acceptance-synth.done"  # written last: a synth that broke off is redone, not reused
    with exclusive(shared_dir / ".acceptance-synth.lock"):
        if not done.exists():
            synthesize(built, outdir)
            done.write_text(STACK)
    return read_synth(outdir, STACK)
