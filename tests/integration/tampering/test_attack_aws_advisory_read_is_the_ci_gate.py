"""Red-team finding, and the answer to it: in AWS (reads_witness=False) a decision read never compares with
the witness. The CI gate (`sentinel-hook gate`, the protected branch's required check) used to ask exactly
that read, so a table writer who rolled the PROJECT chain back to an earlier genuine head (undoing a policy
amendment that retired the evidence) made it answer `ready` until the scheduled verifier marked the chain.
The CI gate now acts on a recorded decision (`POST …/decisions`, sentinel_client.verdicts.judge(record=True)),
the release path, which compares both chains with the witness first; the hook's advisory read keeps the
verifier's window (docs/failing-closed.md), and the hook is a guard rail, not the enforcement point."""

from pathlib import Path

import pytest

from sentinel_client import ci_gate, verdicts
from sentinel_client.api import Response
from sentinel_client.settings import ClientSettings
from sentinel_domain.errors import Refusal
from sentinel_domain.models import Policy
from sentinel_domain.ports import StreamRef
from sentinel_domain.usecases import Gate
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore
from support.moto_world import Flow
from support.tamper import SqliteRows
from support.world import ADMIN, AUDITOR, PROJECT, RECEIPT_SIGNER, SEAL, UNIT_POLICY, World

DECIDED = Flow.STEPS.index("decide") + 1


def test_attack_project_chain_rollback_is_caught_by_the_release_path_the_ci_gate_uses(tmp_path: Path) -> None:
    # Given a ready candidate, every checkpoint in the witness
    store = SqliteStateStore(SqliteDatabase(tmp_path / "state.db"))
    world = World(store=store)
    flow = Flow()
    for step in Flow.STEPS[:DECIDED]:
        assert flow.run(world.gate, step).accepted, step
    # And the gate as AWS runs it (decision reads do not read the witness; release paths do)
    aws = Gate(
        store,
        world.clock,
        world.ids,
        witness=world.witness,
        seal=SEAL,
        reads_witness=False,
        appends_witness=False,
        receipt_signer=RECEIPT_SIGNER,
    )
    cid = flow.candidate_id
    assert aws.decision(PROJECT, cid, AUDITOR, None).decision == "ready"

    # And the tamperer keeps a copy of the project chain's rows (no key needed to read or copy them)
    rows = SqliteRows(tmp_path / "state.db")
    before = rows.snapshot(StreamRef(PROJECT))

    # And an admin amends the unit-tests policy: its evidence is retired, the candidate holds, and the
    # amendment's checkpoint is in the witness
    world.gate.put_policy(
        PROJECT, "unit-tests", ADMIN, Policy.model_validate({**UNIT_POLICY, "min_tests": 50})
    )
    assert aws.decision(PROJECT, cid, AUDITOR, None).decision == "hold"
    assert world.witness.newest(StreamRef(PROJECT))["seq"] > len(before["events"])

    # When the tamperer puts the project chain back to its earlier genuine head
    rows.restore(StreamRef(PROJECT), before)

    # Then the release path sees it (this holds today: refused, or an unrecorded hold)...
    try:
        recorded = aws.record_decision(PROJECT, cid, AUDITOR, None)
    except Refusal as refusal:
        assert refusal.code == "STATE_UNAVAILABLE"
    else:
        assert recorded.decision == "hold"
    # ...and that is the read the CI gate acts on (test_the_ci_gate_acts_on_a_recorded_decision)


class AskedClient:
    """A client that answers one candidate and records which decision route it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.timeout = 0.0

    def find_candidates(self, project: str, **query: str) -> Response:
        return Response(200, {"candidates": [{**query, "candidate_id": "cand_1"}]})

    def decision(self, project: str, cid: str) -> Response:
        self.asked.append("GET …/decision")
        return Response(200, {"decision": "ready", "findings": [], "revision": "a" * 40})

    def record_decision(self, project: str, cid: str) -> Response:
        self.asked.append("POST …/decisions")
        return Response(201, {"decision": "ready", "findings": [], "revision": "a" * 40, "seq": 9})


@pytest.mark.parametrize(("record", "asked"), [(True, "POST …/decisions"), (False, "GET …/decision")])
def test_the_ci_gate_acts_on_a_recorded_decision(record: bool, asked: str) -> None:
    # Given the service as the CI gate (record) and the hook (advisory) see it
    client = AskedClient()
    settings = ClientSettings(project="demo", subject="payments", environment="staging")
    # When each judges a commit
    verdict = verdicts.judge(client, settings, "a" * 40, verdicts._Deadline(5), record=record)  # type: ignore[arg-type]
    # Then the CI gate recorded the decision (the release path); the hook only read it
    assert client.asked == [asked] and verdict.state == "ready"
    # And `sentinel-hook gate` is the recording kind
    source = Path(ci_gate.__file__).read_text()
    assert "Service(settings, record=True)" in source
