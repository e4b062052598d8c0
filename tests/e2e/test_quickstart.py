"""docs/quickstart.md, run: a team's first hour with nothing but the `sentinel` command.

A fresh `sentinel serve` without `--seed`; the operator provisions a project from docs/examples/sentinel.yaml
and its principals; then requester, publisher, reviewer and auditor take a change to `ready` using only the
commands, each as a separate process with its own saved context, their `--json` output parsed at every step.
The test writes no HTTP: every request is one a command made."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.http

REPO = Path(__file__).resolve().parents[2]
PROJECT_FILE = REPO / "docs" / "examples" / "sentinel.yaml"
SENTINEL = [sys.executable, "-m", "sentinel_runner.cli"]
JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="payments" tests="2" failures="0" errors="0" skipped="0">
  <testcase classname="tests.test_refunds" name="test_refund_is_idempotent" time="0.01"/>
  <testcase classname="tests.test_refunds" name="test_refund_needs_a_charge" time="0.01"/>
</testsuite>
"""


OPENAPI = """openapi: 3.1.0
info: {title: payments, version: "1"}
paths:
  /refunds:
    post:
      responses:
        "201": {description: created}
"""
# Where the project's OpenAPI document lives in this repository (the example file names no repositories).
WHERE_THE_API_IS = ["--openapi", "payments-api=api/payments-api.yaml"]


