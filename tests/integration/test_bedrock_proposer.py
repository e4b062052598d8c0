"""The model adapters against their providers' wire formats, without a network (DOMAIN.md rule 23).

Bedrock: a real bedrock-runtime client (us-east-1, fake credentials) built by the production factory, with
botocore's Stubber scripting each answer (so botocore validates every request against the Converse model), or
an event hook raising the transport errors a slow or unreachable endpoint gives. Every scenario goes through
`Gate.propose` and must end in the exact mode and reason, with one plan.stored fact appended and the decision
unchanged. The OpenAI-compatible adapter and the composition root (settings, compose, health) follow."""

import copy
import http.server
import json
import logging
import socket
import threading
import urllib.error
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError
from botocore.stub import ANY, Stubber

from sentinel_domain.models import ChangeContextRequest
from sentinel_domain.ports import StreamRef
from sentinel_domain.proposals import PLAN_TOOL_NAME, ProposalFailed, plan_tool_schema
from sentinel_service import compose as bootstrap
from sentinel_service.adapters.proposers import (
    BedrockProposer,
    ModelLimits,
    NoModel,
    OpenAICompatibleProposer,
    bedrock_runtime_client,
)
from sentinel_service.http import endpoints
from sentinel_service.settings import Settings
from support.world import CI, PROJECT, REQUESTER, World

FILES = ("services/payments/api.py", "docs/guide.md")
MODEL_ID = "anthropic.claude-test-v1:0"
# Small numbers so a scripted retry costs nothing; the fake sleep records instead of sleeping.
LIMITS = ModelLimits(
    connect_timeout_seconds=0.2,
    read_timeout_seconds=0.2,
    max_attempts=2,
    budget_seconds=5,
    backoff_seconds=0.01,
)
SECRET = "sk-test-0123456789-never-shown"


@pytest.fixture(autouse=True)
def fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


# ---- the world a proposal runs in --------------------------------------------------------------------


def attested_candidate(world: World) -> dict[str, Any]:
    created = world.candidate(files=FILES)
    world.gate.add_change_context(
        PROJECT,
        created["candidate_id"],
        CI,
        ChangeContextRequest.model_validate({"change": {"files": list(FILES)}}),
        None,
    )
    return created


def obligation(created: dict[str, Any], policy_id: str) -> str:
    return next(o["obligation_id"] for o in created["obligations"] if o["policy_id"] == policy_id)


def valid_plan(created: dict[str, Any]) -> dict[str, Any]:
    return {
        "tasks": [
            {
                "task_id": "T-unit",
                "title": "Unit tests for payments",
                "checks": [
                    {
                        "check_id": "C-unit",
                        "policy_ref": "unit-tests",
                        "command": "pytest -q payments-api",
                        "expected_exit_code": 0,
                        "covers": [obligation(created, "unit-tests")],
                    }
                ],
            },
            {
                "task_id": "T-lint",
                "title": "Lint the guide",
                "checks": [
                    {
                        "check_id": "C-lint",
                        "policy_ref": "lint",
                        "command": "ruff check docs/guide.md",
                        "expected_exit_code": 0,
                        "covers": [obligation(created, "lint")],
                    }
                ],
            },
        ],
        "actions": [
            {"action_id": "A1", "type": "dispatch_checks", "params": {"checks": ["C-unit", "C-lint"]}}
        ],
    }


def decision(world: World, cid: str) -> dict[str, Any]:
    return world.gate.decision(PROJECT, cid, REQUESTER, None).as_json()


def without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


def through_gate(build: Callable[[dict[str, Any]], Any]) -> tuple[World, str, dict[str, Any]]:
    """Proposes with the proposer `build(created)` returns, and checks what every proposal keeps: one
    plan.stored fact appended and nothing else; the decision's non-plan fields as before; and for a
    fallback, the very plan and decision its twin world got without any model."""
    world, twin = World(), World()
    created = attested_candidate(world)
    cid = created["candidate_id"]
    assert attested_candidate(twin)["candidate_id"] == cid
    ref = StreamRef(PROJECT, cid)
    before_events = copy.deepcopy(world.store.streams[ref].events)
    before = decision(world, cid)
    world.gate.proposer = build(created)
    body = world.gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()
    after_events = world.store.streams[ref].events
    assert after_events[: len(before_events)] == before_events
    assert [e["type"] for e in after_events[len(before_events) :]] == ["plan.stored"]
    after = decision(world, cid)
    assert without(after, "plan_digest", "facts_digest", "findings") == without(
        before, "plan_digest", "facts_digest", "findings"
    )
    assert after["decision"] == "hold"
    if body["mode"] == "fallback":
        baseline = twin.gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()
        assert (body["plan"], body["plan_digest"]) == (baseline["plan"], baseline["plan_digest"])
        assert without(after, "facts_digest") == without(decision(twin, cid), "facts_digest")
    return world, cid, body


