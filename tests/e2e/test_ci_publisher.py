"""The CI publisher as CI runs it, a subprocess: `sentinel-hook evidence` against a stand-in service that
records what it is sent, `gate --wait` and `gate --receipt` against stand-ins whose decision changes, and
the whole ready flow against `sentinel serve` with no hand-written evidence JSON."""

import calendar
import hashlib
import json
import os
import secrets
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from sentinel_client.flow import junit_report
from sentinel_runner.demo import LocalGate
from support.hook_harness import clean_env, hook_command, json_answer, run_hook, stand_in_server
from support.paths import REPO

SHA = "e" * 40
GITHUB = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_SERVER_URL": "https://github.com",
    "GITHUB_REPOSITORY": "acme/payments",
    "GITHUB_RUN_ID": "7001",
}
CANDIDATE = {
    "candidate_id": "cand_1",
    "subject": "payments",
    "revision": SHA,
    "environment": "staging",
    "obligations": [
        {"obligation_id": "o1", "policy_id": "unit-tests", "scope": "payments-api", "reason": "r"},
        {"obligation_id": "o2", "policy_id": "lint", "scope": "docs", "reason": "r"},
    ],
    "plan": {
        "tasks": [
            {
                "task_id": "T1",
                "checks": [{"check_id": "C1", "policy_ref": "unit-tests", "covers": ["o1"]}],
            },
            {"task_id": "T2", "checks": [{"check_id": "C2", "policy_ref": "lint", "covers": ["o2"]}]},
        ]
    },
    "evidence": [],
    "tasks": [{"task_id": "T1", "passes": False}, {"task_id": "T2", "passes": False}],
}
STORED = {
    "evidence_id": "ev_1",
    "outcome": "pass",
    "trust": "verified",
    "binding": {"obligation_ids": ["o1"], "policy_id": "unit-tests", "policy_version": 1, "mismatches": []},
    "counts": {"tests": 1, "failures": 0, "errors": 0, "skipped": 0},
    "raw_sha256": "ab" * 32,
}


def env_for(home: Path, url: str, token_file: Path, **extra: str) -> dict[str, str]:
    env = clean_env(
        home,
        url=url,
        project="demo",
        subject="payments",
        environment="staging",
        token_file=str(token_file),
        timeout_seconds="5",
    )
    env.update(extra)
    return env


def publisher_service(candidate: dict[str, Any], posted: list[dict[str, Any]], stored: dict[str, Any]):
    """Finds cand_1, answers `candidate` (with what was posted once it was), stores evidence as `stored`."""

    def answer(request):
        path = request.path
        if path.startswith("/v1/projects/demo/candidates?"):
            return json_answer(200, {"candidates": [CANDIDATE | {"revision": SHA}], "next_cursor": None})
        if path == "/v1/projects/demo/candidates/cand_1" and request.command == "GET":
            seen = [{"check_id": p["check_id"], "outcome": "pass", "trust": "verified"} for p in posted]
            return json_answer(200, candidate | {"evidence": seen})
        if path == "/v1/projects/demo/candidates/cand_1/evidence" and request.command == "POST":
            posted.append(json.loads(request.body))
            return json_answer(201, stored)
        return json_answer(404, {"code": "NOT_FOUND"})

    return answer


