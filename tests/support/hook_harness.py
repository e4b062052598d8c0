"""Running the hook as Claude Code runs it: a real subprocess with an event on stdin, a clean HOME and only
the settings a test gives it; real git repositories; stand-in servers for failures sentinel serve never
has."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from support.paths import CORPUS as SHARED_CORPUS
from support.paths import REPO

ROOT = REPO
CORPUS = SHARED_CORPUS / "hooks" / "constructed-from-docs" / "input"
HOOK_SCRIPT = Path(sys.executable).parent / "sentinel-hook"
GIT_IDENTITY = [
    "-c",
    "user.name=Sentinel Test",
    "-c",
    "user.email=test@example.invalid",
    "-c",
    "commit.gpgsign=false",
]


@dataclass(frozen=True)
class Ran:
    exit_code: int
    stdout: str
    stderr: str
    seconds: float


def hook_command(*args: str) -> list[str]:
    # As docs/hook.md's managed command runs it: the installed console script under `python -I` (isolated
    # from PYTHONPATH and the user's site); `-m` keeps the tests usable without the script.
    if HOOK_SCRIPT.exists():
        return [sys.executable, "-I", str(HOOK_SCRIPT), *args]
    return [sys.executable, "-I", "-m", "sentinel_client.hook", *args]


_SETTING_NAMES = (
    "url",
    "project",
    "subject",
    "environment",
    "token_file",
    "timeout_seconds",
    "release_patterns",
)


def managed_settings_file(directory: Path, settings: dict[str, Any]) -> Path:
    """A managed settings file as an administrator writes it: root-owned (the tests run as root; when they
    do not, a test that needs one is skipped, never passed), mode 644, in a directory only root can write."""
    if os.geteuid() != 0:
        pytest.skip("a managed settings file must be owned by root; these tests run as root in CI")
    directory.mkdir(parents=True, exist_ok=True, mode=0o755)
    directory.chmod(0o755)
    path = directory / "client.json"
    path.write_text(json.dumps(settings))
    path.chmod(0o644)
    return path


def managed_from_env(env: dict[str, str]) -> dict[str, Any]:
    """What an administrator would have written: the SENTINEL_* values a test gives, as the managed file."""
    values: dict[str, Any] = {}
    for name in _SETTING_NAMES:
        value = env.get(f"SENTINEL_{name.upper()}")
        if value:
            values[name] = value.splitlines() if name == "release_patterns" else value
    if "timeout_seconds" in values:
        values["timeout_seconds"] = float(values["timeout_seconds"])
    return values


def clean_env(home: Path, **settings: str) -> dict[str, str]:
    """Nothing of the developer's environment leaks in: a fresh HOME and only the settings given, both as
    SENTINEL_* variables (what `gate` reads; run_hook turns them into the managed settings file)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "PYTHONPATH": str(ROOT),
    }
    env.update({f"SENTINEL_{name.upper()}": value for name, value in settings.items()})
    return env


def run_hook(
    stdin: dict[str, Any] | bytes,
    env: dict[str, str],
    *args: str,
    timeout: float = 30,
    managed: dict[str, Any] | None = None,
) -> Ran:
    """The hook as a managed hook command runs it: `--settings FILE`, where FILE holds `managed` (by default
    the SENTINEL_* values of env, as an administrator would have written them), unless args are given."""
    data = stdin if isinstance(stdin, bytes) else json.dumps(stdin).encode()
    directory: Path | None = None
    if not args:
        directory = Path(tempfile.mkdtemp(prefix="sentinel-managed-"))
        path = managed_settings_file(
            directory / "etc", managed if managed is not None else managed_from_env(env)
        )
        args = ("--settings", str(path))
    started = time.monotonic()
    try:
        done = subprocess.run(
            hook_command(*args),
            input=data,
            capture_output=True,
            env=env,
            timeout=timeout,
            cwd=env["HOME"],
            check=False,
        )
    finally:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
    return Ran(done.returncode, done.stdout.decode(), done.stderr.decode(), time.monotonic() - started)


def git(*args: str, cwd: Path) -> str:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    done = subprocess.run(
        ["git", *GIT_IDENTITY, *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def make_repo(path: Path, content: str, branch: str = "main") -> str:
    """A repository with one commit on `branch`; returns the commit id."""
    path.mkdir(parents=True)
    git("init", "-q", "-b", branch, cwd=path)
    (path / "README.md").write_text(content)
    git("add", "README.md", cwd=path)
    git("commit", "-q", "-m", f"commit {content}", cwd=path)
    return git("rev-parse", "HEAD", cwd=path)


def corpus_event(name: str, **changes: Any) -> dict[str, Any]:
    """A corpus input, read at test time (never copied into the repository), with some fields replaced."""
    if not CORPUS.is_dir():
        pytest.skip(f"the hook corpus is absent: {CORPUS} does not exist")
    event = json.loads((CORPUS / name).read_text())
    event.update(changes)
    return event


def bash_event(command: str, cwd: Path | str) -> dict[str, Any]:
    """A PreToolUse Bash event in the documented shape (the corpus's minimal payload, with a command)."""
    return {
        "session_id": "test",
        "transcript_path": "/dev/null",
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": "toolu_test",
    }


Answer = tuple[int, dict[str, str], bytes]


@contextmanager
def stand_in_server(answer: Callable[[BaseHTTPRequestHandler], Answer | None]) -> Iterator[str]:
    """A loopback HTTP server whose every answer comes from `answer` (None: hang until the test ends)."""
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            reply = answer(self)
            if reply is None:
                release.wait(30)
                return
            status, headers, body = reply
            self.send_response(status)
            for name, value in {"Content-Length": str(len(body)), **headers}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802 - the CI gate records the decision it acts on
            length = int(self.headers.get("Content-Length") or 0)
            # Kept for answers (and tests) that look at what was sent, e.g. the evidence a publisher posts.
            self.body = self.rfile.read(length) if length else b""
            self.do_GET()

        def log_message(self, *_args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # the hook hanging up on a hanging or trickling server is the point, not an error

    server = Server(("127.0.0.1", 0), Handler)
    # A short poll keeps shutdown quick: the tests start one of these per case.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def json_answer(status: int, body: Any, **headers: str) -> Answer:
    return status, {"Content-Type": "application/json", **headers}, json.dumps(body).encode()
