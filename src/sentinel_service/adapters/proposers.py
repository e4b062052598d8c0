"""Model adapters behind `sentinel_domain.ports.Proposer` (DOMAIN.md rule 23): Amazon Bedrock's Converse API,
an OpenAI-compatible chat endpoint (standard library only), and NoModel.

Each adapter asks for the plan as the input of one forced tool call whose schema is the plan schema, bounds
every attempt by connect and read timeouts and the whole proposal by one wall-clock budget, and turns every
failure into `ProposalFailed` with a stable code; the gate then stores the deterministic fallback. Nothing
here builds a client at import time, and no key is ever logged, raised or returned."""

import http.client
import ipaddress
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sentinel_domain.proposals import (
    MAX_PLAN_BYTES,
    PLAN_TOOL_DESCRIPTION,
    PLAN_TOOL_NAME,
    ProposalFailed,
    model_prompt,
    plan_tool_schema,
)
from sentinel_service.settings import Settings

log = logging.getLogger(__name__)

# Worth a second attempt: the provider may well answer the next one. A timeout is not retried, since it
# has already spent most of the budget, nor is a refusal, which the next attempt would only repeat.
RETRYABLE = frozenset({"MODEL_THROTTLED", "MODEL_UNAVAILABLE", "MODEL_TRANSPORT_ERROR"})


@dataclass(frozen=True)
class ModelLimits:
    connect_timeout_seconds: float = 2.0
    read_timeout_seconds: float = 15.0
    max_attempts: int = 2
    budget_seconds: float = 20.0
    max_output_tokens: int = 8192
    max_input_bytes: int = 300_000  # the quoted request; beyond it the model is not asked at all
    max_output_bytes: int = MAX_PLAN_BYTES
    backoff_seconds: float = 0.25

    @classmethod
    def from_settings(cls, s: Settings) -> "ModelLimits":
        return cls(
            connect_timeout_seconds=s.model_connect_timeout_seconds,
            read_timeout_seconds=s.model_read_timeout_seconds,
            max_attempts=s.model_max_attempts,
            budget_seconds=s.model_budget_seconds,
            max_output_tokens=s.model_max_output_tokens,
        )


def _bounded(
    call: Callable[[], Any],
    classify: Callable[[Exception], str],
    limits: ModelLimits,
    provider: str,
    sleep: Callable[[float], None],
    monotonic: Callable[[], float],
) -> Any:
    """Bounded retries inside one budget: a further attempt starts only when its worst case (backoff,
    connect, read) still ends before the deadline, so a proposal never outlives the gateway's answer."""
    deadline = monotonic() + limits.budget_seconds
    attempt = 0
    while True:
        attempt += 1
        try:
            return call()
        except ProposalFailed:
            raise
        except Exception as error:  # classified below; an unclassified one becomes MODEL_ERROR
            code = classify(error)
            delay = limits.backoff_seconds * 2 ** (attempt - 1)
            worst = delay + limits.connect_timeout_seconds + limits.read_timeout_seconds
            if code not in RETRYABLE or attempt >= limits.max_attempts or monotonic() + worst > deadline:
                # Type names only: a provider's message may echo the request, and never carries anything
                # an operator needs that the code does not say.
                log.warning(
                    "model proposal failed: provider=%s code=%s error=%s attempts=%d",
                    provider,
                    code,
                    type(error).__name__,
                    attempt,
                )
                raise ProposalFailed(
                    code, f"{provider}: {type(error).__name__} after {attempt} attempt(s)"
                ) from None
            sleep(delay)


def _by_status(status: int) -> str:
    if status == 429:
        return "MODEL_THROTTLED"
    if status == 408:
        return "MODEL_TIMEOUT"
    if status >= 500:
        return "MODEL_UNAVAILABLE"
    return "MODEL_REJECTED"  # 4xx and a refused 3xx: this request will not succeed as it is


def _checked_prompt(request: dict[str, Any], limits: ModelLimits) -> tuple[str, str]:
    system, user = model_prompt(request)
    if len(user.encode("utf-8")) > limits.max_input_bytes:
        raise ProposalFailed(
            "MODEL_INPUT_TOO_LARGE",
            f"the request is {len(user.encode('utf-8'))} bytes; at most {limits.max_input_bytes}",
        )
    return system, user


def plan_from_tool_calls(calls: list[tuple[Any, Any]], limits: ModelLimits) -> dict[str, Any]:
    """The input of the single plan tool call, as a JSON object no larger than a plan may be."""
    if len(calls) != 1 or calls[0][0] != PLAN_TOOL_NAME:
        raise ProposalFailed(
            "MODEL_OUTPUT_MALFORMED",
            f"expected one {PLAN_TOOL_NAME} call, got {[name for name, _ in calls][:5]}",
        )
    value = calls[0][1]
    if isinstance(value, str):  # OpenAI-style APIs, and some Bedrock models, hand the input over as JSON text
        if len(value.encode("utf-8")) > limits.max_output_bytes:
            raise ProposalFailed("MODEL_OUTPUT_TOO_LARGE", "the tool input exceeds the plan size limit")
        try:
            value = json.loads(value)
        except ValueError:
            raise ProposalFailed("MODEL_OUTPUT_MALFORMED", "the tool input is not JSON") from None
    if not isinstance(value, dict):
        raise ProposalFailed("MODEL_OUTPUT_MALFORMED", "the tool input is not a JSON object")
    if len(json.dumps(value, ensure_ascii=False).encode("utf-8")) > limits.max_output_bytes:
        raise ProposalFailed("MODEL_OUTPUT_TOO_LARGE", "the tool input exceeds the plan size limit")
    return value