def test_evidence_finds_the_check_and_posts_the_junit_report_with_the_run_url(
    home: Path, token_file: Path
) -> None:
    # Given a plan with one unit-test check over payments-api, and a JUnit report in the working directory
    (home / "reports").mkdir()
    report = junit_report("pay", 1)
    (home / "reports" / "unit.xml").write_text(report)
    posted: list[dict[str, Any]] = []
    with stand_in_server(publisher_service(CANDIDATE, posted, STORED)) as url:
        # When CI publishes it by policy and scope
        before = time.time()
        ran = run_hook(
            b"",
            env_for(home, url, token_file, **GITHUB),
            "evidence",
            "--revision",
            SHA,
            "--policy",
            "unit-tests",
            "--scope",
            "payments-api",
            "--junit",
            "reports/*.xml",
        )
    # Then one evidence for C1 was posted, bound to the commit, with the run's URL and the report as it is
    assert (ran.exit_code, ran.stderr) == (0, ""), ran.stderr
    [body] = posted
    observed = body.pop("observed_at")
    assert body == {
        "check_id": "C1",
        "subject": "payments",
        "revision": SHA,
        "environment": "staging",
        "scope": ["payments-api"],
        "source": {
            "system": "github-actions",
            "run_id": "7001",
            "url": "https://github.com/acme/payments/actions/runs/7001",
        },
        "junit_xml": report,
    }
    assert abs(calendar.timegm(time.strptime(observed, "%Y-%m-%dT%H:%M:%SZ")) - before) < 5
    # And it prints what the service answered, and that reporting T1 is the requester's step
    assert ran.stdout == (
        f"POSTED  evidence ev_1 for check C1 (task T1) on payments at {SHA} in staging\n"
        "  outcome: pass  trust: verified\n"
        "  counts: tests 1, failures 0, errors 0, skipped 0\n"
        "  bound to: o1 (policy unit-tests v1)\n"
        "  mismatches: none\n"
        f"  raw sha256: {'ab' * 32}\n"
        "  source: github-actions https://github.com/acme/payments/actions/runs/7001\n"
        "TASK T1: every check has evidence (C1: pass, verified); reporting the task is the requester's step "
        "(POST …/tasks/T1/reports), which this command does not take\n"
    )


def test_exit_code_evidence_carries_local_digests_and_source_url_overrides(
    home: Path, token_file: Path
) -> None:
    # Given a built artifact
    (home / "dist").mkdir()
    (home / "dist" / "site.tar").write_bytes(b"site")
    posted: list[dict[str, Any]] = []
    stored = STORED | {"trust": "untrusted"}
    with stand_in_server(publisher_service(CANDIDATE, posted, stored)) as url:
        ran = run_hook(
            b"",
            env_for(home, url, token_file, **GITHUB),
            "evidence",
            "--revision",
            SHA,
            "--policy",
            "lint",
            "--scope",
            "docs",
            "--exit-code",
            "0",
            "--artifact",
            "dist/*.tar",
            "--source-url",
            "https://ci.example/run/9",
        )
    # Then the exit code and the artifact's sha256 were sent for C2, with the given URL
    [body] = posted
    assert body["check_id"] == "C2" and "junit_xml" not in body
    assert body["result"] == {
        "exit_code": 0,
        "artifacts": [{"name": "dist/site.tar", "sha256": hashlib.sha256(b"site").hexdigest()}],
    }
    assert body["source"]["url"] == "https://ci.example/run/9"
    # And evidence that will not count (untrusted) is stored but exits 1, saying why
    assert ran.exit_code == 1
    assert "NOT COUNTING  this evidence will not decide as it is" in ran.stdout


def test_evidence_refuses_when_no_check_or_several_match_and_posts_nothing(
    home: Path, token_file: Path
) -> None:
    (home / "unit.xml").write_text(junit_report("pay", 1))
    two = json.loads(json.dumps(CANDIDATE))
    two["plan"]["tasks"][1]["checks"].append({"check_id": "C3", "policy_ref": "unit-tests", "covers": ["o1"]})
    posted: list[dict[str, Any]] = []
    args = ["evidence", "--revision", SHA, "--policy", "unit-tests", "--junit", "unit.xml"]
    with stand_in_server(publisher_service(two, posted, STORED)) as url:
        env = env_for(home, url, token_file)
        several = run_hook(b"", env, *args, "--scope", "payments-api")
        none = run_hook(b"", env, *args, "--scope", "web")
        chosen = run_hook(b"", env, *args, "--scope", "payments-api", "--check", "C3")
    assert (several.exit_code, several.stdout) == (2, "")
    assert several.stderr == (
        "ERROR  nothing published: AMBIGUOUS_CHECK\n"
        "  2 checks of the current plan match policy unit-tests and scope payments-api: C1 (task T1): policy "
        "unit-tests, scope payments-api; C3 (task T2): policy unit-tests, scope payments-api; say which with "
        "--check C1 or --check C3\n"
    )
    assert (
        none.exit_code == 2
        and "NO_MATCHING_CHECK" in none.stderr
        and "the plan has: C1 (task T1)" in none.stderr
    )
    # And with --check the one named is posted, and only then
    assert chosen.exit_code == 0 and [p["check_id"] for p in posted] == ["C3"]


