"""The attack: someone who can write the local gate's database (but not its chain key or witness) hides a
failing test report by deleting its event and rolling the chain's HEAD back to the genuine head before it
(its tag copied from the checkpoint item the database still holds), to turn `hold` into `ready`. The local
gate appends every checkpoint to its witness before answering, so the very next read names the cut, and
`sentinel audit verify` names it too."""

import json
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sentinel_client.flow import run_ready_flow
from sentinel_runner.demo import LocalGate

pytestmark = pytest.mark.http

FAILING = '<testsuite name="C1"><testcase name="a"/><testcase name="b"><failure/></testcase></testsuite>'


def checkpoint_seq(witness: Path, candidate_id: str) -> int:
    seqs = [
        r["checkpoint"]["seq"]
        for r in map(json.loads, witness.read_text().splitlines())
        if "checkpoint" in r and r["checkpoint"]["candidate_id"] == candidate_id
    ]
    return max(seqs, default=0)


def test_a_failing_report_deleted_with_head_rolled_back_is_tampering_not_ready(tmp_path: Path) -> None:
    # Given a candidate made ready, then a newer failing report for one of its checks (so it holds)
    with LocalGate(tmp_path) as gate:
        clients = {role: gate.client(role) for role in ("requester", "publisher", "reviewer")}
        flow = run_ready_flow(clients, "demo")
        cid = flow.candidate_id
        view = clients["requester"].request("GET", f"/projects/demo/candidates/{cid}").body
        passed = view["evidence"][0]
        failing = clients["publisher"].post_evidence(
            "demo",
            cid,
            {
                "check_id": passed["check_id"],
                "subject": "payments",
                "revision": view["revision"],
                "environment": "staging",
                "scope": passed["scope"],
                "observed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "source": {"system": "ci", "run_id": "late", "url": ""},
                "junit_xml": FAILING,
            },
        )
        assert failing.status == 201 and failing.body["outcome"] == "fail"
        assert clients["requester"].decision("demo", cid).body["decision"] == "hold"
        # (the gate appended the new head's checkpoint to the witness before it answered)
        assert checkpoint_seq(tmp_path / "witness.jsonl", cid) == failing.body["seq"]
        # When the attacker deletes the failing report's event and fact, and moves HEAD back one event
        chain = f"P#demo#C#{cid}"
        with sqlite3.connect(tmp_path / "sentinel.db") as db:
            seq = db.execute("SELECT seq FROM chain_heads WHERE chain = ?", (chain,)).fetchone()[0]
            before = json.loads(db.execute("SELECT event FROM events WHERE chain = ? AND seq = ?",
                                           (chain, seq - 1)).fetchone()[0])  # fmt: skip
            head = json.loads(
                db.execute("SELECT head FROM chain_heads WHERE chain = ?", (chain,)).fetchone()[0]
            )
            older = json.loads(
                db.execute(
                    "SELECT item FROM outbox WHERE chain = ? AND seq = ? AND kind = 'checkpoint'",
                    (chain, seq - 1),
                ).fetchone()[0]
            )
            db.execute("DELETE FROM events WHERE chain = ? AND seq = ?", (chain, seq))
            db.execute("DELETE FROM facts WHERE chain = ? AND seq = ?", (chain, seq))
            db.execute(
                "UPDATE chain_heads SET seq = ?, head = ? WHERE chain = ?",
                (
                    seq - 1,
                    json.dumps({**head, "hash": before["hash"], "seq": seq - 1, "mac": older["mac"]}),
                    chain,
                ),
            )
        # Then the decision does not go back to ready: it holds, naming the tampering
        decision = clients["requester"].decision("demo", cid).body
        recorded = clients["requester"].request("POST", f"/projects/demo/candidates/{cid}/decisions")
    assert decision["decision"] == "hold"
    assert "STATE_TAMPERED" in {f["code"] for f in decision["findings"]}
    # (recording is a write: refused with 503, nothing appended, the hold's findings in the problem)
    assert recorded.status == 503 and recorded.body["code"] == "STATE_UNAVAILABLE"
    assert "STATE_TAMPERED" in {f["code"] for f in recorded.body["findings"]}
    # And the operator's check names the first missing seq, exit 1
    command = ["audit", "verify", "--project", "demo", "--candidate", cid, "--data", str(tmp_path)]
    audit = subprocess.run(
        [sys.executable, "-m", "sentinel_runner.cli", *command], capture_output=True, text=True, timeout=60
    )
    assert audit.returncode == 1, audit.stderr
    assert json.loads(audit.stdout)["first_bad_seq"] == seq
