"""Red-team finding: the forge check publisher (a required check on the protected branch, so an enforcement
point) judged each candidate with the advisory read (`decisions.judged`, which in AWS, reads_witness=False,
never compares the chains with the witness). A table writer who puts the candidate's chain back to an
earlier genuine head (dropping the failing evidence that made it hold, or a rejection) makes the publisher
turn the check `success` while the release path refuses to record anything: the same hole the CI gate had
(test_attack_aws_advisory_read_is_the_ci_gate.py), reopened by the new enforcement point."""

from pathlib import Path

from unit.test_forge_checks import FAILING, GITHUB, evidence, ready

from sentinel_domain.errors import Refusal
from sentinel_domain.ports import StreamRef
from sentinel_domain.usecases import Gate
from sentinel_domain.usecases.forge_checks import ForgeChecks
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore
from support.recording_forge import RecordingForge
from support.tamper import SqliteRows
from support.world import AUDITOR, CI, CONFIG, PROJECT, RECEIPT_SIGNER, REV, SEAL, World


def test_attack_candidate_chain_rollback_never_turns_the_check_success(tmp_path: Path) -> None:
    # Given a ready candidate of a GitHub-mapped project, every checkpoint in the witness
    store = SqliteStateStore(SqliteDatabase(tmp_path / "state.db"))
    world = World({**CONFIG, "github": GITHUB}, store=store)
    cid = ready(world)
    # And the gate and the publisher as AWS runs them (advisory reads do not read the witness)
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
    forge = RecordingForge()
    checks = ForgeChecks(aws.chain, forge, store)
    assert checks.publish(PROJECT, cid).conclusion == "success"
    # And the tamperer keeps a copy of the candidate chain's rows
    rows = SqliteRows(tmp_path / "state.db")
    before = rows.snapshot(StreamRef(PROJECT, cid))
    # And CI then proves the same check failing: the candidate holds, the check turns failure
    world.gate.post_evidence(PROJECT, cid, CI, evidence(FAILING), None)
    assert checks.publish(PROJECT, cid).conclusion == "failure"
    # When the tamperer puts the candidate's chain back to its earlier genuine head
    rows.restore(StreamRef(PROJECT, cid), before)
    # Then the release path sees it...
    try:
        recorded = aws.record_decision(PROJECT, cid, AUDITOR, None)
    except Refusal as refusal:
        assert refusal.code == "STATE_UNAVAILABLE"
    else:
        assert recorded.decision == "hold"
    # ...and so does the publisher: whatever triggers it, the check never turns success
    published = checks.publish(PROJECT, cid)
    assert published.conclusion != "success"
    assert forge.latest("sentinel/staging", REV).conclusion != "success"
