"""Red-team finding: the candidate lookup the hook and the CI gate make (GET .../candidates?subject&revision&
environment -> find_candidates) answers the claim row's candidate id with the QUERY's subject, revision and
environment echoed back, never reading that candidate's sealed `candidate.created` fact. The claim row is
plain table data (no tag, no witness). A table writer (no chain key) points the claim for (payments, R,
production) at the ready candidate of (payments, R, staging); the lookup says it is production's, its
decision says `ready` for revision R (the only binding sentinel_client.verdicts checks), and the gate lets R
into production while production's own candidate holds. Fixed: the lookup checks the claimed candidate's
creation fact."""

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from sentinel_domain.errors import Refusal
from sentinel_domain.models import CandidateRequest
from sentinel_service.adapters.sqlite_database import SqliteDatabase
from sentinel_service.adapters.sqlite_store import SqliteStateStore
from support.moto_world import Flow
from support.world import AUDITOR, BASE, PROJECT, REQUESTER, REV, World

DECIDED = Flow.STEPS.index("decide") + 1


@pytest.mark.parametrize("hold_chains", [False, True], ids=["local", "lambda-held-chains"])
def test_attack_a_redirected_claim_never_answers_another_candidates_ready(
    tmp_path: Path, hold_chains: bool
) -> None:
    # Given a ready candidate for (payments, REV, staging) (on Lambda, its verified chain held by the
    # container after a decision read, so the lookup checks the claim from what is held)
    store = SqliteStateStore(SqliteDatabase(tmp_path / "state.db"))
    world = World(store=store, hold_chains=hold_chains)
    flow = Flow()
    for step in Flow.STEPS[:DECIDED]:
        assert flow.run(world.gate, step).accepted, step
    staging = flow.candidate_id
    assert world.gate.decision(PROJECT, staging, AUDITOR, None).decision == "ready"
    # And a candidate for the same commit in production, which holds
    body = {
        "subject": "payments",
        "base_revision": BASE,
        "revision": REV,
        "environment": "production",
        "change": {"files": ["services/payments/api.py"]},
    }
    production = world.gate.create_candidate(
        PROJECT, REQUESTER, CandidateRequest.model_validate(body), None
    ).candidate_id
    assert world.gate.decision(PROJECT, production, AUDITOR, None).decision == "hold"

    # When a table writer points production's claim at the staging candidate
    with closing(sqlite3.connect(tmp_path / "state.db", isolation_level=None)) as db:
        changed = db.execute(
            "UPDATE claims SET candidate_id = ? WHERE candidate_id = ?", (staging, production)
        ).rowcount
    assert changed == 1

    # Then the lookup the gate makes for (payments, REV, production) never answers a candidate that is not
    # production's (today it answers the staging candidate as production's, whose decision reads ready)
    # production's (the claimed candidate's sealed creation fact is checked: a mismatch is refused as 503)
    with pytest.raises(Refusal) as refused:
        world.gate.find_candidates(PROJECT, AUDITOR, "payments", REV, "production", 10, None)
    assert refused.value.code == "STATE_UNAVAILABLE" and "tampered" in refused.value.detail
    # And the lookup for staging itself still answers staging's candidate
    page = world.gate.find_candidates(PROJECT, AUDITOR, "payments", REV, "staging", 10, None)
    assert [c.candidate_id for c in page.candidates] == [staging]
