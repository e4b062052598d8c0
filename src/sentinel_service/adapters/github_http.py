"""One bounded HTTP exchange with GitHub's REST API, and what each kind of failure means for Sentinel.

Standard library only (urllib). Every call has a timeout and a cap on the bytes it reads; the base URL must
be https unless it is loopback (the tests' fake GitHub), and is configurable for GitHub Enterprise Server
(`https://HOST/api/v3`). Redirects are not followed: a 3xx is an answer we do not expect and is refused.

The mapping (GitHub's "rate limits for the REST API" and "troubleshooting" pages):
- unreachable, timed out, 5xx, 429, and a 403 that carries `retry-after` or `x-ratelimit-remaining: 0` or
  says it is a rate limit (the primary and secondary rate limits) are `ForgeUnavailable`, with the wait
  GitHub asked for when it said one (`retry-after` seconds, else until `x-ratelimit-reset`, else a minute,
  as GitHub's docs ask for a secondary limit that names no wait);
- 401, 403 otherwise, 404, 409, 422 and any other 4xx are `ForgeRefused`: asking again will not help;
- an answer larger than the cap, or not the JSON it should be, is `ForgeRefused` too."""

from __future__ import annotations

import ipaddress
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from typing import Any

from sentinel_domain.forge import ForgeRefused, ForgeUnavailable

API_VERSION = "2022-11-28"
USER_AGENT = "sentinel-readiness-gate"
DEFAULT_TIMEOUT_SECONDS = 10.0
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
SECONDARY_LIMIT_WAIT_SECONDS = 60  # GitHub: "wait for at least one minute before retrying"
MAX_RETRY_AFTER_SECONDS = 3600


def check_base_url(url: str) -> str:
    """`url` without its trailing slash, when it is https, or http to a loopback host (tests)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme == "https" and host:
        return url.rstrip("/")
    if parts.scheme == "http" and _loopback(host):
        return url.rstrip("/")
    raise ValueError(f"the GitHub API URL must be https:// (or loopback for tests), not {url!r}")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError):
            raise GitHubRefused(f"GitHub answered {self.status} with a body that is not JSON") from None


class GitHubRefused(ForgeRefused):
    """ForgeRefused with the HTTP status GitHub answered (0 when the answer itself was unusable)."""

    def __init__(self, detail: str, status: int = 0) -> None:
        super().__init__(detail)
        self.status = status


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a 3xx surfaces as an HTTPError and is refused


@dataclass
class GitHubHttp:
    base_url: str
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    clock_seconds: Callable[[], float] | None = None  # for x-ratelimit-reset; time.time when None
    _opener: urllib.request.OpenerDirector = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.base_url = check_base_url(self.base_url)
        self._opener = urllib.request.build_opener(_NoRedirect())

    def call(
        self,
        method: str,
        path: str,
        *,
        token: str,
        query: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
        accept: str = "application/vnd.github+json",
        max_bytes: int | None = None,
    ) -> Answer:
        """One request; a 2xx answer is returned, anything else raises as the module says."""
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode("utf-8")
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", accept)
        request.add_header("Authorization", "Bearer " + token)
        request.add_header("X-GitHub-Api-Version", API_VERSION)
        request.add_header("User-Agent", USER_AGENT)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        limit = self.max_response_bytes if max_bytes is None else max_bytes
        try:
            with self._opener.open(request, timeout=self.timeout_seconds) as response:
                return Answer(response.status, _headers(response.headers), _read(response, limit))
        except urllib.error.HTTPError as error:
            headers = _headers(error.headers)
            with error:
                detail = _message(_read_quietly(error, 64 * 1024))
            raise self._failure(method, path, error.code, headers, detail) from None
        except TimeoutError:
            raise ForgeUnavailable(f"GitHub did not answer {method} {path} in time") from None
        except (urllib.error.URLError, ConnectionError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ForgeUnavailable(f"GitHub cannot be reached: {type(reason).__name__}") from None

    def _failure(
        self, method: str, path: str, status: int, headers: Mapping[str, str], detail: str
    ) -> Exception:
        said = f"GitHub answered {status} to {method} {path}" + (f": {detail}" if detail else "")
        if status >= 500:
            return ForgeUnavailable(said, _retry_after(headers, self._now()))
        # GitHub's rate-limit 403s carry one of these headers, or at least say so in their message.
        limited = (
            "retry-after" in headers
            or headers.get("x-ratelimit-remaining") == "0"
            or "rate limit" in detail.lower()
        )
        if status == 429 or (status == 403 and limited):
            wait = _retry_after(headers, self._now())
            return ForgeUnavailable(said, SECONDARY_LIMIT_WAIT_SECONDS if wait is None else wait)
        return GitHubRefused(said, status)

    def _now(self) -> float:
        if self.clock_seconds is not None:
            return self.clock_seconds()
        import time

        return time.time()


def _headers(message: Message | None) -> dict[str, str]:
    if message is None:
        return {}
    return {name.lower(): value for name, value in message.items()}


def _read(response: Any, limit: int) -> bytes:
    body: bytes = response.read(limit + 1)
    if len(body) > limit:
        raise GitHubRefused(f"GitHub's answer is larger than {limit} bytes")
    return body


def _read_quietly(error: urllib.error.HTTPError, limit: int) -> bytes:
    try:
        body: bytes = error.read(limit)
        return body
    except OSError:
        return b""


def _message(body: bytes) -> str:
    """GitHub's own `message`, shortened: it names what was wrong, and carries no credential."""
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return ""
    message = parsed.get("message") if isinstance(parsed, dict) else None
    return message[:200] if isinstance(message, str) else ""


def _retry_after(headers: Mapping[str, str], now: float) -> int | None:
    """The seconds GitHub asked us to wait: `retry-after`, else until `x-ratelimit-reset` when the limit is
    spent; bounded, so a wild header cannot park the outbox for days."""
    value = headers.get("retry-after", "").strip()
    if value.isdigit():
        return min(int(value), MAX_RETRY_AFTER_SECONDS)
    reset = headers.get("x-ratelimit-reset", "").strip()
    if headers.get("x-ratelimit-remaining") == "0" and reset.isdigit():
        return max(0, min(int(reset) - int(now), MAX_RETRY_AFTER_SECONDS))
    return None
