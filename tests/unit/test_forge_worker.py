"""The forge worker (usecases.forge.handle_delivery) with the in-memory Forge: candidates for a pull request's
head and a merge queue's commit, attested from the forge's own answers; renames owe both paths; a truncated
list is never attested; a forge that cannot answer writes nothing; OpenAPI documents are read at both commits;
the pull request's author is the requester of record and cannot approve."""

import json
from typing import Any

import pytest

from sentinel_domain.errors import Refusal
from sentinel_domain.forge import ForgeRefused, ForgeUnavailable
from sentinel_domain.models import ProjectConfig, ReviewRequest
from sentinel_domain.usecases.forge import handle_delivery
from support.memory_forge import MemoryForge
from support.world import ADMIN, CONFIG, PROJECT, REQUESTER, REVIEWER, REVIEWER_2, World, actor

REPO = "acme/payments"
INSTALLATION = 42
BASE_SHA, HEAD = "b" * 40, "a" * 40
APP = actor("gh-app", "ci", "publisher", "requester")
OPENAPI_PATH = "api/openapi.json"


def openapi(*paths: str) -> str:
    return json.dumps(
        {
            "openapi": "3.0.3",
            "info": {"title": "payments", "version": "1"},
            "paths": {
                p: {"get": {"operationId": p.strip("/"), "responses": {"200": {"description": "ok"}}}}
                for p in paths
            },
        }
    )


GITHUB = {
    "app_id": 7,
    "installation_id": INSTALLATION,
    "app_principal": "gh-app",
    "repositories": [
        {
            "repository": REPO,
            "subject": "payments",
            "environments": ["staging", "production"],
            "openapi": {"payments-openapi": OPENAPI_PATH},
        }
    ],
    "logins": {"Octocat": "rita-reviewer"},
}
FORGE_CONFIG = {
    **CONFIG,
    "derivation_rules": [
        *CONFIG["derivation_rules"],
        {"openapi": "payments-openapi", "policy_id": "unit-tests", "per": "operation"},
    ],
    "change_context_publishers": ["ci-bot", "gh-app"],
    "github": GITHUB,
}


@pytest.fixture
def world() -> World:
    return World(config=FORGE_CONFIG)


@pytest.fixture
def forge() -> MemoryForge:
    forge = MemoryForge()
    forge.commit(REPO, BASE_SHA, {OPENAPI_PATH: openapi("/charges"), "services/payments/api.py": "x"})
    forge.commit(REPO, HEAD, {OPENAPI_PATH: openapi("/charges", "/refunds"), "services/payments/api.py": "y"})
    forge.change(REPO, BASE_SHA, HEAD, ["services/payments/api.py"])
    return forge


def delivery(event: str = "pull_request", **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "delivery_id": "dlv-1",
        "event": event,
        "action": {"pull_request": "opened", "merge_group": "checks_requested"}.get(event, "rerequested"),
        "repository": REPO,
        "installation_id": INSTALLATION,
    }
    if event == "pull_request":
        record.update(pull_request=5, base=BASE_SHA, head=HEAD, author="octocat")
    elif event == "merge_group":
        record.update(base=BASE_SHA, head=HEAD, author=None)
    record.update(fields)
    return record


def handle(world: World, forge: MemoryForge, record: dict[str, Any] | None = None, app=APP) -> Any:
    return handle_delivery(world.gate.chain, forge, PROJECT, record or delivery(), app)


def view(world: World, cid: str) -> dict[str, Any]:
    return world.gate.get_candidate(PROJECT, cid, ADMIN).as_json()


def created_fact(world: World, cid: str) -> dict[str, Any]:
    return world.gate.chain.candidate(PROJECT, cid)[1].candidate


def codes(world: World, cid: str) -> list[str]:
    return [f.code for f in world.gate.evaluate(PROJECT, cid, ADMIN).findings]


# ---- pull requests and merge groups ---------------------------------------------------------------------


def test_a_pull_request_creates_an_attested_candidate_per_mapped_environment(
    world: World, forge: MemoryForge
) -> None:
    # When the worker handles pull_request.opened
    done = handle(world, forge)
    # Then one candidate per environment the repository maps, on the head against the base, attested
    assert len(done.created) == 2 and done.complete and done.attested
    for cid in done.created:
        body = view(world, cid)
        assert (body["base_revision"], body["revision"], body["change_context"]) == (
            BASE_SHA,
            HEAD,
            "attested",
        )
        assert body["created_by"]["id"] == "gh-app"
        assert "CHANGE_CONTEXT_UNVERIFIED" not in codes(world, cid)
    assert sorted(view(world, c)["environment"] for c in done.created) == ["production", "staging"]
    # And each new candidate asks the check publisher to publish its check (the forge_check outbox item)
    published = [o["candidate_id"] for o in world.store.outbox if o.get("kind") == "forge_check"]
    assert sorted(published) == sorted(done.created)


