"""Issue 15's "Must show", end to end: a pull request opened on GitHub (the fake GitHub on loopback, which
checks every request Sentinel makes against GitHub's published REST description and signs its webhooks as
GitHub does) reaches `sentinel serve` as a subprocess, whose relay runs the forge worker and the check
publisher. The candidate is attested by the forge from GitHub's compare, the requester plans, CI publishes
JUnit with `sentinel-hook evidence`, the requester reports, a human approves, and the check run
`sentinel/staging` on the pull request's head turns `success`; the receipt `sentinel-hook gate --receipt`
saves verifies offline for that commit only. A run whose tests fail keeps the check not-success, naming the
failing tests.

Everything runs as an operator and a CI job would run it: the gate configured by environment and owner-only
files, principals added with `sentinel principals add`, the configuration put over HTTP by the admin, the
CI publisher and the gate as `sentinel-hook` subprocesses. Waiting is polling with a deadline: the relay
runs every 0.2 s."""

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from sentinel_client.api import SentinelClient
from sentinel_client.flow import junit_report
from sentinel_runner.demo import LocalGate
from support.fake_github import FakeGitHub
from support.hook_harness import clean_env, run_hook

pytestmark = pytest.mark.http

PROJECT = "demo"  # `sentinel serve --seed`'s project, policies and principals
ENVIRONMENT = "staging"
CHECK_NAME = f"sentinel/{ENVIRONMENT}"
REPOSITORY = "acme/payments"
INSTALLATION = 4711
APP_PRINCIPAL = "github-app"
AUTHOR_LOGIN, AUTHOR = "octocat", "octo"  # the pull request's author and the principal it maps to
DEADLINE_SECONDS = 20.0  # the relay runs every 0.2 s; a publication GitHub missed is retried after 1 s, 2 s…
RUN_URL = f"https://github.com/{REPOSITORY}/actions/runs/9001"
CI_RUN = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_SERVER_URL": "https://github.com",
    "GITHUB_REPOSITORY": REPOSITORY,
    "GITHUB_RUN_ID": "9001",
}
FAILING = ("payments.Refunds.test_refund_rounds_down", "payments.Refunds.test_refund_twice")

T = TypeVar("T")


def eventually(what: str, probe: Callable[[], T | None], deadline: float = DEADLINE_SECONDS) -> T:
    """Poll `probe` until it returns something, or fail saying what never happened."""
    until = time.monotonic() + deadline
    while True:
        found = probe()
        if found is not None:
            return found
        if time.monotonic() > until:
            pytest.fail(f"within {deadline:.0f} s: {what}")
        time.sleep(0.1)


