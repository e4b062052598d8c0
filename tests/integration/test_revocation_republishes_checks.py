"""A revocation writes only to project chains, yet changes decisions (DOMAIN.md rule 26): so the write that
records it carries a `forge_recheck` outbox item, in the same transaction as the principal change (SQLite: one
database transaction; DynamoDB: the staged chain items in the principal's TransactWriteItems), and the
publisher turns every checked candidate of the project that the revocation affects to not-success. Through
the operator on each store, with the recording forge."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from sentinel_domain.forge_checks import FORGE_RECHECK_KIND
from sentinel_domain.usecases.chain import ANSWER_TAG
from sentinel_domain.usecases.forge_checks import ForgeChecks
from sentinel_service.adapters.tables import ensure_tables
from sentinel_service.compose import Services, compose
from sentinel_service.settings import Settings
from support.moto_world import Flow, moto_dynamodb
from support.recording_forge import RecordingForge
from support.world import CI, CONFIG, LINT_POLICY, PROJECT, REQUESTER, REV, REVIEWER, UNIT_POLICY, sealed

GITHUB = {
    "app_id": 1,
    "installation_id": 2,
    "app_principal": "ci-bot",
    "repositories": [{"repository": "acme/payments", "subject": "payments", "environments": ["staging"]}],
}
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


@pytest.fixture(params=["sqlite", "dynamodb"])
def services(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Services]:
    if request.param == "sqlite":
        from sentinel_runner.data_dir import open_data_dir
        from sentinel_runner.runtime import open_embedded

        data = tmp_path / "data"
        made = open_embedded(
            open_data_dir(data), environ={"SENTINEL_TOKEN_KEY_FILE": str(data / "token.key")}
        )
        yield made
        made.store.db.close()  # type: ignore[attr-defined]
        return
    with moto_dynamodb() as client:
        settings = Settings.from_env({"AWS_REGION": "us-east-1"})
        ensure_tables(client, settings.state_table, settings.principals_table)
        yield compose(settings, dynamodb=client, token_key=bytes(range(32)), **sealed())


def pending(services: Services, kind: str) -> list[dict]:
    return [p["item"] for p in services.store.pending_outbox() if p["kind"] == kind]  # type: ignore[attr-defined]


def test_a_compromised_revocation_carries_a_recheck_and_the_check_turns(services: Services) -> None:
    # Given a GitHub-mapped project, a ready candidate and its check published success
    operator = services.operator
    operator.provision_project(
        PROJECT, {"unit-tests": UNIT_POLICY, "lint": LINT_POLICY}, {**CONFIG, "github": GITHUB}
    )
    operator.add_principal("hank-human", "human", None, {PROJECT: ["requester"]})
    operator.add_principal(REQUESTER.id, "agent", "hank-human", {PROJECT: ["requester"]})
    operator.add_principal(REVIEWER.id, "human", None, {PROJECT: ["reviewer"]})
    operator.add_principal(CI.id, "ci", None, {PROJECT: ["publisher", "requester"]})
    flow = Flow()
    for step in STEPS:
        assert flow.run(services.gate, step).accepted, step
    forge = RecordingForge()
    checks = ForgeChecks(services.gate.chain, forge, services.store)  # type: ignore[arg-type]
    assert checks.publish(PROJECT, flow.candidate_id).conclusion == "success"
    # (what the setup's writes left in the outbox is relayed: the configuration's own re-check among them)
    for item in services.store.pending_outbox(1000):  # type: ignore[attr-defined]
        services.store.mark_relayed(item["pk"], item["sk"])  # type: ignore[attr-defined]
    # When the operator revokes the reviewer as compromised
    operator.revoke(REVIEWER.id, compromised=True)
    # Then the revocation's own write carried one project-wide re-check, tagged as every side effect
    (item,) = pending(services, FORGE_RECHECK_KIND)
    assert ANSWER_TAG in item
    assert {k: v for k, v in item.items() if k != ANSWER_TAG} == {
        "kind": FORGE_RECHECK_KIND,
        "project": PROJECT,
        "reason": "principal.revoked",
    }
    # And delivering it turns the candidate's check to not-success, naming the withdrawn approval
    (published,) = checks.handle(item)
    assert published.status == "published" and published.conclusion == "action_required"
    run = forge.latest("sentinel/staging", REV)
    assert run is not None and "APPROVAL_REVOKED" in run.summary
