"""The webhook and the forge worker against the fake GitHub on loopback (support.fake_github: every request
checked against GitHub's REST description, webhooks signed as GitHub signs them and valid against its webhook
description): a pull request opened on GitHub becomes a candidate attested from GitHub's own compare and
contents, through the gateway and the worker, with GitHub's author as the requester of record."""

from typing import Any

from sentinel_gateway.gateway import LocalGateway
from sentinel_gateway.server import make_server, serve_in_thread
from sentinel_service.forge_worker import run_forge_delivery
from support.world import ADMIN, CONFIG, PROJECT, World

REPO = "acme/payments"
INSTALLATION = 42
OPENAPI_PATH = "api/openapi.json"
DOC = '{"openapi": "3.0.3", "info": {"title": "p", "version": "1"}, "paths": {%s}}'
OP = '"/%s": {"get": {"operationId": "%s", "responses": {"200": {"description": "ok"}}}}'


class Principals:
    def get(self, principal_id: str) -> dict[str, Any] | None:
        roles = {PROJECT: ["publisher", "requester"]}
        found = {"id": principal_id, "kind": "ci", "sponsor": None, "roles": roles, "revoked": False}
        return found if principal_id == "gh-app" else None


def config(app_id: int) -> dict[str, Any]:
    github = {
        "app_id": app_id,
        "installation_id": INSTALLATION,
        "app_principal": "gh-app",
        "repositories": [
            {
                "repository": REPO,
                "subject": "payments",
                "environments": ["staging"],
                "openapi": {"payments-openapi": OPENAPI_PATH},
            }
        ],
        "logins": {"octocat": "rita-reviewer"},
    }
    rules = [
        *CONFIG["derivation_rules"],
        {"openapi": "payments-openapi", "policy_id": "unit-tests", "per": "operation"},
    ]
    return {
        **CONFIG,
        "derivation_rules": rules,
        "change_context_publishers": ["ci-bot", "gh-app"],
        "github": github,
    }


def test_a_pull_request_opened_on_github_becomes_a_candidate_attested_by_github(fake_github: Any) -> None:
    # Given a repository on the fake GitHub with a change to the service and to its OpenAPI document
    fake = fake_github
    fake.install(INSTALLATION, REPO)
    base = fake.commit(REPO, {"services/payments/api.py": "a", OPENAPI_PATH: DOC % (OP % ("charges", "c"))})
    head = fake.commit(
        REPO,
        {
            "services/payments/api.py": "b",
            OPENAPI_PATH: DOC % ",".join([OP % ("charges", "c"), OP % ("refunds", "r")]),
        },
        parent=base,
    )
    fake.open_pull(REPO, 5, base, head)
    # And a gate whose project takes that repository, the app's principal in its directory, the fake's secret
    world = World(config=config(fake.app_id))
    world.services._forge_builder = lambda github: fake.forge(github.installation_id)
    world.services._admin = Principals()
    world.services._webhook_secret = fake.webhook_secret.encode()
    server = make_server(LocalGateway(lambda: world.services), "127.0.0.1", 0)
    serve_in_thread(server)
    host, port = server.server_address[:2]
    try:
        # When GitHub delivers pull_request.opened
        hook = f"http://{host}:{port}/v1/forge/github/webhook"
        answer = fake.deliver(hook, "pull_request", base=base, head=head, number=5, author="octocat")
        assert answer.status == 202 and answer.json()["status"] == "accepted", answer.body
        # And it delivers the same again: a duplicate, nothing written
        again = fake.deliver(
            hook,
            "pull_request",
            base=base,
            head=head,
            number=5,
            author="octocat",
            delivery_id=answer.delivery_id,
        )
        assert again.status == 200 and again.json()["status"] == "duplicate"
        # And a delivery signed with another secret is refused
        forged = fake.deliver(hook, "pull_request", base=base, head=head, secret="not-the-apps-secret")
        assert forged.status == 401
    finally:
        server.shutdown()
    # When the worker takes the recorded delivery from the outbox
    (entry,) = [o for o in world.store.outbox if o.get("kind") == "forge_delivery"]
    done = run_forge_delivery(world.services, PROJECT, entry["delivery"])
    # Then the candidate for the head exists, attested from GitHub's compare and contents
    (cid,) = done.created
    view = world.gate.get_candidate(PROJECT, cid, ADMIN).as_json()
    assert (view["base_revision"], view["revision"], view["change_context"]) == (base, head, "attested")
    scopes = {o["scope"] for o in view["obligations"]}
    assert {"payments-api", "payments-openapi/GET /refunds"} <= scopes
    # And GitHub's author is the requester of record
    created = world.gate.chain.candidate(PROJECT, cid)[1].candidate
    assert created["forge"]["requester_of_record"] == {"login": "octocat", "principal": "rita-reviewer"}
    # And every request Sentinel made was one GitHub documents (the fixture fails on any violation)
    assert any("/compare/" in path for _method, path in fake.requests)
