"""What the authorizer and the operator need of a principals store, whichever holds it (DynamoDB in AWS, the
embedded SQLite database locally): the two adapters answer the same calls with the same rules."""

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol


class PrincipalReader(Protocol):
    """The authorizer's side: a token names a live principal, or nobody."""

    def authenticate(self, token: str, key: bytes, now: datetime) -> dict[str, Any] | None: ...


class PrincipalWriter(Protocol):
    """The operator's side. Tokens are returned once and stored only as their HMAC under `key`."""

    def get(self, principal_id: str) -> dict[str, Any] | None: ...

    def principals(self) -> list[dict[str, Any]]: ...

    def add(
        self,
        principal_id: str,
        kind: str,
        sponsor: str | None,
        roles: Mapping[str, Sequence[str]],
        ttl_seconds: int | None,
        key: bytes,
        now: datetime,
    ) -> str: ...

    def rotate(self, principal_id: str, ttl_seconds: int | None, key: bytes, now: datetime) -> str: ...

    def revoke(self, principal_id: str, compromised: bool, now: datetime) -> dict[str, Any]: ...
