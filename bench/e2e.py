"""Part 5: the hook's decision call (GET .../decision) end to end.

Over HTTP: `sentinel serve --seed` in its own process (its embedded SQLite store, then moto's server as the
baseline; stage throttle off with --rate 0,
loopback only), a ready candidate made by the client's own flow, then a bounded number of threads, each
with its own client, calling GET .../decision for a bounded time. Requests per second and latency
percentiles per concurrency level.

In-process: the same handlers behind LocalGateway over the same kind of store (moto's server on loopback,
one lock around every call as the runner does), with a timing wrapper outside the lock (what the handler
waits for, lock included) and one inside it (moto's own service time): the store's share of each request."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, ensure_repo_on_path, median, percentile, r, section_main, set_fake_aws

LEVELS = (1, 4, 8)
SECONDS = 3.0
MAX_PER_THREAD = 3_000


def _load(call: Any, threads: int, seconds: float) -> dict[str, Any]:
    """`call()` -> (status, store_outer_s, store_inner_s) from `threads` threads for `seconds`."""
    latencies: list[float] = []
    store_outer: list[float] = []
    store_inner: list[float] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    start = threading.Barrier(threads + 1)
    deadline = [0.0]

    def worker() -> None:
        mine: list[tuple[float, int, float, float]] = []
        start.wait()
        while time.perf_counter() < deadline[0] and len(mine) < MAX_PER_THREAD:
            t0 = time.perf_counter()
            status, outer, inner = call()
            mine.append((time.perf_counter() - t0, status, outer, inner))
        with lock:
            for seconds_, status, outer, inner in mine:
                latencies.append(seconds_)
                store_outer.append(outer)
                store_inner.append(inner)
                statuses[status] = statuses.get(status, 0) + 1

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for w in workers:
        w.start()
    deadline[0] = time.perf_counter() + seconds
    t0 = time.perf_counter()
    start.wait()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    row: dict[str, Any] = {
        "threads": threads,
        "requests": len(latencies),
        "seconds": r(elapsed, 2),
        "rps": r(len(latencies) / elapsed, 1),
        "p50_ms": r(median(latencies) * 1000, 1),
        "p90_ms": r(percentile(latencies, 90) * 1000, 1),
        "p99_ms": r(percentile(latencies, 99) * 1000, 1),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
    }
    if any(store_outer):
        total = sum(latencies)
        row.update(
            store_share_with_lock_wait=r(sum(store_outer) / total, 3),
            store_share_service_time=r(sum(store_inner) / total, 3),
            store_ms_per_request=r(median(store_outer) * 1000, 1),
        )
    return row


def over_http(levels: tuple[int, ...], seconds: float, store: str = "sqlite") -> dict[str, Any]:
    from sentinel_client.api import SentinelClient
    from sentinel_client.flow import run_ready_flow
    from sentinel_runner.embedded import EmbeddedStore

    embedded = EmbeddedStore() if store == "moto" else None
    with tempfile.TemporaryDirectory(prefix="sentinel-bench-e2e-") as tmp:
        # A data directory of its own for each run: the runner keeps its chain key and witness there, also
        # for a DynamoDB endpoint (a fresh moto server's tables must not meet an earlier run's witness).
        env = dict(
            os.environ,
            SENTINEL_TOKEN_KEY_FILE=str(Path(tmp) / "token.key"),
            SENTINEL_DATA_DIR=str(Path(tmp) / "data"),
        )
        env.pop("AWS_LAMBDA_FUNCTION_NAME", None)
        # The store under test: the embedded SQLite store in a data directory, or (the baseline, the local
        # gate's store until now) moto's server on loopback with one lock around every call.
        where = ["--dynamodb-endpoint", embedded.start()] if embedded else ["--data", str(Path(tmp) / "data")]
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sentinel_runner.cli",
                "serve",
                "--seed",
                "--rate",
                "0",
                *where,
                "--event-log",
                str(Path(tmp) / "events.jsonl"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=str(REPO),
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(
                    f"sentinel serve did not start: {process.stderr.read()[-2000:] if process.stderr else ''}"
                )
            banner = json.loads(line)
            url, principals = banner["url"], banner["seed"]["principals"]
            clients = {
                role: SentinelClient(url, token=principals[role]["token"])
                for role in ("requester", "publisher", "reviewer")
            }
            flow = run_ready_flow(clients, banner["seed"]["project"])
            project, cid = banner["seed"]["project"], flow.candidate_id
            local = threading.local()

            def call() -> tuple[int, float, float]:
                if not hasattr(local, "client"):
                    local.client = SentinelClient(url, token=principals["requester"]["token"])
                return local.client.decision(project, cid).status, 0.0, 0.0

            for _ in range(20):  # warm the server's handlers and connections
                call()
            rows = [_load(call, level, seconds) for level in levels]
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
            if embedded:
                embedded.stop()
    return {"url": "loopback", "store": banner.get("store"), "throttle": "off (--rate 0)", "rows": rows}


def in_process(levels: tuple[int, ...], seconds: float) -> dict[str, Any]:
    import boto3
    from botocore.config import Config

    from bench.inproc import build_world
    from bench.metering import TimingClient
    from sentinel_client.flow import run_ready_flow
    from sentinel_runner.embedded import EmbeddedStore, LockedClient

    embedded = EmbeddedStore()
    endpoint = embedded.start()
    # moto keeps its tables per process: the over-HTTP run's (sealed under that server's own chain key) must
    # not meet this world's.
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=10)
    try:
        raw = boto3.client(
            "dynamodb",
            region_name="us-east-1",
            endpoint_url=endpoint,
            aws_access_key_id="local",
            aws_secret_access_key="local",
            config=Config(
                connect_timeout=2, read_timeout=10, retries={"max_attempts": 3}, max_pool_connections=32
            ),
        )
        lock = threading.Lock()
        inner = TimingClient(raw)
        outer = TimingClient(LockedClient(inner, lock))
        with tempfile.TemporaryDirectory(prefix="sentinel-bench-share-") as tmp:
            world = build_world(outer, Path(tmp), admin_client=LockedClient(raw, lock))
            project = world.seed["project"]
            flow = run_ready_flow(world.flow_clients(), project)
            token = world.seed["principals"]["requester"]["token"]
            gateway = world.recorder.gateway
            path = f"/v1/projects/{project}/candidates/{flow.candidate_id}/decision"
            headers = {"authorization": f"Bearer {token}", "accept": "application/json"}

            def call() -> tuple[int, float, float]:
                outer.reset()
                inner.reset()
                status, _headers, _body = gateway.invoke("GET", path, headers, None, None)
                return status, outer.taken()[0], inner.taken()[0]

            for _ in range(10):
                call()
            rows = [_load(call, level, seconds) for level in levels]
    finally:
        embedded.stop()
    return {
        "store": "moto ThreadedMotoServer on loopback, one lock around every call (as `sentinel serve`)",
        "rows": rows,
    }


def run(quick: bool) -> dict[str, Any]:
    ensure_repo_on_path()
    set_fake_aws()
    levels = (1, 4) if quick else LEVELS
    seconds = 1.5 if quick else SECONDS
    http = over_http(levels, seconds, "sqlite")
    baseline = over_http(levels[:2], seconds, "moto")
    one = {row["threads"]: row for row in http["rows"]}.get(1, {})
    before = {row["threads"]: row for row in baseline["rows"]}.get(1, {})
    return {
        "http": http,
        "http_moto_baseline": baseline,
        "targets": {
            "ten_times_the_moto_store_for_one_client": {
                "rps": one.get("rps"),
                "baseline_rps": before.get("rps"),
                "ratio": round(one["rps"] / before["rps"], 1)
                if one.get("rps") and before.get("rps")
                else None,
                "met": bool(one.get("rps") and before.get("rps") and one["rps"] >= 10 * before["rps"]),
            },
            "p99_under_50_ms_for_one_client": {
                "p99_ms": one.get("p99_ms"),
                "met": bool(one.get("p99_ms") is not None and one["p99_ms"] < 50),
            },
        },
        "in_process": in_process(levels[:2], seconds),
        "bounds": {
            "seconds_per_level": seconds,
            "max_requests_per_thread": MAX_PER_THREAD,
            "levels": list(levels),
        },
        "note": "2 cores shared by the clients and the server; the server is `sentinel serve` on its "
        "embedded SQLite store, then, as the baseline, on moto's server (the local gate's store until now, "
        "every call serialised by one lock)",
    }


if __name__ == "__main__":
    section_main("e2e", run)
