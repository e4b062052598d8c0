"""The forge check publisher through the real GitHub App adapter against the fake GitHub (which checks every
request against GitHub's REST description and fails the test at teardown on any GitHub would not admit): the
composition root's per-installation forge, one run per candidate created then updated in place, and a
publication GitHub refuses to take leaves the run as it was, never success."""

from typing import Any

import pytest

from sentinel_domain.forge import ForgeUnavailable
from sentinel_domain.memory import MemoryStore
from sentinel_service.compose import compose
from sentinel_service.settings import Settings
from support.fake_github import FakeGitHub, running_fake
from support.world import CONFIG, PROJECT, REQUESTER, SEAL, World

INSTALLATION = 77
REPOSITORY = "acme/payments"


@pytest.fixture
def github() -> Any:
    with running_fake() as fake:
        fake.install(INSTALLATION, REPOSITORY)
        yield fake


def test_a_candidates_check_is_created_then_updated_on_github(github: FakeGitHub) -> None:
    # Given a project whose GitHub App is the fake's, and a candidate on a commit GitHub knows
    config = {
        **CONFIG,
        "github": {
            "app_id": github.app_id,
            "installation_id": INSTALLATION,
            "app_principal": "ci-bot",
            "repositories": [{"repository": REPOSITORY, "subject": "payments", "environments": ["staging"]}],
        },
    }
    world = World(config, store=MemoryStore())
    head = github.commit(REPOSITORY, {"services/payments/api.py": "print(1)"})
    cid = world.candidate(revision=head)["candidate_id"]
    services = compose(
        Settings.from_env({}),
        store=world.store,
        clock=world.clock,
        ids=world.ids,
        seal=SEAL,
        witness=world.witness,
        forge_builder=lambda app: github.forge(app.installation_id),
    )
    checks = services.forge_checks
    # When the publisher publishes it, then GitHub holds one completed run, not success
    assert checks.publish(PROJECT, cid).status == "published"
    [run] = github.check_runs(REPOSITORY, head)
    assert (run["name"], run["status"], run["conclusion"]) == (
        "sentinel/staging",
        "completed",
        "action_required",
    )
    assert run["external_id"] == cid and "PLAN_MISSING" in run["output"]["summary"]
    # When the candidate is planned and GitHub fails once, the run keeps what it said
    world.gate.propose(PROJECT, cid, REQUESTER, None, None)
    github.fail(502, times=1)
    with pytest.raises(ForgeUnavailable):
        checks.publish(PROJECT, cid)
    [run] = github.check_runs(REPOSITORY, head)
    assert "PLAN_MISSING" in run["output"]["summary"]
    # And the retry updates the same run in place
    assert checks.publish(PROJECT, cid).status == "published"
    [run] = github.check_runs(REPOSITORY, head)
    assert "PLAN_MISSING" not in run["output"]["summary"] and "REVIEW_MISSING" in run["output"]["summary"]
    assert [h["conclusion"] for h in run["history"]] == ["action_required", "action_required"]
