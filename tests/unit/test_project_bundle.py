"""A project's configuration and policies applied together (`put_bundle`, one `bundle.set` fact): the state it
folds to is the state of the equivalent separate writes; it is judged as they are; it writes only what
differs, and nothing at all when nothing does."""

from typing import Any

import pytest

from sentinel_domain.errors import IF_MATCH_MISSING, IF_MATCH_STALE, Refusal
from sentinel_domain.forge_checks import FORGE_RECHECK_KIND
from sentinel_domain.models import Policy, ProjectBundle, ProjectConfig
from sentinel_domain.ports import StreamRef
from sentinel_domain.state import ProjectState
from sentinel_domain.usecases.chain import ANSWER_TAG
from sentinel_domain.webhooks import forge_index_key
from support.world import ADMIN, AUDITOR, CONFIG, LINT_POLICY, PROJECT, UNIT_POLICY, World

CONTRACT_POLICY = dict(UNIT_POLICY, command="schemathesis run {scope}")
NEW_CONFIG = dict(
    CONFIG,
    derivation_rules=[
        *CONFIG["derivation_rules"],
        {"openapi": "payments-api", "policy_id": "api-contract", "per": "operation"},
    ],
    approvals_required=2,
)
STRICTER_UNIT = dict(UNIT_POLICY, min_tests=5)


def bundle(config: dict[str, Any], **policies: dict[str, Any]) -> ProjectBundle:
    return ProjectBundle.model_validate(
        {"config": config, "policies": {k.replace("_", "-"): v for k, v in policies.items()}}
    )


def state(world: World) -> ProjectState:
    return world.gate.chain.project(PROJECT)[1]


def project_seq(world: World) -> int:
    stream = world.store.load(StreamRef(PROJECT))
    assert stream is not None
    return stream.seq


def settled_view(s: ProjectState, as_of: str | None = None) -> dict[str, Any]:
    """Everything the project state answers about configuration and policies."""
    config = s.config(as_of)
    return {
        "config": config.stored() if config else None,
        "config_version": s.config_version(as_of),
        "policies": {pid: (v, p.model_dump(mode="json")) for pid, (v, p) in s.policies(as_of).items()},
        "versions": {
            pid: [(e["version"], e["policy"], e["actor"]["id"]) for e in s.policy_versions(pid, as_of)]
            for pid in ("unit-tests", "lint", "api-contract")
        },
        "unit_v1": s.policy("unit-tests", as_of, version=1),
    }


def test_a_bundle_folds_to_the_state_of_the_separate_writes() -> None:
    # Given two identical projects
    separate, together = World(), World()
    # When one gets a new policy, a changed policy and a new configuration as three writes
    separate.gate.put_policy(PROJECT, "api-contract", ADMIN, Policy.model_validate(CONTRACT_POLICY))
    separate.gate.put_policy(PROJECT, "unit-tests", ADMIN, Policy.model_validate(STRICTER_UNIT))
    separate.gate.put_config(PROJECT, ADMIN, ProjectConfig.model_validate(NEW_CONFIG), "1")
    # And the other the same as one bundle (naming an unchanged policy too)
    applied = together.gate.put_bundle(
        PROJECT,
        ADMIN,
        bundle(NEW_CONFIG, api_contract=CONTRACT_POLICY, unit_tests=STRICTER_UNIT, lint=LINT_POLICY),
        '"1"',
    )
    # Then both fold to the same configuration, policies and versions, now and at the instant before
    assert settled_view(state(together)) == settled_view(state(separate))
    before = "2026-11-29T11:59:59Z"
    assert settled_view(state(together), before) == settled_view(state(separate), before)
    # And the bundle answered the versions the separate writes made, as one fact on the chain
    assert applied.config_version == 2 and applied.policies == {"api-contract": 1, "lint": 1, "unit-tests": 2}
    assert applied.changed.config is True and applied.changed.policies == ["api-contract", "unit-tests"]
    assert project_seq(together) == project_seq(separate) - 2 == applied.seq