def owner_only(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    path.chmod(0o600)
    return path


def run_sentinel(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The operator's `sentinel` command, with this process's environment (the gate's settings)."""
    return subprocess.run(
        [sys.executable, "-m", "sentinel_runner.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )


@dataclass
class ForgeGate:
    github: FakeGitHub
    gate: LocalGate
    home: Path
    tokens: dict[str, Path]  # role -> owner-only token file, as CI and a deploy step keep them
    author: SentinelClient  # the pull request's author, a human who also reviews (others' changes)

    @property
    def url(self) -> str:
        return str(self.gate.banner["url"])

    @property
    def webhook(self) -> str:
        return self.url + "/v1/forge/github/webhook"

    def client(self, role: str) -> SentinelClient:
        return self.gate.client(role)

    def hook_env(self, role: str, **extra: str) -> dict[str, str]:
        env = clean_env(
            self.home,
            url=self.url,
            project=PROJECT,
            subject="payments",
            environment=ENVIRONMENT,
            token_file=str(self.tokens[role]),
            timeout_seconds="10",
        )
        env.update(extra)
        return env

    def check_items(self, candidate_id: str) -> int:
        """How many `forge_check` items of the candidate the relay has handed on (its event log says)."""
        log = self.gate.event_log
        events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return sum(
            1
            for e in events
            if e["detail-type"] == "sentinel.forge_check" and e["detail"].get("candidate_id") == candidate_id
        )

    def check_run_when(self, head: str, what: str, holds: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The check run on `head` once `holds` is true of it (polled until the deadline)."""
        return eventually(what, lambda: run if (run := self.check_run(head)) and holds(run) else None)

    def check_run(self, head: str) -> dict[str, Any] | None:
        runs = [r for r in self.github.check_runs(REPOSITORY, head) if r["name"] == CHECK_NAME]
        assert len(runs) <= 1, f"more than one {CHECK_NAME} run on {head}: {runs}"
        return runs[0] if runs else None


def project_config(app_id: int) -> dict[str, Any]:
    from sentinel_runner.seed import CONFIG

    return {
        **CONFIG,
        "change_context_publishers": [*CONFIG["change_context_publishers"], APP_PRINCIPAL],
        "github": {
            "app_id": app_id,
            "installation_id": INSTALLATION,
            "app_principal": APP_PRINCIPAL,
            "repositories": [
                {"repository": REPOSITORY, "subject": "payments", "environments": [ENVIRONMENT]}
            ],
            "logins": {AUTHOR_LOGIN: AUTHOR},
        },
    }


@pytest.fixture
def forge_gate(
    fake_github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ForgeGate]:
    """`sentinel serve --seed` as an operator runs it for a project with a GitHub App: the app's key and the
    webhook secret in owner-only files, the REST API at the fake GitHub, the app's `ci` principal and the
    pull request's author added with `sentinel principals add`, and the configuration put by the admin."""
    home = tmp_path / "home"
    home.mkdir()
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    monkeypatch.setenv("SENTINEL_GITHUB_API_URL", fake_github.url)
    monkeypatch.setenv(
        "SENTINEL_GITHUB_APP_KEY_FILE", str(owner_only(keys / "app.pem", fake_github.private_key_pem))
    )
    monkeypatch.setenv(
        "SENTINEL_GITHUB_WEBHOOK_SECRET_FILE",
        str(owner_only(keys / "webhook-secret", fake_github.webhook_secret)),
    )
    fake_github.install(INSTALLATION, REPOSITORY)
    data = tmp_path / "data"
    with LocalGate(data) as gate:
        seed = gate.banner["seed"]["principals"]
        tokens = {
            role: owner_only(home / f"{role}.token", seed[role]["token"]) for role in ("publisher", "auditor")
        }
        roles = ("--project", PROJECT, "--role")
        app = ("--id", APP_PRINCIPAL, "--kind", "ci", "--sponsor", seed["admin"]["id"])
        added = run_sentinel(
            "principals", "add", "--data", str(data), *app, *roles, "publisher", *roles, "requester", cwd=home
        )
        assert added.returncode == 0, added.stderr
        author = ("--id", AUTHOR, "--kind", "human")
        added = run_sentinel(
            "principals",
            "add",
            "--data",
            str(data),
            *author,
            *roles,
            "requester",
            *roles,
            "reviewer",
            cwd=home,
        )
        assert added.returncode == 0, added.stderr
        author_client = SentinelClient(gate.banner["url"], token=added.stdout.strip())
        admin = gate.client("admin")
        current = admin.request("GET", f"/projects/{PROJECT}/config")
        put = admin.put_config(PROJECT, project_config(fake_github.app_id), if_match=current.etag)
        assert put.status == 201, put.body
        yield ForgeGate(fake_github, gate, home, tokens, author_client)


def open_pull_request(forge: ForgeGate, number: int) -> tuple[str, str]:
    """A pull request changing the payments service and its docs (README.md untouched) on the fake GitHub,
    delivered to the gate as GitHub delivers `pull_request` `opened`; its (base, head)."""
    github = forge.github
    base = github.commit(
        REPOSITORY,
        {"services/payments/api.py": "v1", "docs/guide.md": "v1", "README.md": "hello"},
    )
    head = github.commit(
        REPOSITORY,
        {"services/payments/api.py": f"v2 of #{number}", "docs/guide.md": f"v2 of #{number}"},
        parent=base,
    )
    github.open_pull(REPOSITORY, number, base, head)
    answer = github.deliver(
        forge.webhook, "pull_request", base=base, head=head, number=number, author=AUTHOR_LOGIN
    )
    assert (answer.status, answer.json()["status"]) == (202, "accepted"), answer.body
    return base, head


def forge_candidate(forge: ForgeGate, head: str) -> dict[str, Any]:
    """The candidate the relay's forge worker created for `head`, once it exists."""
    requester = forge.client("requester")

    def created() -> dict[str, Any] | None:
        found = requester.find_candidates(PROJECT, revision=head, environment=ENVIRONMENT).body["candidates"]
        return requester.get_candidate(PROJECT, found[0]["candidate_id"]).body if found else None

    return eventually(f"the forge worker creates a candidate for {head}", created)


def plan(forge: ForgeGate, cid: str) -> dict[str, Any]:
    """The requester proposes, then submits the proposal as its plan; the submitted plan version."""
    requester = forge.client("requester")
    proposal = requester.propose(PROJECT, cid)
    assert proposal.status == 201, proposal.body
    submitted = requester.put_plan(PROJECT, cid, proposal.body["plan"], if_match=proposal.body["plan_digest"])
    assert submitted.status == 201, submitted.body
    return dict(submitted.body)


def publish_junit(forge: ForgeGate, head: str, obligation: dict[str, Any], report: str) -> Any:
    """CI publishes what it ran for one (policy, scope) with `sentinel-hook evidence`, no check id: the JUnit
    report, or for lint (whose policy takes exit-code evidence) the exit code 0."""
    (forge.home / "junit-result.xml").write_text(report)
    kind = ["--exit-code", "0"] if obligation["policy_id"] == "lint" else ["--junit", "junit-*.xml"]
    return run_hook(
        b"",
        forge.hook_env("publisher", **CI_RUN),
        "evidence",
        "--revision",
        head,
        "--policy",
        obligation["policy_id"],
        "--scope",
        obligation["scope"],
        *kind,
    )


def failing_junit(suite: str) -> str:
    cases = '<testcase classname="payments.Refunds" name="test_refund_applies" time="0.01"/>'
    for name in FAILING:
        classname, _, test = name.rpartition(".")
        cases += (
            f'<testcase classname="{classname}" name="{test}" time="0.01">'
            '<failure message="assert 3 == 2">AssertionError</failure></testcase>'
        )
    suite_tag = f'<testsuite name="{suite}" tests="3" failures="2">'
    return f'<?xml version="1.0" encoding="UTF-8"?>{suite_tag}{cases}</testsuite>'


def test_a_pull_request_turns_its_check_success_and_its_receipt_verifies(forge_gate: ForgeGate) -> None:
    forge, github = forge_gate, forge_gate.github
    # Given a pull request opened on GitHub, delivered to the gate signed with the app's webhook secret
    base, head = open_pull_request(forge, 7)
    # When the relay's forge worker handles the delivery
    candidate = forge_candidate(forge, head)
    cid = candidate["candidate_id"]
    # Then the candidate is the pull request's head, its change attested by the forge (not by any caller)
    assert (candidate["base_revision"], candidate["revision"]) == (base, head)
    assert candidate["change_context"] == "attested" and candidate["created_by"]["id"] == APP_PRINCIPAL
    # And its obligations are those of the files GitHub's compare returned (README.md is not among them)
    assert any("/compare/" in path for _method, path in github.requests)
    assert {(o["policy_id"], o["scope"]) for o in candidate["obligations"]} == {
        ("unit-tests", "payments-api"),
        ("lint", "docs"),
    }
    # And the pull request already shows the check, not success: nothing is planned yet
    first = eventually("the first check run on the head", lambda: forge.check_run(head))
    assert first["status"] == "completed" and first["conclusion"] == "action_required"
    assert first["external_id"] == cid and "PLAN_MISSING" in first["output"]["summary"]

    # When the requester plans, and CI publishes one passing JUnit report per obligation
    submitted = plan(forge, cid)
    for obligation in candidate["obligations"]:
        ran = publish_junit(forge, head, obligation, junit_report(obligation["scope"], 2))
        assert ran.exit_code == 0, ran.stderr + ran.stdout
        assert "outcome: pass  trust: verified" in ran.stdout
    # And the requester reports each task with the evidence CI posted
    requester = forge.client("requester")
    evidence = {
        e["check_id"]: e["evidence_id"] for e in requester.get_candidate(PROJECT, cid).body["evidence"]
    }
    for task in submitted["plan"]["tasks"]:
        claims = [{"check_id": c["check_id"], "evidence_id": evidence[c["check_id"]]} for c in task["checks"]]
        body = {
            "plan_digest": submitted["plan_digest"],
            "status": "completed",
            "checks": claims,
            "summary": "CI passed",
        }
        reported = requester.report(PROJECT, cid, task["task_id"], body)
        assert reported.status == 201 and reported.body["passes"], reported.body
    # Then only a review is missing, and the check says so
    waiting = forge.check_run_when(
        head,
        "the check run holds on the review alone",
        lambda run: run["output"]["title"].endswith("(1 finding)"),
    )
    assert waiting["conclusion"] == "action_required" and "REVIEW_MISSING" in waiting["output"]["summary"]

    review = {
        "decision": "approve",
        "plan_digest": submitted["plan_digest"],
        "revision": head,
        "comment": "ok",
    }
    # When the pull request's author, a reviewer by role, approves it: refused, it is their own change
    own = forge.author.review(PROJECT, cid, review)
    assert (own.status, own.code) == (403, "SELF_APPROVAL"), own.body
    # When a human reviewer approves
    approved = forge.client("reviewer").review(PROJECT, cid, review)
    assert approved.status == 201, approved.body
    # Then the check run on the pull request's head turns success, the one run updated in place
    ready = forge.check_run_when(
        head, "the check run turns success", lambda run: run["conclusion"] == "success"
    )
    assert ready["id"] == first["id"] and ready["output"]["title"] == f"{ENVIRONMENT}: ready"
    assert all(h["conclusion"] != "success" for h in ready["history"][:-1])
    # And its summary shows the approval of the plan as submitted (the proposal, submitted unchanged)
    assert "rita approved the current plan" in ready["output"]["summary"]
    assert "this plan version is the first one approved" in ready["output"]["summary"]

    # When the deploy pipeline's gate records the decision and saves the receipt
    items_before = forge.check_items(cid)
    gated = run_hook(b"", forge.hook_env("auditor"), "gate", "--revision", head, "--receipt", "receipt.json")
    assert gated.exit_code == 0, gated.stderr + gated.stdout
    assert gated.stdout == f"READY  payments at {head} in {ENVIRONMENT} (candidate {cid})\n"
    # Then the receipt verifies offline, with the key the gate publishes, for this commit and no other
    keys = run_sentinel("keys", "--url", forge.url, cwd=forge.home)
    assert keys.returncode == 0, keys.stderr
    (forge.home / "receipt-key.pem").write_text(keys.stdout)
    verify = ("receipt", "verify", "receipt.json", "--project", PROJECT, "--environment", ENVIRONMENT)
    key = ("--key", "receipt-key.pem")
    ok = run_sentinel(*verify, "--revision", head, *key, cwd=forge.home)
    assert ok.returncode == 0 and ok.stdout.startswith(f"ok: {head} is ready"), ok.stderr
    other = run_sentinel(*verify, "--revision", base, *key, cwd=forge.home)
    assert other.returncode == 1 and "RECEIPT_REVISION_MISMATCH" in other.stderr
    # And once the relay has handed the recorded decision's write to the publisher, the check is still success
    eventually(
        "the relay hands the recorded decision to the check publisher",
        lambda: forge.check_items(cid) > items_before or None,
    )
    assert forge.check_run(head)["conclusion"] == "success"


def test_a_pull_request_whose_tests_fail_keeps_its_check_failing_and_names_the_tests(
    forge_gate: ForgeGate,
) -> None:
    forge = forge_gate
    # Given a pull request's candidate, attested by the forge, and planned
    _base, head = open_pull_request(forge, 8)
    candidate = forge_candidate(forge, head)
    assert candidate["change_context"] == "attested"
    plan(forge, candidate["candidate_id"])
    # When CI publishes a passing JUnit report for the docs, then one with failing tests for the service
    by_scope = {o["scope"]: o for o in candidate["obligations"]}
    passed = publish_junit(forge, head, by_scope["docs"], junit_report("docs", 1))
    assert passed.exit_code == 0, passed.stderr + passed.stdout
    failed = publish_junit(forge, head, by_scope["payments-api"], failing_junit("payments"))
    # Then the failing run is published like any other (docs/ci.md: exit 0, the outcome is the gate's)
    assert failed.exit_code == 0, failed.stderr + failed.stdout
    assert "outcome: fail  trust: verified" in failed.stdout and "failures 2" in failed.stdout
    # And the check run fails, its summary naming each failing test and the CI run that found them
    failing = forge.check_run_when(
        head, "the check run names the failing tests", lambda run: FAILING[0] in run["output"]["summary"]
    )
    summary = failing["output"]["summary"]
    assert failing["conclusion"] == "failure" and "EVIDENCE_NEGATIVE" in summary
    assert "EVIDENCE_MISSING" not in summary  # the docs' passing report came first
    assert all(name in summary for name in FAILING) and RUN_URL in summary
    assert "payments.Refunds.test_refund_applies" not in summary
    # And it never said success
    assert all(h["conclusion"] != "success" for h in failing["history"])
