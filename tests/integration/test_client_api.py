"""The HTTP client against a tiny recording server on loopback: requests as sent, answers as parsed."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sentinel_client.api import Response, SentinelClient, TransportError, iter_pages, quote_etag
from sentinel_client.settings import ClientConfigError, ClientSettings, SentinelClientError

TOKEN = "snt_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGabcdef"


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Canned:
    status: int = 200
    body: bytes = b'{"ok": true}'
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    delay: float = 0.0


@dataclass
class RecordingServer:
    url: str
    requests: list[Recorded]
    answer: Callable[[Recorded], Canned]

    @property
    def last(self) -> Recorded:
        return self.requests[-1]


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    recording = RecordingServer(url="", requests=[], answer=lambda _: Canned())

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            record = Recorded(
                self.command,
                self.path,
                {name.lower(): value for name, value in self.headers.items()},
                self.rfile.read(length),
            )
            recording.requests.append(record)
            canned = recording.answer(record)
            if canned.delay:
                time.sleep(canned.delay)
            self.send_response(canned.status)
            for name, value in canned.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(canned.body)))
            self.end_headers()
            self.wfile.write(canned.body)

        do_GET = do_PUT = do_POST = _serve

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
            pass

    class QuietServer(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: object, client_address: object) -> None:
            # The timeout test closes its end while the handler still sleeps; that is expected.
            pass

    httpd = QuietServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    recording.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield recording
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def json_answer(status: int, body: object, **headers: str) -> Canned:
    return Canned(
        status=status,
        body=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", **headers},
    )


PLAN = {"tasks": [], "actions": []}
ROUTES: list[tuple[str, Callable[[SentinelClient], Response], str, str, object]] = [
    ("health", lambda c: c.health(), "GET", "/v1/health", None),
    ("openapi", lambda c: c.openapi(), "GET", "/v1/openapi.json", None),
    ("whoami", lambda c: c.whoami(), "GET", "/v1/whoami", None),
    (
        "put_config",
        lambda c: c.put_config("p", {"environments": []}),
        "PUT",
        "/v1/projects/p/config",
        {"environments": []},
    ),
    (
        "put_bundle",
        lambda c: c.put_bundle("p", {"config": {}, "policies": {}}),
        "PUT",
        "/v1/projects/p/bundle",
        {"config": {}, "policies": {}},
    ),
    (
        "put_policy",
        lambda c: c.put_policy("p", "unit-tests", {"check_type": "junit"}),
        "PUT",
        "/v1/projects/p/policies/unit-tests",
        {"check_type": "junit"},
    ),
    ("get_config", lambda c: c.get_config("p"), "GET", "/v1/projects/p/config", None),
    ("list_policies", lambda c: c.list_policies("p"), "GET", "/v1/projects/p/policies", None),
    (
        "get_plan",
        lambda c: c.get_plan("p", "cand_1", 2),
        "GET",
        "/v1/projects/p/candidates/cand_1/plans/2",
        None,
    ),
    (
        "get_policy",
        lambda c: c.get_policy("p", "unit-tests", version=3),
        "GET",
        "/v1/projects/p/policies/unit-tests?version=3",
        None,
    ),
    (
        "project_audit",
        lambda c: c.project_audit("p", limit=50, cursor="abc"),
        "GET",
        "/v1/projects/p/audit?limit=50&cursor=abc",
        None,
    ),
    (
        "create_candidate",
        lambda c: c.create_candidate("p", {"subject": "api"}),
        "POST",
        "/v1/projects/p/candidates",
        {"subject": "api"},
    ),
    (
        "add_change_context",
        lambda c: c.add_change_context("p", "c1", {"files": ["a.py"]}),
        "POST",
        "/v1/projects/p/candidates/c1/change-context",
        {"change": {"files": ["a.py"]}},
    ),
    (
        "find_candidates",
        lambda c: c.find_candidates("p", subject="api", revision="ab" * 20),
        "GET",
        "/v1/projects/p/candidates?subject=api&revision=" + "ab" * 20,
        None,
    ),
    ("get_candidate", lambda c: c.get_candidate("p", "c1"), "GET", "/v1/projects/p/candidates/c1", None),
    ("propose", lambda c: c.propose("p", "c1"), "POST", "/v1/projects/p/candidates/c1/proposals", {}),
    ("put_plan", lambda c: c.put_plan("p", "c1", PLAN), "PUT", "/v1/projects/p/candidates/c1/plan", PLAN),
    ("get_plan", lambda c: c.get_plan("p", "c1", 2), "GET", "/v1/projects/p/candidates/c1/plans/2", None),
    (
        "review",
        lambda c: c.review("p", "c1", {"decision": "approve"}),
        "POST",
        "/v1/projects/p/candidates/c1/reviews",
        {"decision": "approve"},
    ),
    (
        "execute",
        lambda c: c.execute("p", "c1", "A1", {"params": {}}, "key-1"),
        "POST",
        "/v1/projects/p/candidates/c1/actions/A1/executions",
        {"params": {}},
    ),
    (
        "post_evidence",
        lambda c: c.post_evidence("p", "c1", {"check_id": "C1"}),
        "POST",
        "/v1/projects/p/candidates/c1/evidence",
        {"check_id": "C1"},
    ),
    (
        "report",
        lambda c: c.report("p", "c1", "T1", {"status": "completed"}),
        "POST",
        "/v1/projects/p/candidates/c1/tasks/T1/reports",
        {"status": "completed"},
    ),
    (
        "settle",
        lambda c: c.settle("p", "c1", "T1", {"note": "ok"}),
        "POST",
        "/v1/projects/p/candidates/c1/tasks/T1/settlement",
        {"note": "ok"},
    ),
    ("decision", lambda c: c.decision("p", "c1"), "GET", "/v1/projects/p/candidates/c1/decision", None),
    (
        "record_decision",
        lambda c: c.record_decision("p", "c1"),
        "POST",
        "/v1/projects/p/candidates/c1/decisions",
        {},
    ),
    (
        "candidate_audit",
        lambda c: c.candidate_audit("p", "c1", limit=10),
        "GET",
        "/v1/projects/p/candidates/c1/audit?limit=10",
        None,
    ),
]


@pytest.mark.parametrize(
    ("call", "method", "path", "body"), [route[1:] for route in ROUTES], ids=[route[0] for route in ROUTES]
)
def test_each_route_sends_its_method_path_and_body(
    server: RecordingServer, call: Callable[[SentinelClient], Response], method: str, path: str, body: object
) -> None:
    # Given a client for the recording server
    client = SentinelClient(server.url, token=TOKEN)
    # When the route's method is called
    response = call(client)
    # Then exactly one request went out with the route's method, path and JSON body
    assert response.status == 200
    assert len(server.requests) == 1
    assert server.last.method == method
    assert server.last.path == path
    if body is None:
        assert server.last.body == b""
    else:
        assert json.loads(server.last.body) == body


def test_every_public_route_method_is_covered() -> None:
    # Given the routes table of API.md as methods on the client
    names = {route[0] for route in ROUTES}
    public = {name for name in vars(SentinelClient) if not name.startswith("_")} - {
        "request",
        "from_settings",
    }
    # Then the table above exercises every one of them
    assert public == names


def test_path_segments_are_quoted(server: RecordingServer) -> None:
    # Given identifiers with a slash, a space, a percent sign and a question mark
    client = SentinelClient(server.url, token=TOKEN)
    # When a nested route is called
    client.report("team a/b", "c%1?x", "T/1", {"status": "completed"})
    # Then every segment arrives percent-encoded and cannot escape its place in the path
    assert server.last.path == "/v1/projects/team%20a%2Fb/candidates/c%251%3Fx/tasks/T%2F1/reports"


@pytest.mark.parametrize("segment", ["", ".", ".."])
def test_dot_and_empty_segments_are_refused_before_sending(server: RecordingServer, segment: str) -> None:
    # Given a path segment that would collapse or climb the path
    client = SentinelClient(server.url, token=TOKEN)
    # When it is used
    with pytest.raises(ValueError):
        client.get_candidate("p", segment)
    # Then nothing was sent
    assert server.requests == []


def test_standard_headers_are_sent(server: RecordingServer) -> None:
    # Given a client with a token
    client = SentinelClient(server.url, token=TOKEN)
    # When any route is called
    client.whoami()
    # Then the bearer token, JSON content negotiation and the user agent are sent
    headers = server.last.headers
    assert headers["authorization"] == f"Bearer {TOKEN}"
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "application/json, application/problem+json"
    assert headers["user-agent"] == "sentinel-client/0.1"


def test_no_authorization_header_without_a_token(server: RecordingServer) -> None:
    # Given a client without a token
    client = SentinelClient(server.url)
    # When the anonymous health route is called
    client.health()
    # Then no Authorization header is sent
    assert "authorization" not in server.last.headers


@pytest.mark.parametrize(
    ("given", "sent"), [("abc123", '"abc123"'), ('"abc123"', '"abc123"'), (' "abc123" ', '"abc123"')]
)
def test_if_match_is_sent_quoted(server: RecordingServer, given: str, sent: str) -> None:
    # Given a plan digest, bare or already quoted
    client = SentinelClient(server.url, token=TOKEN)
    # When a plan amendment carries it
    client.put_plan("p", "c1", PLAN, if_match=given)
    # Then If-Match is the quoted entity tag
    assert server.last.headers["if-match"] == sent


def test_if_match_is_sent_on_config_and_proposals(server: RecordingServer) -> None:
    # Given a client
    client = SentinelClient(server.url, token=TOKEN)
    # When config and proposal writes carry a version
    client.put_config("p", {}, if_match="v1")
    config_headers = server.last.headers
    client.put_bundle("p", {"config": {}}, if_match="3")
    bundle_headers = server.last.headers
    client.propose("p", "c1", if_match="d1", idempotency_key="k-9")
    # Then each carries its quoted If-Match (and the proposal its key)
    assert config_headers["if-match"] == '"v1"'
    assert bundle_headers["if-match"] == '"3"'
    assert server.last.headers["if-match"] == '"d1"'
    assert server.last.headers["idempotency-key"] == "k-9"


def test_no_if_match_unless_given(server: RecordingServer) -> None:
    # Given a first plan submission
    client = SentinelClient(server.url, token=TOKEN)
    # When it is sent without a version
    client.put_plan("p", "c1", PLAN)
    # Then no If-Match header goes out
    assert "if-match" not in server.last.headers


def test_quote_etag_refuses_embedded_quotes() -> None:
    # Given an entity tag with a quote inside
    # When it is quoted
    # Then it is refused rather than sent as a broken header
    with pytest.raises(ValueError):
        quote_etag('ab"c')


def test_idempotency_key_is_sent(server: RecordingServer) -> None:
    # Given a client
    client = SentinelClient(server.url, token=TOKEN)
    # When an execution is requested with a key
    client.execute("p", "c1", "A1", {"plan_digest": "d", "params": {}}, idempotency_key="exec-42")
    # Then the key is sent in the Idempotency-Key header
    assert server.last.headers["idempotency-key"] == "exec-42"


def test_an_execution_without_an_idempotency_key_is_refused_locally(server: RecordingServer) -> None:
    # Given a client
    client = SentinelClient(server.url, token=TOKEN)
    # When an execution is requested with an empty key
    with pytest.raises(ValueError):
        client.execute("p", "c1", "A1", {}, idempotency_key="")
    # Then nothing was sent
    assert server.requests == []


def test_a_successful_answer_is_parsed(server: RecordingServer) -> None:
    # Given a server answering 201 with an ETag and a replay marker
    server.answer = lambda _: json_answer(
        201,
        {"plan_version": 2, "plan_digest": "abc", "note": "café"},
        ETag='"abc"',
        **{"Idempotent-Replay": "true"},
    )
    client = SentinelClient(server.url, token=TOKEN)
    # When a plan is submitted
    response = client.put_plan("p", "c1", PLAN, if_match="old")
    # Then the body is parsed, headers are lower-cased, the ETag unquoted and the replay flagged
    assert response.status == 201
    assert response.ok
    assert response.body == {"plan_version": 2, "plan_digest": "abc", "note": "café"}
    assert response.headers["etag"] == '"abc"'
    assert response.etag == "abc"
    assert response.replayed is True
    assert response.code is None


def test_a_fresh_write_is_not_a_replay(server: RecordingServer) -> None:
    # Given a server answering without Idempotent-Replay
    server.answer = lambda _: json_answer(201, {"seq": 1})
    # When a write is sent
    response = SentinelClient(server.url, token=TOKEN).create_candidate("p", {}, idempotency_key="k")
    # Then it is not flagged as a replay, and there is no ETag
    assert response.replayed is False
    assert response.etag is None


def test_json_is_sent_as_utf8_without_ascii_escapes(server: RecordingServer) -> None:
    # Given a body with non-ASCII text
    client = SentinelClient(server.url, token=TOKEN)
    # When it is sent
    client.review("p", "c1", {"decision": "approve", "comment": "prêt ✓"})
    # Then it travels as raw UTF-8
    assert "prêt ✓".encode() in server.last.body
    assert b"\\u" not in server.last.body


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (
            409,
            {"type": "about:blank", "title": "Conflict", "status": 409, "code": "CANDIDATE_EXISTS"},
            "CANDIDATE_EXISTS",
        ),
        (412, {"status": 412, "code": "VERSION_CONFLICT"}, "VERSION_CONFLICT"),
        (401, {"message": "Unauthorized"}, None),
        (403, {"message": "Forbidden"}, None),
        (503, {"status": 503, "code": "STATE_UNAVAILABLE"}, "STATE_UNAVAILABLE"),
    ],
)
def test_non_2xx_answers_are_returned_not_raised(
    server: RecordingServer, status: int, body: dict[str, object], code: str | None
) -> None:
    # Given a server answering with an error
    server.answer = lambda _: json_answer(status, body, **{"Content-Type": "application/problem+json"})
    client = SentinelClient(server.url, token=TOKEN)
    # When a route is called
    response = client.create_candidate("p", {"subject": "api"})
    # Then the answer comes back with its status, parsed body and code
    assert response.status == status
    assert not response.ok
    assert response.body == body
    assert response.code == code


def test_a_non_json_error_page_is_returned_with_its_raw_bytes(server: RecordingServer) -> None:
    # Given a gateway answering 502 with HTML and a Retry-After
    server.answer = lambda _: Canned(
        502, b"<html>Bad Gateway</html>", {"Content-Type": "text/html", "Retry-After": "3"}
    )
    # When a route is called
    response = SentinelClient(server.url, token=TOKEN).whoami()
    # Then the status is returned, the body is None and the bytes are kept
    assert response.status == 502
    assert response.body is None
    assert response.raw == b"<html>Bad Gateway</html>"
    assert response.retry_after == 3.0


def test_redirects_are_not_followed(server: RecordingServer) -> None:
    # Given a server redirecting elsewhere (urllib would forward the bearer token)
    server.answer = lambda _: Canned(302, b"", {"Location": "http://127.0.0.1:1/steal"})
    # When a route is called
    response = SentinelClient(server.url, token=TOKEN).whoami()
    # Then the redirect is returned as is, after a single request
    assert response.status == 302
    assert len(server.requests) == 1


def test_an_empty_success_body_is_none(server: RecordingServer) -> None:
    # Given a server answering 204 with no body
    server.answer = lambda _: Canned(204, b"", {})
    # When a route is called
    response = SentinelClient(server.url, token=TOKEN).whoami()
    # Then the body is None
    assert response.status == 204
    assert response.body is None


def test_garbage_json_on_a_success_is_a_bad_response(server: RecordingServer) -> None:
    # Given a server answering 200 with a body that is not JSON
    server.answer = lambda _: Canned(200, b"{not json", {"Content-Type": "application/json"})
    # When a route is called
    with pytest.raises(TransportError) as caught:
        SentinelClient(server.url, token=TOKEN).decision("p", "c1")
    # Then it raises BAD_RESPONSE
    assert caught.value.code == "BAD_RESPONSE"
    assert isinstance(caught.value, SentinelClientError)


def test_a_refused_connection_is_unreachable() -> None:
    # Given a loopback port that was just bound and closed, so nothing listens on it
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = SentinelClient(f"http://127.0.0.1:{port}", token=TOKEN, timeout=2.0)
    # When a route is called
    with pytest.raises(TransportError) as caught:
        client.health()
    # Then it raises UNREACHABLE
    assert caught.value.code == "UNREACHABLE"


def test_a_slow_server_is_a_timeout(server: RecordingServer) -> None:
    # Given a server that takes 0.3 s to answer and a client that waits 0.1 s
    server.answer = lambda _: Canned(delay=0.3)
    client = SentinelClient(server.url, token=TOKEN, timeout=0.1)
    started = time.monotonic()
    # When a route is called
    with pytest.raises(TransportError) as caught:
        client.decision("p", "c1")
    # Then it raises TIMEOUT without waiting for the answer
    assert caught.value.code == "TIMEOUT"
    assert time.monotonic() - started < 0.3


def test_query_parameters_skip_none_and_are_encoded(server: RecordingServer) -> None:
    # Given a lookup by subject and environment only, and a what-if decision at a given time
    client = SentinelClient(server.url, token=TOKEN)
    # When they are sent
    client.find_candidates("p", subject="pay ments&x", environment="production")
    lookup = server.last.path
    client.decision("p", "c1", as_of=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    # Then unset parameters are left out, values are encoded, and times are RFC 3339 UTC
    assert lookup == "/v1/projects/p/candidates?subject=pay+ments%26x&environment=production"
    assert server.last.path == "/v1/projects/p/candidates/c1/decision?as_of=2026-01-02T03%3A04%3A05Z"


def test_a_base_url_with_a_path_prefix_is_kept(server: RecordingServer) -> None:
    # Given a base URL with a stage prefix and a trailing slash
    client = SentinelClient(server.url + "/prod/", token=TOKEN)
    # When a route is called
    client.health()
    # Then the prefix precedes /v1
    assert server.last.path == "/prod/v1/health"


def test_an_insecure_base_url_is_refused() -> None:
    # Given a plain-http URL to a remote host
    # When a client is built for it
    with pytest.raises(ClientConfigError) as caught:
        SentinelClient("http://sentinel.example.com", token=TOKEN)
    # Then it is refused before any token can be sent
    assert caught.value.code == "INSECURE_URL"


def test_the_token_is_not_in_the_repr() -> None:
    # Given a client with a token
    client = SentinelClient("http://127.0.0.1:9", token=TOKEN)
    # When it is printed
    # Then the token does not appear
    assert TOKEN not in repr(client)


def test_a_client_is_built_from_settings(server: RecordingServer, tmp_path: Path) -> None:
    # Given settings with a URL, a token file and a timeout
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n", encoding="ascii")
    settings = ClientSettings(url=server.url, token_file=str(token_file), timeout_seconds=2.0)
    # When a client is built from them and used
    client = SentinelClient.from_settings(settings)
    client.whoami()
    # Then it uses that URL, token and timeout
    assert client.timeout == 2.0
    assert server.last.headers["authorization"] == f"Bearer {TOKEN}"


def test_iter_pages_follows_cursors_until_the_last_page(server: RecordingServer) -> None:
    # Given an audit chain served in three pages
    pages = {None: ("c2", [1, 2]), "c2": ("c3", [3, 4]), "c3": (None, [5])}

    def answer(record: Recorded) -> Canned:
        cursor = record.path.partition("cursor=")[2] or None
        next_cursor, events = pages[cursor]
        return json_answer(200, {"events": events, "next_cursor": next_cursor})

    server.answer = answer
    client = SentinelClient(server.url, token=TOKEN)
    # When every page is read
    responses = list(iter_pages(lambda cursor: client.candidate_audit("p", "c1", limit=2, cursor=cursor)))
    # Then the events arrive in order and paging stops at the last page
    assert [event for page in responses for event in page.body["events"]] == [1, 2, 3, 4, 5]
    assert len(server.requests) == 3


def test_iter_pages_stops_at_an_error_and_refuses_a_stuck_cursor(server: RecordingServer) -> None:
    # Given a server that answers an error, then one that repeats the same cursor forever
    client = SentinelClient(server.url, token=TOKEN)
    server.answer = lambda _: json_answer(403, {"code": "FORBIDDEN_ROLE"})
    errors = list(iter_pages(lambda cursor: client.project_audit("p", cursor=cursor)))
    server.answer = lambda _: json_answer(200, {"events": [], "next_cursor": "same"})
    # When the pages are read
    # Then the error page is yielded and paging stops; the stuck cursor is a BAD_RESPONSE
    assert [page.status for page in errors] == [403]
    with pytest.raises(TransportError) as caught:
        list(iter_pages(lambda cursor: client.project_audit("p", cursor=cursor)))
    assert caught.value.code == "BAD_RESPONSE"


def test_a_failed_tls_handshake_is_unreachable(server: RecordingServer) -> None:
    # Given an https URL pointing at a server that only speaks plain HTTP
    client = SentinelClient(server.url.replace("http://", "https://"), token=TOKEN, timeout=2.0)
    # When a route is called
    with pytest.raises(TransportError) as caught:
        client.health()
    # Then the TLS failure raises UNREACHABLE and names TLS
    assert caught.value.code == "UNREACHABLE"
    assert "TLS" in str(caught.value)
