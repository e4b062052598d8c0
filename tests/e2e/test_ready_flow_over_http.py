"""The full ready flow over real HTTP against `sentinel serve` on its embedded store (a child process)."""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sentinel_client.api import SentinelClient
from sentinel_client.flow import run_ready_flow
from sentinel_runner.demo import LocalGate

pytestmark = pytest.mark.http


@pytest.fixture(scope="module")
def gate():
    with tempfile.TemporaryDirectory() as tmp, LocalGate(Path(tmp)) as running:
        yield running


def test_the_ready_flow_ends_ready_with_a_verified_chain(gate) -> None:
    # Given the seeded demo project and its principals
    clients = {role: gate.client(role) for role in ("requester", "publisher", "reviewer")}
    # When the flow of API.md runs through the HTTP client
    result = run_ready_flow(clients, "demo", outbox_count=gate.delivered)
    # Then the recorded decision is ready and the chain has one event per accepted write
    assert result.decision["decision"] == "ready"
    assert result.verification["valid"] is True
    assert result.verification["length"] == result.accepted_writes


def test_the_gateway_answers_401_and_403_like_api_gateway(gate) -> None:
    url = gate.banner["url"]
    anonymous = SentinelClient(url).whoami()
    assert (anonymous.status, anonymous.body) == (401, {"message": "Unauthorized"})
    forged = SentinelClient(url, token="snt_" + "A" * 49).whoami()
    assert (forged.status, forged.body) == (403, {"message": "Forbidden"})


def test_health_names_the_local_runtime_and_no_secret(gate) -> None:
    health = SentinelClient(gate.banner["url"]).health()
    assert health.status == 200 and health.body["runtime"] == "local"
    text = json.dumps(health.body)
    for principal in gate.banner["seed"]["principals"].values():
        assert principal["token"] not in text


def test_serve_prints_its_url_and_store_as_the_first_line(tmp_path: Path) -> None:
    # Given a server started on a data directory without --seed
    process = subprocess.Popen(
        [sys.executable, "-m", "sentinel_runner.cli", "serve", "--data", str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # When it prints its first line
        banner = json.loads(process.stdout.readline())
    finally:
        process.terminate()
        process.wait(timeout=10)
    # Then it is one JSON object naming where it listens, its store, its data and that the data is kept
    assert banner["url"].startswith("http://127.0.0.1:")
    assert banner["store"] == "sqlite" and banner["data_dir"] == str(tmp_path.resolve())
    assert banner["persistent"] is True and "synchronous=FULL" in banner["durability"]
    assert "dynamodb_endpoint" not in banner and "seed" not in banner