class Team:
    """Each person runs `sentinel` in their own process, with their own saved contexts (one HOME)."""

    def __init__(self, home: Path, data: Path) -> None:
        self.home, self.data = home, data
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("SENTINEL_") and key not in ("XDG_CONFIG_HOME", "HOME")
        }
        self.env.update(HOME=str(home), SENTINEL_DATA_DIR=str(data))

    def run(self, *args: str, stdin: str | None = None, expect: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*SENTINEL, *args], env=self.env, input=stdin, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == expect, f"sentinel {' '.join(args)}: {done.returncode}\n{done.stderr}"
        assert "Traceback" not in done.stderr
        return done

    def json(self, *args: str, expect: int = 0) -> Any:
        return json.loads(self.run(*args, "--json", expect=expect).stdout)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def gate(tmp_path: Path):
    data = tmp_path / "data"
    server = subprocess.Popen(
        [*SENTINEL, "serve", "--data", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    try:
        banner = json.loads(server.stdout.readline())
        yield banner, data
    finally:
        server.terminate()
        server.wait(timeout=20)


@pytest.fixture
def change(tmp_path: Path) -> tuple[Path, str, str]:
    """A clone with one commit on main and one change to the payments service."""
    repo = tmp_path / "shop"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    (repo / "services" / "payments").mkdir(parents=True)
    (repo / "services" / "payments" / "refunds.py").write_text("def refund(charge):\n    return charge\n")
    (repo / "api").mkdir()
    (repo / "api" / "payments-api.yaml").write_text(OPENAPI)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "services" / "payments" / "refunds.py").write_text(
        "def refund(charge):\n    if charge is None:\n        raise ValueError('none')\n    return charge\n"
    )
    git(repo, "commit", "-q", "-am", "refunds need a charge")
    return repo, base, git(repo, "rev-parse", "HEAD")


def test_the_quickstart_reaches_ready_with_only_the_commands(gate, change, tmp_path: Path) -> None:
    banner, data = gate
    url = banner["url"]
    repo, base, head = change
    team = Team(tmp_path / "home", data)
    assert "seed" not in banner and banner["persistent"] is True

    # The operator: a project and one principal per person, each token written to its own file
    assert team.json("projects", "create", "--id", "shop")["project"] == "shop"
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    people = [
        ("olga", "human", None, ["admin", "auditor"]),
        ("dana", "human", None, ["requester"]),
        ("claude-dana", "agent", "dana", ["requester"]),
        ("rita", "human", None, ["reviewer"]),
        ("ci-bot", "ci", None, ["publisher"]),
    ]
    for name, kind, sponsor, roles in people:
        args = ["principals", "add", "--id", name, "--kind", kind]
        args += ["--sponsor", sponsor] if sponsor else []
        for role in roles:
            args += ["--project", "shop", "--role", role]
        (tokens / name).write_text(team.run(*args).stdout.strip() + "\n")
    listed = team.json("principals", "list", "--project", "shop", "--kind", "human")
    assert {p["id"] for p in _rows(listed)} == {"olga", "dana", "rita"}

    # Everyone logs in once: a saved context each (the login checks the token with whoami)
    for name, *_ in people:
        extra = ["--subject", "payments", "--environment", "staging"]
        who = team.json(
            "login",
            "--name",
            name,
            "--url",
            url,
            "--project",
            "shop",
            "--token-file",
            str(tokens / name),
            *extra,
        )
        assert who["whoami"]["principal_id"] == name

    # The admin applies the project's configuration and policies from the file, as one write
    dry = team.json("apply", "-f", str(PROJECT_FILE), "--dry-run", "--context", "olga")
    assert dry["changes"]["config"]["status"] == "added" and dry["applied"] is None
    applied = team.json("apply", "-f", str(PROJECT_FILE), "--yes", "--context", "olga")
    assert applied["applied"]["config_version"] == 1
    again = team.json("apply", "-f", str(PROJECT_FILE), "--dry-run", "--context", "olga")["changes"]
    assert again["config"]["status"] == "unchanged"
    assert (again["policies"]["added"], again["policies"]["changed"]) == ({}, {})

    # The requester's agent: a candidate from the commits, and a drafted plan
    created = team.json(
        "candidate",
        "create",
        "--from-git",
        f"{base}..{head}",
        "--repo",
        str(repo),
        *WHERE_THE_API_IS,
        "--context",
        "claude-dana",
    )
    cid = created["candidate_id"]
    assert created["revision"] == head and created["change_context"] == "declared"
    assert [(o["policy_id"], o["scope"]) for o in created["obligations"]] == [("unit-tests", "payments-api")]
    proposed = team.json("plan", "propose", cid, "--context", "claude-dana")
    assert proposed["mode"] == "fallback"

    # CI, the trusted publisher: attests the change context from the same commits
    attested = team.json(
        "candidate",
        "attest",
        cid,
        "--from-git",
        f"{base}..{head}",
        "--repo",
        str(repo),
        *WHERE_THE_API_IS,
        "--context",
        "ci-bot",
    )
    assert attested["change_context"] == "attested"

    # The reviewer: the candidate is in her queue; she reads it and approves what she read
    queue = team.json("review", "queue", "--context", "rita")
    assert cid in [c["candidate_id"] for c in _rows(queue)]
    shown = team.json("review", "show", cid, "--context", "rita")
    assert shown["plan_digest"] == proposed["plan_digest"]
    approved = team.json(
        "review", "approve", cid, "--expect-digest", shown["plan_digest"][:16], "--yes", "--context", "rita"
    )
    assert approved["plan_digest"] == proposed["plan_digest"]
    assert cid not in [c["candidate_id"] for c in _rows(team.json("review", "queue", "--context", "rita"))]

    # CI publishes the test report for the plan's check
    report = tmp_path / "junit.xml"
    report.write_text(JUNIT)
    evidence = team.json(
        "evidence", "post", cid, "--policy", "unit-tests", "--scope", "payments-api",
        "--junit", str(report), "--revision", head, "--context", "ci-bot",
    )  # fmt: skip
    assert (evidence["outcome"], evidence["trust"]) == ("pass", "verified")

    # The agent reports its task done; the report writer records it as passing
    task = team.json("plan", "show", cid, "--context", "claude-dana")["plan"]["tasks"][0]["task_id"]
    reported = team.json("report", cid, task, "--status", "completed", "--context", "claude-dana")
    assert reported["passes"] is True

    # The auditor: the status board, the recorded decision with its explanation, the audit trail
    board = team.json("status", "--context", "olga")
    assert [c["decision"] for c in _rows(board) if c["candidate_id"] == cid] == ["ready"]
    decided = team.json("decision", cid, "--record", "--explain", "--context", "olga")
    assert decided["decision"] == "ready" and decided["findings"] == []
    trail = team.json("audit", "show", "--candidate", cid, "--context", "olga")
    assert trail["verification"]["valid"] is True
    assert [e["type"] for e in trail["events"]][-1] == "decision.recorded"


def test_a_person_without_the_role_is_refused_in_one_line(gate, tmp_path: Path) -> None:
    banner, data = gate
    team = Team(tmp_path / "home", data)
    team.run("projects", "create", "--id", "shop")
    token = team.run(
        "principals", "add", "--id", "rita", "--kind", "human", "--project", "shop", "--role", "reviewer"
    ).stdout.strip()
    (tmp_path / "rita").write_text(token)
    team.run(
        "login",
        "--name",
        "rita",
        "--url",
        banner["url"],
        "--project",
        "shop",
        "--token-file",
        str(tmp_path / "rita"),
    )
    # When the reviewer tries to apply the project file, Then she is refused, in one line, and nothing changed
    refused = team.run("apply", "-f", str(PROJECT_FILE), "--yes", expect=1)
    first = refused.stderr.splitlines()[0]
    assert first.startswith("error: FORBIDDEN_ROLE: ") and "next:" in refused.stderr


def _rows(document: Any) -> list[dict[str, Any]]:
    """A listing's rows, whether the command prints a list or an object holding one."""
    if isinstance(document, list):
        return document
    for key in ("candidates", "principals", "awaiting", "items", "rows"):
        if isinstance(document.get(key), list):
            return document[key]
    raise AssertionError(f"no rows in {sorted(document)}")
