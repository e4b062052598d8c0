"""The real handlers in-process: the emulated API Gateway (sentinel_gateway.gateway.LocalGateway) with the
real authorizer, the gate over DynamoStateStore over a client of our choosing, and the stdlib client's own
flow (sentinel_client.flow.run_ready_flow) driven through it by a SentinelClient whose transport is the
gateway."""

import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentinel_client.api import ACCEPT, Response, SentinelClient, quote_etag
from sentinel_service.http.routes import route_for


@dataclass
class Request:
    route: str
    status: int
    seconds: float
    authorizer_seconds: float
    calls: list[Any] = field(default_factory=list)


class Recorder:
    """Invokes the gateway and records, per request, its route, status, durations and store calls."""

    def __init__(self, gateway: Any, meter: Any | None = None) -> None:
        self.gateway = gateway
        self.meter = meter
        self.requests: list[Request] = []
        self._authorizer_seconds = 0.0

    def timed_authorizer(
        self, real: Callable[[dict[str, Any], Any], dict[str, Any]]
    ) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
        def authorizer(event: dict[str, Any], context: Any) -> dict[str, Any]:
            previous = self.meter.context if self.meter is not None else {}
            if self.meter is not None:
                self.meter.context = {**previous, "phase": "authorizer"}
            t0 = time.perf_counter()
            try:
                return real(event, context)
            finally:
                self._authorizer_seconds += time.perf_counter() - t0
                if self.meter is not None:
                    self.meter.context = previous

        return authorizer

    def invoke(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes | None,
        query: dict[str, str] | None,
    ) -> tuple[int, dict[str, str], bytes]:
        route = route_for(method, path)
        label = f"{method} {route.path if route else path}"
        start = len(self.meter.calls) if self.meter is not None else 0
        if self.meter is not None:
            self.meter.context = {"route": label, "phase": "function"}
        self._authorizer_seconds = 0.0
        t0 = time.perf_counter()
        status, out_headers, raw = self.gateway.invoke(method, path, headers, body, query)
        seconds = time.perf_counter() - t0
        calls = list(self.meter.calls[start:]) if self.meter is not None else []
        self.requests.append(Request(label, status, seconds, self._authorizer_seconds, calls))
        return status, out_headers, raw


class InProcessClient(SentinelClient):
    """The stdlib client's API, with the gateway in-process as its transport."""

    def __init__(self, recorder: Recorder, token: str) -> None:
        super().__init__("http://127.0.0.1:9", token=token)
        self.recorder = recorder

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Any = None,
        if_match: str | None = None,
        idempotency_key: str | None = None,
    ) -> Response:
        headers = {"accept": ACCEPT, "content-type": "application/json", "user-agent": "sentinel-bench"}
        if self._token is not None:
            headers["authorization"] = f"Bearer {self._token}"
        if if_match is not None:
            headers["if-match"] = quote_etag(if_match)
        if idempotency_key is not None:
            headers["idempotency-key"] = idempotency_key
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        elif method in ("POST", "PUT"):
            data = b"{}"
        pairs = {k: str(v) for k, v in (query or {}).items() if v is not None} or None
        status, out_headers, raw = self.recorder.invoke(method, "/v1" + path, headers, data, pairs)
        return Response(
            status, self._parse_body(status, raw), {k.lower(): v for k, v in out_headers.items()}, raw
        )


@dataclass
class World:
    runtime: Any
    seed: dict[str, Any]
    recorder: Recorder

    def client(self, role: str) -> InProcessClient:
        return InProcessClient(self.recorder, self.seed["principals"][role]["token"])

    def flow_clients(self) -> dict[str, InProcessClient]:
        return {role: self.client(role) for role in ("requester", "publisher", "reviewer")}


def build_world(
    client: Any, key_dir: Path, meter: Any | None = None, admin_client: Any | None = None
) -> World:
    """Tables, the seeded demo project and principals (`sentinel serve --seed`), the handlers wired to a gate
    over `client`. Nothing is metered until this returns (the caller clears its meter)."""
    from sentinel_domain.integrity import ChainSeal
    from sentinel_domain.memory import MemoryWitness
    from sentinel_gateway.gateway import LocalGateway
    from sentinel_runner.seed import seed_demo
    from sentinel_service.adapters.receipt_signer import PemReceiptSigner, new_private_key_pem
    from sentinel_service.adapters.tables import ensure_tables
    from sentinel_service.compose import compose
    from sentinel_service.http.authorizer import make_authorizer
    from sentinel_service.settings import Settings

    os.environ["SENTINEL_TOKEN_KEY_FILE"] = str(key_dir / "token.key")
    os.environ.pop("AWS_LAMBDA_FUNCTION_NAME", None)  # the local runtime: no EMF lines on stdout
    # As the stack deploys by default: no notification target, so no notification items
    os.environ["SENTINEL_NOTIFICATIONS"] = "off"
    settings = Settings.from_env()
    admin_client = admin_client or client
    ensure_tables(admin_client, settings.state_table, settings.principals_table)
    # As a Lambda container composes: decision reads hold the chains they verified (compose.chain_cache).
    # The chain key and the witness are in memory: the witness (S3 in AWS) costs no DynamoDB unit, and its
    # own price per write is bench/witness_cost.py's.
    seal = ChainSeal(secrets.token_bytes(32))
    witness = MemoryWitness(seal)
    # A recorded ready decision is signed (KMS in AWS: no DynamoDB unit; a key in memory here).
    signer = PemReceiptSigner(new_private_key_pem())
    services = compose(
        settings,
        dynamodb=client,
        create_token_key=True,
        hold_chains=True,
        seal=seal,
        witness=witness,
        receipt_signer=signer,
    )
    # The operator provisions through its own client, so the seed's writes never reach the meter.
    seed = seed_demo(
        compose(
            settings, dynamodb=admin_client, token_key=services.token_key(), seal=seal, witness=witness
        ).operator
    )
    recorder = Recorder(None, meter)
    recorder.gateway = LocalGateway(
        lambda: services, authorizer=recorder.timed_authorizer(make_authorizer(lambda: services))
    )
    return World(services, seed, recorder)
