"""`sentinel plan show --version N` and `plan amend` against a stub gate on loopback that records what it was
asked: the route and headers each command sends, and what it makes of the answer."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sentinel_client.cli import main

DIGEST = "ab" * 32
PLAN = {
    "tasks": [{"task_id": "T1", "title": "t", "checks": [{"check_id": "C1", "policy_ref": "unit-tests"}]}]
}


class Stub:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str], Any]] = []
        self.answers: dict[tuple[str, str], tuple[int, Any]] = {}


@pytest.fixture
def stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Stub, list[str]]]:
    recorded = Stub()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            recorded.seen.append((self.command, self.path, dict(self.headers), body))
            status, answer = recorded.answers.get((self.command, self.path), (404, {"code": "NOT_FOUND"}))
            raw = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_PUT = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    for name in (
        "SENTINEL_URL",
        "SENTINEL_PROJECT",
        "SENTINEL_TOKEN",
        "SENTINEL_TOKEN_FILE",
        "SENTINEL_CONTEXT",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    token = tmp_path / "token"
    token.write_text("snt_" + "A" * 49 + "\n")
    token.chmod(0o600)
    where = [
        "--url",
        f"http://127.0.0.1:{server.server_port}",
        "--project",
        "demo",
        "--token-file",
        str(token),
    ]
    try:
        yield recorded, where
    finally:
        server.shutdown()


def test_plan_show_with_a_version_reads_that_version(stub, capsys) -> None:
    recorded, where = stub
    recorded.answers[("GET", "/v1/projects/demo/candidates/c1/plans/2")] = (
        200,
        {"plan_version": 2, "plan_digest": DIGEST, "plan": PLAN},
    )
    # When version 2 is asked for
    code = main(["plan", "show", "c1", "--version", "2", *where, "--json"], registrations=[])
    # Then that route is read and its plan printed
    assert code == 0 and json.loads(capsys.readouterr().out)["plan_digest"] == DIGEST
    assert [(method, path) for method, path, _, _ in recorded.seen] == [
        ("GET", "/v1/projects/demo/candidates/c1/plans/2")
    ]


def test_plan_amend_names_the_current_digest_and_sends_the_file(stub, capsys, tmp_path) -> None:
    recorded, where = stub
    recorded.answers[("GET", "/v1/projects/demo/candidates/c1")] = (
        200,
        {"plan": PLAN, "plan_digest": DIGEST, "plan_versions": [{"plan_version": 1}], "revision": "c" * 40},
    )
    recorded.answers[("PUT", "/v1/projects/demo/candidates/c1/plan")] = (
        201,
        {"plan_version": 2, "plan_digest": "cd" * 32, "plan": PLAN},
    )
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(PLAN))
    # When the plan is amended without a terminal and without --yes
    assert main(["plan", "amend", "c1", "-f", str(plan_file), *where], registrations=[]) == 1
    # Then nothing is written: confirmation is required
    assert "error: CONFIRMATION_REQUIRED" in capsys.readouterr().err
    assert [method for method, *_ in recorded.seen] == ["GET"]
    # When it is amended with --yes
    assert main(["plan", "amend", "c1", "-f", str(plan_file), "--yes", *where], registrations=[]) == 0
    out = capsys.readouterr().out
    # Then the PUT carries the file's plan and If-Match of the current digest, and both digests are said
    method, path, headers, body = recorded.seen[-1]
    assert (method, path, body) == ("PUT", "/v1/projects/demo/candidates/c1/plan", PLAN)
    assert headers["If-Match"] == f'"{DIGEST}"'
    assert f"digest {'cd' * 32}" in out and f"replaces digest {DIGEST}" in out


def test_a_first_plan_needs_no_confirmation_and_no_if_match(stub, capsys, tmp_path) -> None:
    recorded, where = stub
    recorded.answers[("GET", "/v1/projects/demo/candidates/c1")] = (
        200,
        {"plan": None, "plan_digest": None, "plan_versions": [], "revision": "c" * 40},
    )
    recorded.answers[("PUT", "/v1/projects/demo/candidates/c1/plan")] = (
        201,
        {"plan_version": 1, "plan_digest": DIGEST, "plan": PLAN},
    )
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(PLAN))
    assert main(["plan", "amend", "c1", "-f", str(plan_file), *where], registrations=[]) == 0
    assert "If-Match" not in recorded.seen[-1][2]
    assert "the candidate's first plan" in capsys.readouterr().out
