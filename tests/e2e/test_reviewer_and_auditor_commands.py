"""The reviewer's and auditor's commands (`review queue|show|approve|reject`, `plan diff`, `status`,
`decision`, `audit show`) against a real `sentinel serve --seed` over HTTP, run in process through
`sentinel_client.cli.main` with each persona's token, their `--json` output parsed. The candidates are set
up through the HTTP client as a requester and a publisher would; every reviewer and auditor step is a
command."""

import io
import json
import secrets
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sentinel_client.api import SentinelClient
from sentinel_client.cli import main
from sentinel_client.flow import run_ready_flow
from sentinel_runner.demo import LocalGate
from sentinel_runner.seed import POLICIES

pytestmark = pytest.mark.http
PROJECT = "demo"


@pytest.fixture(scope="module")
def gate() -> Iterator[LocalGate]:
    with tempfile.TemporaryDirectory() as tmp, LocalGate(Path(tmp)) as running:
        for role, principal in running.banner["seed"]["principals"].items():
            (Path(tmp) / f"{role}.token").write_text(principal["token"] + "\n")
        running.tokens = Path(tmp)  # type: ignore[attr-defined]
        yield running


@pytest.fixture
def sentinel(gate: LocalGate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
    """sentinel(role, *argv, json=True) -> (exit code, parsed standard output or text, standard error)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in (
        "SENTINEL_URL",
        "SENTINEL_PROJECT",
        "SENTINEL_TOKEN",
        "SENTINEL_TOKEN_FILE",
        "SENTINEL_CONTEXT",
    ):
        monkeypatch.delenv(name, raising=False)

    def run(role: str, *argv: str, as_json: bool = True) -> tuple[int, Any, str]:
        where = ["--url", gate.banner["url"], "--project", PROJECT]
        where += ["--token-file", str(gate.tokens / f"{role}.token")]  # type: ignore[attr-defined]
        code = main([*argv, *where, *(["--json"] if as_json else [])])
        out, err = capsys.readouterr()
        assert "Traceback" not in err
        return code, (json.loads(out) if as_json and out.strip() else out), err

    return run


def client(gate: LocalGate, role: str) -> SentinelClient:
    return gate.client(role)


def new_candidate(gate: LocalGate, files: list[str] | None = None) -> dict[str, Any]:
    """A candidate with an attested change context and a proposed plan (v1), as requester and CI make it."""
    requester, publisher = client(gate, "requester"), client(gate, "publisher")
    change = {"files": files or ["services/payments/api.py", "docs/guide.md"]}
    body = {
        "subject": "payments-" + secrets.token_hex(3),
        "base_revision": secrets.token_hex(20),
        "revision": secrets.token_hex(20),
        "environment": "staging",
        "change": change,
    }
    created = requester.create_candidate(PROJECT, body).body
    assert publisher.add_change_context(PROJECT, created["candidate_id"], change).status == 201
    proposal = requester.propose(PROJECT, created["candidate_id"]).body
    return {**body, **created, "proposal": proposal}


def amend(gate: LocalGate, cid: str) -> dict[str, Any]:
    """Plan v(n+1): the first task renamed and the second task's check run with -x; nothing else."""
    requester = client(gate, "requester")
    current = requester.get_candidate(PROJECT, cid).body
    plan = json.loads(json.dumps(current["plan"]))
    plan["tasks"][0]["title"] = "Renamed by the amendment"
    stored = requester.put_plan(PROJECT, cid, plan, if_match=current["plan_digest"])
    assert stored.status == 201, stored.body
    return stored.body


# ---- the reviewer -----------------------------------------------------------------------------------------


def test_the_queue_holds_a_new_plan_until_i_approve_it_and_again_once_it_is_amended(gate, sentinel) -> None:
    # Given a candidate with a proposed plan that rita did not create
    cid = new_candidate(gate)["candidate_id"]
    # When rita reads her queue
    code, queue, _ = sentinel("reviewer", "review", "queue")
    # Then the candidate awaits her review, at its current plan version
    assert code == 0 and queue["reviewer"] == "rita"
    row = next(r for r in queue["awaiting"] if r["candidate_id"] == cid)
    assert (row["plan_version"], row["you_approved_version"]) == (1, None)
    # When she approves it (the digest and revision filled in by the command)
    digest = sentinel("reviewer", "review", "show", cid)[1]["plan_digest"]
    code, approved, _ = sentinel("reviewer", "review", "approve", cid, "--yes", "--expect-digest", digest)
    # Then the approval names the current digest and revision, and the candidate leaves her queue
    view = client(gate, "reviewer").get_candidate(PROJECT, cid).body
    assert code == 0 and approved["review"]["plan_digest"] == view["plan_digest"]
    assert approved["revision"] == view["revision"] and approved["tasks"] == len(view["plan"]["tasks"])
    queue = sentinel("reviewer", "review", "queue")[1]
    assert cid not in [r["candidate_id"] for r in queue["awaiting"]]
    assert queue["skipped"].get("you already approved or rejected its current plan", 0) >= 1
    # When the requester amends the plan, Then it is back in her queue as a re-review of v1
    amend(gate, cid)
    row = next(r for r in sentinel("reviewer", "review", "queue")[1]["awaiting"] if r["candidate_id"] == cid)
    assert (row["plan_version"], row["you_approved_version"]) == (2, 1)


def test_review_show_diffs_an_amended_plan_against_the_version_i_approved(gate, sentinel) -> None:
    # Given a plan rita approved at v1, then amended in exactly one task's title
    cid = new_candidate(gate)["candidate_id"]
    digest = sentinel("reviewer", "review", "show", cid)[1]["plan_digest"]
    assert sentinel("reviewer", "review", "approve", cid, "--yes", "--expect-digest", digest)[0] == 0
    amend(gate, cid)
    # When she shows the candidate
    code, shown, _ = sentinel("reviewer", "review", "show", cid)
    assert code == 0
    since = shown["since_your_approval"]
    assert (since["approved_version"], since["current_version"]) == (1, 2)
    # Then the diff since v1 names exactly the renamed task, and no check or action
    diff = since["diff"]
    assert since["status"] == "changed"
    assert [t["task_id"] for t in diff["tasks"]["changed"]] == [shown["plan"]["tasks"][0]["task_id"]]
    assert list(diff["tasks"]["changed"][0]["fields"]) == ["title"]
    assert diff["checks"] == {"added": [], "removed": [], "changed": []}
    assert diff["tasks"]["added"] == diff["tasks"]["removed"] == []
    # And `plan diff` says the same between v1 and v2
    code, planned, _ = sentinel("reviewer", "plan", "diff", cid)
    assert code == 0 and (planned["from"], planned["to"]) == (1, 2) and planned["diff"] == diff
    assert (
        sentinel("reviewer", "plan", "diff", cid, "--from", "1", "--to", "1")[1]["diff"]["unchanged"] is True
    )
    code, _out, err = sentinel("reviewer", "plan", "diff", cid, "--to", "3")
    assert code == 1 and err.startswith("error: VALIDATION_FAILED: plan versions run from 1 to 2")


def test_review_show_gives_the_facts_a_reviewer_needs(gate, sentinel) -> None:
    # Given a candidate whose first check has a failing JUnit report from the trusted publisher
    made = new_candidate(gate)
    cid, check = made["candidate_id"], made["proposal"]["plan"]["tasks"][0]["checks"][0]
    obligation = next(o for o in made["obligations"] if o["obligation_id"] in check["covers"])
    junit = (
        '<testsuite name="s" tests="2"><testcase classname="pay" name="test_refund">'
        '<failure message="boom"/></testcase><testcase classname="pay" name="test_charge"/></testsuite>'
    )
    posted = client(gate, "publisher").post_evidence(
        PROJECT,
        cid,
        {
            "check_id": check["check_id"],
            "subject": made["subject"],
            "revision": made["revision"],
            "environment": "staging",
            "scope": [obligation["scope"]],
            "observed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "source": {"system": "ci", "run_id": "run-42", "url": "https://ci.example/run/42"},
            "junit_xml": junit,
        },
    )
    assert posted.status == 201 and posted.body["outcome"] == "fail"
    # When rita shows it
    code, shown, _ = sentinel("reviewer", "review", "show", cid)
    # Then she sees the plan with its checks' policies, the obligations with reasons, and the evidence's
    # outcome, run and failing tests
    assert code == 0 and shown["plan_version"] == 1
    policy = shown["policies"][check["policy_ref"]]
    assert (policy["version"], policy["min_tests"]) == (1, POLICIES[check["policy_ref"]]["min_tests"])
    assert {o["obligation_id"]: o["reason"] for o in shown["obligations"]} == {
        o["obligation_id"]: o["reason"] for o in made["obligations"]
    }
    evidence = next(e for e in shown["evidence"] if e["check_id"] == check["check_id"])
    assert (evidence["outcome"], evidence["trust"], evidence["counts"]["failures"]) == ("fail", "verified", 1)
    assert evidence["source"]["url"] == "https://ci.example/run/42"
    assert evidence["failing_tests"] is None or any(
        "test_refund" in n for n in evidence["failing_tests"]["names"]
    )
    files = shown["changed_files"]
    assert files is None or sorted(files["files"]) == ["docs/guide.md", "services/payments/api.py"]
    assert shown["since_your_approval"]["status"] == "never_approved"
    # And in words, the run URL and the failing test are on the page
    text = sentinel("reviewer", "review", "show", cid, as_json=False)[1]
    assert "https://ci.example/run/42" in text and "changed files" in text
    assert "obligations (" in text and obligation["reason"] in text


def test_approving_needs_confirmation_off_a_terminal_and_records_nothing_without_it(gate, sentinel) -> None:
    cid = new_candidate(gate)["candidate_id"]
    digest = sentinel("reviewer", "review", "show", cid)[1]["plan_digest"]
    code, _out, err = sentinel("reviewer", "review", "approve", cid, "--expect-digest", digest)
    assert code == 1 and err.startswith("error: CONFIRMATION_REQUIRED:") and "--yes" in err
    assert client(gate, "reviewer").get_candidate(PROJECT, cid).body["reviews"] == []


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "recorded"), [("y\n", 1), ("n\n", 0)])
def test_at_a_terminal_the_reviewer_sees_what_is_approved_before_answering(
    gate, sentinel, monkeypatch, answer, recorded
) -> None:
    # Given a candidate, and rita at a terminal
    made = new_candidate(gate)
    cid = made["candidate_id"]
    digest = client(gate, "reviewer").get_candidate(PROJECT, cid).body["plan_digest"]
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    # When she approves without --yes and answers
    code, out, err = sentinel("reviewer", "review", "approve", cid, "--expect-digest", digest, as_json=False)
    # Then she was shown the candidate, revision, plan version and digest and the counts before the question
    shown = err.split("[y/N]")[0]
    assert cid in shown and made["revision"] in shown and f"v1 {digest}" in shown and "task(s)" in shown
    # And only a yes records the approval
    assert code == (0 if recorded else 1)
    assert len(client(gate, "reviewer").get_candidate(PROJECT, cid).body["reviews"]) == recorded
    assert (f"approved plan v1 of {cid}" in out) == bool(recorded)
    if not recorded:
        assert "error: NOT_CONFIRMED:" in err


