"""A server killed with SIGKILL in the middle of a stream of writes loses none it acknowledged, and every
chain it kept still verifies when a new server starts on the same data directory."""

import http.client
import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sentinel_client.api import SentinelClient, TransportError

pytestmark = pytest.mark.http

KILLS = 20
PROJECT = "demo"


def start(data: Path, *extra: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "sentinel_runner.cli", "serve", "--data", str(data), "--rate", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, "sentinel serve did not start"
    return process, json.loads(line)


def write_until_killed(url: str, token: str, acknowledged: list[str], stop: threading.Event) -> None:
    """Create candidates one after another; remember each one the server answered 201 for."""
    client = SentinelClient(url, token=token, timeout=5)
    while not stop.is_set():
        body = {"subject": "payments", "base_revision": "b" * 40, "revision": random.randbytes(20).hex(),
                "environment": "staging", "change": {"files": ["services/payments/api.py"]}}  # fmt: skip
        try:
            answer = client.request("POST", f"/projects/{PROJECT}/candidates", body)
        except (TransportError, OSError, http.client.HTTPException):
            return  # the server is gone (mid-answer too): whatever was not answered was never acknowledged
        if answer.status == 201 and isinstance(answer.body, dict):
            acknowledged.append(answer.body["candidate_id"])
        elif answer.status == 201:
            return  # killed after the status line, inside the body: an id nobody can read is not checked


def test_every_acknowledged_write_survives_sigkill_and_every_chain_verifies(tmp_path: Path) -> None:
    # Given a seeded server on a data directory, and the tokens it issued (they live in its store)
    process, banner = start(tmp_path, "--seed")
    tokens = {role: p["token"] for role, p in banner["seed"]["principals"].items()}
    acknowledged: list[str] = []
    rng = random.Random(20261201)
    # When, twenty times, a stream of writes is cut by SIGKILL at a random moment and a new server starts
    for _kill in range(KILLS):
        stop = threading.Event()
        writer = threading.Thread(
            target=write_until_killed, args=(banner["url"], tokens["requester"], acknowledged, stop)
        )
        writer.start()
        time.sleep(rng.uniform(0.05, 0.4))
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=20)
        stop.set()
        writer.join(timeout=20)
        process, banner = start(tmp_path)
    try:
        admin = SentinelClient(banner["url"], token=tokens["admin"])
        missing = [
            c
            for c in acknowledged
            if admin.request("GET", f"/projects/{PROJECT}/candidates/{c}").status != 200
        ]
        broken = []
        for candidate in [None, *acknowledged]:
            path = f"/projects/{PROJECT}" + (f"/candidates/{candidate}" if candidate else "") + "/audit"
            verification = admin.request("GET", path, query={"limit": 500}).body["verification"]
            if not verification["valid"]:
                broken.append((candidate, verification))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
    # Then writes were acknowledged across the kills, every one of them is there, and every chain verifies
    assert len(acknowledged) >= KILLS
    assert missing == []
    assert broken == []