def test_a_redelivery_finds_the_candidates_and_is_not_an_error(world: World, forge: MemoryForge) -> None:
    first = handle(world, forge)
    again = handle(world, forge)
    assert again.created == [] and sorted(again.existing) == sorted(first.created)
    assert sorted(again.publish) == sorted(first.created)


def test_a_merge_group_creates_the_candidate_for_the_queue_commit(world: World, forge: MemoryForge) -> None:
    done = handle(world, forge, delivery("merge_group"))
    assert len(done.created) == 2
    fact = created_fact(world, done.created[0])
    assert (fact["base_revision"], fact["revision"]) == (BASE_SHA, HEAD)
    assert fact["forge"]["requester_of_record"] == {"login": None, "principal": None}


def test_a_rename_owes_both_paths(world: World, forge: MemoryForge) -> None:
    # Given a change that moves a file out of the payments service
    forge.change(REPO, BASE_SHA, HEAD, [], renames=[("services/payments/api.py", "misc/api.py")])
    done = handle(world, forge)
    # Then the obligations cover the old path's rule and the new path (unclassified)
    scopes = sorted(o["scope"] for o in view(world, done.created[0])["obligations"])
    assert scopes == ["misc/api.py", "payments-api"]


def test_openapi_documents_are_read_at_both_commits_and_derive_their_obligations(
    world: World, forge: MemoryForge
) -> None:
    # Given a change that adds an operation to the OpenAPI document the rules name
    forge.change(REPO, BASE_SHA, HEAD, [OPENAPI_PATH])
    done = handle(world, forge)
    # Then the document was read at the base and at the head
    reads = [c for c in forge.calls if c[0] == "read_file"]
    assert sorted(c[2] for c in reads) == sorted([BASE_SHA, HEAD]) and {c[3] for c in reads} == {OPENAPI_PATH}
    # And the added operation owes its own obligation
    scopes = {o["scope"] for o in view(world, done.created[0])["obligations"]}
    assert "payments-openapi/GET /refunds" in scopes


def test_a_document_whose_path_did_not_change_is_not_read(world: World, forge: MemoryForge) -> None:
    handle(world, forge)
    assert [c for c in forge.calls if c[0] == "read_file"] == []


# ---- faults ---------------------------------------------------------------------------------------------


def test_a_truncated_file_list_is_never_attested_and_holds_with_change_context_incomplete(
    world: World, forge: MemoryForge
) -> None:
    # Given the forge says its file list may be truncated
    forge.change(REPO, BASE_SHA, HEAD, ["services/payments/api.py"], complete=False)
    done = handle(world, forge)
    # Then the candidates exist, declared, and hold with CHANGE_CONTEXT_INCOMPLETE
    assert done.complete is False and done.attested is False
    cid = done.created[0]
    assert view(world, cid)["change_context"] == "declared"
    assert {"CHANGE_CONTEXT_UNVERIFIED", "CHANGE_CONTEXT_INCOMPLETE"} <= set(codes(world, cid))
    # And with a truncated list every named document is read (its path may be among the missing files)
    assert {c[3] for c in forge.calls if c[0] == "read_file"} == {OPENAPI_PATH}


def test_a_forge_that_cannot_answer_writes_nothing_and_a_retry_succeeds(
    world: World, forge: MemoryForge
) -> None:
    # Given the forge is unavailable for its next call
    forge.unavailable_for = 1
    before = world.store.snapshot()
    # When the worker handles the delivery
    with pytest.raises(ForgeUnavailable):
        handle(world, forge)
    # Then nothing was written (the outbox retries it)
    assert world.store.snapshot() == before
    # And the retry, once the forge answers, creates the candidates
    assert len(handle(world, forge).created) == 2


def test_a_forge_failing_halfway_through_the_documents_writes_nothing(
    world: World, forge: MemoryForge
) -> None:
    forge.change(REPO, BASE_SHA, HEAD, [OPENAPI_PATH])
    before = world.store.snapshot()
    original = forge.read_file
    calls = {"n": 0}

    def second_read_fails(repository: str, revision: str, path: str) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise ForgeUnavailable("rate limited", retry_after_seconds=60)
        return original(repository, revision, path)

    forge.read_file = second_read_fails  # type: ignore[method-assign]
    with pytest.raises(ForgeUnavailable):
        handle(world, forge)
    assert world.store.snapshot() == before


