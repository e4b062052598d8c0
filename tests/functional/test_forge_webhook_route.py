"""The webhook route through the emulated gateway: anonymous (no bearer token, no authorizer), the body
bounded before it is read, the signature before the JSON, and each answer's status and code."""

import json
from typing import Any

import pytest
from unit.test_forge_webhook_receive import FORGE_CONFIG, SECRET, pull_request, sign

from sentinel_gateway.gateway import LocalGateway
from sentinel_service.http.routes import WEBHOOK_BODY, route_for
from support.world import World

PATH = "/v1/forge/github/webhook"


class Hook:
    def __init__(self) -> None:
        self.world = World(config=FORGE_CONFIG)
        self.world.services._webhook_secret = SECRET

        def no_authorizer(_event: dict[str, Any], _context: Any) -> dict[str, Any]:
            raise AssertionError("the webhook route must never reach the authorizer")

        self.gateway = LocalGateway(lambda: self.world.services, no_authorizer)

    def post(
        self,
        body: bytes,
        signature: str | None = "sign",
        event: str = "pull_request",
        delivery: str = "d-1",
        extra: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        headers = {"content-type": "application/json", "x-github-event": event, "x-github-delivery": delivery}
        if signature is not None:
            headers["x-hub-signature-256"] = sign(body) if signature == "sign" else signature
        headers.update(extra or {})
        status, _headers, out = self.gateway.invoke("POST", PATH, headers, body)
        return status, json.loads(out) if out else {}


@pytest.fixture
def hook() -> Hook:
    return Hook()


def test_the_route_is_public_and_served_by_the_forge_function() -> None:
    route = route_for("POST", PATH)
    assert route is not None and route.public and route.function == "forge"
    assert route.body_limit == WEBHOOK_BODY


def test_a_signed_delivery_is_accepted_and_a_replay_is_a_duplicate(hook: Hook) -> None:
    status, body = hook.post(pull_request())
    assert (status, body["status"], body["project"]) == (202, "accepted", "demo")
    before = hook.world.store.snapshot()
    status, body = hook.post(pull_request())
    assert (status, body["status"]) == (200, "duplicate")
    assert hook.world.store.snapshot() == before


@pytest.mark.parametrize(
    "signature", [None, "sha256=" + "0" * 64, sign(b"other")], ids=["missing", "zeros", "other"]
)
def test_an_unsigned_or_wrongly_signed_delivery_is_refused_with_401(
    hook: Hook, signature: str | None
) -> None:
    before = hook.world.store.snapshot()
    status, body = hook.post(pull_request(), signature=signature)
    assert (status, body["code"]) == (401, "WEBHOOK_SIGNATURE_INVALID")
    assert hook.world.store.snapshot() == before


def test_an_oversized_delivery_is_refused_before_anything_is_read(hook: Hook) -> None:
    big = b'{"pad": "' + b"x" * WEBHOOK_BODY + b'"}'
    before = hook.world.store.snapshot()
    status, body = hook.post(big)
    assert (status, body["code"]) == (413, "PAYLOAD_TOO_LARGE")
    assert hook.world.store.snapshot() == before


def test_malformed_json_with_a_good_signature_is_400(hook: Hook) -> None:
    status, body = hook.post(b"{not json")
    assert (status, body["code"]) == (400, "WEBHOOK_MALFORMED")


def test_a_missing_field_is_422(hook: Hook) -> None:
    status, body = hook.post(pull_request(installation={}))
    assert (status, body["code"]) == (422, "WEBHOOK_PAYLOAD_INVALID")


def test_an_unknown_event_is_ignored_with_202_and_a_code(hook: Hook) -> None:
    status, body = hook.post(json.dumps({"action": "created"}).encode(), event="star")
    assert (status, body["status"], body["code"]) == (202, "ignored", "WEBHOOK_EVENT_IGNORED")


def test_a_form_encoded_delivery_is_refused_as_not_json(hook: Hook) -> None:
    status, body = hook.post(b"payload=%7B%7D", extra={"content-type": "application/x-www-form-urlencoded"})
    assert status == 415


def test_a_bearer_token_changes_nothing(hook: Hook) -> None:
    status, body = hook.post(pull_request(), signature=None, extra={"authorization": "Bearer tok-admin"})
    assert (status, body["code"]) == (401, "WEBHOOK_SIGNATURE_INVALID")


def test_without_a_configured_secret_every_delivery_is_refused(hook: Hook) -> None:
    hook.world.services._webhook_secret = None  # the settings name no secret file or ARN
    status, body = hook.post(pull_request())
    assert (status, body["code"]) == (503, "STATE_UNAVAILABLE")


# ---- the acceptance check, against the gateway on loopback ------------------------------------------------


@pytest.fixture
def served(hook: Hook):
    from sentinel_gateway.server import make_server, serve_in_thread

    server = make_server(hook.gateway, "127.0.0.1", 0)
    serve_in_thread(server)
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}"
    server.shutdown()


def test_the_acceptance_check_passes_when_unsigned_deliveries_are_refused(hook: Hook, served: str) -> None:
    from sentinel_acceptance.webhook import unsigned_deliveries_refused

    before = hook.world.store.snapshot()
    assert unsigned_deliveries_refused(served, "/forge/github/webhook") == []
    assert hook.world.store.snapshot() == before


def test_the_acceptance_check_fails_naming_the_route_when_the_signature_is_not_checked(
    hook: Hook, served: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a webhook that believes every delivery (the signature check removed)
    import sentinel_domain.usecases.forge as forge_usecase

    monkeypatch.setattr(forge_usecase, "signature_valid", lambda *_: True)
    from sentinel_acceptance.webhook import unsigned_deliveries_refused

    problems = unsigned_deliveries_refused(served, "/forge/github/webhook")
    # Then every probe is reported (the repository is unknown, so each is "ignored" with 202)
    assert len(problems) == 4 and all("expected 401 WEBHOOK_SIGNATURE_INVALID" in p for p in problems)