class NoModel:
    """No model configured: every proposal is the deterministic fallback."""

    provider = "none"
    model_id = ""

    def propose(self, request: dict[str, Any]) -> dict[str, Any]:
        raise ProposalFailed("MODEL_NOT_CONFIGURED", "no model provider is configured")


# ---- Amazon Bedrock (Converse API) -------------------------------------------------------------------

BEDROCK_ERRORS = {
    "ThrottlingException": "MODEL_THROTTLED",
    "ServiceQuotaExceededException": "MODEL_THROTTLED",
    "ModelTimeoutException": "MODEL_TIMEOUT",
    "ServiceUnavailableException": "MODEL_UNAVAILABLE",
    "InternalServerException": "MODEL_UNAVAILABLE",
    "ModelNotReadyException": "MODEL_UNAVAILABLE",
    "ModelErrorException": "MODEL_UNAVAILABLE",
    "AccessDeniedException": "MODEL_REJECTED",
    "ValidationException": "MODEL_REJECTED",
    "ResourceNotFoundException": "MODEL_REJECTED",
    "UnrecognizedClientException": "MODEL_REJECTED",
    "ExpiredTokenException": "MODEL_REJECTED",
}
BEDROCK_STOPS = {
    "max_tokens": "MODEL_OUTPUT_TOO_LARGE",
    "model_context_window_exceeded": "MODEL_OUTPUT_TOO_LARGE",
    "guardrail_intervened": "MODEL_OUTPUT_FILTERED",
    "content_filtered": "MODEL_OUTPUT_FILTERED",
    "malformed_model_output": "MODEL_OUTPUT_MALFORMED",
    "malformed_tool_use": "MODEL_OUTPUT_MALFORMED",
}


def bedrock_failure(error: Exception) -> str:
    from botocore import exceptions as bx

    if isinstance(error, bx.ReadTimeoutError | bx.ConnectTimeoutError):
        return "MODEL_TIMEOUT"
    if isinstance(error, bx.ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return BEDROCK_ERRORS.get(code) or _by_status(status)
    if isinstance(error, bx.NoCredentialsError | bx.PartialCredentialsError):
        return "MODEL_NOT_CONFIGURED"
    if isinstance(error, bx.ConnectionError | bx.HTTPClientError):
        return "MODEL_TRANSPORT_ERROR"
    return "MODEL_ERROR"


def bedrock_runtime_client(region: str, limits: ModelLimits, endpoint_url: str | None = None) -> Any:
    """A bedrock-runtime client with tight timeouts and no retries of its own: BedrockProposer retries
    within its budget, which botocore's retry modes cannot bound in time."""
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=limits.connect_timeout_seconds,
        read_timeout=limits.read_timeout_seconds,
        retries={"mode": "standard", "total_max_attempts": 1},
        user_agent_extra="sentinel-proposals",
    )
    return boto3.client("bedrock-runtime", region_name=region, endpoint_url=endpoint_url, config=config)


