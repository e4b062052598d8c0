"""Attacks on the forge worker (usecases.forge.handle_delivery): a candidate the agent made first for the
pull request's head must not keep the forge's own account of the change out."""

from test_forge_worker import FORGE_CONFIG, HEAD, REPO, delivery

from sentinel_domain.models import ChangeContextRequest
from sentinel_domain.usecases.forge import handle_delivery
from support.memory_forge import MemoryForge
from support.world import CI, PROJECT, REQUESTER, World, actor

APP = actor("gh-app", "ci", "publisher", "requester")
BASE_SHA = "b" * 40


def test_a_candidate_squatted_before_the_delivery_still_owes_what_the_forge_says_changed() -> None:
    world = World(config=FORGE_CONFIG)
    forge = MemoryForge()
    forge.commit(REPO, BASE_SHA, {"services/payments/api.py": "x"})
    forge.commit(REPO, HEAD, {"services/payments/api.py": "y"})
    forge.change(REPO, BASE_SHA, HEAD, ["services/payments/api.py"])
    # Given the agent, which knows its commit before it pushes, claimed (subject, HEAD, staging) first with a
    # declared context naming only documentation, from a base of its choosing
    squat = world.candidate(files=("docs/readme.md",), by=REQUESTER, revision=HEAD)["candidate_id"]
    # And a trusted CI publisher attested that narrow diff (against the base the agent's candidate names)
    narrow = ChangeContextRequest.model_validate({"change": {"files": ["docs/readme.md"]}})
    world.gate.add_change_context(PROJECT, squat, CI, narrow, None)
    # When the pull request's delivery reaches the worker, twice (the claim is taken: CANDIDATE_EXISTS)
    for _ in range(2):
        done = handle_delivery(world.gate.chain, forge, PROJECT, delivery(), APP)
        assert squat in done.existing
    # Then the candidate the check run is published for owes what GitHub says the pull request changed
    state = world.gate.chain.candidate(PROJECT, squat)[1]
    assert {o["scope"] for o in state.obligations.values()} >= {"payments-api"}
    # And the redelivery added nothing more (keyed by the delivery)
    assert sum(1 for c in state.contexts if c.get("actor", {}).get("id") == "gh-app") == 1


def test_a_truncated_forge_list_joins_a_squatted_candidate_as_declared_only() -> None:
    world = World(config=FORGE_CONFIG)
    forge = MemoryForge()
    forge.commit(REPO, BASE_SHA, {"services/payments/api.py": "x"})
    forge.commit(REPO, HEAD, {"services/payments/api.py": "y"})
    forge.change(REPO, BASE_SHA, HEAD, ["services/payments/api.py"], complete=False)
    # Given a squatted candidate (declared) for the head
    squat = world.candidate(files=("docs/readme.md",), by=REQUESTER, revision=HEAD)["candidate_id"]
    # When the forge's list may be truncated
    handle_delivery(world.gate.chain, forge, PROJECT, delivery(), APP)
    # Then its obligations join, but nothing is attested by it
    state = world.gate.chain.candidate(PROJECT, squat)[1]
    assert "payments-api" in {o["scope"] for o in state.obligations.values()}
    assert not state.attested
