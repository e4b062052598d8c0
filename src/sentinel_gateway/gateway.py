"""The API Gateway in front of the handlers, as the HTTP API behaves: route match, the Lambda authorizer on
every non-public route (401 without the header, 403 when refused), then the route's function handler."""

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from sentinel_service.compose import ServicesProvider
from sentinel_service.http.authorizer import make_authorizer
from sentinel_service.http.entry import lambda_handler
from sentinel_service.http.problems import problem_body
from sentinel_service.http.routes import route_for

from .events import authorizer_event, http_event, response_parts, with_authorizer

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
# One request at a time through the handlers of this process, as in one Lambda execution environment:
# Powertools' resolver keeps the current event on a class attribute shared by every resolver of the process,
# and the dependency cache on the app, so two requests at once (through one gateway or two) could read each
# other's event and caller.
ONE_REQUEST_AT_A_TIME = threading.Lock()
JSON = {"content-type": "application/json"}


def _gateway_answer(status: int, message: str) -> tuple[int, dict[str, str], bytes]:
    return status, dict(JSON), json.dumps({"message": message}).encode()


def _rate_limited(wait: float) -> tuple[int, dict[str, str], bytes]:
    retry = str(max(1, math.ceil(wait)))
    body = problem_body(
        "RATE_LIMITED",
        429,
        "Too many requests",
        f"this caller is over its request rate; retry after {retry} s",
    )
    return 429, {"content-type": "application/problem+json", "Retry-After": retry}, json.dumps(body).encode()


class LambdaContext:
    """The few context attributes Powertools reads."""

    function_name = "sentinel-local"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:local:000000000000:function:sentinel-local"
    aws_request_id = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


class TokenBucket:
    """The stage throttle (API Gateway's token bucket), per caller: `rate` requests a second, `burst` at
    once."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, caller: str) -> float:
        """0 when admitted, else the seconds until a request would be."""
        with self._lock:
            now = self.clock()
            tokens, last = self._buckets.get(caller, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens >= 1:
                self._buckets[caller] = (tokens - 1, now)
                return 0.0
            self._buckets[caller] = (tokens, now)
            return (1 - tokens) / self.rate


class LocalGateway:
    """API Gateway in front of the real handlers: route match, throttle, the authorizer, then the function's
    handler with a payload 2.0 event. `services` is what the handlers' endpoints receive (the composition
    root's product for this runner); `authorizer` replaces the real one (tests with fake tokens)."""

    def __init__(
        self,
        services: ServicesProvider,
        authorizer: Handler | None = None,
        throttle: TokenBucket | None = None,
    ) -> None:
        self._services = services
        self._authorizer = authorizer
        self._handlers: dict[str, Handler] = {}
        self.throttle = throttle

    def authorizer(self) -> Handler:
        if self._authorizer is None:
            self._authorizer = make_authorizer(self._services)
        return self._authorizer

    def handler(self, function: str) -> Handler:
        if function not in self._handlers:
            self._handlers[function] = lambda_handler(function, self._services)
        return self._handlers[function]

    def invoke(
        self,
        method: str,
        path: str,
        headers: dict[str, str] | None = None,
        body: bytes | str | None = None,
        query: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        route = route_for(method, path)
        if route is None:
            return _gateway_answer(404, "Not Found")
        event = http_event(
            method, path, headers=headers, body=body, query=query, route_key=f"{route.method} {route.path}"
        )
        if self.throttle is not None:
            caller = hashlib.sha256(event["headers"].get("authorization", "").encode()).hexdigest()
            wait = self.throttle.take(caller)
            if wait:
                return _rate_limited(wait)
        if not route.public:
            if not event["headers"].get("authorization"):
                return _gateway_answer(401, "Unauthorized")
            try:
                verdict = self.authorizer()(authorizer_event(event), LambdaContext())
            except Exception:  # the gateway answers 500 when its authorizer fails: never a pass
                return _gateway_answer(500, "Internal Server Error")
            if not verdict.get("isAuthorized"):
                return _gateway_answer(403, "Forbidden")
            with_authorizer(event, verdict.get("context") or {})
        try:
            with ONE_REQUEST_AT_A_TIME:
                result = self.handler(route.function)(event, LambdaContext())
        except Exception:
            return _gateway_answer(500, "Internal Server Error")
        return response_parts(result)