def test_an_expected_digest_that_is_no_longer_current_is_refused_with_review_show_as_next_step(
    gate, sentinel
) -> None:
    # Given the digest rita read, then an amendment
    cid = new_candidate(gate)["candidate_id"]
    read = sentinel("reviewer", "review", "show", cid)[1]["plan_digest"]
    amend(gate, cid)
    # When she approves what she read
    code, _out, err = sentinel("reviewer", "review", "approve", cid, "--yes", "--expect-digest", read[:16])
    # Then it is refused, nothing is recorded, and she is told to show it again
    assert code == 1 and err.startswith("error: DIGEST_MISMATCH:") and f"review show {cid}" in err
    assert client(gate, "reviewer").get_candidate(PROJECT, cid).body["reviews"] == []


def test_a_plan_amended_between_reading_and_posting_is_refused_by_the_gate(
    gate, sentinel, monkeypatch
) -> None:
    # Given an amendment that lands after the command read the candidate and before it posts the review
    cid = new_candidate(gate)["candidate_id"]
    post = SentinelClient.review

    def amended_first(self, project, candidate_id, body, idempotency_key=None):
        amend(gate, candidate_id)
        return post(self, project, candidate_id, body, idempotency_key)

    digest = sentinel("reviewer", "review", "show", cid)[1]["plan_digest"]
    monkeypatch.setattr(SentinelClient, "review", amended_first)
    # When rita approves
    code, _out, err = sentinel("reviewer", "review", "approve", cid, "--yes", "--expect-digest", digest)
    # Then the gate's 409 DIGEST_MISMATCH is said with the next step
    assert code == 1 and err.startswith("error: DIGEST_MISMATCH:") and f"review show {cid}" in err