def test_a_candidate_is_judged_the_same_under_a_bundle_and_under_separate_writes() -> None:
    # Given the same change applied both ways
    separate, together = World(), World()
    separate.gate.put_policy(PROJECT, "unit-tests", ADMIN, Policy.model_validate(STRICTER_UNIT))
    together.gate.put_bundle(PROJECT, ADMIN, bundle(CONFIG, unit_tests=STRICTER_UNIT), "1")
    # When a candidate is created and judged in each
    decisions = []
    for world in (separate, together):
        cid = world.candidate()["candidate_id"]
        decision = world.gate.evaluate(PROJECT, cid, AUDITOR)
        decisions.append(
            (decision.decision, [(f.code, f.obligation_id, f.check_id) for f in decision.findings])
        )
    # Then the decisions and their findings are the same
    assert decisions[0] == decisions[1]


def test_only_what_differs_gets_a_new_version() -> None:
    world = World()
    # Given the current configuration, an unchanged policy and one changed policy
    applied = world.gate.put_bundle(
        PROJECT, ADMIN, bundle(CONFIG, lint=LINT_POLICY, unit_tests=STRICTER_UNIT), "1"
    )
    # Then only the changed policy is versioned; the configuration keeps its version
    assert applied.changed.config is False and applied.changed.policies == ["unit-tests"]
    assert applied.config_version == 1 and applied.policies == {"lint": 1, "unit-tests": 2}
    s = state(world)
    assert [e["version"] for e in s.policy_versions("lint")] == [1]
    assert s.config_version() == 1 and s.policies()["unit-tests"][0] == 2


def test_a_bundle_that_differs_in_nothing_writes_nothing() -> None:
    world = World()
    before = world.store.snapshot()
    # When the current configuration and policies are applied again
    applied = world.gate.put_bundle(
        PROJECT, ADMIN, bundle(CONFIG, lint=LINT_POLICY, unit_tests=UNIT_POLICY), "1"
    )
    # Then the answer names the current versions and the chain's head, and nothing was written
    assert not applied.wrote and applied.changed.policies == []
    assert (applied.config_version, applied.policies) == (1, {"lint": 1, "unit-tests": 1})
    assert applied.seq == project_seq(world)
    assert world.store.snapshot() == before


def test_policies_absent_from_the_bundle_are_left_as_they_are() -> None:
    world = World()
    world.gate.put_bundle(PROJECT, ADMIN, bundle(CONFIG, unit_tests=STRICTER_UNIT), "1")
    assert state(world).policies()["lint"] == (1, Policy.model_validate(LINT_POLICY))


@pytest.mark.parametrize(
    ("if_match", "reason"), [(None, IF_MATCH_MISSING), ('"7"', IF_MATCH_STALE), ("0", IF_MATCH_STALE)]
)
def test_a_bundle_names_the_current_configuration_version(if_match: str | None, reason: str) -> None:
    world = World()
    before = world.store.snapshot()
    with pytest.raises(Refusal) as refused:
        world.gate.put_bundle(PROJECT, ADMIN, bundle(CONFIG, unit_tests=STRICTER_UNIT), if_match)
    assert (refused.value.code, refused.value.reason) == ("VERSION_CONFLICT", reason)
    assert world.store.snapshot() == before


@pytest.mark.parametrize("expected", [{"unit-tests": 1}, {"api-contract": 0}])
def test_a_policy_that_moved_since_the_bundle_was_made_is_refused_not_reverted(
    expected: dict[str, int],
) -> None:
    # Given another admin tightened unit-tests (version 2) and added api-contract after this bundle was made
    world = World()
    world.gate.put_policy(PROJECT, "unit-tests", ADMIN, Policy.model_validate(STRICTER_UNIT))
    world.gate.put_policy(PROJECT, "api-contract", ADMIN, Policy.model_validate(CONTRACT_POLICY))
    before = world.store.snapshot()
    made = bundle(CONFIG, unit_tests=UNIT_POLICY, api_contract=CONTRACT_POLICY)
    made = made.model_copy(update={"expected_policy_versions": expected})
    # When the bundle says which versions it was made from, Then it is refused and nothing is written
    with pytest.raises(Refusal) as refused:
        world.gate.put_bundle(PROJECT, ADMIN, made, "1")
    assert (refused.value.code, refused.value.reason) == ("VERSION_CONFLICT", IF_MATCH_STALE)
    assert world.store.snapshot() == before
    # And the versions it names, when current, are accepted
    current = made.model_copy(update={"expected_policy_versions": {"unit-tests": 2, "api-contract": 1}})
    assert world.gate.put_bundle(PROJECT, ADMIN, current, "1").changed.policies == ["unit-tests"]


