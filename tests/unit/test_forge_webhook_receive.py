"""The webhook's receiving half (sentinel_domain.webhooks and usecases.forge.receive_webhook) on the in-memory
store: the signature before anything is read, the delivery's few fields, de-duplication by delivery id, and
every refusal or ignore changing nothing."""

import hashlib
import hmac
import json
from typing import Any

import pytest

from sentinel_domain.errors import Refusal
from sentinel_domain.models import ProjectConfig
from sentinel_domain.ports import StreamRef
from sentinel_domain.usecases.forge import delivery_ref, receive_webhook
from sentinel_domain.webhooks import forge_index_key, signature_valid
from support.world import ADMIN, CI, CONFIG, PROJECT, World

SECRET = b"webhook-secret-for-tests-0123456789"
REPO = "acme/payments"
INSTALLATION = 42
HEAD, BASE_SHA = "c" * 40, "d" * 40
GITHUB = {
    "app_id": 7,
    "installation_id": INSTALLATION,
    "app_principal": "gh-app",
    "repositories": [{"repository": REPO, "subject": "payments", "environments": ["staging"]}],
    "logins": {"octocat": "hank-human"},
}
FORGE_CONFIG = {**CONFIG, "change_context_publishers": ["ci-bot", "gh-app"], "github": GITHUB}


def sign(body: bytes, secret: bytes = SECRET) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def pull_request(action: str = "opened", **over: Any) -> bytes:
    payload = {
        "action": action,
        "pull_request": {
            "number": 5,
            "head": {"sha": HEAD},
            "base": {"sha": BASE_SHA},
            "user": {"login": "octocat"},
        },
        "repository": {"full_name": REPO},
        "installation": {"id": INSTALLATION},
        **over,
    }
    return json.dumps(payload).encode()


@pytest.fixture
def world() -> World:
    return World(config=FORGE_CONFIG)


def receive(
    world: World,
    body: bytes,
    event: str | None = "pull_request",
    delivery: str | None = "11111111-2222-3333-4444-555555555555",
    signature: str | None = None,
) -> Any:
    return receive_webhook(
        world.gate.chain,
        lambda: SECRET,
        event,
        delivery,
        sign(body) if signature is None else signature,
        body,
    )


# ---- the signature --------------------------------------------------------------------------------------


def test_a_good_signature_verifies_and_every_other_does_not() -> None:
    # Given a body and its signature under the secret
    body = pull_request()
    good = sign(body)
    # Then it verifies; a missing header, another secret, one changed byte of body or of signature do not
    assert signature_valid(SECRET, body, good)
    assert not signature_valid(SECRET, body, None)
    assert not signature_valid(SECRET, body, "")
    assert not signature_valid(SECRET, body, good.removeprefix("sha256="))
    assert not signature_valid(SECRET, body, sign(body, b"another-secret-0123456789abcdef"))
    assert not signature_valid(SECRET, body[:-1] + b" ", good)
    assert not signature_valid(SECRET, body, good[:-1] + ("0" if good[-1] != "0" else "1"))
    assert not signature_valid(SECRET, body, "sha1=" + good[7:])
    assert not signature_valid(b"", body, sign(body, b""))  # no secret verifies nothing


@pytest.mark.parametrize(
    "signature",
    ["", "sha256=", "sha256=" + "0" * 64, sign(b"{}"), sign(pull_request(), b"x" * 32)],
    ids=["missing", "empty", "zeros", "other-body", "other-secret"],
)
def test_a_bad_signature_is_refused_and_nothing_is_recorded(world: World, signature: str) -> None:
    # Given the project's state before
    before = world.store.snapshot()
    # When a delivery arrives with a wrong or missing signature
    with pytest.raises(Refusal) as refused:
        receive(world, pull_request(), signature=signature)
    # Then it is refused with WEBHOOK_SIGNATURE_INVALID and nothing changed
    assert refused.value.code == "WEBHOOK_SIGNATURE_INVALID"
    assert world.store.snapshot() == before


