"""Attacks on the forge worker (usecases.forge.handle_delivery): a candidate the agent made first for the
pull request's head must not keep the forge's own account of the change out."""

import pytest
from test_forge_worker import FORGE_CONFIG, HEAD, REPO, delivery

from sentinel_domain.errors import Refusal
from sentinel_domain.models import ChangeContextRequest, ReviewRequest
from sentinel_domain.usecases.forge import handle_delivery
from support.memory_forge import MemoryForge
from support.world import CI, PROJECT, REQUESTER, REVIEWER, World, actor

APP = actor("gh-app", "ci", "publisher", "requester")
BASE_SHA = "b" * 40
LOGINS = {"hank": "hank-human", "rita": "rita-reviewer"}


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


def test_the_pull_request_author_cannot_approve_the_merge_queue_candidate_of_their_own_change() -> None:
    world = World(config=FORGE_CONFIG)
    forge = MemoryForge()
    queue = "c" * 40
    forge.commit(REPO, BASE_SHA, {"services/payments/api.py": "x"})
    forge.commit(REPO, HEAD, {"services/payments/api.py": "y"})
    forge.commit(REPO, queue, {"services/payments/api.py": "y"})
    forge.change(REPO, BASE_SHA, HEAD, ["services/payments/api.py"])
    forge.change(REPO, BASE_SHA, queue, ["services/payments/api.py"])
    forge.pull_authors[(REPO, 5)] = "octocat"
    # Given octocat (mapped to rita-reviewer) opened pull request 5, which she may not approve
    handle_delivery(world.gate.chain, forge, PROJECT, delivery(), APP)
    # And the pull request entered the merge queue: GitHub made the queue commit and sent merge_group
    queued = delivery(
        "merge_group",
        delivery_id="dlv-2",
        head=queue,
        pull_request=5,  # what the webhook reads from head_ref gh-readonly-queue/main/pr-5-<sha>
    )
    cid = handle_delivery(world.gate.chain, forge, PROJECT, queued, APP).created[0]
    digest = world.gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()["plan_digest"]
    # When rita approves the queue commit's plan, which is her own change
    with pytest.raises(Refusal) as refused:
        world.gate.review(
            PROJECT,
            cid,
            REVIEWER,
            ReviewRequest(decision="approve", plan_digest=digest, revision=queue),
            None,
        )
    # Then it is self-approval there too
    assert refused.value.code == "SELF_APPROVAL"


def test_whoever_pushed_the_head_cannot_approve_it_on_someone_elses_pull_request() -> None:
    world = World(config={**FORGE_CONFIG, "github": {**FORGE_CONFIG["github"], "logins": LOGINS}})
    forge = MemoryForge()
    forge.commit(REPO, BASE_SHA, {"services/payments/api.py": "x"})
    forge.commit(REPO, HEAD, {"services/payments/api.py": "y"})
    forge.change(REPO, BASE_SHA, HEAD, ["services/payments/api.py"])
    # Given hank's pull request, to whose branch rita (a reviewer with write access) pushed the head commit:
    # GitHub's synchronize names the pull request's opener as its user and the pusher as its sender
    pushed = delivery(action="synchronize", author="hank", sender="rita")
    cid = handle_delivery(world.gate.chain, forge, PROJECT, pushed, APP).created[0]
    digest = world.gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()["plan_digest"]
    # When rita approves the plan of the commit she pushed
    with pytest.raises(Refusal) as refused:
        world.gate.review(
            PROJECT, cid, REVIEWER, ReviewRequest(decision="approve", plan_digest=digest, revision=HEAD), None
        )
    # Then it is self-approval: the head's pusher is excluded as the pull request's author is
    assert refused.value.code == "SELF_APPROVAL"
