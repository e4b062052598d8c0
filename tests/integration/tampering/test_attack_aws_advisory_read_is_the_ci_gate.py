"""Red-team finding: in AWS (reads_witness=False) a decision read never compares with the witness, and
docs/failing-closed.md accepts that because such reads "can never release anything". But the CI gate,
docs/hook.md's enforcement point (`sentinel-hook gate`, the protected branch's required check), and the hook
both ask exactly that read (sentinel_client.verdicts -> GET .../decision). A table writer who rolls the
PROJECT chain back to an earlier genuine head (undoing a policy amendment that retired the evidence, or a
compromised revocation) makes that read answer `ready` until the scheduled verifier marks the chain, although
the witness already holds the newer checkpoint. FAILS today."""

from pathlib import Path

from sentinel_domain.errors import Refusal
from sentinel_domain.models import Policy
from sentinel_domain.ports import StreamRef
from sentinel_domain.usecases import Gate
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore
from support.moto_world import Flow
from support.tamper import SqliteRows
from support.world import ADMIN, AUDITOR, PROJECT, SEAL, UNIT_POLICY, World

DECIDED = Flow.STEPS.index("decide") + 1


def test_attack_project_chain_rollback_is_never_read_ready_by_the_ci_gates_decision_read(tmp_path: Path) -> None:
    # Given a ready candidate, every checkpoint in the witness
    store = SqliteStateStore(SqliteDatabase(tmp_path / "state.db"))
    world = World(store=store)
    flow = Flow()
    for step in Flow.STEPS[:DECIDED]:
        assert flow.run(world.gate, step).accepted, step
    # And the gate as AWS runs it (decision reads do not read the witness; release paths do)
    aws = Gate(
        store, world.clock, world.ids, witness=world.witness, seal=SEAL, reads_witness=False,
        appends_witness=False,
    )
    cid = flow.candidate_id
    assert aws.decision(PROJECT, cid, AUDITOR, None).decision == "ready"

    # And the tamperer keeps a copy of the project chain's rows (no key needed to read or copy them)
    rows = SqliteRows(tmp_path / "state.db")
    before = rows.snapshot(StreamRef(PROJECT))

    # And an admin amends the unit-tests policy: its evidence is retired, the candidate holds, and the
    # amendment's checkpoint is in the witness
    world.gate.put_policy(PROJECT, "unit-tests", ADMIN, Policy.model_validate({**UNIT_POLICY, "min_tests": 50}))
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
    # ...and so must the read the CI gate and the hook ask: today it answers ready
    read = aws.decision(PROJECT, cid, AUDITOR, None)
    assert read.decision == "hold", [f.code for f in read.findings]