def test_the_signature_is_checked_before_the_body_is_read(world: World) -> None:
    # Given a body that is not JSON, signed with another secret
    with pytest.raises(Refusal) as refused:
        receive(world, b"not json", signature=sign(b"not json", b"y" * 32))
    # Then the answer is about the signature, not the body
    assert refused.value.code == "WEBHOOK_SIGNATURE_INVALID"


def test_a_secret_that_cannot_be_read_refuses_as_unavailable(world: World) -> None:
    def broken() -> bytes:
        raise OSError("no secret")

    with pytest.raises(Refusal) as refused:
        receive_webhook(world.gate.chain, broken, "pull_request", "d1", sign(b"{}"), b"{}")
    assert refused.value.code == "STATE_UNAVAILABLE"


# ---- recording and de-duplication -----------------------------------------------------------------------


def test_a_verified_pull_request_is_recorded_once_for_the_worker(world: World) -> None:
    # When a signed pull_request.opened arrives
    first = receive(world, pull_request())
    # Then it is accepted for the repository's project, as a one-fact chain whose outbox carries it
    assert (first.status, first.project) == ("accepted", PROJECT)
    stream = world.store.load(delivery_ref(PROJECT, hashlib.sha256(pull_request()).hexdigest()))
    assert stream is not None and stream.seq == 1
    carried = [o for o in world.store.outbox if o.get("kind") == "forge_delivery"]
    assert len(carried) == 1
    assert carried[0]["delivery"]["head"] == HEAD and carried[0]["delivery"]["author"] == "octocat"
    # And the same delivery again (GitHub's redelivery) answers duplicate and writes nothing
    before = world.store.snapshot()
    again = receive(world, pull_request())
    assert again.status == "duplicate"
    assert world.store.snapshot() == before


def test_another_delivery_id_is_another_record(world: World) -> None:
    receive(world, pull_request())
    second = receive(world, pull_request("synchronize"), delivery="another-delivery")
    assert second.status == "accepted"
    assert len([o for o in world.store.outbox if o.get("kind") == "forge_delivery"]) == 2


# ---- ignored and malformed ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "body", "code"),
    [
        ("ping", json.dumps({"zen": "hi", "hook_id": 1}).encode(), "WEBHOOK_PING"),
        ("issues", json.dumps({"action": "opened"}).encode(), "WEBHOOK_EVENT_IGNORED"),
        ("pull_request", pull_request("closed"), "WEBHOOK_EVENT_IGNORED"),
        ("pull_request", pull_request(repository={"full_name": "acme/other"}), "WEBHOOK_REPOSITORY_UNKNOWN"),
        ("pull_request", pull_request(installation={"id": 99}), "WEBHOOK_REPOSITORY_UNKNOWN"),
    ],
    ids=["ping", "unknown-event", "unknown-action", "unknown-repository", "other-installation"],
)
def test_what_sentinel_does_not_act_on_is_ignored_with_a_code(
    world: World, event: str, body: bytes, code: str
) -> None:
    before = world.store.snapshot()
    answer = receive(world, body, event=event)
    assert (answer.status, answer.code) == ("ignored", code)
    assert world.store.snapshot() == before


@pytest.mark.parametrize(
    ("event", "delivery", "body", "code"),
    [
        ("pull_request", "d1", b"{not json", "WEBHOOK_MALFORMED"),
        ("pull_request", "d1", b"[1, 2]", "WEBHOOK_MALFORMED"),
        ("pull_request", "d1", b"\xff\xfe", "WEBHOOK_MALFORMED"),
        (None, "d1", pull_request(), "WEBHOOK_MALFORMED"),
        ("pull_request", None, pull_request(), "WEBHOOK_MALFORMED"),
        ("pull_request", "d/1", pull_request(), "WEBHOOK_MALFORMED"),
        ("pull_request", "d1", pull_request(pull_request={"number": 5}), "WEBHOOK_PAYLOAD_INVALID"),
        ("pull_request", "d1", pull_request(installation={}), "WEBHOOK_PAYLOAD_INVALID"),
        ("pull_request", "d1", pull_request(repository={"full_name": "no slash"}), "WEBHOOK_PAYLOAD_INVALID"),
        (
            "pull_request",
            "d1",
            pull_request(pull_request={"number": 5, "head": {"sha": "main"}, "base": {"sha": BASE_SHA}}),
            "WEBHOOK_PAYLOAD_INVALID",
        ),
        ("check_run", "d1", json.dumps({"action": "rerequested"}).encode(), "WEBHOOK_PAYLOAD_INVALID"),
    ],
    ids=[
        "not-json",
        "not-object",
        "not-utf8",
        "no-event",
        "no-delivery",
        "bad-delivery",
        "no-commits",
        "no-installation",
        "bad-repository",
        "branch-not-sha",
        "check-run-empty",
    ],
)
def test_malformed_deliveries_are_refused_with_a_code_and_nothing_is_recorded(
    world: World, event: str | None, delivery: str | None, body: bytes, code: str
) -> None:
    before = world.store.snapshot()
    with pytest.raises(Refusal) as refused:
        receive(world, body, event=event, delivery=delivery)
    assert refused.value.code == code
    assert world.store.snapshot() == before