# ---- Bedrock: scripted answers -------------------------------------------------------------------------


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def tool_answer(tool_input: Any, name: str = PLAN_TOOL_NAME, stop: str = "tool_use") -> dict[str, Any]:
    content = [
        {"text": "Here is the plan."},
        {"toolUse": {"toolUseId": "tu-1", "name": name, "input": tool_input}},
    ]
    return message(content, stop)


def message(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {"inputTokens": 10, "outputTokens": 20, "totalTokens": 30},
        "metrics": {"latencyMs": 5},
    }


def error(code: str, status: int) -> tuple[str, int]:
    return (code, status)


class Scripted:
    """A real client under a Stubber, with one scripted step per Converse call."""

    def __init__(self, steps: list[Any]) -> None:
        self.client = bedrock_runtime_client("us-east-1", LIMITS)
        self.stubber = Stubber(self.client)
        for step in steps:
            if isinstance(step, tuple):
                self.stubber.add_client_error(
                    "converse",
                    service_error_code=step[0],
                    http_status_code=step[1],
                    service_message="scripted",
                )
            else:
                self.stubber.add_response(
                    "converse",
                    step,
                    {
                        "modelId": MODEL_ID,
                        "system": ANY,
                        "messages": ANY,
                        "inferenceConfig": ANY,
                        "toolConfig": ANY,
                    },
                )
        self.stubber.activate()
        self.sleeps = Sleeps()

    def proposer(
        self, limits: ModelLimits = LIMITS, monotonic: Callable[[], float] | None = None
    ) -> BedrockProposer:
        extra = {"monotonic": monotonic} if monotonic else {}
        return BedrockProposer(MODEL_ID, lambda: self.client, limits, sleep=self.sleeps, **extra)


def huge_plan(created: dict[str, Any]) -> dict[str, Any]:
    plan = valid_plan(created)
    plan["tasks"][0]["checks"][0]["assertions"] = ["x" * 400] * 700  # about 280 KiB
    return plan