def test_evidence_without_its_report_asks_nothing(home: Path, token_file: Path) -> None:
    # Given a server that would hang on any request
    with stand_in_server(lambda _request: None) as url:
        ran = run_hook(
            b"",
            env_for(home, url, token_file),
            "evidence",
            "--revision",
            SHA,
            "--policy",
            "unit-tests",
            "--scope",
            "payments-api",
            "--junit",
            "missing/*.xml",
        )
    assert (
        ran.exit_code == 2
        and ran.stderr.startswith("ERROR  nothing published: NO_FILES\n")
        and ran.seconds < 4
    )


ENVELOPE = {
    "payloadType": "application/vnd.in-toto+json",
    "payload": "eyJfdHlwZSI6ICJ4In0=",
    "signatures": [{"keyid": "k1", "sig": "c2lnbmF0dXJl"}],
}


def decision_service(reads: list[dict[str, Any]], recorded: dict[str, Any]):
    """Finds cand_1; each `GET …/decision` answers the next of `reads` (the last repeats); `POST
    …/decisions` answers `recorded`. Counts the requests."""
    counts = {"GET": 0, "POST": 0}

    def answer(request):
        if request.path.startswith("/v1/projects/demo/candidates?"):
            return json_answer(200, {"candidates": [CANDIDATE], "next_cursor": None})
        if request.path == "/v1/projects/demo/candidates/cand_1/decision":
            counts["GET"] += 1
            return json_answer(200, reads[min(counts["GET"], len(reads)) - 1] | {"revision": SHA})
        if request.path == "/v1/projects/demo/candidates/cand_1/decisions" and request.command == "POST":
            counts["POST"] += 1
            return json_answer(201, recorded | {"revision": SHA})
        return json_answer(404, {"code": "NOT_FOUND"})

    answer.counts = counts  # type: ignore[attr-defined]
    return answer


def hold(*codes: str) -> dict[str, Any]:
    return {
        "decision": "hold",
        "findings": [
            {
                "code": c,
                "obligation_id": None,
                "check_id": None,
                "task_id": None,
                "detail": c.lower(),
                "remediation_hint": None,
            }
            for c in codes
        ],
    }


def test_gate_waits_until_ready_then_records_and_saves_the_receipt(home: Path, token_file: Path) -> None:
    # Given a decision that holds on missing evidence, then on an unreported task, then is ready
    service = decision_service(
        [hold("EVIDENCE_MISSING"), hold("TASK_NOT_REPORTED"), {"decision": "ready", "findings": []}],
        {"decision": "ready", "findings": [], "receipt": ENVELOPE},
    )
    receipt = home / "out" / "receipt.json"
    receipt.parent.mkdir()
    with stand_in_server(service) as url:
        # When the gate waits for it with a receipt path
        ran = run_hook(
            b"",
            env_for(home, url, token_file),
            "gate",
            "--revision",
            SHA,
            "--wait",
            "2m",
            "--receipt",
            str(receipt),
        )
    # Then it polled until ready, printed each change on stderr, recorded once, and passed
    assert (ran.exit_code, ran.stdout) == (0, f"READY  payments at {SHA} in staging (candidate cand_1)\n")
    lines = [line.split("] ", 1)[1] for line in ran.stderr.splitlines()]
    assert lines == [
        "hold: EVIDENCE_MISSING",
        "hold: TASK_NOT_REPORTED",
        "ready: no findings",
        "stopped waiting: ready",
    ]
    assert service.counts == {"GET": 3, "POST": 1}
    # And the receipt the recorded decision carried is saved, owner-only
    assert json.loads(receipt.read_text()) == ENVELOPE
    assert stat.S_IMODE(os.stat(receipt).st_mode) == 0o600


