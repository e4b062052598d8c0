"""The attack: someone who can write the local gate's database (but not its key or event log) hides a failing
test report by deleting its event and rolling the chain's HEAD back, to turn `hold` into `ready`."""

import json
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sentinel_client.flow import run_ready_flow
from sentinel_runner.demo import LocalGate

pytestmark = pytest.mark.http

FAILING = '<testsuite name="C1"><testcase name="a"/><testcase name="b"><failure/></testcase></testsuite>'


def checkpoint_seq(log: Path, candidate_id: str) -> int:
    if not log.exists():
        return 0
    seqs = [
        e["detail"]["seq"]
        for e in map(json.loads, log.read_text().splitlines())
        if e["detail-type"] == "sentinel.checkpoint" and e["detail"]["candidate_id"] == candidate_id
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
        # (the relay has passed the new head to the event log, as it does within a round)
        deadline = time.monotonic() + 10
        while checkpoint_seq(gate.event_log, cid) < failing.body["seq"] and time.monotonic() < deadline:
            time.sleep(0.1)
        # When the attacker deletes the failing report's event and fact, and moves HEAD back one event
        chain = f"P#demo#C#{cid}"
        with sqlite3.connect(tmp_path / "sentinel.db") as db:
            seq = db.execute("SELECT seq FROM chain_heads WHERE chain = ?", (chain,)).fetchone()[0]
            before = json.loads(db.execute("SELECT event FROM events WHERE chain = ? AND seq = ?",
                                           (chain, seq - 1)).fetchone()[0])  # fmt: skip
            head = json.loads(
                db.execute("SELECT head FROM chain_heads WHERE chain = ?", (chain,)).fetchone()[0]
            )
            db.execute("DELETE FROM events WHERE chain = ? AND seq = ?", (chain, seq))
            db.execute("DELETE FROM facts WHERE chain = ? AND seq = ?", (chain, seq))
            db.execute(
                "UPDATE chain_heads SET seq = ?, head = ? WHERE chain = ?",
                (
                    seq - 1,
                    json.dumps(
                        {**head, "hash": before["hash"], **({"seq": seq - 1} if "seq" in head else {})}
                    ),
                    chain,
                ),
            )
        # Then the decision does not go back to ready: it holds, naming the tampering
        decision = clients["requester"].decision("demo", cid).body
        recorded = clients["requester"].request("POST", f"/projects/demo/candidates/{cid}/decisions")
    assert decision["decision"] == "hold"
    assert "STATE_TAMPERED" in {f["code"] for f in decision["findings"]}
    assert recorded.body["decision"] == "hold"
