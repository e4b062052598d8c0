"""The rules of principals and tokens, whatever stores them: who may be added with which kind, roles, sponsor
and token lifetime; what a listing may show; when a presented token stands for a live principal; what an
authorizer answers. The DynamoDB directory (`principals`) and the SQLite one (`sqlite_principals`) both apply
these and keep only their storage to themselves. Standard library only."""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from sentinel_domain.identity import IDENT, PROJECT_ID, ROLES_BY_KIND
from sentinel_domain.times import format_time, parse_time
from sentinel_service.adapters.tokens import MAX_TTL_SECONDS, default_ttl_seconds

_IDENT = re.compile(IDENT)
_PROJECT = re.compile(PROJECT_ID)
# What `list`/`get`/`authenticate` may show of a principal: never the token hash.
PUBLIC_FIELDS = (
    "id",
    "kind",
    "sponsor",
    "roles",
    "revoked",
    "compromised",
    "created_at",
    "revoked_at",
    "token_expires_at",
)


class DirectoryUnavailable(Exception):
    """The principals could not be read or written: the caller refuses (fail closed)."""


class PrincipalRefused(Exception):
    """An operator request the rules refuse; `code` is stable, the message is for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class PrincipalReader(Protocol):
    """What the authorizer reads: the principal a token stands for now, or None."""

    def authenticate(self, token: str, key: bytes, now: datetime) -> dict[str, Any] | None: ...


class PrincipalWriter(Protocol):
    """What the operator's acts use to manage principals."""

    def get(self, principal_id: str) -> dict[str, Any] | None: ...

    def principals(self) -> list[dict[str, Any]]: ...

    # `extra_items`: DynamoDB TransactWriteItems entries written in the same transaction as the change (the
    # chain events that record it); a store that joins them otherwise refuses any (see principal_changes).
    def add(
        self,
        principal_id: str,
        kind: str,
        sponsor: str | None,
        roles: Mapping[str, Sequence[str]],
        ttl_seconds: int | None,
        key: bytes,
        now: datetime,
        *,
        extra_items: Sequence[dict[str, Any]] = (),
    ) -> str: ...

    def rotate(
        self,
        principal_id: str,
        ttl_seconds: int | None,
        key: bytes,
        now: datetime,
        *,
        extra_items: Sequence[dict[str, Any]] = (),
    ) -> str: ...

    def revoke(
        self,
        principal_id: str,
        compromised: bool,
        now: datetime,
        *,
        extra_items: Sequence[dict[str, Any]] = (),
    ) -> dict[str, Any]: ...


# ---- views ------------------------------------------------------------------------------------------------


def public_view(plain: Mapping[str, Any]) -> dict[str, Any]:
    """The public fields of a stored principal (plain values), normalised; never its token hash."""
    view = {field: plain.get(field) for field in PUBLIC_FIELDS}
    view["sponsor"] = view["sponsor"] or None
    view["revoked"] = bool(view["revoked"])
    view["compromised"] = bool(view["compromised"])
    view["roles"] = view["roles"] or {}
    return view


# ---- adding, rotating, revoking ---------------------------------------------------------------------------


def check_addition(
    principal_id: str,
    kind: str,
    sponsor: str | None,
    roles: Mapping[str, Sequence[str]],
    ttl_seconds: int | None,
) -> tuple[dict[str, list[str]], int]:
    """(clean roles, token lifetime) of an addition the rules accept; PrincipalRefused otherwise. Whether the
    id is free and the sponsor a live human are the store's to check, inside its write."""
    if not isinstance(principal_id, str) or not _IDENT.fullmatch(principal_id):
        raise PrincipalRefused("INVALID_ID", f"a principal id must match {IDENT}")
    if kind not in ROLES_BY_KIND:
        raise PrincipalRefused("INVALID_KIND", f"kind must be one of {sorted(ROLES_BY_KIND)}")
    clean_roles = check_roles(kind, roles)
    ttl = check_ttl(kind, ttl_seconds)
    if sponsor is not None and kind == "human":
        raise PrincipalRefused("SPONSOR_NOT_ALLOWED", "a human principal has no sponsor")
    return clean_roles, ttl


def sponsor_checkable(sponsor: object) -> bool:
    """Only an id that could exist is looked up."""
    return isinstance(sponsor, str) and bool(_IDENT.fullmatch(sponsor))


def check_sponsor(sponsor: str, view: Mapping[str, Any] | None) -> None:
    """A sponsor is an existing, unrevoked human."""
    if view is None or view["kind"] != "human" or view["revoked"]:
        raise sponsor_invalid(sponsor)


def sponsor_invalid(sponsor: str | None) -> PrincipalRefused:
    return PrincipalRefused("SPONSOR_INVALID", f"sponsor {sponsor} is not an existing, unrevoked human")


def principal_exists(principal_id: str) -> PrincipalRefused:
    return PrincipalRefused("PRINCIPAL_EXISTS", f"principal {principal_id} exists (ids are never reused)")


def not_found(principal_id: str) -> PrincipalRefused:
    return PrincipalRefused("NOT_FOUND", f"no principal {principal_id}")