def test_gate_stops_waiting_on_a_hold_only_a_person_can_resolve(home: Path, token_file: Path) -> None:
    # Given a decision missing a review (and evidence)
    service = decision_service(
        [hold("EVIDENCE_MISSING", "REVIEW_MISSING")], hold("EVIDENCE_MISSING", "REVIEW_MISSING")
    )
    with stand_in_server(service) as url:
        ran = run_hook(b"", env_for(home, url, token_file), "gate", "--revision", SHA, "--wait", "30m")
    # Then it does not wait the 30 minutes: one read, the decision recorded, exit 1 hold
    assert ran.exit_code == 1 and ran.seconds < 10
    assert ran.stdout.startswith(f"HOLD  payments at {SHA} in staging (candidate cand_1)\n")
    assert ran.stderr.splitlines()[-1].endswith(
        "stopped waiting: a hold only a person can resolve (REVIEW_MISSING)"
    )
    assert service.counts == {"GET": 1, "POST": 1}


def test_gate_wait_ends_at_its_deadline_with_the_recorded_hold(home: Path, token_file: Path) -> None:
    service = decision_service([hold("EVIDENCE_MISSING")], hold("EVIDENCE_MISSING"))
    with stand_in_server(service) as url:
        ran = run_hook(b"", env_for(home, url, token_file), "gate", "--revision", SHA, "--wait", "3s")
    assert ran.exit_code == 1 and 3 <= ran.seconds < 10
    assert ran.stderr.splitlines()[-1].endswith("stopped waiting: the deadline of 0m03s passed")
    assert service.counts["POST"] == 1 and service.counts["GET"] >= 2


def test_a_ready_decision_without_a_receipt_fails_the_gate(home: Path, token_file: Path) -> None:
    receipt = home / "receipt.json"
    service = decision_service([], {"decision": "ready", "findings": [], "receipt": None})
    with stand_in_server(service) as url:
        ran = run_hook(
            b"", env_for(home, url, token_file), "gate", "--revision", SHA, "--receipt", str(receipt)
        )
    assert (ran.exit_code, ran.stdout) == (2, "")
    assert ran.stderr == (
        f"ERROR  payments at {SHA} in staging (candidate cand_1): no decision could be established\n"
        "  RECEIPT_MISSING\n"
        "      the decision is ready but the service answered without a receipt, and a deploy needs one: "
        "check that the service signs receipts (docs/ci.md)\n"
        "The gate fails closed: this check passes only on a ready decision.\n"
    )
    assert not receipt.exists()


def test_a_bad_wait_duration_is_a_usage_error(home: Path) -> None:
    ran = run_hook(b"", clean_env(home), "gate", "--revision", SHA, "--wait", "soon")
    assert ran.exit_code == 2 and "--wait: 'soon' is not a duration" in ran.stderr


# ---- against sentinel serve ----------------------------------------------------------------------------