def test_attack_a_plan_amended_after_review_show_is_never_approved_unseen(
    gate, sentinel, monkeypatch
) -> None:
    # Given rita read plan v1 with `review show`, and the agent amended it while she thought it over
    cid = new_candidate(gate)["candidate_id"]
    read = sentinel("reviewer", "review", "show", cid)[1]["plan_digest"]
    amend(gate, cid)
    # When she approves as docs/quickstart.md shows, by script or at a terminal (answering yes)
    code, _out, err = sentinel("reviewer", "review", "approve", cid, "--yes")
    assert code == 1 and err.startswith("error: DIGEST_REQUIRED:") and f"review show {cid}" in err
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    code, _out, err = sentinel("reviewer", "review", "approve", cid)
    assert code == 1 and err.startswith("error: DIGEST_REQUIRED:")
    # Then nothing is recorded: v2, which she never read, is not approved
    reviews = client(gate, "reviewer").get_candidate(PROJECT, cid).body["reviews"]
    assert reviews == [] and read != client(gate, "reviewer").get_candidate(PROJECT, cid).body["plan_digest"]


@pytest.mark.parametrize("prefix", [8, 15])
def test_attack_an_expected_digest_too_short_to_resist_grinding_is_refused(gate, sentinel, prefix) -> None:
    # Given a digest prefix the agent could match by varying a task title (2^32 hashes for 8 hex digits)
    cid = new_candidate(gate)["candidate_id"]
    digest = sentinel("reviewer", "review", "show", cid)[1]["plan_digest"]
    # When rita approves with it, Then it is refused: 16 hex digits (64 bits), as review show prints, or more
    code, _out, err = sentinel(
        "reviewer", "review", "approve", cid, "--yes", "--expect-digest", digest[:prefix]
    )
    assert code == 1 and err.startswith("error: VALIDATION_FAILED:")
    assert client(gate, "reviewer").get_candidate(PROJECT, cid).body["reviews"] == []