class BedrockProposer:
    """Converse with one tool whose input schema is the plan schema, and the tool choice forced to it."""

    provider = "bedrock"

    def __init__(
        self,
        model_id: str,
        client_factory: Callable[[], Any],
        limits: ModelLimits | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model_id = model_id
        self.limits = limits or ModelLimits()
        self._factory = client_factory
        self._built: Any = None
        self._lock = (
            threading.Lock()
        )  # boto3's default session is not safe to build clients from concurrently
        self._sleep = sleep
        self._monotonic = monotonic

    def _client(self) -> Any:
        with self._lock:
            if self._built is None:
                self._built = self._factory()
            return self._built

    def converse_params(self, request: dict[str, Any]) -> dict[str, Any]:
        system, user = _checked_prompt(request, self.limits)
        return {
            "modelId": self.model_id,
            "system": [{"text": system}],
            "messages": [{"role": "user", "content": [{"text": user}]}],
            "inferenceConfig": {"maxTokens": self.limits.max_output_tokens, "temperature": 0},
            "toolConfig": {
                "tools": [
                    {
                        "toolSpec": {
                            "name": PLAN_TOOL_NAME,
                            "description": PLAN_TOOL_DESCRIPTION,
                            "inputSchema": {"json": plan_tool_schema()},
                        }
                    }
                ],
                "toolChoice": {"tool": {"name": PLAN_TOOL_NAME}},
            },
        }

    def propose(self, request: dict[str, Any]) -> dict[str, Any]:
        params = self.converse_params(request)
        response = _bounded(
            lambda: self._client().converse(**params),
            bedrock_failure,
            self.limits,
            self.provider,
            self._sleep,
            self._monotonic,
        )
        stop = BEDROCK_STOPS.get(str(response.get("stopReason", "")))
        if stop:
            raise ProposalFailed(stop, f"stopReason {response.get('stopReason')}")
        try:
            content = response["output"]["message"]["content"]
            calls = [
                (block["toolUse"]["name"], block["toolUse"].get("input"))
                for block in content
                if "toolUse" in block
            ]
        except (KeyError, TypeError, AttributeError):
            raise ProposalFailed("MODEL_OUTPUT_MALFORMED", "the response carries no message") from None
        return plan_from_tool_calls(calls, self.limits)


# ---- OpenAI-compatible chat completions (standard library only) ----------------------------------------


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect would carry the key to another address: it is answered as the 3xx it is."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


def openai_failure(error: Exception) -> str:
    if isinstance(error, urllib.error.HTTPError):
        return _by_status(error.code)
    if isinstance(error, urllib.error.URLError):
        return "MODEL_TIMEOUT" if isinstance(error.reason, TimeoutError) else "MODEL_TRANSPORT_ERROR"
    if isinstance(error, TimeoutError):
        return "MODEL_TIMEOUT"
    if isinstance(error, OSError | http.client.HTTPException):
        return "MODEL_TRANSPORT_ERROR"
    return "MODEL_ERROR"


def safe_endpoint(url: str) -> bool:
    """A key travels only over https, or to this machine."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        return False
    if parts.scheme == "https" and parts.hostname:
        return True
    if parts.scheme != "http":
        return False
    host = parts.hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OpenAICompatibleProposer:
    """POST {endpoint}/chat/completions with one function tool, forced; the key comes from a variable the
    settings name, read at call time so it is never held in the settings."""

    provider = "openai"

    def __init__(
        self,
        model_id: str,
        endpoint_url: str,
        api_key: Callable[[], str | None],
        limits: ModelLimits | None = None,
        *,
        opener: Any = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model_id = model_id
        self.endpoint_url = endpoint_url.rstrip("/")
        self.limits = limits or ModelLimits()
        self._api_key = api_key
        self._opener = opener or urllib.request.build_opener(_RefuseRedirects)
        self._sleep = sleep
        self._monotonic = monotonic

    def chat_body(self, request: dict[str, Any]) -> dict[str, Any]:
        system, user = _checked_prompt(request, self.limits)
        return {
            "model": self.model_id,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": PLAN_TOOL_NAME,
                        "description": PLAN_TOOL_DESCRIPTION,
                        "parameters": plan_tool_schema(),
                    },
                }
            ],
            "tool_choice": {"type": "function", "function": {"name": PLAN_TOOL_NAME}},
            "max_tokens": self.limits.max_output_tokens,
            "temperature": 0,
        }

    def propose(self, request: dict[str, Any]) -> dict[str, Any]:
        key = self._api_key()
        if not key:
            raise ProposalFailed("MODEL_NOT_CONFIGURED", "the key variable named by the settings is empty")
        if not safe_endpoint(self.endpoint_url):
            raise ProposalFailed(
                "MODEL_NOT_CONFIGURED",
                "the endpoint must be https (or loopback) without credentials in the URL",
            )
        body = json.dumps(self.chat_body(request)).encode("utf-8")
        raw = _bounded(
            lambda: self._post(body, key),
            openai_failure,
            self.limits,
            self.provider,
            self._sleep,
            self._monotonic,
        )
        return self._plan(raw)

    def _post(self, body: bytes, key: str) -> bytes:
        req = urllib.request.Request(
            f"{self.endpoint_url}/chat/completions",
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json",
                "Authorization": f"Bearer {key}",
            },
        )
        # The arguments arrive as an escaped JSON string inside the envelope: room for that, and no more.
        cap = 2 * self.limits.max_output_bytes + 64 * 1024
        with self._opener.open(req, timeout=self.limits.read_timeout_seconds) as response:
            data = response.read(cap + 1)
        if len(data) > cap:
            raise ProposalFailed("MODEL_OUTPUT_TOO_LARGE", "the response exceeds the plan size limit")
        return bytes(data)

    def _plan(self, raw: bytes) -> dict[str, Any]:
        try:
            choice = json.loads(raw)["choices"][0]
            finish = choice.get("finish_reason")
            calls = choice["message"].get("tool_calls") or []
            named = [(c["function"].get("name"), c["function"].get("arguments")) for c in calls]
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise ProposalFailed("MODEL_OUTPUT_MALFORMED", "the response is not a chat completion") from None
        if finish == "length":
            raise ProposalFailed("MODEL_OUTPUT_TOO_LARGE", "finish_reason length")
        if finish == "content_filter":
            raise ProposalFailed("MODEL_OUTPUT_FILTERED", "finish_reason content_filter")
        return plan_from_tool_calls(named, self.limits)