@pytest.mark.http
def test_the_ready_flow_with_the_publisher_and_a_waiting_gate_against_serve(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with tempfile.TemporaryDirectory() as data, LocalGate(Path(data)) as gate:
        seed = gate.banner["seed"]["principals"]
        requester, reviewer = gate.client("requester"), gate.client("reviewer")
        tokens = {}
        for role in ("publisher", "auditor"):
            tokens[role] = home / f"{role}.token"
            tokens[role].write_text(seed[role]["token"])
            tokens[role].chmod(0o600)
        revision = secrets.token_hex(20)
        change = {"files": ["services/payments/api.py", "docs/guide.md"]}
        # Given a candidate, attested, with the service's proposal as its plan
        created = requester.create_candidate(
            "demo",
            {
                "subject": "payments",
                "base_revision": secrets.token_hex(20),
                "revision": revision,
                "environment": "staging",
                "change": change,
            },
        )
        assert created.status == 201, created.body
        cid = created.body["candidate_id"]
        assert gate.client("publisher").add_change_context("demo", cid, change).status == 201
        proposal = requester.propose("demo", cid).body
        # When CI publishes what each (policy, scope) it ran produced, naming no check id: a JUnit report for
        # the unit tests, the exit code for lint (its policy's check_type is exit_code)
        publish_env = env_for(home, gate.banner["url"], tokens["publisher"], **GITHUB)
        for obligation in created.body["obligations"]:
            (home / "junit-result.xml").write_text(junit_report(obligation["scope"].replace("/", "."), 2))
            kind = ["--exit-code", "0"] if obligation["policy_id"] == "lint" else ["--junit", "junit-*.xml"]
            ran = run_hook(
                b"",
                publish_env,
                "evidence",
                "--revision",
                revision,
                "--policy",
                obligation["policy_id"],
                "--scope",
                obligation["scope"],
                *kind,
            )
            assert ran.exit_code == 0, ran.stderr + ran.stdout
            assert "outcome: pass  trust: verified" in ran.stdout and "mismatches: none" in ran.stdout
        # Then every task has evidence for each check, and the publisher said so without reporting any
        assert ran.stdout.count("TASK ") == len(proposal["plan"]["tasks"])
        state = requester.get_candidate("demo", cid).body
        assert all(not task["attempts"] for task in state["tasks"])
        # When a human approves, and the gate waits while the requester reports the tasks
        review = reviewer.review(
            "demo",
            cid,
            {
                "decision": "approve",
                "plan_digest": proposal["plan_digest"],
                "revision": revision,
                "comment": "ok",
            },
        )
        assert review.status == 201, review.body
        gate_env = env_for(home, gate.banner["url"], tokens["auditor"])
        waiting = subprocess.Popen(
            hook_command("gate", "--revision", revision, "--wait", "90s", "--receipt", "receipt.json"),
            env=gate_env,
            cwd=home,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # The gate's progress is read as it comes, so the tasks are reported only once it has seen the hold
        # (a fixed sleep raced a slow start under load).
        said: list[str] = []
        saw_hold = threading.Event()

        def follow() -> None:
            for line in waiting.stderr or []:
                said.append(line)
                if "hold: TASK_NOT_REPORTED" in line:
                    saw_hold.set()

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        try:
            assert saw_hold.wait(60), "the waiting gate never said it holds: " + "".join(said)
            by_check = {e["check_id"]: e["evidence_id"] for e in state["evidence"]}
            for task in proposal["plan"]["tasks"]:
                claims = [
                    {"check_id": c["check_id"], "evidence_id": by_check[c["check_id"]]}
                    for c in task["checks"]
                ]
                reported = requester.report(
                    "demo",
                    cid,
                    task["task_id"],
                    {
                        "plan_digest": proposal["plan_digest"],
                        "status": "completed",
                        "checks": claims,
                        "summary": "ok",
                    },
                )
                assert reported.status == 201 and reported.body["passes"], reported.body
            out = waiting.stdout.read() if waiting.stdout else ""
            waiting.wait(timeout=120)
            reader.join(timeout=10)
            err = "".join(said)
        finally:
            if waiting.poll() is None:
                waiting.kill()
        # Then the gate saw the hold turn ready, recorded it, and passed
        assert waiting.returncode == 0, err + out
        assert out == f"READY  payments at {revision} in staging (candidate {cid})\n"
        assert "hold: TASK_NOT_REPORTED" in err and "stopped waiting: ready" in err
        recorded = requester.get_candidate("demo", cid).body["last_decision"]
        assert recorded["decision"] == "ready"
        # And the receipt it saved verifies offline, with the key the gate publishes, for this commit only
        keys = run_sentinel("keys", "--url", gate.banner["url"], cwd=home)
        assert keys.returncode == 0, keys.stderr
        (home / "receipt-key.pem").write_text(keys.stdout)
        verify = ("receipt", "verify", "receipt.json", "--project", "demo", "--environment", "staging")
        key = ("--key", "receipt-key.pem")
        ok = run_sentinel(*verify, "--revision", revision, *key, cwd=home)
        assert ok.returncode == 0 and ok.stdout.startswith("ok"), ok.stderr
        other = run_sentinel(*verify, "--revision", secrets.token_hex(20), *key, cwd=home)
        assert other.returncode == 1 and "RECEIPT_REVISION_MISMATCH" in other.stderr


def run_sentinel(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The operator's `sentinel` command, as a deploy step runs it."""
    return subprocess.run(
        [sys.executable, "-m", "sentinel_runner.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


# ---- the action's own script ---------------------------------------------------------------------------


def action_step(number: int) -> dict[str, Any]:
    """The action's `number`-th run step: its script and the names of its `env:` (all set, maybe empty,
    when GitHub runs it)."""
    steps = yaml.safe_load((REPO / ".github/actions/sentinel/action.yml").read_text())["runs"]["steps"]
    return [s for s in steps if "run" in s][number]


def test_the_actions_evidence_step_sends_every_glob_as_one_report_and_leaves_no_token(home: Path) -> None:
    # Given the action's run step, with the client where its install step puts it, and two JUnit reports
    runner_temp = home / "runner-temp"
    (runner_temp / "sentinel-client" / "bin").mkdir(parents=True)
    hook = (
        Path(hook_command()[2])
        if len(hook_command()) > 2 and hook_command()[2].endswith("sentinel-hook")
        else None
    )
    if hook is None:
        pytest.skip("the sentinel-hook console script is not installed in this environment")
    (runner_temp / "sentinel-client" / "bin" / "sentinel-hook").symlink_to(hook)
    (home / "reports").mkdir()
    (home / "reports" / "a.xml").write_text(junit_report("a", 1))
    (home / "reports" / "b-1.xml").write_text(junit_report("b", 2))
    posted: list[dict[str, Any]] = []
    tokens: list[str] = []

    def answer(request):
        tokens.append(request.headers.get("Authorization", ""))
        return publisher_service(CANDIDATE, posted, STORED)(request)

    token = "snt_" + "B" * 49
    with stand_in_server(answer) as url:
        step = action_step(1)
        env = {
            **dict.fromkeys(step["env"], ""),
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "RUNNER_TEMP": str(runner_temp),
            "SENTINEL_MODE": "evidence",
            "SENTINEL_URL": url,
            "SENTINEL_PROJECT": "demo",
            "SENTINEL_SUBJECT": "payments",
            "SENTINEL_ENVIRONMENT": "staging",
            "SENTINEL_TOKEN_VALUE": token,
            "SENTINEL_REVISION": SHA,
            "SENTINEL_POLICY": "unit-tests",
            "SENTINEL_SCOPE": "payments-api",
            "SENTINEL_JUNIT": "reports/a.xml\nreports/b-*.xml",
            **GITHUB,
        }
        # When the step runs as the runner runs it
        ran = subprocess.run(
            ["bash", "-e", "-c", step["run"]],
            env=env,
            cwd=home,
            capture_output=True,
            text=True,
            timeout=60,
        )
    # Then both files went as one report, with the token from its file, and the token file is gone
    assert ran.returncode == 0, ran.stderr + ran.stdout
    [body] = posted
    assert body["junit_xml"].count("<testcase") == 3 and body["check_id"] == "C1"
    assert set(tokens) == {f"Bearer {token}"}
    assert list(runner_temp.iterdir()) == [runner_temp / "sentinel-client"]
