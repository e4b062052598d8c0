"""Handlers in-process behind the emulated gateway, over the in-memory store, with a token table fake."""

import json
from typing import Any

import pytest

from sentinel_gateway.gateway import LocalGateway
from support.world import ADMIN, AUDITOR, CI, OUTSIDER, REQUESTER, REVIEWER, REVIEWER_2, UNTRUSTED_CI, World

ACTORS = {
    "admin": ADMIN,
    "requester": REQUESTER,
    "reviewer": REVIEWER,
    "reviewer2": REVIEWER_2,
    "ci": CI,
    "untrusted-ci": UNTRUSTED_CI,
    "auditor": AUDITOR,
    "outsider": OUTSIDER,
}


def fake_authorizer(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    """Tokens are `tok-<name>`; the real authorizer is tested on its own against the principals table."""
    header = event["headers"].get("authorization", "")
    name = header.removeprefix("Bearer tok-")
    actor = ACTORS.get(name) if header.startswith("Bearer tok-") else None
    if actor is None:
        return {"isAuthorized": False}
    roles = {"demo": list(actor.roles)} if actor.roles else {}
    return {
        "isAuthorized": True,
        "context": {
            "principal_id": actor.id,
            "kind": actor.kind,
            "sponsor": actor.sponsor or "",
            "roles": json.dumps(roles),
        },
    }


class Api:
    def __init__(self, world: World) -> None:
        self.world = world
        self.gateway = LocalGateway(lambda: world.services, fake_authorizer)

    def call(
        self,
        method: str,
        path: str,
        as_: str | None = "requester",
        body: Any = None,
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
        raw: str | None = None,
    ):
        h = dict(headers or {})
        if as_:
            h["authorization"] = f"Bearer tok-{as_}"
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        status, out_headers, out = self.gateway.invoke(method, path, h, data, query)
        return status, {k.lower(): v for k, v in out_headers.items()}, (json.loads(out) if out else None)


@pytest.fixture
def api():
    return Api(World())
