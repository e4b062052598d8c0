"""`sentinel serve` keeps its data across restarts, owns its data directory alone, says what it keeps in its
first line, and refuses at start what it cannot keep safely."""

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sentinel_client.api import SentinelClient
from sentinel_client.flow import run_ready_flow
from sentinel_runner.demo import LocalGate

pytestmark = pytest.mark.http


def serve(data: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "sentinel_runner.cli", "serve", "--data", str(data), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def first_line(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, process.stderr.read() if process.stderr else ""
    banner: dict[str, Any] = json.loads(line)
    return banner


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=20)


def test_the_ready_flow_outlives_a_restart(tmp_path: Path) -> None:
    # Given the ready flow run to `ready` against a server on a data directory, and the server stopped
    data = tmp_path / "data"
    with LocalGate(data) as gate:
        clients = {role: gate.client(role) for role in ("requester", "publisher", "reviewer")}
        result = run_ready_flow(clients, gate.banner["seed"]["project"])
        tokens = gate.banner["seed"]["principals"]
    # When a new server starts on the same directory, without seeding
    process = serve(data)
    try:
        banner = first_line(process)
        auditor = SentinelClient(banner["url"], token=tokens["admin"]["token"])
        path = f"/projects/demo/candidates/{result.candidate_id}"
        candidate = auditor.request("GET", path)
        audit = auditor.request("GET", path + "/audit", query={"limit": 500})
    finally:
        stop(process)
    # Then the first line says the data is kept, and where
    assert banner["store"] == "sqlite" and banner["persistent"] is True
    assert banner["data_dir"] == str(data.resolve())
    # And the candidate, its recorded decision and its audit chain are all there, under the old tokens
    assert candidate.status == 200, candidate.body
    assert candidate.body["last_decision"]["decision"] == "ready"
    assert audit.body["verification"]["valid"] is True
    assert audit.body["verification"]["length"] == result.verification["length"]


def test_a_second_server_on_the_same_directory_refuses_to_start(tmp_path: Path) -> None:
    # Given a server on a data directory
    first = serve(tmp_path)
    try:
        first_line(first)
        # When a second one is started on the same directory
        second = serve(tmp_path)
        _out, err = second.communicate(timeout=60)
    finally:
        stop(first)
    # Then it refuses with one error line naming the cause and a next step, and no traceback
    assert second.returncode == 3  # unavailable (docs/cli.md, exit codes)
    assert err.startswith("error: STATE_UNAVAILABLE: another `sentinel serve`")
    assert "Traceback" not in err


def test_the_operator_commands_write_while_the_server_runs(tmp_path: Path) -> None:
    # Given a seeded server on a data directory
    process = serve(tmp_path, "--seed")
    try:
        banner = first_line(process)
        # When the operator adds a principal to the same directory while it serves
        added = subprocess.run(
            [sys.executable, "-m", "sentinel_runner.cli", "principals", "add", "--data", str(tmp_path),
             "--id", "olga", "--kind", "human", "--project", "demo", "--role", "auditor"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        # Then the new token works against the running server at once
        me = SentinelClient(banner["url"], token=added.stdout.strip()).request("GET", "/whoami")
    finally:
        stop(process)
    assert added.returncode == 0, added.stderr
    assert me.status == 200 and me.body["principal_id"] == "olga"


def test_a_throwaway_store_says_so_and_leaves_nothing(tmp_path: Path) -> None:
    # Given a server on a throwaway store
    process = subprocess.Popen(
        [sys.executable, "-m", "sentinel_runner.cli", "serve", "--store", "memory"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    banner = first_line(process)
    # When it stops
    stop(process)
    # Then its first line said nothing would be kept, and nothing was
    assert banner["store"] == "memory" and banner["persistent"] is False
    assert not Path(banner["data_dir"]).exists()


def test_a_database_from_a_newer_version_is_refused_and_left_alone(tmp_path: Path) -> None:
    # Given a data directory whose database a newer version wrote
    process = serve(tmp_path)
    first_line(process)
    stop(process)
    with sqlite3.connect(tmp_path / "sentinel.db") as database:
        database.execute("PRAGMA user_version = 999")
        before = database.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    # When a server starts on it
    refused = serve(tmp_path)
    _out, err = refused.communicate(timeout=60)
    # Then it refuses with a clear line, and the database is neither migrated nor changed in shape
    assert refused.returncode == 3 and err.startswith("error: STATE_UNAVAILABLE:"), err
    assert "Traceback" not in err
    with sqlite3.connect(tmp_path / "sentinel.db") as database:
        assert database.execute("PRAGMA user_version").fetchone() == (999,)
        assert (
            database.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall() == before
        )


def test_a_corrupt_database_is_refused_at_start(tmp_path: Path) -> None:
    # Given a data directory whose database file is not a database
    (tmp_path / "sentinel.db").write_bytes(b"this is not a database" * 100)
    # When a server starts on it
    started = time.monotonic()
    refused = serve(tmp_path)
    _out, err = refused.communicate(timeout=60)
    # Then it refuses at once with a clear line and no traceback
    assert refused.returncode == 3 and err.startswith("error: STATE_UNAVAILABLE:"), err
    assert "Traceback" not in err and time.monotonic() - started < 60


def test_a_store_whose_token_key_went_missing_is_refused_not_rekeyed(tmp_path: Path) -> None:
    # Given a seeded data directory, its files for its owner alone, and then its token key lost
    process = serve(tmp_path, "--seed")
    first_line(process)
    stop(process)
    modes = {name: oct((tmp_path / name).stat().st_mode & 0o777) for name in ("sentinel.db", "token.key")}
    assert modes == {"sentinel.db": "0o600", "token.key": "0o600"}
    (tmp_path / "token.key").unlink()
    # When a server starts on it
    refused = serve(tmp_path)
    _out, err = refused.communicate(timeout=60)
    # Then it refuses, says what to restore, and makes no new key (which would void every token)
    assert refused.returncode == 3 and err.startswith("error: STATE_UNAVAILABLE: the token key"), err
    assert not (tmp_path / "token.key").exists()
