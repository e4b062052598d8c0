"""What one run of one scenario holds while it runs: its result so far, the fresh fixture (the world), the
harness's shadow of what the gate should know, and the plumbing every step uses (sending a request through the
emulated API Gateway, the caller a credential names, failing an expectation)."""

import json
from dataclasses import dataclass, field
from typing import Any

from sentinel_domain.models import Actor
from sentinel_domain.times import format_time

from .backings import Backing
from .catalog import Scenario
from .fixture import CONFIG, POLICIES, build_world, token
from .oracles import Shadow
from .requests import Request, RequestBuilder, Response


@dataclass
class RunResult:
    scenario: str
    observation: dict[str, Any]
    digest: str
    failures: list[str] = field(default_factory=list)  # expectations the gate did not meet
    false_ready: list[str] = field(default_factory=list)
    unauthorized_side_effects: list[str] = field(default_factory=list)
    wrong_binding: list[str] = field(default_factory=list)
    identity_boundary: list[str] = field(default_factory=list)
    outcome_mixups: list[str] = field(default_factory=list)  # negative and unknown not kept apart
    fallback_problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not (
            self.failures
            or self.false_ready
            or self.unauthorized_side_effects
            or self.wrong_binding
            or self.identity_boundary
            or self.outcome_mixups
            or self.fallback_problems
        )


def body_of(response: Response) -> dict[str, Any]:
    return response.body if isinstance(response.body, dict) else {}


class RunState:
    """A run's state and plumbing; the step modules' classes extend it and runner.Run composes them."""

    def __init__(self, scenario: Scenario, backing: Backing | None = None) -> None:
        self.scenario = scenario
        config = dict(CONFIG, **scenario.fixture.config)
        policies = {pid: dict(p, **scenario.fixture.policies.get(pid, {})) for pid, p in POLICIES.items()}
        self.shadow = Shadow(
            config=config, policies={pid: {"version": 1, "policy": p} for pid, p in policies.items()}
        )
        self.world = build_world(scenario.fixture.proposer, backing)
        self.labels: dict[str, str] = {}
        self.requests = RequestBuilder(self.shadow, self.world.clock.now, self.labels)
        self.result = RunResult(scenario.name, {}, "")
        self.trace: list[dict[str, Any]] = []
        self.modes: list[dict[str, Any]] = []
        self.idempotency: list[dict[str, Any]] = []
        self.approval_accepted = False
        self.executed = False
        self.n = 0

    # ---- plumbing ------------------------------------------------------------------------------------

    @property
    def now(self) -> str:
        return format_time(self.world.clock.now())

    @property
    def where(self) -> str:
        return f"{self.scenario.name} step {self.n}" if self.n else f"{self.scenario.name} final"

    def fail(self, message: str) -> None:
        self.result.failures.append(f"step {self.n}: {message}" if self.n else message)

    def send(self, request: Request) -> Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        if request.authorization is not None:
            if request.authorization:
                headers["authorization"] = request.authorization
        elif request.as_name is not None:
            headers["authorization"] = f"Bearer {token(request.as_name)}"
        data = json.dumps(request.body) if request.body is not None else None
        status, out_headers, raw = self.world.gateway.invoke(
            request.method, request.path, headers, data, request.query
        )
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = {"unreadable": True}
        return Response(status, {k.lower(): v for k, v in out_headers.items()}, body)

    def caller(self, request: Request) -> Actor | None:
        """The principal the credential names, as the authorizer fake resolves it (None: nobody)."""
        value = request.authorization
        if value is None:
            return self.world.directory.get(request.as_name) if request.as_name else None
        if not value.startswith("Bearer tok-"):
            return None
        return self.world.directory.get(value.removeprefix("Bearer tok-"))
