"""The requester's and publisher's commands (`sentinel candidate|plan|evidence|report`) against a real local
gate (`sentinel serve --store memory --seed`, a child process), run in process through
`sentinel_client.cli.main` with only the client's own commands, their `--json` output parsed."""

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sentinel_client.api import SentinelClient
from sentinel_client.cli import main

pytestmark = pytest.mark.http

SPEC_V1 = (
    "openapi: 3.0.3\ninfo: {title: pay, version: '1'}\npaths:\n  /pay:\n    get:\n      responses:\n"
    "        '200': {description: ok}\n"
)
SPEC_V2 = SPEC_V1 + "  /refund:\n    post:\n      responses:\n        '200': {description: ok}\n"
CONTRACT_POLICY = {
    "check_type": "junit",
    "command": "schemathesis run {scope}",
    "expected_exit_code": 0,
    "expected_artifacts": [],
    "fail_message": "The API contract tests failed",
    "remediation_hint": "Run schemathesis locally",
    "max_evidence_age_seconds": 86400,
    "trusted_publishers": ["ci-bot"],
    "min_tests": 1,
}
JUNIT = (
    '<testsuite name="s"><testcase classname="a" name="t1"/><testcase classname="a" name="t2"/></testsuite>'
)
NOWHERE = "http://127.0.0.1:9"  # nothing listens: a command that sent a request would say UNREACHABLE


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The seeded demo project on a throwaway store, its config given an OpenAPI rule by its admin."""
    process = subprocess.Popen(
        [sys.executable, "-m", "sentinel_runner.cli", "serve", "--store", "memory", "--seed"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, process.stderr.read() if process.stderr else ""
        banner = json.loads(line)
        tokens = {role: p["token"] for role, p in banner["seed"]["principals"].items()}
        admin = SentinelClient(banner["url"], token=tokens["admin"])
        assert admin.put_policy("demo", "api-contract", CONTRACT_POLICY).status == 201
        current = admin.request("GET", "/projects/demo/config")
        config = current.body["config"]
        config["derivation_rules"].append({"openapi": "payments-api", "policy_id": "api-contract"})
        assert admin.put_config("demo", config, if_match=str(current.body["version"])).status == 201
        folder = tmp_path_factory.mktemp("tokens")
        files = {}
        for role, token in tokens.items():
            files[role] = folder / role
            files[role].write_text(token + "\n")
            files[role].chmod(0o600)
        yield {"url": banner["url"], "tokens": tokens, "files": files}
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)


@pytest.fixture(autouse=True)
def own_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user's context or SENTINEL_* variable reaches the commands: only what each test passes."""
    for name in list(os.environ):
        if name.startswith("SENTINEL_") and name != "SENTINEL_DATA_DIR":
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A repository whose last commit changes the payments service and adds an operation to the document."""
    repo = tmp_path / "clone"
    (repo / "services" / "payments").mkdir(parents=True)
    (repo / "api").mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "services" / "payments" / "pay.py").write_text("x = 1\n")
    (repo / "api" / "payments.yaml").write_text(SPEC_V1)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    # Each test's own commits (the gate outlives the test): a candidate per test, never CANDIDATE_EXISTS
    (repo / "services" / "payments" / "pay.py").write_text(f"x = 2  # {tmp_path.name}\n")
    (repo / "api" / "payments.yaml").write_text(SPEC_V2)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "head")
    return repo


def sentinel(capsys: pytest.CaptureFixture[str], gate: dict[str, Any], role: str, *argv: str) -> Any:
    """Run one command as `role` with --json; its exit code must be 0 and its output one JSON document."""
    where = ["--url", gate["url"], "--project", "demo", "--token-file", str(gate["files"][role]), "--json"]
    code = main([*argv, *where], registrations=[])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv), registrations=[])
    out, err = capsys.readouterr()
    return code, err


def create_args(clone: Path, environment: str = "staging") -> list[str]:
    return [
        "candidate",
        "create",
        "--from-git",
        "HEAD~1..HEAD",
        "--repo",
        str(clone),
        "--subject",
        "payments-api",
        "--environment",
        environment,
        "--openapi",
        "payments-api=api/payments.yaml",
    ]


def reasons(obligations: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return sorted((o["policy_id"], o["scope"], o["reason"]) for o in obligations)


def test_create_from_git_derives_what_the_hand_written_post_derives(capsys, gate, clone) -> None:
    # Given the change written out by hand, as a requester would have posted it before these commands
    base, head = git(clone, "rev-parse", "HEAD~1"), git(clone, "rev-parse", "HEAD")
    by_hand = SentinelClient(gate["url"], token=gate["tokens"]["requester"]).create_candidate(
        "demo",
        {
            "subject": "payments-api",
            "base_revision": base,
            "revision": head,
            "environment": "production",
            "change": {
                "files": ["api/payments.yaml", "services/payments/pay.py"],
                "openapi": [{"name": "payments-api", "before": SPEC_V1, "after": SPEC_V2}],
            },
        },
    )
    assert by_hand.status == 201, by_hand.body
    # When the requester creates the same change from git
    created = sentinel(capsys, gate, "requester", *create_args(clone))
    # Then the same obligations come back, for the full commit ids, the OpenAPI one among them
    assert reasons(created["obligations"]) == reasons(by_hand.body["obligations"])
    assert {o["policy_id"] for o in created["obligations"]} == {"unit-tests", "api-contract"}
    assert (created["base_revision"], created["revision"], created["existing"]) == (base, head, False)
    assert created["openapi"] == ["payments-api"] and created["change_context"] == "declared"
    # And creating it again is not an error: the existing candidate's id, exit 0
    again = sentinel(capsys, gate, "requester", *create_args(clone))
    assert again == {"candidate_id": created["candidate_id"], "existing": True}


def test_a_candidate_goes_from_git_to_a_passing_task_with_the_commands(capsys, gate, clone, tmp_path) -> None:
    # Given a candidate created from git and attested by the CI publisher from the same commits
    cid = sentinel(capsys, gate, "requester", *create_args(clone))["candidate_id"]
    attested = sentinel(
        capsys,
        gate,
        "publisher",
        "candidate",
        "attest",
        cid,
        "--from-git",
        "HEAD~1..HEAD",
        "--repo",
        str(clone),
        "--openapi",
        "payments-api=api/payments.yaml",
    )
    assert attested["change_context"] == "attested" and attested["added_obligations"] == []
    # When the requester has a plan drafted, then amends it with an action (If-Match filled in)
    proposed = sentinel(capsys, gate, "requester", "plan", "propose", cid)
    shown = sentinel(capsys, gate, "requester", "plan", "show", cid)
    assert shown["plan_digest"] == proposed["plan_digest"] and shown["plan_version"] == 1
    plan = shown["plan"]
    first = plan["tasks"][0]["checks"][0]["check_id"]
    plan["actions"] = [{"action_id": "A1", "type": "dispatch_checks", "params": {"checks": [first]}}]
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(shown))  # `plan show --json` output, edited in place
    amended = sentinel(capsys, gate, "requester", "plan", "amend", cid, "-f", str(plan_file), "--yes")
    assert amended["plan_version"] == 2 and amended["replaced_plan_digest"] == proposed["plan_digest"]
    assert amended["plan"]["actions"][0]["action_id"] == "A1"
    # And the publisher posts a JUnit report for the unit tests by policy and scope
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "unit.xml").write_text(JUNIT)
    posted = sentinel(
        capsys,
        gate,
        "publisher",
        "evidence",
        "post",
        cid,
        "--policy",
        "unit-tests",
        "--scope",
        "payments-api",
        "--junit",
        str(reports / "*.xml"),
        "--revision",
        git(clone, "rev-parse", "HEAD"),
        "--source-url",
        "https://ci.example.com/runs/7",
        "--run-id",
        "7",
    )
    # Then it is bound to the plan's unit-tests check and the unit-tests obligation, verified
    candidate = sentinel(capsys, gate, "requester", "candidate", "show", cid)
    unit = next(
        o for o in candidate["obligations"] if (o["policy_id"], o["scope"]) == ("unit-tests", "payments-api")
    )
    check = next(
        (task["task_id"], c["check_id"])
        for task in candidate["plan"]["tasks"]
        for c in task["checks"]
        if c["covers"] == [unit["obligation_id"]]
    )
    assert (posted["task_id"], posted["check_id"]) == check
    assert (
        posted["binding"]["obligation_ids"] == [unit["obligation_id"]]
        and posted["binding"]["mismatches"] == []
    )
    assert (posted["outcome"], posted["trust"], posted["counts"]["tests"]) == ("pass", "verified", 2)
    assert posted["counts_toward_decision"] is True
    # And evidence posted by --check alone takes that check's policy and the scopes it covers
    contract = next(
        c for task in candidate["plan"]["tasks"] for c in task["checks"] if c["policy_ref"] == "api-contract"
    )
    by_check = sentinel(
        capsys,
        gate,
        "publisher",
        "evidence",
        "post",
        cid,
        "--check",
        contract["check_id"],
        "--junit",
        str(reports / "unit.xml"),
        "--revision",
        git(clone, "rev-parse", "HEAD"),
    )
    assert by_check["check_id"] == contract["check_id"] and by_check["binding"]["mismatches"] == []
    assert sorted(by_check["binding"]["obligation_ids"]) == sorted(contract["covers"])
    # When the requester reports that task completed (digest and evidence filled in)
    reported = sentinel(capsys, gate, "requester", "report", cid, check[0], "--status", "completed")
    # Then the attempt is recorded completed and the task passes
    assert (reported["attempt"], reported["recorded_status"], reported["passes"]) == (1, "completed", True)
    assert reported["checks"] == [{"check_id": check[1], "evidence_id": posted["evidence_id"]}]
    after = sentinel(capsys, gate, "requester", "candidate", "show", cid)
    assert next(t for t in after["tasks"] if t["task_id"] == check[0])["passes"] is True


def test_the_human_words_name_obligations_plan_evidence_and_tasks(capsys, gate, clone, tmp_path) -> None:
    where = ["--url", gate["url"], "--project", "demo", "--token-file", str(gate["files"]["requester"])]
    cid = sentinel(capsys, gate, "requester", *create_args(clone, "production"))["candidate_id"]
    assert main(["plan", "propose", cid, *where], registrations=[]) == 0
    assert "drafted by the fallback" in capsys.readouterr().out
    failing = tmp_path / "failing.xml"
    failing.write_text(JUNIT.replace('name="t2"/>', 'name="t2"><failure message="boom"/></testcase>'))
    posted = sentinel(
        capsys,
        gate,
        "publisher",
        "evidence",
        "post",
        cid,
        "--policy",
        "unit-tests",
        "--scope",
        "payments-api",
        "--junit",
        str(failing),
        "--revision",
        git(clone, "rev-parse", "HEAD"),
        "--source-url",
        "https://ci.example.com/runs/8",
    )
    assert posted["outcome"] == "fail"
    assert main(["candidate", "show", cid, *where], registrations=[]) == 0
    out = capsys.readouterr().out
    assert f"{posted['evidence_id']} failed: a.t2" in out
    assert f"{posted['evidence_id']} run: https://ci.example.com/runs/8" in out
    assert f"candidate {cid}: payments-api in production" in out
    assert "api-contract" in out and "OBLIGATION" in out and "WHY" in out
    assert "plan: version 1 of 1, digest " in out and "last decision: none recorded" in out


def test_a_plan_that_fails_preflight_prints_each_finding_and_stores_nothing(capsys, gate, clone, tmp_path):
    cid = sentinel(capsys, gate, "requester", *create_args(clone, "production"))["candidate_id"]
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps({"tasks": [{"task_id": "T1", "title": "x", "checks": [], "colour": "red"}]}))
    where = ["--url", gate["url"], "--project", "demo", "--token-file", str(gate["files"]["requester"])]
    code = main(["plan", "amend", cid, "-f", str(bad), *where], registrations=[])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: PLAN_PREFLIGHT_FAILED: ")
    assert "PLAN_SCHEMA_INVALID" in err and "Traceback" not in err
    assert sentinel(capsys, gate, "requester", "candidate", "show", cid)["plan_versions"] == []


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ("candidate create --from-git HEAD~1..HEAD --repo {tmp}", "NOT_A_GIT_REPOSITORY"),
        ("candidate create --from-git main --repo {clone}", "BAD_RANGE"),
        ("candidate create --from-git nobranch..HEAD --repo {clone}", "BAD_RANGE"),
        ("candidate attest cand_x --from-git HEAD.. --repo {tmp}", "NOT_A_GIT_REPOSITORY"),
        ("plan amend cand_x -f {tmp}/not.json", "PLAN_FILE_INVALID"),
        ("plan amend cand_x -f {tmp}/absent.json", "PLAN_FILE_UNREADABLE"),
        ("evidence post cand_x --check C1 --junit {tmp}/none/*.xml", "NO_FILES"),
        ("evidence post cand_x --policy p --exit-code 0", "BAD_OPTION"),
        ("evidence post cand_x --check C1 --exit-code 0 --artifact a={tmp}/no", "NO_FILES"),
        ("report cand_x T1 --status blocked", "BAD_OPTION"),
    ],
)
def test_bad_input_is_refused_before_any_request(capsys, clone, tmp_path, command, code) -> None:
    # Given a gate URL where nothing listens (a request would be refused as UNREACHABLE)
    (tmp_path / "not.json").write_text("{tasks: nope")
    where = ["--url", NOWHERE, "--project", "demo", "--subject", "payments-api", "--environment", "staging"]
    filled = command.replace("{tmp}", str(tmp_path)).replace("{clone}", str(clone)).split()
    if filled[:2] != ["candidate", "create"]:
        where = where[:4]
    # When the command runs with bad input
    status, err = refused(capsys, *filled, *where)
    # Then it exits 1 with one error line naming the code and a next step, and no traceback
    lines = err.splitlines()
    assert status == 1, err
    assert [line for line in lines if line.startswith("error:")] == [lines[0]]
    assert lines[0].startswith(f"error: {code}: ") and lines[1].startswith("next: ") and len(lines) == 2
    assert "Traceback" not in err


def test_a_missing_subject_is_a_missing_setting_with_a_next_step(capsys, clone) -> None:
    status, err = refused(
        capsys, "candidate", "create", "--from-git", "HEAD~1..HEAD", "--repo", str(clone), "--url", NOWHERE
    )
    assert status == 3 and err.startswith("error: SETTING_MISSING: the candidate's subject is not set")
    assert "next: give --subject" in err


def test_the_script_refuses_bad_input_in_one_line_without_a_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sentinel_client.cli",
            "candidate",
            "create",
            "--from-git",
            "a..b",
            "--repo",
            str(tmp_path),
            "--url",
            NOWHERE,
            "--project",
            "p",
            "--subject",
            "s",
            "--environment",
            "e",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines()[0].startswith("error: NOT_A_GIT_REPOSITORY: ")
    assert "Traceback" not in done.stderr


EVERY_COMMAND = [
    "candidate create --from-git HEAD~1..HEAD --repo {clone} --openapi payments-api=api/payments.yaml",
    "candidate show cand_x",
    "candidate attest cand_x --from-git HEAD~1..HEAD --repo {clone}",
    "plan propose cand_x",
    "plan show cand_x",
    "plan show cand_x --version 2",
    "plan amend cand_x -f {tmp}/plan.json --yes",
    "evidence post cand_x --check C1 --junit {tmp}/unit.xml",
    "evidence post cand_x --policy unit-tests --scope payments-api --exit-code 0",
    "report cand_x T1 --status completed",
]


@pytest.mark.parametrize("command", EVERY_COMMAND)
@pytest.mark.parametrize(
    ("token", "code", "exit_code"), [(False, "TOKEN_UNAVAILABLE", 3), (True, "UNREACHABLE", 3)]
)
def test_no_token_or_no_gate_is_one_error_line(capsys, clone, tmp_path, command, token, code, exit_code):
    # Given good input, and either no token at all or a gate that does not answer
    (tmp_path / "plan.json").write_text('{"tasks": []}')
    (tmp_path / "unit.xml").write_text(JUNIT)
    (tmp_path / "token").write_text("snt_" + "A" * 49 + "\n")
    (tmp_path / "token").chmod(0o600)
    where = ["--url", NOWHERE, "--project", "demo", "--subject", "payments-api", "--environment", "staging"]
    filled = command.replace("{tmp}", str(tmp_path)).replace("{clone}", str(clone)).split()
    if filled[:2] != ["candidate", "create"]:
        where = where[:4]
    if token:
        where += ["--token-file", str(tmp_path / "token")]
    # When the command runs
    status, err = refused(capsys, *filled, *where)
    # Then it says so in one error line and a next step, exits 3 (unavailable), and shows no traceback
    lines = err.splitlines()
    assert status == exit_code and lines[0].startswith(f"error: {code}: "), err
    assert len(lines) == 2 and lines[1].startswith("next: ") and "Traceback" not in err


def test_attack_a_base_the_agent_chose_is_never_what_ci_is_told_to_attest(capsys, gate, clone) -> None:
    # Given an agent whose change is two commits (the payments code, then the document), which created the
    # candidate from the last commit alone: its base_revision is the first commit, hiding the payments change
    base = git(clone, "rev-parse", "HEAD~1")
    (clone / "docs").mkdir()
    (clone / "docs" / "note.md").write_text("innocent\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "docs")
    cid = sentinel(
        capsys, gate, "requester", "candidate", "create", "--from-git", "HEAD~1..HEAD", "--repo", str(clone),
        "--subject", "payments", "--environment", "staging", "--openapi", "payments-api=api/payments.yaml",
    )["candidate_id"]  # fmt: skip
    # When CI attests the range it trusts (from the protected branch's commit)
    where = ["--url", gate["url"], "--project", "demo", "--token-file", str(gate["files"]["publisher"])]
    code = main(
        ["candidate", "attest", cid, "--from-git", f"{base}..HEAD", "--repo", str(clone), *where],
        registrations=[],
    )
    err = capsys.readouterr().err
    # Then it is refused, and the next step does not tell CI to attest the agent's narrower range instead
    assert code == 1 and err.startswith("error: REVISION_MISMATCH:")
    assert "--from-git" not in err.split("next:", 1)[1]
    assert "never" in err.split("next:", 1)[1]


def test_attack_a_run_of_another_commit_never_becomes_evidence_for_the_candidate(
    capsys, gate, clone, tmp_path, monkeypatch
) -> None:
    # Given the agent's candidate for its head, and CI (the trusted publisher) whose tests ran on the base
    # commit, told the candidate's id by the agent (as docs/cli.md's "Try it" passes $ID to CI)
    cid = sentinel(capsys, gate, "requester", *create_args(clone))["candidate_id"]
    sentinel(capsys, gate, "requester", "plan", "propose", cid)
    tested = git(clone, "rev-parse", "HEAD~1")
    (tmp_path / "unit.xml").write_text(JUNIT)
    where = ["--url", gate["url"], "--project", "demo", "--token-file", str(gate["files"]["publisher"])]
    post = ["evidence", "post", cid, "--policy", "unit-tests", "--scope", "payments-api"]
    post += ["--junit", str(tmp_path / "unit.xml")]
    # When CI posts what it ran, naming the commit it tested (or on GitHub Actions, where the variables say)
    code = main([*post, "--revision", tested, *where], registrations=[])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: REVISION_MISMATCH:")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_EVENT_NAME", "push")
    monkeypatch.setenv("GITHUB_SHA", tested)
    code = main([*post, *where], registrations=[])
    assert code == 1 and capsys.readouterr().err.startswith("error: REVISION_MISMATCH:")
    # And a publisher that says nothing about the commit is asked to, outside CI
    monkeypatch.delenv("GITHUB_ACTIONS")
    code = main([*post, *where], registrations=[])
    assert code == 1 and capsys.readouterr().err.startswith("error: REVISION_REQUIRED:")
    # Then nothing was recorded for the candidate
    assert (
        SentinelClient(gate["url"], token=gate["tokens"]["publisher"])
        .get_candidate("demo", cid)
        .body["evidence"]
        == []
    )
