"""The deterministic fallback plan stands in even for scopes a placeholder cannot carry as they are."""

from sentinel_domain.models import CandidateRequest, Policy, ProjectConfig
from sentinel_domain.plans import conforms
from support.world import ADMIN, BASE, CONFIG, PROJECT, REQUESTER, REV, UNIT_POLICY, World

BEFORE = {
    "openapi": "3.0.3",
    "info": {"title": "p", "version": "1"},
    "paths": {"/pets/{id}": {"get": {"responses": {"200": {"description": "ok"}}}}},
}
AFTER = {
    "openapi": "3.0.3",
    "info": {"title": "p", "version": "1"},
    "paths": {
        "/pets/{id}": {"get": {"responses": {"200": {"description": "ok"}}}},
        "/pets": {"post": {"responses": {"201": {"description": "made"}}}},
    },
}


def test_operation_scopes_are_percent_encoded_into_conforming_commands() -> None:
    # Given a project whose OpenAPI rule owes a contract test per changed operation
    world = World()
    world.gate.put_policy(
        PROJECT,
        "api-contract-tests",
        ADMIN,
        Policy.model_validate(dict(UNIT_POLICY, command="schemathesis run --operation {scope}")),
    )
    config = dict(
        CONFIG,
        derivation_rules=[
            *CONFIG["derivation_rules"],
            {"openapi": "payments-api", "policy_id": "api-contract-tests", "per": "operation"},
        ],
    )
    world.gate.put_config(PROJECT, ADMIN, ProjectConfig.model_validate(config), '"1"')
    created = world.gate.create_candidate(
        PROJECT,
        REQUESTER,
        CandidateRequest.model_validate(
            {
                "subject": "payments",
                "base_revision": BASE,
                "revision": REV,
                "environment": "staging",
                "change": {"openapi": [{"name": "payments-api", "before": BEFORE, "after": AFTER}]},
            }
        ),
        None,
    ).as_json()
    assert any(" " in o["scope"] for o in created["obligations"])
    # When the requester asks for a proposal without a model
    proposal = world.gate.propose(PROJECT, created["candidate_id"], REQUESTER, None, None)
    # Then the fallback plan is stored, each command an instance of its policy's template
    assert proposal.mode == "fallback"
    commands = [c["command"] for t in proposal.plan["tasks"] for c in t["checks"]]
    assert "schemathesis run --operation payments-api/POST%20/pets" in commands
    assert all(conforms(c, "schemathesis run --operation {scope}") for c in commands)
