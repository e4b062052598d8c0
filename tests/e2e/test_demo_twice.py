"""`make demo` twice in a row on one data directory: both end READY, each on a fresh revision."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.http


def test_the_demo_succeeds_twice_on_the_same_data(tmp_path: Path) -> None:
    # Given one data directory for both runs (the demo keeps its data, as the local gate does)
    env = {"SENTINEL_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    runs = []
    for _ in range(2):
        # When the demo runs
        done = subprocess.run(
            [sys.executable, "-m", "sentinel_runner.demo"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        runs.append(done)
    # Then both end READY, on two different candidates
    assert [r.returncode for r in runs] == [0, 0], runs[-1].stderr[-2000:]
    ready = [line for r in runs for line in r.stdout.splitlines() if line.startswith("READY: candidate ")]
    assert len(ready) == 2 and ready[0].split()[2] != ready[1].split()[2]
    # And each run's receipt verified offline under the data directory's key
    verified = [
        line for r in runs for line in r.stdout.splitlines() if line.startswith("   receipt: signed by")
    ]
    assert len(verified) == 2