def changed_meanwhile(principal_id: str | None = None) -> PrincipalRefused:
    if principal_id is None:
        return PrincipalRefused("CONFLICT", "the principals table changed meanwhile; try again")
    return PrincipalRefused("CONFLICT", f"principal {principal_id} changed meanwhile; try again")


def check_rotation(principal_id: str, view: Mapping[str, Any], ttl_seconds: int | None) -> int:
    """The new token's lifetime; a revoked principal is never rotated back to life."""
    if view["revoked"]:
        raise PrincipalRefused("PRINCIPAL_REVOKED", f"principal {principal_id} is revoked")
    return check_ttl(view["kind"], ttl_seconds)


def revocation(view: Mapping[str, Any], compromised: bool, now: datetime) -> tuple[bool, str]:
    """(compromised, revoked_at): revoking again may only add `compromised`, and keeps the first time."""
    return bool(compromised) or bool(view["compromised"]), view["revoked_at"] or format_time(now)


def expiry(now: datetime, ttl_seconds: int) -> str:
    return format_time(now + timedelta(seconds=ttl_seconds))


def check_ttl(kind: str, ttl_seconds: int | None) -> int:
    if ttl_seconds is None:
        return default_ttl_seconds(kind)
    if (
        isinstance(ttl_seconds, bool)
        or not isinstance(ttl_seconds, int)
        or not 0 < ttl_seconds <= MAX_TTL_SECONDS
    ):
        raise PrincipalRefused("INVALID_TTL", f"ttl must be between 1 second and {MAX_TTL_SECONDS} seconds")
    return ttl_seconds


def check_roles(kind: str, roles: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    if not isinstance(roles, Mapping) or not roles:
        raise PrincipalRefused("NO_ROLES", "a principal needs at least one role in one project")
    allowed = ROLES_BY_KIND[kind]
    clean: dict[str, list[str]] = {}
    for project, names in roles.items():
        if not isinstance(project, str) or not _PROJECT.fullmatch(project):
            raise PrincipalRefused("INVALID_PROJECT", f"not a project id: {project!r}")
        if isinstance(names, str) or not names:
            raise PrincipalRefused("NO_ROLES", f"no roles given in project {project}")
        for role in names:
            if role not in allowed:
                raise PrincipalRefused(
                    "ROLE_NOT_ALLOWED",
                    f"a principal of kind {kind} may not hold role {role!r} (allowed: {sorted(allowed)})",
                )
        clean[project] = sorted(set(names))
    return clean


# ---- authenticating ---------------------------------------------------------------------------------------


def token_expired(expires_at: str, now: datetime) -> bool:
    """Expired at its expiry instant, not one tick later. A malformed expiry is DirectoryUnavailable."""
    try:
        return now >= parse_time(expires_at)
    except (TypeError, ValueError) as error:
        raise DirectoryUnavailable("a token item is malformed") from error


def live_principal(view: dict[str, Any], current_hmac: str, hashed: str) -> dict[str, Any] | None:
    """The principal a token's hash names, if it is live and this is its current token."""
    if view["revoked"] or view["kind"] not in ROLES_BY_KIND:
        return None
    # A token row left behind by an interrupted rotation must not outlive its replacement.
    if not hmac.compare_digest(current_hmac, hashed):
        return None
    return view


def sponsor_holds(view: Mapping[str, Any] | None) -> bool:
    """A sponsored principal acts for its sponsor: it stands only while its sponsor is an existing, unrevoked
    human (DOMAIN.md rule 26). A sponsor whose own token merely expired still holds: expiry is not
    revocation, and a human's 12-hour token would otherwise stop every agent overnight."""
    return view is not None and view["kind"] == "human" and not view["revoked"]


def authorizer_response(
    event: Mapping[str, Any], authenticate: Callable[[str], dict[str, Any] | None]
) -> dict[str, Any]:
    """An HTTP API (payload 2.0, simple responses) authorizer answer for one request event.

    Anything short of a valid `Bearer <token>` naming a live principal is `isAuthorized: false`; the caller
    turns exceptions into the same refusal.
    """
    token = bearer_token(event)
    if token is None:
        return {"isAuthorized": False}
    principal = authenticate(token)
    if principal is None:
        return {"isAuthorized": False}
    return {
        "isAuthorized": True,
        "context": {
            "principal_id": principal["id"],
            "kind": principal["kind"],
            "sponsor": principal["sponsor"] or "",
            "roles": json.dumps(principal["roles"], sort_keys=True, separators=(",", ":")),
        },
    }


def bearer_token(event: Mapping[str, Any]) -> str | None:
    headers = event.get("headers") or {}
    value = None
    if isinstance(headers, Mapping):
        # Payload 2.0 lower-cases header names; tolerate a caller that did not.
        for name, header in headers.items():
            if isinstance(name, str) and name.lower() == "authorization":
                value = header
                break
    if value is None:
        sources = event.get("identitySource") or []
        if isinstance(sources, list) and len(sources) == 1:
            value = sources[0]
    if not isinstance(value, str):
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    return token or None
