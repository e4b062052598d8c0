"""The Sentinel HTTP API, version 1, over urllib: one method per route of API.md.

Non-2xx answers are returned (callers check `.status` and `.code`); only transport failures raise, as
TransportError with a stable code, so a caller can always tell "the service said no" from "no answer".
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from sentinel_client.settings import (
    ClientSettings,
    SentinelClientError,
    check_url,
    is_loopback_host,
    read_token,
)

USER_AGENT = "sentinel-client/0.1"
ACCEPT = "application/json, application/problem+json"
# Bodies are at most a few MiB by contract; anything far larger is not an answer from Sentinel.
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
_READ_CHUNK = 64 * 1024


class TransportError(SentinelClientError):
    """No usable answer: UNREACHABLE (refused, reset, DNS, TLS), TIMEOUT, or BAD_RESPONSE."""


@dataclass
class Response:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes = field(default=b"", repr=False)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def etag(self) -> str | None:
        value = self.headers.get("etag")
        if value is None:
            return None
        value = value.strip()
        if value.startswith("W/"):
            value = value[2:]
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        return value

    @property
    def replayed(self) -> bool:
        return self.headers.get("idempotent-replay", "").strip().lower() == "true"

    @property
    def code(self) -> str | None:
        """The problem document's stable code, if the body is one."""
        if isinstance(self.body, dict):
            code = self.body.get("code")
            return code if isinstance(code, str) else None
        return None

    @property
    def retry_after(self) -> float | None:
        value = self.headers.get("retry-after")
        try:
            return max(0.0, float(value)) if value is not None else None
        except ValueError:
            return None


def quote_etag(value: str) -> str:
    """An If-Match value: sent quoted (`"<digest>"`) unless it already is."""
    value = value.strip()
    if len(value) >= 2 and value.endswith('"') and (value.startswith('"') or value.startswith('W/"')):
        return value
    if '"' in value or any(ord(character) < 0x20 or ord(character) == 0x7F for character in value):
        raise ValueError("an entity tag must not contain quotes or control characters")
    return f'"{value}"'


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


def iter_pages(fetch: Callable[[str | None], Response], max_pages: int = 1000) -> Iterator[Response]:
    """Yield every page of a cursor-paged read.

    `fetch(cursor)` returns one page; paging follows `next_cursor` in the body and stops at the first
    page without one, or after yielding a non-2xx response (the caller checks `.status`).
    """
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(max_pages):
        page = fetch(cursor)
        yield page
        if not page.ok or not isinstance(page.body, dict):
            return
        cursor = page.body.get("next_cursor")
        if not cursor:
            return
        if not isinstance(cursor, str) or cursor in seen:
            raise TransportError("BAD_RESPONSE", "the service returned a cursor that does not advance")
        seen.add(cursor)
    raise TransportError("BAD_RESPONSE", f"more than {max_pages} pages; stopping")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # urllib would forward the Authorization header to wherever a redirect points, http:// included.
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _segment(value: str) -> str:
    if not isinstance(value, str) or value in ("", ".", ".."):
        raise ValueError(f"invalid path segment: {value!r}")
    return quote(value, safe="")


def _format_time(value: str | datetime) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("as_of must be timezone-aware")
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


