"""What one request carries besides its body: the caller (from the authorizer, never from a body) and
headers."""

import json
from dataclasses import dataclass
from typing import Any

from sentinel_domain.models import Actor


@dataclass(frozen=True)
class Call:
    headers: dict[str, str]
    authorizer: dict[str, Any] | None

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> "Call":
        headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
        context = ((event.get("requestContext") or {}).get("authorizer") or {}).get("lambda")
        return cls(headers, context)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def idempotency_key(self) -> str | None:
        return self.header("idempotency-key")

    def actor(self, project: str | None) -> Actor:
        """The caller with its roles in `project`. No authorizer context means no identity at all."""
        ctx = self.authorizer or {}
        roles_map = ctx.get("roles") or "{}"
        if isinstance(roles_map, str):
            roles_map = json.loads(roles_map)
        roles = tuple(roles_map.get(project, ())) if project else ()
        return Actor(
            id=str(ctx.get("principal_id", "")),
            kind=ctx.get("kind", "agent"),
            sponsor=ctx.get("sponsor") or None,
            roles=roles,
        )

    def roles_map(self) -> dict[str, list[str]]:
        roles = (self.authorizer or {}).get("roles") or "{}"
        return json.loads(roles) if isinstance(roles, str) else dict(roles)
