"""Revocation reaches what a principal did (DOMAIN.md rule 26), through the operator on each store (the
embedded SQLite database, DynamoDB on moto), and `sentinel audit exposure` / `principals revoke
--compromised` on the embedded store: a recorded ready names the principals it relied on, the operator lists
the releases a principal touched, and a compromised revocation turns them to hold from then on while the
records still replay as they were made."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sentinel_domain.ports import StreamRef
from sentinel_runner.cli import main
from sentinel_service.adapters.tables import ensure_tables
from sentinel_service.compose import Services, compose
from sentinel_service.settings import Settings
from support.moto_world import Flow, moto_dynamodb
from support.world import CI, CONFIG, LINT_POLICY, PROJECT, REQUESTER, REVIEWER, UNIT_POLICY, sealed

KEY = bytes(range(32))
STEPS = (
    "create",
    "attest",
    "propose",
    "amend",
    "approve",
    "evidence 1",
    "evidence 2",
    "report 1",
    "report 2",
)


def open_sqlite(data: Path) -> Services:
    from sentinel_runner.data_dir import open_data_dir
    from sentinel_runner.runtime import open_embedded

    return open_embedded(open_data_dir(data), environ={"SENTINEL_TOKEN_KEY_FILE": str(data / "token.key")})


@pytest.fixture(params=["sqlite", "dynamodb"])
def services(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Services]:
    if request.param == "sqlite":
        made = open_sqlite(tmp_path / "data")
        yield made
        made.store.db.close()  # type: ignore[attr-defined]
        return
    with moto_dynamodb() as client:
        settings = Settings.from_env({"AWS_REGION": "us-east-1"})
        ensure_tables(client, settings.state_table, settings.principals_table)
        yield compose(settings, dynamodb=client, token_key=KEY, **sealed())


def a_recorded_ready(services: Services, flow: Flow | None = None) -> tuple[str, int]:
    """The demo project, its principals added by the operator, and one candidate's ready decision recorded:
    created and planned by agent-1, attested and proved by ci-bot, approved by rita-reviewer."""
    operator = services.operator
    operator.provision_project(PROJECT, {"unit-tests": UNIT_POLICY, "lint": LINT_POLICY}, CONFIG)
    operator.add_principal("hank-human", "human", None, {PROJECT: ["requester"]})
    operator.add_principal(REQUESTER.id, "agent", "hank-human", {PROJECT: ["requester"]})
    operator.add_principal(REVIEWER.id, "human", None, {PROJECT: ["reviewer"]})
    operator.add_principal(CI.id, "ci", None, {PROJECT: ["publisher", "requester"]})
    flow = flow or Flow()
    for step in STEPS:
        assert flow.run(services.gate, step).accepted, step
    recorded = services.gate.record_decision(PROJECT, flow.candidate_id, REQUESTER, None)
    assert recorded.decision == "ready", recorded.findings
    return flow.candidate_id, recorded.seq


def test_exposure_lists_the_recorded_ready_decisions_a_principal_touched(services: Services) -> None:
    # Given a recorded ready decision
    cid, seq = a_recorded_ready(services)
    # When the operator asks what each principal's releases are
    by = {p: services.operator.exposure(p) for p in (REVIEWER.id, CI.id, REQUESTER.id, "hank-human")}
    # Then the reviewer, the ci publisher and the requester are each named with how it was relied on
    assert [(e["project"], e["candidate_id"], e["seq"], e["exposed"]) for e in by[REVIEWER.id]] == [
        (PROJECT, cid, seq, True)
    ]
    assert by[REVIEWER.id][0]["relied_on_as"] == ["approver"]
    assert by[CI.id][0]["relied_on_as"] == ["attester", "publisher"]
    assert by[REQUESTER.id][0]["relied_on_as"] == ["requester"]
    entry = by[REVIEWER.id][0]
    assert (entry["subject"], entry["environment"]) == ("payments", "staging") and entry["decided_at"]
    # And a principal the decision did not rely on has nothing exposed
    assert by["hank-human"] == []


def test_a_compromised_reviewer_turns_a_recorded_ready_to_hold_from_then_on(services: Services) -> None:
    # Given a recorded ready decision approved by rita
    cid, seq = a_recorded_ready(services)
    # When the operator revokes her as compromised
    answer = services.operator.revoke(REVIEWER.id, compromised=True)
    # Then the revocation is a fact on the project's chain
    assert answer == {"principal_id": REVIEWER.id, "revoked": True, "compromised": True}
    project: Any = services.store.load(StreamRef(PROJECT))
    assert project.events[-1]["type"] == "principal.revoked"
    # And the candidate's decision reads hold with APPROVAL_REVOKED
    now = services.gate.evaluate(PROJECT, cid, REQUESTER)
    assert now.decision == "hold" and {f.code for f in now.findings} == {"APPROVAL_REVOKED"}
    # And the recorded ready still replays as it was made, and is still listed as exposed
    last = services.gate.get_candidate(PROJECT, cid, REQUESTER).last_decision
    assert last is not None and last.seq == seq and last.decision == "ready"
    assert last.findings_digest_matches is True
    assert [e["seq"] for e in services.operator.exposure(REVIEWER.id)] == [seq]


@pytest.mark.parametrize(
    ("principal", "codes"),
    [
        (CI.id, {"ATTESTATION_REVOKED", "EVIDENCE_UNTRUSTED"}),
        (REQUESTER.id, {"REQUESTER_REVOKED"}),
    ],
    ids=["ci-publisher", "requester"],
)
def test_a_compromised_publisher_or_requester_holds_a_recorded_ready(
    services: Services, principal: str, codes: set[str]
) -> None:
    # Given a recorded ready decision
    cid, seq = a_recorded_ready(services)
    # When the ci publisher (or the requester) is revoked as compromised by the operator
    services.operator.revoke(principal, compromised=True)
    # Then the candidate holds with the codes of what it did, while the record still replays as ready
    assert {f.code for f in services.gate.evaluate(PROJECT, cid, REQUESTER).findings} == codes
    last = services.gate.get_candidate(PROJECT, cid, REQUESTER).last_decision
    assert last is not None and (last.seq, last.decision, last.findings_digest_matches) == (
        seq,
        "ready",
        True,
    )


def test_a_compromised_reviewers_approval_makes_no_action_executable(services: Services) -> None:
    # Given an approved plan declaring an action, its candidate ready
    flow = Flow()
    a_recorded_ready(services, flow)
    # When its only approver is revoked as compromised
    services.operator.revoke(REVIEWER.id, compromised=True)
    # Then the declared action is refused as not approved, and nothing is executed
    refused = flow.run(services.gate, "execute")
    assert (refused.status, refused.code) == (403, "PLAN_NOT_APPROVED")
    assert "APPROVAL_REVOKED" in refused.body["detail"]


def test_a_plain_revocation_withdraws_nothing(services: Services) -> None:
    # Given a recorded ready decision
    cid, _seq = a_recorded_ready(services)
    # When the reviewer is revoked without --compromised (left the team)
    services.operator.revoke(REVIEWER.id, compromised=False)
    # Then the candidate is still ready
    assert services.gate.evaluate(PROJECT, cid, REQUESTER).decision == "ready"


def test_the_cli_revokes_as_compromised_and_lists_the_exposure(tmp_path: Path, capsys) -> None:
    # Given the embedded store with a recorded ready decision
    data = tmp_path / "data"
    services = open_sqlite(data)
    cid, seq = a_recorded_ready(services)
    services.store.db.close()  # type: ignore[attr-defined]
    # When the operator revokes ci-bot as compromised, then asks for its exposure
    assert main(["principals", "revoke", "--id", CI.id, "--compromised", "--yes", "--data", str(data)]) == 0
    revoked = json.loads(capsys.readouterr().out)
    code = main(["audit", "exposure", "--principal", CI.id, "--data", str(data)])
    out, err = capsys.readouterr()
    # Then the revocation is reported, the one exposed release is listed as a JSON line, and stderr says so
    assert revoked == {"principal_id": CI.id, "revoked": True, "compromised": True}
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(e["candidate_id"], e["seq"], e["relied_on_as"], e["exposed"]) for e in lines] == [
        (cid, seq, ["attester", "publisher"], True)
    ]
    assert "1 recorded ready decision(s) relied on ci-bot" in err and "exposed" in err
    # And the candidate holds on the store the CLI wrote
    again = open_sqlite(data)
    try:
        codes = {f.code for f in again.gate.evaluate(PROJECT, cid, REQUESTER).findings}
        assert codes == {"ATTESTATION_REVOKED", "EVIDENCE_UNTRUSTED"}
    finally:
        again.store.db.close()  # type: ignore[attr-defined]


def test_exposure_of_an_unknown_principal_is_refused(tmp_path: Path, capsys) -> None:
    # Given an empty embedded store  When exposure is asked for nobody  Then NOT_FOUND, exit code non-zero
    code = main(["audit", "exposure", "--principal", "ghost", "--data", str(tmp_path / "data")])
    assert code != 0 and "NOT_FOUND" in capsys.readouterr().err