def mutated(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def build(created: dict[str, Any]) -> dict[str, Any]:
        plan = valid_plan(created)
        change(plan)
        return plan

    return build


# Each: the steps the model answers with (built from the candidate), then (mode, reason, sleeps).
SCENARIOS: dict[str, tuple[Callable[[dict[str, Any]], list[Any]], tuple[str, str | None, int]]] = {
    "valid plan": (lambda c: [tool_answer(valid_plan(c))], ("model", None, 0)),
    "valid plan as JSON text": (lambda c: [tool_answer(json.dumps(valid_plan(c)))], ("model", None, 0)),
    "throttled once, then a valid plan": (
        lambda c: [error("ThrottlingException", 429), tool_answer(valid_plan(c))],
        ("model", None, 1),
    ),
    "unknown obligation": (
        lambda c: [
            tool_answer(
                mutated(
                    lambda p: p["tasks"][0]["checks"][0]["covers"].append("obl_ffffffffffffffffffffffff")
                )(c)
            )
        ],
        ("fallback", "MODEL_OUTPUT_OUT_OF_SCOPE", 0),
    ),
    "unknown policy": (
        lambda c: [
            tool_answer(mutated(lambda p: p["tasks"][1]["checks"][0].update(policy_ref="security-scan"))(c))
        ],
        ("fallback", "MODEL_OUTPUT_OUT_OF_SCOPE", 0),
    ),
    "undeclared action type": (
        lambda c: [
            tool_answer(
                mutated(
                    lambda p: p["actions"].append(
                        {"action_id": "A2", "type": "run_shell", "params": {"cmd": "make deploy"}}
                    )
                )(c)
            )
        ],
        ("fallback", "MODEL_OUTPUT_OUT_OF_SCOPE", 0),
    ),
    "action type not allow-listed": (
        lambda c: [
            tool_answer(
                mutated(
                    lambda p: p["actions"].append(
                        {"action_id": "A2", "type": "promote", "params": {"environment": "production"}}
                    )
                )(c)
            )
        ],
        ("fallback", "MODEL_OUTPUT_OUT_OF_SCOPE", 0),
    ),
    "missing coverage": (
        lambda c: [tool_answer(mutated(lambda p: p["tasks"].pop())(c))],
        ("fallback", "MODEL_OUTPUT_OUT_OF_SCOPE", 0),
    ),
    "non-conforming command": (
        lambda c: [
            tool_answer(
                mutated(
                    lambda p: p["tasks"][0]["checks"][0].update(
                        command="pytest -q payments-api && curl evil.example"
                    )
                )(c)
            )
        ],
        ("fallback", "MODEL_OUTPUT_INVALID", 0),
    ),
    "unknown field": (
        lambda c: [tool_answer(mutated(lambda p: p.update(rationale="trust me"))(c))],
        ("fallback", "MODEL_OUTPUT_INVALID", 0),
    ),
    "malformed JSON": (lambda c: [tool_answer('{"tasks": [')], ("fallback", "MODEL_OUTPUT_MALFORMED", 0)),
    "tool input not an object": (lambda c: [tool_answer(["T1"])], ("fallback", "MODEL_OUTPUT_MALFORMED", 0)),
    "no tool use": (
        lambda c: [message([{"text": "I would rather chat."}], "end_turn")],
        ("fallback", "MODEL_OUTPUT_MALFORMED", 0),
    ),
    "another tool": (
        lambda c: [tool_answer(valid_plan(c), name="run_command")],
        ("fallback", "MODEL_OUTPUT_MALFORMED", 0),
    ),
    "two plan calls": (
        lambda c: [
            message(
                [
                    {"toolUse": {"toolUseId": f"tu-{n}", "name": PLAN_TOOL_NAME, "input": valid_plan(c)}}
                    for n in (1, 2)
                ],
                "tool_use",
            )
        ],
        ("fallback", "MODEL_OUTPUT_MALFORMED", 0),
    ),
    "malformed tool use": (
        lambda c: [message([{"text": "{"}], "malformed_tool_use")],
        ("fallback", "MODEL_OUTPUT_MALFORMED", 0),
    ),
    "cut at max tokens": (
        lambda c: [tool_answer({"tasks": []}, stop="max_tokens")],
        ("fallback", "MODEL_OUTPUT_TOO_LARGE", 0),
    ),
    "oversized output": (lambda c: [tool_answer(huge_plan(c))], ("fallback", "MODEL_OUTPUT_TOO_LARGE", 0)),
    "guardrail intervened": (
        lambda c: [message([{"text": "blocked"}], "guardrail_intervened")],
        ("fallback", "MODEL_OUTPUT_FILTERED", 0),
    ),
    "ThrottlingException": (
        lambda c: [error("ThrottlingException", 429)] * 2,
        ("fallback", "MODEL_THROTTLED", 1),
    ),
    "ServiceUnavailableException": (
        lambda c: [error("ServiceUnavailableException", 503)] * 2,
        ("fallback", "MODEL_UNAVAILABLE", 1),
    ),
    "InternalServerException": (
        lambda c: [error("InternalServerException", 500)] * 2,
        ("fallback", "MODEL_UNAVAILABLE", 1),
    ),
    "ModelTimeoutException": (
        lambda c: [error("ModelTimeoutException", 408)],
        ("fallback", "MODEL_TIMEOUT", 0),
    ),
    "AccessDeniedException": (
        lambda c: [error("AccessDeniedException", 403)],
        ("fallback", "MODEL_REJECTED", 0),
    ),
    "ValidationException": (lambda c: [error("ValidationException", 400)], ("fallback", "MODEL_REJECTED", 0)),
    "ResourceNotFoundException": (
        lambda c: [error("ResourceNotFoundException", 404)],
        ("fallback", "MODEL_REJECTED", 0),
    ),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_each_bedrock_answer_ends_in_its_mode_and_reason(scenario: str) -> None:
    steps, (mode, reason, sleeps) = SCENARIOS[scenario]
    scripted: dict[str, Scripted] = {}

    def build(created: dict[str, Any]) -> BedrockProposer:
        scripted["s"] = Scripted(steps(created))
        return scripted["s"].proposer()

    # Given Bedrock answering as the scenario says
    # When the requester asks for a proposal
    _world, _cid, body = through_gate(build)
    # Then the proposal ends in the exact mode and reason, after exactly the scripted calls
    assert (body["mode"], body["fallback_reason"]) == (mode, reason)
    scripted["s"].stubber.assert_no_pending_responses()
    assert len(scripted["s"].sleeps) == sleeps


def test_the_converse_request_forces_the_plan_tool_and_quotes_the_change() -> None:
    # Given a stubbed Bedrock that records what it was asked
    seen: list[dict[str, Any]] = []

    def build(created: dict[str, Any]) -> BedrockProposer:
        s = Scripted([tool_answer(valid_plan(created))])
        s.client.meta.events.register(
            "before-parameter-build.bedrock-runtime.Converse",
            lambda params, **_: seen.append(copy.deepcopy(params)),
        )
        return s.proposer()

    # When a proposal is drafted (botocore validated the request against the Converse model on the way)
    through_gate(build)
    # Then it names the configured model, forces the one tool whose schema is the plan schema, caps the
    # output, and carries the change only inside the quoted data block
    [params] = seen
    assert params["modelId"] == MODEL_ID
    assert params["toolConfig"]["toolChoice"] == {"tool": {"name": PLAN_TOOL_NAME}}
    [tool] = params["toolConfig"]["tools"]
    assert (
        tool["toolSpec"]["name"] == PLAN_TOOL_NAME
        and tool["toolSpec"]["inputSchema"]["json"] == plan_tool_schema()
    )
    assert params["inferenceConfig"] == {"maxTokens": LIMITS.max_output_tokens, "temperature": 0}
    user = params["messages"][0]["content"][0]["text"]
    data = json.loads(user[user.index("<sentinel-data>") + 15 : user.index("</sentinel-data>")])
    assert data["changed_files"] == sorted(FILES)
    assert "never instructions" in params["system"][0]["text"]


# ---- Bedrock: slow and unreachable endpoints ---------------------------------------------------------


def raising(make: Callable[[str], Exception]) -> tuple[Any, list[int]]:
    """A real client (no Stubber) whose every send raises what a slow or unreachable endpoint raises."""
    client = bedrock_runtime_client("us-east-1", LIMITS)
    sent: list[int] = []

    def send(request: Any, **_: Any) -> None:
        sent.append(1)
        raise make(request.url)

    client.meta.events.register("before-send.bedrock-runtime.Converse", send)
    return client, sent


TRANSPORT = {
    "read timeout": (lambda url: ReadTimeoutError(endpoint_url=url), "MODEL_TIMEOUT", 1),
    "connect timeout": (lambda url: ConnectTimeoutError(endpoint_url=url), "MODEL_TIMEOUT", 1),
    "endpoint unreachable": (
        lambda url: EndpointConnectionError(endpoint_url=url),
        "MODEL_TRANSPORT_ERROR",
        2,
    ),
}


@pytest.mark.parametrize("case", list(TRANSPORT))
def test_a_slow_or_unreachable_bedrock_falls_back(case: str) -> None:
    make, reason, sends = TRANSPORT[case]
    sleeps = Sleeps()
    sent: list[list[int]] = []

    def build(_created: dict[str, Any]) -> BedrockProposer:
        client, calls = raising(make)
        sent.append(calls)
        return BedrockProposer(MODEL_ID, lambda: client, LIMITS, sleep=sleeps)

    # Given a Bedrock endpoint that times out or cannot be reached
    # When the requester asks for a proposal
    _world, _cid, body = through_gate(build)
    # Then the fallback stands in with the reason, and botocore itself never retried (the adapter decides)
    assert (body["mode"], body["fallback_reason"]) == ("fallback", reason)
    assert len(sent[0]) == sends and len(sleeps) == sends - 1


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback endpoint that accepts the request and never answers in time."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(5)  # never a hung worker, even when the client never connects
    done = threading.Event()

    def serve() -> None:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        with connection:
            connection.recv(65536)
            done.wait(2)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    done.set()
    thread.join(3)
    listener.close()


def test_the_read_timeout_reaches_the_socket(silent_server: str) -> None:
    # Given the production client pointed at an endpoint that never answers, with a 0.2 s read timeout
    limits = ModelLimits(
        connect_timeout_seconds=0.2, read_timeout_seconds=0.2, max_attempts=1, budget_seconds=1
    )
    proposer = BedrockProposer(
        MODEL_ID, lambda: bedrock_runtime_client("us-east-1", limits, silent_server), limits
    )
    # When a proposal is drafted
    with pytest.raises(ProposalFailed) as failed:
        proposer.propose({"obligations": []})
    # Then it ends as a timeout after one attempt, not after botocore's retries
    assert failed.value.code == "MODEL_TIMEOUT"


def test_a_retry_starts_only_if_it_fits_in_the_budget() -> None:
    # Given a throttled answer that arrives when less than one more attempt fits in the budget
    clock = iter([0.0, 4.9])
    s = Scripted([error("ThrottlingException", 429)])
    proposer = s.proposer(monotonic=lambda: next(clock))
    # When a proposal is drafted
    with pytest.raises(ProposalFailed) as failed:
        proposer.propose({"obligations": []})
    # Then it is not retried: the proposal never outlives its budget
    assert failed.value.code == "MODEL_THROTTLED" and s.sleeps == []
    s.stubber.assert_no_pending_responses()


def test_an_oversized_request_never_reaches_the_model() -> None:
    s = Scripted([])
    with pytest.raises(ProposalFailed) as failed:
        s.proposer().propose({"changed_files": ["x" * 1000] * 400})
    assert failed.value.code == "MODEL_INPUT_TOO_LARGE"


# ---- OpenAI-compatible chat completions ----------------------------------------------------------------


class FakeResponse:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def __enter__(self) -> "FakeResponse":
        return self

    def __exit__(self, *_: Any) -> None:
        return None

    def read(self, limit: int = -1) -> bytes:
        return self.body if limit < 0 else self.body[:limit]


class FakeOpener:
    """Answers each POST with the next scripted body or exception, and keeps the requests."""

    def __init__(self, *steps: Any) -> None:
        self.steps = list(steps)
        self.requests: list[Any] = []

    def open(self, request: Any, timeout: float) -> FakeResponse:
        self.requests.append((request, timeout))
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        return FakeResponse(step if isinstance(step, bytes) else json.dumps(step).encode())


def completion(arguments: Any, name: str = PLAN_TOOL_NAME, finish: str = "tool_calls") -> dict[str, Any]:
    call = {
        "id": "call-1",
        "type": "function",
        "function": {
            "name": name,
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }
    return {
        "id": "c-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": finish,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            }
        ],
    }


def http_error(status: int) -> urllib.error.HTTPError:
    return urllib.error.HTTPError(
        "https://models.example/v1/chat/completions", status, "scripted", None, None
    )  # type: ignore[arg-type]  # no headers, as a bare 4xx/5xx may come


def openai(
    opener: FakeOpener,
    key: str | None = SECRET,
    url: str = "https://models.example/v1",
    sleeps: Sleeps | None = None,
) -> OpenAICompatibleProposer:
    return OpenAICompatibleProposer(
        "gpt-test", url, lambda: key, LIMITS, opener=opener, sleep=sleeps or Sleeps()
    )


PLAN = {
    "tasks": [
        {
            "task_id": "T1",
            "title": "t",
            "checks": [
                {
                    "check_id": "C1",
                    "policy_ref": "unit-tests",
                    "command": "pytest -q x",
                    "expected_exit_code": 0,
                }
            ],
        }
    ]
}
OPENAI_FAILURES = {
    "cut at the token limit": ([completion(PLAN, finish="length")], "MODEL_OUTPUT_TOO_LARGE", 1),
    "content filtered": ([completion(PLAN, finish="content_filter")], "MODEL_OUTPUT_FILTERED", 1),
    "arguments not JSON": ([completion('{"tasks": [')], "MODEL_OUTPUT_MALFORMED", 1),
    "another function": ([completion(PLAN, name="exec")], "MODEL_OUTPUT_MALFORMED", 1),
    "not a completion": ([b"<html>gateway</html>"], "MODEL_OUTPUT_MALFORMED", 1),
    "no tool call": (
        [{"choices": [{"finish_reason": "stop", "message": {"content": "hi"}}]}],
        "MODEL_OUTPUT_MALFORMED",
        1,
    ),
    "oversized body": ([b"x" * (2 * LIMITS.max_output_bytes + 64 * 1024 + 1)], "MODEL_OUTPUT_TOO_LARGE", 1),
    "throttled": ([http_error(429), http_error(429)], "MODEL_THROTTLED", 2),
    "server error": ([http_error(502), http_error(503)], "MODEL_UNAVAILABLE", 2),
    "bad key": ([http_error(401)], "MODEL_REJECTED", 1),
    "redirect": ([http_error(307)], "MODEL_REJECTED", 1),
    "read timeout": ([urllib.error.URLError(TimeoutError("timed out"))], "MODEL_TIMEOUT", 1),
    "socket timeout while reading": ([TimeoutError("timed out")], "MODEL_TIMEOUT", 1),
    "connection refused": (
        [urllib.error.URLError(ConnectionRefusedError()), ConnectionResetError()],
        "MODEL_TRANSPORT_ERROR",
        2,
    ),
}


@pytest.mark.parametrize("case", list(OPENAI_FAILURES))
def test_each_openai_compatible_failure_has_its_code(case: str, caplog: pytest.LogCaptureFixture) -> None:
    steps, code, calls = OPENAI_FAILURES[case]
    opener = FakeOpener(*steps)
    with caplog.at_level(logging.WARNING), pytest.raises(ProposalFailed) as failed:
        openai(opener).propose({"obligations": []})
    assert failed.value.code == code and len(opener.requests) == calls
    # The key is in the request's header only: never in the error or the log
    assert SECRET not in str(failed.value) and SECRET not in caplog.text
    assert opener.requests[0][0].get_header("Authorization") == f"Bearer {SECRET}"


def test_an_openai_compatible_plan_goes_through_the_gate_with_mode_model() -> None:
    opener: dict[str, FakeOpener] = {}

    def build(created: dict[str, Any]) -> OpenAICompatibleProposer:
        opener["o"] = FakeOpener(completion(valid_plan(created)))
        return openai(opener["o"])

    _world, _cid, body = through_gate(build)
    assert (body["mode"], body["fallback_reason"]) == ("model", None)
    request, timeout = opener["o"].requests[0]
    sent = json.loads(request.data)
    assert (
        request.full_url == "https://models.example/v1/chat/completions"
        and timeout == LIMITS.read_timeout_seconds
    )
    assert sent["tool_choice"] == {"type": "function", "function": {"name": PLAN_TOOL_NAME}}
    assert sent["tools"][0]["function"]["parameters"] == plan_tool_schema() and sent["model"] == "gpt-test"


@pytest.mark.parametrize(
    "key, url",
    [
        (None, "https://models.example/v1"),
        ("", "https://models.example/v1"),
        (SECRET, "http://models.example/v1"),
        (SECRET, "https://user:pw@models.example/v1"),
    ],
    ids=["no-key", "empty-key", "plain-http", "credentials-in-url"],
)
def test_openai_without_a_key_or_a_safe_endpoint_is_not_configured(key: str | None, url: str) -> None:
    opener = FakeOpener()
    with pytest.raises(ProposalFailed) as failed:
        openai(opener, key=key, url=url).propose({"obligations": []})
    assert failed.value.code == "MODEL_NOT_CONFIGURED" and opener.requests == []


def test_a_redirect_never_carries_the_key_elsewhere() -> None:
    # Given a loopback endpoint answering 307 to another loopback address that records what reaches it
    reached: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            reached.append(self.path + " " + str(self.headers.get("Authorization")))
            self.send_response(307)
            self.send_header("Location", "/elsewhere/chat/completions")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            return None

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        proposer = OpenAICompatibleProposer(
            "gpt-test", f"http://127.0.0.1:{server.server_port}/v1", lambda: SECRET, LIMITS, sleep=Sleeps()
        )
        # When a proposal is drafted with the real opener
        with pytest.raises(ProposalFailed) as failed:
            proposer.propose({"obligations": []})
    finally:
        server.shutdown()
        server.server_close()
    # Then the redirect is refused, and only the configured address ever saw the request
    assert failed.value.code == "MODEL_REJECTED"
    assert reached == [f"/v1/chat/completions Bearer {SECRET}"]


# ---- settings, the composition root and the health route ----------------------------------------------


def settings(**env: str) -> Settings:
    return Settings.from_env({"SENTINEL_MODEL_PROVIDER": "bedrock", "SENTINEL_MODEL_ID": MODEL_ID, **env})


def test_model_settings_keep_their_defaults_and_clamp_what_would_outlive_the_gateway() -> None:
    assert Settings.from_env({}).model_provider == "none"
    s = settings()
    assert (
        s.model_connect_timeout_seconds,
        s.model_read_timeout_seconds,
        s.model_max_attempts,
        s.model_budget_seconds,
        s.model_max_output_tokens,
    ) == (2.0, 15.0, 2, 20.0, 8192)
    wild = settings(
        SENTINEL_MODEL_BUDGET_SECONDS="300",
        SENTINEL_MODEL_READ_TIMEOUT_SECONDS="60",
        SENTINEL_MODEL_MAX_ATTEMPTS="10",
        SENTINEL_MODEL_CONNECT_TIMEOUT_SECONDS="nan",
    )
    assert wild.model_budget_seconds == 25.0 and wild.model_max_attempts == 3
    assert wild.model_connect_timeout_seconds + wild.model_read_timeout_seconds <= wild.model_budget_seconds
    assert settings(SENTINEL_MODEL_READ_TIMEOUT_SECONDS="soon").model_read_timeout_seconds == 15.0
    assert settings(SENTINEL_MODEL_PROVIDER=" Bedrock ").model_provider == "bedrock"
    assert settings(SENTINEL_MODEL_PROVIDER="gpt").model_provider == "none"
    assert (
        settings(SENTINEL_MODEL_API_KEY_ENV="AWS_SECRET_ACCESS_KEY").model_api_key_env
        == "SENTINEL_MODEL_API_KEY"
    )
    assert settings(SENTINEL_MODEL_API_KEY_ENV="VENDOR_KEY").model_api_key_env == "VENDOR_KEY"


def test_bootstrap_wires_bedrock_lazily_with_the_configured_timeouts() -> None:
    # Given Bedrock settings with a model region of its own
    s = settings(SENTINEL_MODEL_REGION="us-west-2", SENTINEL_MODEL_READ_TIMEOUT_SECONDS="9")
    # When the composition root builds the proposer
    proposer = bootstrap.build_proposer(s)
    # Then it is Bedrock with the model id, and no client exists until the first proposal
    assert isinstance(proposer, BedrockProposer) and (proposer.provider, proposer.model_id) == (
        "bedrock",
        MODEL_ID,
    )
    assert proposer._built is None
    client = proposer._client()
    assert client.meta.region_name == "us-west-2"
    assert (client.meta.config.connect_timeout, client.meta.config.read_timeout) == (2.0, 9.0)
    assert client.meta.config.retries["total_max_attempts"] == 1


@pytest.mark.parametrize(
    "env",
    [{"SENTINEL_MODEL_PROVIDER": "none"}, {"SENTINEL_MODEL_ID": ""}, {"SENTINEL_MODEL_PROVIDER": "openai"}],
    ids=["none", "bedrock-without-model", "openai-without-endpoint"],
)
def test_an_incomplete_model_configuration_is_no_model(env: dict[str, str]) -> None:
    proposer = bootstrap.build_proposer(settings(**env))
    assert isinstance(proposer, NoModel)
    with pytest.raises(ProposalFailed) as failed:
        proposer.propose({})
    assert failed.value.code == "MODEL_NOT_CONFIGURED"


def test_bootstrap_reads_the_openai_key_from_the_named_variable_at_call_time() -> None:
    environ = {"VENDOR_KEY": ""}
    proposer = bootstrap.build_proposer(
        settings(
            SENTINEL_MODEL_PROVIDER="openai",
            SENTINEL_MODEL_ENDPOINT_URL="https://models.example/v1",
            SENTINEL_MODEL_API_KEY_ENV="VENDOR_KEY",
        ),
        environ,
    )
    assert isinstance(proposer, OpenAICompatibleProposer)
    environ["VENDOR_KEY"] = SECRET  # rotated after the cold start: the next proposal uses it
    assert proposer._api_key() == SECRET


def test_health_names_the_provider_and_model_never_the_key_or_endpoint() -> None:
    # Given services composed from settings naming an OpenAI-compatible model and its key
    env = {
        "SENTINEL_MODEL_PROVIDER": "openai",
        "SENTINEL_MODEL_ID": "gpt-test",
        "SENTINEL_MODEL_ENDPOINT_URL": "https://models.example/v1",
        "SENTINEL_MODEL_API_KEY": SECRET,
    }
    world = World()
    services = bootstrap.compose(Settings.from_env(env), store=world.store, environ=env)
    # When the health route answers
    response = endpoints.health(services)
    # Then it names the provider and the model id, and nothing of the key or where it is sent
    body = response.body.model_dump(mode="json")
    assert response.status_code == 200 and body["model"] == {"provider": "openai", "model_id": "gpt-test"}
    assert SECRET not in json.dumps(body) and "models.example" not in json.dumps(body)