def test_a_check_run_for_no_candidate_of_the_project_is_ignored(world: World) -> None:
    body = json.dumps(
        {
            "action": "rerequested",
            "check_run": {"external_id": "cand_99999999", "head_sha": HEAD},
            "repository": {"full_name": REPO},
            "installation": {"id": INSTALLATION},
        }
    ).encode()
    answer = receive(world, body, event="check_run")
    assert (answer.status, answer.code) == ("ignored", "WEBHOOK_CHECK_UNKNOWN")


# ---- the repository index -------------------------------------------------------------------------------


def test_the_configuration_claims_its_repository_and_a_second_project_is_refused(world: World) -> None:
    # Given the project's configuration claimed acme/payments from installation 42
    assert world.store.forge_owner(forge_index_key(INSTALLATION, REPO)) == PROJECT
    # When another project's admin configures the same repository (any letter case)
    world.gate.create_project("other")
    for policy in ("unit-tests", "lint"):
        world.gate.put_policy(
            "other", policy, ADMIN, world.gate.chain.project(PROJECT)[1].policies()[policy][1]
        )
    other = dict(
        FORGE_CONFIG,
        github=dict(GITHUB, repositories=[dict(GITHUB["repositories"][0], repository="ACME/Payments")]),
    )
    before = world.store.load(StreamRef("other"))
    with pytest.raises(Refusal) as refused:
        world.gate.put_config("other", ADMIN, ProjectConfig.model_validate(other), None)
    # Then it is refused and the other project's chain is unchanged; the index still names the first
    assert refused.value.code == "FORGE_REPOSITORY_CLAIMED"
    after = world.store.load(StreamRef("other"))
    assert before is not None and after is not None and after.seq == before.seq
    assert world.store.forge_owner(forge_index_key(INSTALLATION, "acme/payments")) == PROJECT
    # And the first project may write its configuration again
    world.gate.put_config(PROJECT, ADMIN, ProjectConfig.model_validate(FORGE_CONFIG), "1")


def test_a_check_run_rerequest_goes_straight_to_the_check_publisher(world: World) -> None:
    # Given a candidate the forge created for the head
    from sentinel_domain.models import CandidateRequest

    body = {"subject": "payments", "base_revision": BASE_SHA, "revision": HEAD, "environment": "staging"}
    request = CandidateRequest.model_validate({**body, "change": {"files": ["a.py"]}})
    cid = world.gate.create_candidate(PROJECT, CI, request, None).candidate_id
    delivery = json.dumps(
        {
            "action": "rerequested",
            "check_run": {"external_id": cid, "head_sha": HEAD},
            "repository": {"full_name": REPO},
            "installation": {"id": INSTALLATION},
        }
    ).encode()
    written = len(world.store.outbox)
    # When GitHub asks to re-run its check
    answer = receive(world, delivery, event="check_run", delivery="rerun-1")
    # Then it is recorded, and its outbox item asks the publisher for that candidate's check, not the worker
    assert answer.status == "accepted"
    new = world.store.outbox[written:]
    kinds = [(o["kind"], o.get("candidate_id")) for o in new if o["kind"].startswith("forge")]
    assert kinds == [("forge_check", cid)]
