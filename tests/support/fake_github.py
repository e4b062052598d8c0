"""A fake GitHub on loopback that holds Sentinel to GitHub's published REST and webhook descriptions.

Every request is checked against `@octokit/openapi` (support.github_description): an undocumented path or
method, a missing required parameter, an undocumented query parameter, or a body the operation's schema does
not admit is a violation; so is any answer of the fake's own that its documented response schema refuses.
Violations are recorded (`violations`) and the `fake_github` fixture fails the test at teardown when any is
left: a test that provokes one on purpose takes it with `take_violations()`.

What it models, as GitHub documents it:
- one GitHub App (an RSA key pair; `private_key_pem`) with installations on repositories; app routes need a
  JWT that verifies with the app's public key (RS256, iss the app id, exp - iat at most 10 minutes, not
  expired, not issued in the future); repository routes need a live installation token of an installation
  that covers the repository ("Bad credentials" 401 otherwise, 404 for a repository it cannot see);
- repositories whose commits are path→content trees (`commit`), with git's blob ids;
- compare (`base...head` from the merge base, at most `compare_file_cap` = 300 files, exact renames
  detected), a pull request's files (at most `pull_files_cap` = 3,000, paged), recursive trees that are
  `truncated` past `tree_entry_cap`, commits, blobs, contents at a ref (over 1 MB without content, as
  GitHub answers), and check runs (created, updated, recorded: `check_runs()`);
- faults on demand: `fail(status)` (5xx), `rate_limit(kind)` (secondary 403 with retry-after, primary 403
  with x-ratelimit-remaining 0, 429, or a 403 that only says so), `revoke_tokens()`;
- webhooks signed as GitHub signs them (`deliver`), with payloads that validate against
  `@octokit/openapi-webhooks` (support.fake_github_webhooks)."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import secrets
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from support.fake_github_webhooks import WebhookSender
from support.github_description import Operation, RestDescription, rest_description

API_VERSIONS = {"2022-11-28", "2026-03-10"}
LARGE_FILE_BYTES = 1024 * 1024  # over this the contents API answers without content ("encoding": "none")
TOKEN_LIFETIME = timedelta(hours=1)
JWT_MAX_LIFETIME_SECONDS = 600


@cache
def app_key_pair() -> tuple[bytes, Any]:
    """One RSA key pair per test session (generating one costs tens of milliseconds)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return pem, key.public_key()


