"""`sentinel serve`: the local gate, a real single-machine deployment. Its first line of standard output is
one JSON object saying where it listens, which store keeps its data and whether that data survives a
restart; then it serves on loopback until SIGINT or SIGTERM."""

import argparse
import errno
import json
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.integrity import ChainKeyUnavailable
from sentinel_service.adapters.principals import DirectoryUnavailable
from sentinel_service.adapters.token_key import TokenKeyUnavailable

from .data_dir import DataDirUnavailable, RunnerLock, open_data_dir
from .output import fail
from .relay import EventLog, OutboxRelay, forge_consumers
from .stores import data_dir_of

# What the first line says of an embedded store: the claim SQLite supports, and no more.
DURABILITY = (
    "SQLite in WAL mode with synchronous=FULL: an acknowledged write survives a restart or a crash of this "
    "process, and a power loss where the disk honours fsync"
)


class Startup:
    """What one run of the server holds and must let go of when it stops."""

    def __init__(self) -> None:
        self.lock: RunnerLock | None = None
        self.throwaway: Path | None = None

    def close(self) -> None:
        if self.lock is not None:
            self.lock.release()
        if self.throwaway is not None:
            shutil.rmtree(self.throwaway, ignore_errors=True)


def open_store(args: argparse.Namespace, held: Startup) -> tuple[Any, EventLog, dict[str, Any]]:
    """The services, the relay's event log and what the first line says of the store."""
    from .runtime import connect, open_embedded

    if args.dynamodb_endpoint:
        log = EventLog(Path(args.event_log) if args.event_log else None)
        services = connect(args.dynamodb_endpoint)
        return (
            services,
            log,
            {"store": "dynamodb", "dynamodb_endpoint": args.dynamodb_endpoint, "persistent": None},
        )
    if args.store == "memory":
        held.throwaway = Path(tempfile.mkdtemp(prefix="sentinel-memory-"))
        data = open_data_dir(held.throwaway)
    else:
        data = data_dir_of(args)
    held.lock = RunnerLock(data).acquire()
    log = EventLog(Path(args.event_log) if args.event_log else data.event_log)
    services = open_embedded(data)
    about: dict[str, Any] = {"store": "memory" if held.throwaway else "sqlite", "data_dir": str(data.path)}
    if held.throwaway:
        about.update(persistent=False, durability="a throwaway: deleted when this server stops")
    else:
        about.update(persistent=True, durability=DURABILITY)
    return services, log, about


def cmd_serve(args: argparse.Namespace) -> int:
    from sentinel_gateway.gateway import LocalGateway, TokenBucket
    from sentinel_gateway.server import LOOPBACK_HOSTS, make_server, serve_in_thread

    from .seed import seed_demo

    # Before anything is opened: the local gate is for this machine only, with no flag to widen it (its
    # store is protected by file permissions, not by the API; a shared gate is the deployed stack).
    if args.host not in LOOPBACK_HOSTS:
        return fail(
            "HOST_NOT_LOOPBACK",
            f"--host {args.host} is not a loopback address: the local gate listens on this machine only",
            "serve on 127.0.0.1 (the default); a gate for a team is the deployed stack (docs/deploy.md)",
        )
    if not 0 <= args.port <= 65535:
        return fail("VALIDATION_FAILED", f"--port {args.port} is not a port (0 to 65535; 0 picks a free one)")
    held = Startup()
    try:
        try:
            services, log, about = open_store(args, held)
            services.token_key()  # at start: a key that cannot be read refuses to serve, not every request
            seed = seed_demo(services.operator) if args.seed else None
        except (
            DataDirUnavailable,
            StoreUnavailable,
            TokenKeyUnavailable,
            ChainKeyUnavailable,
            DirectoryUnavailable,
        ) as error:
            return fail(
                "STATE_UNAVAILABLE", str(error), "fix the data directory, or choose another with --data"
            )
        throttle = TokenBucket(args.rate, args.burst) if args.rate > 0 else None
        # The socket before the relay: a port that cannot be had leaves no thread behind.
        try:
            server = make_server(LocalGateway(lambda: services, throttle=throttle), args.host, args.port)
        except OSError as error:
            return _cannot_listen(args.host, args.port, error)
        relay = OutboxRelay(
            services.store,
            log,
            witness=services.witness,
            seal=services.chain_seal,
            forge_checks=services.forge_checks,
            consumers=forge_consumers(services),
        )
        relay.start()
        host, port = server.server_address[:2]
        banner: dict[str, Any] = {"url": f"http://{host}:{port}", **about, "event_log": str(log.path or "")}
        witness_path = getattr(services.witness, "path", None)
        if witness_path is not None:
            banner["witness"] = str(witness_path)
        if seed is not None:
            banner["seed"] = seed
        # The handlers go in before the first line: whoever reads it may stop the server at once.
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        serve_in_thread(server)
        print(json.dumps(banner), flush=True)
        stop.wait()
        server.shutdown()
        relay.stop()
        return 0
    finally:
        held.close()


def _cannot_listen(host: str, port: int, error: OSError) -> int:
    if error.errno == errno.EADDRINUSE:
        return fail("PORT_IN_USE", f"{host}:{port} is already in use")
    reason = error.strerror or str(error)
    if error.errno == errno.EACCES:
        return fail(
            "PORT_UNAVAILABLE",
            f"cannot listen on {host}:{port}: {reason}",
            "ports below 1024 need privileges: choose a port above 1024 (0 picks a free one)",
        )
    return fail(
        "PORT_UNAVAILABLE",
        f"cannot listen on {host}:{port}: {reason}",
        "serve on 127.0.0.1 with another --port (0 picks a free one)",
    )