def test_a_forge_answering_for_other_commits_is_refused(world: World, forge: MemoryForge) -> None:
    from sentinel_domain.forge import ChangedFiles

    forge.changed_files = lambda r, b, h: ChangedFiles(b, "f" * 40, ("x",), True)  # type: ignore[method-assign]
    with pytest.raises(ForgeRefused):
        handle(world, forge)


def test_a_repository_the_configuration_no_longer_lists_changes_nothing(
    world: World, forge: MemoryForge
) -> None:
    before = world.store.snapshot()
    done = handle(world, forge, delivery(repository="acme/elsewhere"))
    assert done.skipped == "WEBHOOK_REPOSITORY_UNKNOWN" and world.store.snapshot() == before


def test_an_app_principal_without_the_publisher_role_is_refused(world: World, forge: MemoryForge) -> None:
    with pytest.raises(Refusal) as refused:
        handle(world, forge, app=actor("gh-app", "ci"))
    assert refused.value.code == "NOT_FOUND"


def test_a_check_run_rerequest_names_the_candidate_for_the_publisher(
    world: World, forge: MemoryForge
) -> None:
    cid = handle(world, forge).created[0]
    before = world.store.snapshot()
    done = handle(world, forge, delivery("check_run", candidate_id=cid, head=HEAD))
    assert done.publish == [cid] and world.store.snapshot() == before


# ---- who acts -------------------------------------------------------------------------------------------


def _plan_for(world: World, cid: str) -> tuple[str, str]:
    body = world.gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()
    return body["plan_digest"], view(world, cid)["revision"]


def test_the_mapped_author_is_the_requester_of_record_and_cannot_approve(
    world: World, forge: MemoryForge
) -> None:
    # Given a pull request by octocat (mapped, whatever the letter case, to rita-reviewer)
    cid = handle(world, forge).created[0]
    assert created_fact(world, cid)["forge"]["requester_of_record"] == {
        "login": "octocat",
        "principal": "rita-reviewer",
    }
    digest, revision = _plan_for(world, cid)
    # When rita approves the plan of her own pull request
    with pytest.raises(Refusal) as refused:
        world.gate.review(
            PROJECT,
            cid,
            REVIEWER,
            ReviewRequest(decision="approve", plan_digest=digest, revision=revision),
            None,
        )
    # Then it is self-approval; another reviewer may approve
    assert refused.value.code == "SELF_APPROVAL"
    world.gate.review(
        PROJECT,
        cid,
        REVIEWER_2,
        ReviewRequest(decision="approve", plan_digest=digest, revision=revision),
        None,
    )


def test_an_unmapped_author_is_recorded_as_such(world: World, forge: MemoryForge) -> None:
    cid = handle(world, forge, delivery(author="stranger")).created[0]
    assert created_fact(world, cid)["forge"]["requester_of_record"] == {
        "login": "stranger",
        "principal": None,
    }
    digest, revision = _plan_for(world, cid)
    world.gate.review(
        PROJECT, cid, REVIEWER, ReviewRequest(decision="approve", plan_digest=digest, revision=revision), None
    )


def test_no_http_body_can_name_a_requester_of_record(world: World) -> None:
    # Given a candidate created over the route's model with a forge field smuggled in
    from pydantic import ValidationError

    from sentinel_domain.models import CandidateRequest

    body = {
        "subject": "payments",
        "base_revision": BASE_SHA,
        "revision": HEAD,
        "environment": "staging",
        "change": {"files": ["a.py"]},
        "forge": {"requester_of_record": {"login": "x", "principal": "rob-reviewer"}},
    }
    with pytest.raises(ValidationError):
        CandidateRequest.model_validate(body)


def test_the_sponsor_of_a_mapped_agent_author_cannot_approve_either(world: World, forge: MemoryForge) -> None:
    # Given a pull request by a login mapped to an agent that rita-reviewer sponsors
    github = dict(GITHUB, logins={"octocat": "agent-7"})
    world.gate.put_config(
        PROJECT, ADMIN, ProjectConfig.model_validate(dict(FORGE_CONFIG, github=github)), "1"
    )
    sponsors = {"agent-7": "rita-reviewer"}
    cid = handle_delivery(world.gate.chain, forge, PROJECT, delivery(), APP, sponsors.get).created[0]
    assert created_fact(world, cid)["forge"]["requester_of_record"] == {
        "login": "octocat",
        "principal": "agent-7",
        "sponsor": "rita-reviewer",
    }
    digest, revision = _plan_for(world, cid)
    # Then the sponsor's approval is self-approval
    with pytest.raises(Refusal) as refused:
        world.gate.review(
            PROJECT,
            cid,
            REVIEWER,
            ReviewRequest(decision="approve", plan_digest=digest, revision=revision),
            None,
        )
    assert refused.value.code == "SELF_APPROVAL"