class SentinelClient:
    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.base_url = check_url(base_url)
        if token is not None and (
            not token or any(ord(character) < 0x21 or ord(character) == 0x7F for character in token)
        ):
            raise ValueError("the token must be non-empty and contain no whitespace or control characters")
        self._token = token
        self.timeout = float(timeout)
        parts = urlsplit(self.base_url)
        self._base_path = parts.path.rstrip("/")
        handlers: list[urllib.request.BaseHandler] = [
            _NoRedirect(),
            urllib.request.HTTPSHandler(context=ssl_context or ssl.create_default_context()),
        ]
        if is_loopback_host(parts.hostname or ""):
            # Never hand a loopback request (and its token, in clear text) to an environment proxy.
            handlers.append(urllib.request.ProxyHandler({}))
        self._opener = urllib.request.build_opener(*handlers)

    @classmethod
    def from_settings(cls, settings: ClientSettings) -> SentinelClient:
        settings.require("url")
        return cls(settings.url or "", token=read_token(settings), timeout=settings.timeout_seconds)

    def __repr__(self) -> str:
        return f"SentinelClient({self.base_url!r}, token={'set' if self._token else None})"

    # --- transport -----------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, Any] | None = None,
        if_match: str | None = None,
        idempotency_key: str | None = None,
    ) -> Response:
        """Send one request to `/v1` + path (already quoted) and return the answer, whatever its status."""
        url = self.base_url + "/v1" + path
        if query:
            pairs = [(key, str(value)) for key, value in query.items() if value is not None]
            if pairs:
                url += "?" + urlencode(pairs)
        headers = {
            "Accept": ACCEPT,
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
        }
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        if if_match is not None:
            headers["If-Match"] = quote_etag(if_match)
        if idempotency_key is not None:
            if not idempotency_key or any(ord(c) < 0x21 or ord(c) == 0x7F for c in idempotency_key):
                raise ValueError("the idempotency key must be non-empty printable text")
            headers["Idempotency-Key"] = idempotency_key
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        elif method in ("POST", "PUT"):
            data = b"{}"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        deadline = time.monotonic() + self.timeout
        try:
            try:
                answer = self._opener.open(request, timeout=self.timeout)
            except urllib.error.HTTPError as error:
                answer = error
            with answer:
                status = answer.code if isinstance(answer, urllib.error.HTTPError) else answer.status
                response_headers = {name.lower(): value for name, value in answer.headers.items()}
                raw = self._read_body(answer, deadline)
        except TransportError:
            raise
        except urllib.error.URLError as error:
            raise self._transport_error(error.reason, url) from None
        except (OSError, http.client.HTTPException) as error:
            raise self._transport_error(error, url) from None
        return Response(status, self._parse_body(status, raw), response_headers, raw)

    def _read_body(self, answer: Any, deadline: float) -> bytes:
        # The socket timeout bounds each read; the deadline bounds a server that trickles bytes.
        chunks: list[bytes] = []
        size = 0
        while True:
            if time.monotonic() > deadline:
                raise TransportError("TIMEOUT", f"no complete answer within {self.timeout:g} s")
            chunk = answer.read(_READ_CHUNK)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                raise TransportError("BAD_RESPONSE", "the response body is too large")
            chunks.append(chunk)

    @staticmethod
    def _parse_body(status: int, raw: bytes) -> Any:
        if not raw.strip():
            return None
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            if 200 <= status < 300:
                raise TransportError("BAD_RESPONSE", f"HTTP {status} with a body that is not JSON") from None
            # A gateway's HTML error page: the status says enough; the bytes stay in `.raw`.
            return None

    def _transport_error(self, reason: object, url: str) -> TransportError:
        target = urlsplit(url).netloc
        if isinstance(reason, TimeoutError):
            return TransportError("TIMEOUT", f"{target} did not answer within {self.timeout:g} s")
        if isinstance(reason, ssl.SSLError | ssl.CertificateError):
            return TransportError("UNREACHABLE", f"TLS with {target} failed: {reason}")
        if isinstance(reason, ConnectionError | OSError):
            return TransportError("UNREACHABLE", f"cannot reach {target}: {reason}")
        if isinstance(reason, http.client.HTTPException):
            return TransportError("BAD_RESPONSE", f"{target} sent a malformed HTTP answer: {reason!r}")
        return TransportError("UNREACHABLE", f"cannot reach {target}: {reason}")

    # --- routes --------------------------------------------------------------------------------------

    @staticmethod
    def _project(project: str) -> str:
        return f"/projects/{_segment(project)}"

    def _candidate(self, project: str, cid: str) -> str:
        return f"{self._project(project)}/candidates/{_segment(cid)}"

    def health(self) -> Response:
        return self.request("GET", "/health")

    def openapi(self) -> Response:
        return self.request("GET", "/openapi.json")

    def whoami(self) -> Response:
        return self.request("GET", "/whoami")

    def put_config(self, project: str, config: Mapping[str, Any], if_match: str | None = None) -> Response:
        return self.request("PUT", f"{self._project(project)}/config", config, if_match=if_match)

    def put_bundle(self, project: str, body: Mapping[str, Any], if_match: str | None = None) -> Response:
        """The configuration and policies as one write: `{"config": {...}, "policies": {id: {...}}}`."""
        return self.request("PUT", f"{self._project(project)}/bundle", body, if_match=if_match)

    def get_config(self, project: str) -> Response:
        return self.request("GET", f"{self._project(project)}/config")

    def put_policy(self, project: str, policy_id: str, policy: Mapping[str, Any]) -> Response:
        return self.request("PUT", f"{self._project(project)}/policies/{_segment(policy_id)}", policy)

    def list_policies(self, project: str, limit: int | None = None, cursor: str | None = None) -> Response:
        return self.request(
            "GET", f"{self._project(project)}/policies", query={"limit": limit, "cursor": cursor}
        )

    def get_policy(self, project: str, policy_id: str, version: int | str | None = None) -> Response:
        return self.request(
            "GET", f"{self._project(project)}/policies/{_segment(policy_id)}", query={"version": version}
        )

    def project_audit(self, project: str, limit: int | None = None, cursor: str | None = None) -> Response:
        return self.request(
            "GET", f"{self._project(project)}/audit", query={"limit": limit, "cursor": cursor}
        )

    def create_candidate(
        self, project: str, body: Mapping[str, Any], idempotency_key: str | None = None
    ) -> Response:
        return self.request(
            "POST", f"{self._project(project)}/candidates", body, idempotency_key=idempotency_key
        )

    def add_change_context(
        self, project: str, cid: str, change: Mapping[str, Any], idempotency_key: str | None = None
    ) -> Response:
        return self.request(
            "POST",
            f"{self._candidate(project, cid)}/change-context",
            {"change": change},
            idempotency_key=idempotency_key,
        )

    def find_candidates(
        self,
        project: str,
        subject: str | None = None,
        revision: str | None = None,
        environment: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Response:
        query = {
            "subject": subject,
            "revision": revision,
            "environment": environment,
            "limit": limit,
            "cursor": cursor,
        }
        return self.request("GET", f"{self._project(project)}/candidates", query=query)

    def get_candidate(self, project: str, cid: str) -> Response:
        return self.request("GET", self._candidate(project, cid))

    def get_plan(self, project: str, cid: str, version: int | str) -> Response:
        """One stored plan version, whole (`200 {plan_version, plan_digest, plan, stored_at, stored_by,
        mode}`; `404 NOT_FOUND` for a version that does not exist)."""
        return self.request("GET", f"{self._candidate(project, cid)}/plans/{_segment(str(version))}")

    def propose(
        self, project: str, cid: str, if_match: str | None = None, idempotency_key: str | None = None
    ) -> Response:
        return self.request(
            "POST",
            f"{self._candidate(project, cid)}/proposals",
            if_match=if_match,
            idempotency_key=idempotency_key,
        )

    def put_plan(
        self, project: str, cid: str, plan: Mapping[str, Any], if_match: str | None = None
    ) -> Response:
        return self.request("PUT", f"{self._candidate(project, cid)}/plan", plan, if_match=if_match)

    def review(
        self, project: str, cid: str, body: Mapping[str, Any], idempotency_key: str | None = None
    ) -> Response:
        return self.request(
            "POST", f"{self._candidate(project, cid)}/reviews", body, idempotency_key=idempotency_key
        )

    def execute(
        self, project: str, cid: str, action_id: str, body: Mapping[str, Any], idempotency_key: str
    ) -> Response:
        if not idempotency_key:
            raise ValueError("an execution needs an idempotency key (see new_idempotency_key())")
        return self.request(
            "POST",
            f"{self._candidate(project, cid)}/actions/{_segment(action_id)}/executions",
            body,
            idempotency_key=idempotency_key,
        )

    def post_evidence(
        self, project: str, cid: str, body: Mapping[str, Any], idempotency_key: str | None = None
    ) -> Response:
        return self.request(
            "POST", f"{self._candidate(project, cid)}/evidence", body, idempotency_key=idempotency_key
        )

    def report(
        self,
        project: str,
        cid: str,
        task_id: str,
        body: Mapping[str, Any],
        idempotency_key: str | None = None,
    ) -> Response:
        return self.request(
            "POST",
            f"{self._candidate(project, cid)}/tasks/{_segment(task_id)}/reports",
            body,
            idempotency_key=idempotency_key,
        )

    def settle(
        self,
        project: str,
        cid: str,
        task_id: str,
        body: Mapping[str, Any],
        idempotency_key: str | None = None,
    ) -> Response:
        return self.request(
            "POST",
            f"{self._candidate(project, cid)}/tasks/{_segment(task_id)}/settlement",
            body,
            idempotency_key=idempotency_key,
        )

    def decision(self, project: str, cid: str, as_of: str | datetime | None = None) -> Response:
        query = {"as_of": _format_time(as_of) if as_of is not None else None}
        return self.request("GET", f"{self._candidate(project, cid)}/decision", query=query)

    def record_decision(self, project: str, cid: str, idempotency_key: str | None = None) -> Response:
        return self.request(
            "POST", f"{self._candidate(project, cid)}/decisions", idempotency_key=idempotency_key
        )

    def candidate_audit(
        self, project: str, cid: str, limit: int | None = None, cursor: str | None = None
    ) -> Response:
        return self.request(
            "GET", f"{self._candidate(project, cid)}/audit", query={"limit": limit, "cursor": cursor}
        )