def test_reject_needs_a_comment_and_an_agent_cannot_review(gate, sentinel) -> None:
    cid = new_candidate(gate)["candidate_id"]
    assert sentinel("reviewer", "review", "reject", cid, "--yes")[0] == 2  # argparse: --comment is required
    code, rejected, _ = sentinel("reviewer", "review", "reject", cid, "--yes", "--comment", "too broad")
    assert code == 0 and rejected["review"]["decision"] == "reject"
    digest = client(gate, "reviewer").get_candidate(PROJECT, cid).body["plan_digest"]
    code, _out, err = sentinel("requester", "review", "approve", cid, "--yes", "--expect-digest", digest)
    assert code == 1 and err.startswith("error: AGENT_CANNOT_REVIEW:")


# ---- the auditor ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ready(gate: LocalGate) -> str:
    clients = {role: gate.client(role) for role in ("requester", "publisher", "reviewer")}
    return run_ready_flow(clients, PROJECT, subject="ledger-" + secrets.token_hex(3)).candidate_id


def test_decision_exits_0_on_ready_and_4_on_hold_and_explains_each_finding(gate, sentinel, ready) -> None:
    assert sentinel("auditor", "decision", ready)[0] == 0
    held = new_candidate(gate)["candidate_id"]
    code, decision, _ = sentinel("auditor", "decision", held, "--explain")
    assert code == 4 and decision["decision"] == "hold"
    by_code = {e["code"]: e for e in decision["explained"]}
    assert {"REVIEW_MISSING", "EVIDENCE_MISSING", "TASK_NOT_REPORTED"} <= set(by_code)
    missing = by_code["EVIDENCE_MISSING"]
    assert missing["rule"].startswith("rules 7, 10:") and missing["remediation"]
    assert any(fact.startswith(f"check {missing['check_id']} in task ") for fact in missing["facts"])
    assert any(fact.startswith(f"obligation {missing['obligation_id']}:") for fact in missing["facts"])
    text = sentinel("auditor", "decision", held, "--explain", as_json=False)[1]
    assert "rule: rules 7, 10:" in text and "   next: " in text


