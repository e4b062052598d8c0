"""`sentinel serve` that cannot serve says why in one line and a next step, and leaves nothing running: a port
already taken, a host that is not loopback (the local gate is for this machine only, and no flag widens it),
a port that is not one, a data directory that is a file. Run as the installed script runs it (a process), so
what the operator would see is what is checked."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest

SERVE = [sys.executable, "-m", "sentinel_runner.cli", "serve"]


def refused(*argv: str, cwd: Path) -> tuple[int, str, str]:
    done = subprocess.run([*SERVE, *argv], capture_output=True, text=True, timeout=60, check=False, cwd=cwd)
    return done.returncode, done.stdout, done.stderr


def assert_one_line(code: int, out: str, err: str, expected: str, exit_code: int) -> None:
    lines = err.splitlines()
    assert code == exit_code, (code, err)
    assert out == "" and "Traceback" not in err, err
    assert lines[0].startswith(f"error: {expected}: ") and lines[1].startswith("next: "), err
    assert len(lines) == 2, err


def test_a_port_in_use_is_one_line_and_a_next_step(tmp_path: Path) -> None:
    # Given a port something already listens on
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # When the gate is asked to serve on it
        code, out, err = refused("--store", "memory", "--port", str(port), cwd=tmp_path)
    # Then it says the port is taken and what to do, exits refused (1), and no traceback
    assert_one_line(code, out, err, "PORT_IN_USE", 1)
    assert f"127.0.0.1:{port}" in err and "--port" in err


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10"])
def test_a_public_host_is_refused_before_anything_is_opened(tmp_path: Path, host: str) -> None:
    # Given a data directory that does not exist yet
    data = tmp_path / "data"
    # When the gate is asked to listen beyond this machine
    code, out, err = refused("--host", host, "--data", str(data), cwd=tmp_path)
    # Then it refuses with a code and the way to serve (there is no flag to widen it), and creates nothing
    assert_one_line(code, out, err, "HOST_NOT_LOOPBACK", 1)
    assert "127.0.0.1" in err.splitlines()[1]
    assert not data.exists()


def test_a_port_that_is_not_a_port_is_refused(tmp_path: Path) -> None:
    code, out, err = refused("--store", "memory", "--port", "70000", cwd=tmp_path)
    lines = err.splitlines()
    assert code == 1 and out == "" and "Traceback" not in err
    assert lines[0].startswith("error: VALIDATION_FAILED: --port 70000") and lines[1].startswith("next: ")


def test_a_data_directory_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "data"
    a_file.write_text("not a directory\n")
    code, out, err = refused("--data", str(a_file), cwd=tmp_path)
    assert_one_line(code, out, err, "STATE_UNAVAILABLE", 3)
