"""Every exit-code path of `sentinel-hook` and `sentinel-hook gate`, as subprocesses. For Claude Code only
exit 2 blocks, so the hook exits 0 only for a proven non-release or a proven ready, and 2 on every other path
(help and unknown options included); the gate exits 0 only for ready, 1 for hold, 2 for any error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.hook_harness import (
    bash_event,
    clean_env,
    hook_command,
    json_answer,
    managed_settings_file,
    run_hook,
    stand_in_server,
)

SHA = "d" * 40


def event(command: str = "ls -la", cwd: str = "/tmp") -> dict:
    return bash_event(command, cwd)


@pytest.mark.parametrize(
    "args",
    [
        ("-h",),
        ("--help",),
        ("--version",),
        ("--settings",),
        ("--settings", "/a", "/b"),
        ("--allow",),
        ("help",),
        ("--settings", "relative.json"),
    ],
)
def test_the_hook_denies_on_help_and_unknown_arguments(home: Path, args: tuple[str, ...]) -> None:
    # Given a harmless command, When the hook is started with arguments that are not its own
    ran = run_hook(event(), clean_env(home), *args)
    # Then it blocks (exit 2), never the 0 that would let the command run
    assert ran.exit_code == 2, ran.stderr


def test_the_hook_allows_a_proven_non_release_with_either_spelling_of_settings(
    home: Path, tmp_path: Path
) -> None:
    path = managed_settings_file(tmp_path / "etc", {})
    for args in (("--settings", str(path)), (f"--settings={path}",)):
        ran = run_hook(event(), clean_env(home), *args)
        assert (ran.exit_code, ran.stdout, ran.stderr) == (0, "", "")


def test_the_hook_without_arguments_reads_the_default_path(home: Path) -> None:
    # Given no managed file at the default path (this machine has none), a non-release still passes
    if os.path.exists("/etc/sentinel/client.json"):
        pytest.skip("this machine has a managed settings file at the default path")
    done = subprocess.run(
        hook_command(),
        input=json.dumps(event()).encode(),
        capture_output=True,
        env=clean_env(home),
        timeout=30,
        check=False,
    )
    assert done.returncode == 0


def test_an_untrusted_managed_file_denies_everything(home: Path, tmp_path: Path) -> None:
    path = managed_settings_file(tmp_path / "etc", {"url": "https://x.example"})
    path.chmod(0o666)
    ran = run_hook(event(), clean_env(home), "--settings", str(path))
    assert ran.exit_code == 2 and "CONFIG_UNTRUSTED" in ran.stderr


@pytest.mark.parametrize(
    "stdin",
    [
        b"",
        b"not json",
        b"[]",
        b'{"hook_event_name": 1}',
        b'{"hook_event_name": "PreToolUse"}',
        b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": "x"}',
        json.dumps(
            {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "x" * 200_000}}
        ).encode(),
    ],
)
def test_malformed_or_oversized_events_are_denied(home: Path, stdin: bytes) -> None:
    ran = run_hook(stdin, clean_env(home))
    assert ran.exit_code == 2, ran.stderr


def test_an_event_larger_than_the_limit_is_denied_unread(home: Path, tmp_path: Path) -> None:
    from sentinel_client.hook_events import MAX_EVENT_BYTES

    ran = run_hook(b" " * (MAX_EVENT_BYTES + 10), clean_env(home))
    assert ran.exit_code == 2 and "larger than" in ran.stderr


def test_a_write_into_git_internals_is_denied_and_elsewhere_allowed(home: Path, tmp_path: Path) -> None:
    def write(path: str) -> int:
        payload = {
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "cwd": str(tmp_path),
            "tool_input": {"file_path": path, "content": "#!/bin/sh\ngit push origin main\n"},
        }
        return run_hook(payload, clean_env(home)).exit_code

    assert write(".git/hooks/pre-push") == 2
    assert write(str(tmp_path / "repo/.git/config")) == 2
    assert write(str(home / ".gitconfig")) == 2
    assert write("src/app.py") == 0


def test_the_hook_deadline_ends_a_stalled_run_with_a_denial() -> None:
    code = "from sentinel_client.hook import _deadline; import time; _deadline(0.3); time.sleep(10)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30, check=False)
    assert done.returncode == 2 and b"ran out of time" in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("gate", "--help"),
        ("gate", "-h"),
        ("gate", "--revision", SHA, "--help"),
        ("gate", "--revision", SHA, "-h"),
        ("gate", "--bogus"),
        ("gate",),
        ("gate", "--revision", SHA, "--rev", SHA),
        ("gate", "--revision", "main"),
    ],
)
def test_the_gate_is_an_error_on_help_and_unknown_options(home: Path, args: tuple[str, ...]) -> None:
    ran = run_hook(b"", clean_env(home), *args)
    assert (ran.exit_code, ran.stdout) == (2, "")


@pytest.mark.parametrize(
    ("decision", "code", "state"),
    [
        ({"decision": "ready", "findings": []}, 0, "ready"),
        ({"decision": "hold", "findings": [{"code": "REVIEW_MISSING"}]}, 1, "hold"),
        ({"decision": "maybe", "findings": []}, 2, "error"),
    ],
)
def test_the_gate_exit_codes_and_json(
    home: Path, tmp_path: Path, decision: dict, code: int, state: str
) -> None:
    token = tmp_path / "token"
    token.write_text("snt_" + "A" * 49)

    def answer(request):
        if "/candidates?" in request.path:
            return json_answer(
                200,
                {
                    "candidates": [
                        {
                            "candidate_id": "c1",
                            "subject": "payments",
                            "revision": SHA,
                            "environment": "staging",
                        }
                    ]
                },
            )
        return json_answer(200, {"revision": SHA, **decision})

    with stand_in_server(answer) as url:
        env = clean_env(
            home,
            url=url,
            project="demo",
            subject="payments",
            environment="staging",
            token_file=str(token),
            timeout_seconds="5",
        )
        plain = run_hook(b"", env, "gate", "--revision", SHA)
        as_json = run_hook(b"", env, "gate", "--revision", SHA, "--json")
    assert plain.exit_code == code
    assert as_json.exit_code == code
    body = json.loads(as_json.stdout)
    assert (body["decision"], body["exit_code"], body["candidate_id"]) == (state, code, "c1")


def test_neither_the_environment_nor_the_user_file_can_point_the_hook_at_a_lying_server(
    home: Path, tmp_path: Path
) -> None:
    # Given a server of the agent's own that answers `ready` for everything
    def always_ready(request):
        if "/candidates?" in request.path:
            revision = request.path.split("revision=")[1].split("&")[0]
            return json_answer(
                200,
                {
                    "candidates": [
                        {
                            "candidate_id": "c1",
                            "subject": "payments",
                            "revision": revision,
                            "environment": "staging",
                        }
                    ]
                },
            )
        return json_answer(200, {"decision": "ready", "findings": [], "revision": SHA})

    token = tmp_path / "token"
    token.write_text("snt_" + "A" * 49)
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    with stand_in_server(always_ready) as lying:
        # And the user file and the environment name it, with a release pattern that matches nothing
        user_file = home / ".config" / "sentinel" / "client.json"
        user_file.parent.mkdir(parents=True)
        user_file.write_text(json.dumps({"url": lying, "token_file": str(token), "release_patterns": ["^$"]}))
        env = {
            **clean_env(home),
            "SENTINEL_URL": lying,
            "SENTINEL_TOKEN_FILE": str(token),
            "SENTINEL_PROJECT": "demo",
            "SENTINEL_SUBJECT": "payments",
            "SENTINEL_ENVIRONMENT": "staging",
            "SENTINEL_RELEASE_PATTERNS": "^$",
        }
        # When the managed file names the real gate (here: nothing listens) and the agent pushes main
        managed = {
            "url": "http://127.0.0.1:9",
            "project": "demo",
            "subject": "payments",
            "environment": "staging",
            "token_file": str(token),
            "timeout_seconds": 2,
        }
        ran = run_hook(bash_event(f"git push origin {SHA}:main", repo), env, managed=managed)
    # Then the hook asked the managed gate, not the lying one, and denies
    assert ran.exit_code == 2
    assert "UNREACHABLE" in ran.stderr and "127.0.0.1:9" in ran.stderr