def test_decision_record_appends_a_decision_and_as_of_with_record_is_refused(gate, sentinel, ready) -> None:
    code, recorded, _ = sentinel("auditor", "decision", ready, "--record")
    assert code == 0 and recorded["decision"] == "ready" and recorded["seq"] > 1
    code, _out, err = sentinel("auditor", "decision", ready, "--record", "--as-of", "2026-01-01T00:00:00Z")
    assert code == 1 and err.startswith("error: VALIDATION_FAILED:")


def test_status_lists_decisions_with_what_they_wait_for_and_exit_code_gates(gate, sentinel, ready) -> None:
    held = new_candidate(gate)["candidate_id"]
    code, status, _ = sentinel("auditor", "status")
    assert code == 0
    rows = {r["candidate_id"]: r for r in status["candidates"]}
    assert rows[ready]["decision"] == "ready" and rows[ready]["waits_for"] == {}
    assert rows[held]["decision"] == "hold"
    assert set(rows[held]["waits_for"]) == {"review", "evidence", "tasks"}
    assert sentinel("auditor", "status", "--exit-code")[0] == 4
    subject = rows[ready]["subject"]
    assert sentinel("auditor", "status", "--subject", subject, "--exit-code")[0] == 0
    assert sentinel("auditor", "status", "--subject", "no-such-subject", "--exit-code")[0] == 4


def test_audit_show_gives_every_event_with_its_payload_and_the_verification(gate, sentinel, ready) -> None:
    code, audit, _ = sentinel("auditor", "audit", "show", "--candidate", ready)
    assert code == 0 and audit["verification"]["valid"] is True
    events = audit["events"]
    assert [e["seq"] for e in events] == list(range(1, audit["verification"]["length"] + 1))
    assert events[0]["type"] == "candidate.created" and events[0]["payload"]["candidate_id"] == ready
    assert all(e["payload"]["type"] == e["type"] for e in events)
    code, first, _ = sentinel("auditor", "audit", "show", "--candidate", ready, "--limit", "2")
    assert code == 0 and [e["seq"] for e in first["events"]] == [1, 2] and first["more"] is True
    code, project, _ = sentinel("auditor", "audit", "show")
    assert code == 0 and project["events"][0]["type"] == "project.created"
    text = sentinel("auditor", "audit", "show", "--candidate", ready, as_json=False)[1]
    assert text.splitlines()[-1].startswith("chain verified: ") and "payload: {" in text


def test_the_project_chain_is_for_auditors_only(gate, sentinel) -> None:
    code, _out, err = sentinel("requester", "audit", "show")
    assert code == 1 and err.startswith("error: FORBIDDEN_ROLE:")


@pytest.mark.parametrize(
    "argv",
    [
        ["review", "queue"],
        ["review", "show", "cand_x"],
        ["review", "approve", "cand_x", "--yes", "--expect-digest", "0" * 16],
        ["plan", "diff", "cand_x"],
        ["status"],
        ["decision", "cand_x"],
        ["audit", "show"],
    ],
)
def test_no_gate_is_one_error_line_and_exit_3(argv, tmp_path, monkeypatch, capsys) -> None:
    # Given a URL where nothing listens and a token
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    token = tmp_path / "token"
    token.write_text("snt_" + "A" * 49 + "\n")
    where = [
        "--url",
        "http://127.0.0.1:9",
        "--project",
        PROJECT,
        "--token-file",
        str(token),
        "--timeout",
        "2",
    ]
    # When the command runs, Then it says so in one line, with a next step, and exits 3
    assert main([*argv, *where]) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: UNREACHABLE:") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 2 and err.splitlines()[1].startswith("next: ")
    # And without a token it exits 3 before any request
    monkeypatch.delenv("SENTINEL_TOKEN", raising=False)
    monkeypatch.delenv("SENTINEL_TOKEN_FILE", raising=False)
    assert main([*argv, "--url", "http://127.0.0.1:9", "--project", PROJECT]) == 3
    assert capsys.readouterr().err.startswith("error: TOKEN_UNAVAILABLE:")