def test_the_first_bundle_of_a_project_needs_no_version() -> None:
    # Given a new project without configuration or policies
    world = World()
    world.gate.create_project("fresh")
    # When its first bundle names the configuration and the policies it needs
    applied = world.gate.put_bundle(
        "fresh", ADMIN, bundle(CONFIG, unit_tests=UNIT_POLICY, lint=LINT_POLICY), None
    )
    # Then everything is version 1, in one fact after the project's creation
    assert (applied.config_version, applied.policies, applied.seq) == (1, {"lint": 1, "unit-tests": 1}, 2)
    assert world.gate.get_config("fresh", ADMIN).version == 1


@pytest.mark.parametrize(
    ("config", "policies", "words"),
    [
        # A configuration naming a policy that neither exists nor comes with it
        (NEW_CONFIG, {}, "unknown policies api-contract"),
        # A derivation rule with both files and openapi
        (
            dict(
                CONFIG,
                derivation_rules=[{"files": ["a/**"], "openapi": "x", "policy_id": "lint"}],
            ),
            {},
            "either files or openapi",
        ),
    ],
)
def test_a_bundle_is_judged_as_its_separate_writes_would_be(
    config: dict[str, Any], policies: dict[str, Any], words: str
) -> None:
    world = World()
    before = world.store.snapshot()
    with pytest.raises(Refusal) as refused:
        world.gate.put_bundle(PROJECT, ADMIN, bundle(config, **policies), "1")
    # The same refusal a separate configuration write gives, and nothing written (not even the policies)
    with pytest.raises(Refusal) as alone:
        world.gate.put_config(PROJECT, ADMIN, ProjectConfig.model_validate(config), "1")
    assert refused.value.code == alone.value.code == "VALIDATION_FAILED"
    assert words in refused.value.detail and refused.value.detail == alone.value.detail
    assert world.store.snapshot() == before


def test_a_policy_the_configuration_needs_may_come_in_the_same_bundle() -> None:
    world = World()
    applied = world.gate.put_bundle(PROJECT, ADMIN, bundle(NEW_CONFIG, api_contract=CONTRACT_POLICY), "1")
    assert applied.changed.config and applied.changed.policies == ["api-contract"]


def test_only_an_admin_applies_a_bundle() -> None:
    world = World()
    with pytest.raises(Refusal) as refused:
        world.gate.put_bundle(PROJECT, AUDITOR, bundle(CONFIG), "1")
    assert refused.value.code == "FORBIDDEN_ROLE"


# ---- the forge ------------------------------------------------------------------------------------------

GITHUB = {
    "app_id": 7,
    "installation_id": 42,
    "app_principal": "gh-app",
    "repositories": [{"repository": "acme/payments", "subject": "payments", "environments": ["staging"]}],
    "logins": {"octocat": "hank-human"},
}
FORGE_CONFIG = {**CONFIG, "change_context_publishers": ["ci-bot", "gh-app"], "github": GITHUB}


def rechecks(world: World) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in item.items() if k != ANSWER_TAG}
        for item in world.store.outbox
        if item["kind"] == FORGE_RECHECK_KIND
    ]


def test_a_bundle_claims_its_repositories_and_carries_the_recheck() -> None:
    # Given a project whose bundle names a repository
    world = World()
    world.store.outbox.clear()
    world.gate.put_bundle(PROJECT, ADMIN, bundle(FORGE_CONFIG, unit_tests=STRICTER_UNIT), "1")
    # Then the repository is the project's, and the write asks the forge to re-publish its checks
    assert world.store.forge_owner(forge_index_key(42, "acme/payments")) == PROJECT
    assert rechecks(world) == [{"kind": FORGE_RECHECK_KIND, "project": PROJECT, "reason": "bundle.set"}]


def test_a_bundle_naming_another_projects_repository_is_refused_and_writes_nothing() -> None:
    # Given a repository claimed by the demo project
    world = World(config=FORGE_CONFIG)
    world.gate.create_project("other")
    before = world.store.load(StreamRef("other"))
    # When another project's bundle names it, with a policy
    with pytest.raises(Refusal) as refused:
        world.gate.put_bundle(
            "other", ADMIN, bundle(FORGE_CONFIG, unit_tests=UNIT_POLICY, lint=LINT_POLICY), None
        )
    # Then it is refused, and neither the configuration nor the policy was written
    assert refused.value.code == "FORGE_REPOSITORY_CLAIMED"
    after = world.store.load(StreamRef("other"))
    assert before is not None and after is not None and after.seq == before.seq