def git_blob_sha(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass
class Commit:
    sha: str
    tree_sha: str
    files: dict[str, bytes]
    parents: list[str]
    message: str


@dataclass
class Repository:
    full_name: str
    id: int
    commits: dict[str, Commit] = field(default_factory=dict)
    trees: dict[str, str] = field(default_factory=dict)  # tree sha -> commit sha
    pulls: dict[int, tuple[str, str]] = field(default_factory=dict)  # number -> (base, head)
    pull_authors: dict[int, str] = field(default_factory=dict)  # number -> the login that opened it


@dataclass
class Fault:
    status: int
    headers: dict[str, str]
    message: str
    operation: str | None  # an operationId, or None for any request
    times: int


@dataclass
class Answer:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None  # a raw media type answer: sent as is, not JSON


class FakeGitHub:
    def __init__(self, *, app_id: int = 4242, now: Callable[[], datetime] | None = None) -> None:
        self.description: RestDescription = rest_description()
        self.app_id = app_id
        self.private_key_pem, self._public_key = app_key_pair()
        self.now = now or (lambda: datetime.now(UTC))
        self.webhook_secret = secrets.token_hex(20)
        self.installations: dict[int, set[str]] = {}
        self.repositories: dict[str, Repository] = {}
        self.compare_file_cap = 300
        self.pull_files_cap = 3000
        self.tree_entry_cap = 100_000
        self.violations: list[str] = []
        self.requests: list[tuple[str, str]] = []  # (method, path with query), in order
        self.tokens_minted = 0
        self._tokens: dict[str, tuple[int, datetime]] = {}
        self._faults: list[Fault] = []
        self._runs: dict[int, dict[str, Any]] = {}
        self._ids = itertools.count(1000)
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self.webhooks = WebhookSender(self)

    # ---- the world ---------------------------------------------------------------------------------------

    def install(self, installation_id: int, *repositories: str) -> None:
        with self._lock:
            self.installations.setdefault(installation_id, set()).update(r.lower() for r in repositories)
            for name in repositories:
                if name.lower() not in self.repositories:
                    self.repositories[name.lower()] = Repository(name, next(self._ids))

    def repo(self, name: str) -> Repository:
        return self.repositories[name.lower()]

    def commit(
        self,
        repository: str,
        changes: dict[str, str | bytes | None],
        parent: str | None = None,
        message: str = "change",
    ) -> str:
        """A new commit on `parent` (none: a root commit) with `changes` applied (None deletes a path)."""
        with self._lock:
            repo = self.repo(repository)
            files = dict(repo.commits[parent].files) if parent else {}
            for path, content in changes.items():
                if content is None:
                    files.pop(path, None)
                else:
                    files[path] = content.encode("utf-8") if isinstance(content, str) else content
            listing = "\n".join(f"{p} {git_blob_sha(c)}" for p, c in sorted(files.items()))
            tree_sha = hashlib.sha1(b"tree " + listing.encode()).hexdigest()
            parents = [parent] if parent else []
            sha = hashlib.sha1(f"{tree_sha} {parents} {message} {len(repo.commits)}".encode()).hexdigest()
            repo.commits[sha] = Commit(sha, tree_sha, files, parents, message)
            repo.trees[tree_sha] = sha
            return sha

    def open_pull(self, repository: str, number: int, base: str, head: str, author: str = "octocat") -> None:
        with self._lock:
            self.repo(repository).pulls[number] = (base, head)
            self.repo(repository).pull_authors[number] = author

    def check_runs(self, repository: str, head_sha: str | None = None) -> list[dict[str, Any]]:
        """The check runs Sentinel published, as GitHub holds them now (each with its `history` of bodies)."""
        with self._lock:
            return [
                json.loads(json.dumps(run))
                for run in self._runs.values()
                if run["repository"] == repository.lower() and head_sha in (None, run["head_sha"])
            ]

    # ---- faults ------------------------------------------------------------------------------------------

    def fail(self, status: int = 502, *, times: int = 1, operation: str | None = None) -> None:
        with self._lock:
            self._faults.append(Fault(status, {}, "Server Error", operation, times))

    def rate_limit(
        self, kind: str = "secondary", *, seconds: int = 30, times: int = 1, operation: str | None = None
    ) -> None:
        """`secondary`: 403 with retry-after; `primary`: 403 with x-ratelimit-remaining 0 and its reset;
        `429`: 429 with retry-after (GitHub answers either status for a secondary limit); `bare`: a
        secondary-limit 403 that names no wait (GitHub then asks for at least a minute)."""
        if kind == "primary":
            reset = int(self.now().timestamp()) + seconds
            headers = {
                "x-ratelimit-limit": "5000",
                "x-ratelimit-remaining": "0",
                "x-ratelimit-reset": str(reset),
            }
            fault = Fault(403, headers, "API rate limit exceeded for installation.", operation, times)
        else:
            status = 429 if kind == "429" else 403
            message = (
                "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
            )
            headers = {} if kind == "bare" else {"retry-after": str(seconds)}
            fault = Fault(status, headers, message, operation, times)
        with self._lock:
            self._faults.append(fault)

    def revoke_tokens(self) -> None:
        with self._lock:
            self._tokens.clear()

    def deliver(
        self, url: str, event: str, payload_overrides: dict[str, Any] | None = None, **options: Any
    ) -> Any:
        """Post one webhook delivery signed as GitHub signs it (support.fake_github_webhooks)."""
        return self.webhooks.deliver(url, event, payload_overrides, **options)

    def take_violations(self) -> list[str]:
        with self._lock:
            taken, self.violations = self.violations, []
            return taken

    # ---- serving -----------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._server is not None, "the fake GitHub is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeGitHub:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                answer = fake.handle(self.command, self.path, dict(self.headers.items()), body)
                payload = answer.raw if answer.raw is not None else json.dumps(answer.body).encode()
                self.send_response(answer.status)
                kind = "application/vnd.github.raw" if answer.raw is not None else "application/json"
                self.send_header("Content-Type", kind + "; charset=utf-8")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _any

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def forge(
        self, installation_id: int, *, clock: Callable[[], datetime] | None = None, **options: Any
    ) -> Any:
        """Sentinel's GitHub App adapter, pointed at this fake with the app's key."""
        from sentinel_service.adapters.github_app import GitHubApp

        pem = self.private_key_pem
        return GitHubApp.build(
            self.url, self.app_id, installation_id, lambda: pem, clock or self.now, **options
        )

    # ---- one request -------------------------------------------------------------------------------------

    def handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        parts = urllib.parse.urlsplit(target)
        query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
        with self._lock:
            self.requests.append((method, target))
            op, params, violations = self.description.check_request(method, parts.path, query, body or None)
            violations += _header_violations(method, parts.path, {k.lower(): v for k, v in headers.items()})
            self.violations += violations
            if op is None:
                return _error(404, "Not Found")
            fault = self._take_fault(op.operation_id)
            if fault is not None:
                answer = _error(fault.status, fault.message, fault.headers)
            else:
                answer = self._route(op, params, query, headers, body)
            if answer.raw is None:
                self.violations += self.description.check_response(op, answer.status, answer.body)
            return answer

    def _take_fault(self, operation: str) -> Fault | None:
        for fault in self._faults:
            if fault.operation in (None, operation):
                fault.times -= 1
                if fault.times <= 0:
                    self._faults.remove(fault)
                return fault
        return None

    def _route(
        self,
        op: Operation,
        params: dict[str, str],
        query: dict[str, list[str]],
        headers: dict[str, str],
        body: bytes,
    ) -> Answer:
        auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        credential = auth.removeprefix("Bearer ").removeprefix("token ").strip()
        if op.operation_id == "apps/create-installation-access-token":
            return self._mint(op, int(params["installation_id"]), credential, _json(body) or {})
        if "repo" not in params or "owner" not in params:
            self.violations.append(
                f"{op.method} {op.template}: the fake GitHub does not model this operation"
            )
            return _error(404, "Not Found")
        name = f"{params['owner']}/{params['repo']}".lower()
        refused = self._installation_refusal(credential, name)
        if refused is not None:
            return refused
        from support.fake_github_routes import route

        return route(self, op, self.repo(name), params, query, headers, _json(body))

    # ---- authentication ------------------------------------------------------------------------------------

    def _mint(self, op: Operation, installation_id: int, jwt: str, asked: dict[str, Any]) -> Answer:
        problem = self._jwt_problem(jwt)
        if problem is not None:
            return _error(401, problem)
        if installation_id not in self.installations:
            return _error(404, "Not Found")
        token = "ghs_" + secrets.token_urlsafe(27)
        expires = self.now() + TOKEN_LIFETIME
        self._tokens[token] = (installation_id, expires)
        self.tokens_minted += 1
        answer = self.description.response_instance(op, 201)
        repos = [_repository_object(self, self.repo(r)) for r in sorted(self.installations[installation_id])]
        granted = {"checks": "write", "contents": "read", "metadata": "read", "pull_requests": "read"}
        permissions = asked.get("permissions") or granted
        if any(granted.get(name) not in (level, "write") for name, level in permissions.items()):
            return _error(422, "The permissions requested are not granted to this installation.")
        answer.update(
            token=token,
            expires_at=expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
            permissions=permissions,
            repository_selection="selected",
            repositories=repos,
        )
        return Answer(201, answer)

    def _jwt_problem(self, jwt: str) -> str | None:
        """Why GitHub would refuse this app JWT, or None (RS256 under the app's public key)."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        try:
            header_b64, claims_b64, signature_b64 = jwt.split(".")
            header, claims = (json.loads(_unb64(p)) for p in (header_b64, claims_b64))
            self._public_key.verify(
                _unb64(signature_b64),
                f"{header_b64}.{claims_b64}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except (ValueError, InvalidSignature):
            return "A JSON web token could not be decoded"
        now = int(self.now().timestamp())
        if header.get("alg") != "RS256":
            return "A JSON web token could not be decoded"
        if str(claims.get("iss")) != str(self.app_id):
            return "Integration not found"
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int) or not isinstance(exp, int):
            return "'Issued at' and 'Expiration time' claims must be integers"
        if iat > now:
            return "'Issued at' claim ('iat') must be an Integer representing a time in the past."
        if exp - iat > JWT_MAX_LIFETIME_SECONDS:
            return "'Expiration time' claim ('exp') is too far in the future"
        if exp <= now:
            return "'Expiration time' claim ('exp') must be a numeric value representing the future time"
        return None

    def _installation_refusal(self, token: str, repository: str) -> Answer | None:
        held = self._tokens.get(token)
        if held is None or held[1] <= self.now():
            return _error(401, "Bad credentials")
        if repository not in self.installations.get(held[0], set()) or repository not in self.repositories:
            return _error(404, "Not Found")
        return None


def _header_violations(method: str, path: str, headers: dict[str, str]) -> list[str]:
    found = []
    if headers.get("x-github-api-version") not in API_VERSIONS:
        found.append(
            f"{method} {path}: X-GitHub-Api-Version {headers.get('x-github-api-version')!r} is unknown"
        )
    if not headers.get("user-agent"):
        found.append(f"{method} {path}: no User-Agent (GitHub refuses such requests)")
    if not headers.get("authorization"):
        found.append(f"{method} {path}: no Authorization header")
    return found


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Answer:
    body = {"message": message, "documentation_url": "https://docs.github.com/rest", "status": str(status)}
    return Answer(status, body, dict(headers or {}))


def _json(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _repository_object(fake: FakeGitHub, repo: Repository) -> dict[str, Any]:
    from support.fake_github_routes import repository_object

    return repository_object(fake, repo)


@contextmanager
def running_fake(**options: Any) -> Iterator[FakeGitHub]:
    """A started fake GitHub; on the way out it stops and fails when a violation was left unclaimed."""
    fake = FakeGitHub(**options).start()
    try:
        yield fake
    finally:
        fake.stop()
    left = fake.take_violations()
    assert not left, "requests or answers GitHub's description does not admit:\n" + "\n".join(left)
