"""The principals table: who may call, with which roles, under which token hash.

Two item shapes share one string hash key `pk`:
  PRINCIPAL#{id}  id, kind, sponsor, roles (project -> [role]), revoked, compromised, created_at,
                  revoked_at, token_hmac, token_expires_at
  TOKEN#{hmac}    principal_id, expires_at
Only the HMAC of a token is ever stored. `PrincipalDirectory` is what the authorizer reads (read only, fails
closed); `PrincipalAdmin` is the operator's CLI writing with the operator's own credentials (no function may
write this table).
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sentinel_domain.identity import IDENT, PROJECT_ID, ROLES_BY_KIND
from sentinel_domain.times import format_time, parse_time
from sentinel_service.adapters.tables import PK  # the table's only key attribute (string hash key)
from sentinel_service.adapters.tokens import (
    MAX_TTL_SECONDS,
    default_ttl_seconds,
    new_token,
    token_hmac,
    well_formed,
)

PRINCIPAL_PREFIX = "PRINCIPAL#"
TOKEN_PREFIX = "TOKEN#"

_IDENT = re.compile(IDENT)
_PROJECT = re.compile(PROJECT_ID)
# What `list`/`get`/`authenticate` may show of a principal item: never the token hash.
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
    """The principals table could not be read or written: the caller refuses (fail closed)."""


class PrincipalRefused(Exception):
    """An operator request the rules refuse; `code` is stable, the message is for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def principal_key(principal_id: str) -> dict[str, Any]:
    return {PK: {"S": PRINCIPAL_PREFIX + principal_id}}


def token_key(hashed: str) -> dict[str, Any]:
    return {PK: {"S": TOKEN_PREFIX + hashed}}


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _roles_attribute(roles: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    return {"M": {project: {"L": [_s(role) for role in names]} for project, names in roles.items()}}


def _plain(item: Mapping[str, Any]) -> dict[str, Any]:
    """Only the attribute types this table uses: S, BOOL, NULL, M of L of S."""
    out: dict[str, Any] = {}
    for name, attribute in item.items():
        if "S" in attribute:
            out[name] = attribute["S"]
        elif "BOOL" in attribute:
            out[name] = attribute["BOOL"]
        elif "NULL" in attribute:
            out[name] = None
        elif "M" in attribute:
            out[name] = {k: [v["S"] for v in inner["L"]] for k, inner in attribute["M"].items()}
        else:
            raise ValueError(f"unexpected attribute type in {name}")
    return out


def public_view(item: Mapping[str, Any]) -> dict[str, Any]:
    plain = _plain(item)
    view = {field: plain.get(field) for field in PUBLIC_FIELDS}
    view["sponsor"] = view["sponsor"] or None
    view["revoked"] = bool(view["revoked"])
    view["compromised"] = bool(view["compromised"])
    view["roles"] = view["roles"] or {}
    return view


def _store_error(error: Exception) -> DirectoryUnavailable:
    code = error.response.get("Error", {}).get("Code", "") if isinstance(error, ClientError) else ""
    return DirectoryUnavailable(f"principals table unavailable: {type(error).__name__} {code}".strip())


class PrincipalDirectory:
    """Read side, used by the authorizer. Its IAM role may only GetItem on the principals table."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def _get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        try:
            answer = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        except (ClientError, BotoCoreError) as error:
            raise _store_error(error) from error
        item: dict[str, Any] | None = answer.get("Item")
        return item

    def authenticate(self, token: str, key: bytes, now: datetime) -> dict[str, Any] | None:
        """The principal a token stands for, or None if it stands for nobody now.

        Raises DirectoryUnavailable when the table cannot answer; the caller refuses in that case too.
        """
        if not well_formed(token):
            return None  # no store read for garbage
        hashed = token_hmac(key, token)
        token_item = self._get(token_key(hashed))
        if token_item is None:
            return None
        try:
            expires_at = parse_time(token_item["expires_at"]["S"])
            principal_id = token_item["principal_id"]["S"]
        except (KeyError, ValueError) as error:
            raise DirectoryUnavailable("a token item is malformed") from error
        if now >= expires_at:
            return None  # expired at its expiry instant, not one tick later
        principal_item = self._get(principal_key(principal_id))
        if principal_item is None:
            return None
        try:
            principal = public_view(principal_item)
            current = principal_item.get("token_hmac", {}).get("S", "")
        except (KeyError, ValueError, TypeError) as error:
            raise DirectoryUnavailable("a principal item is malformed") from error
        if principal["revoked"] or principal["kind"] not in ROLES_BY_KIND:
            return None
        # A token item left behind by an interrupted rotation must not outlive its replacement.
        if not hmac.compare_digest(current, hashed):
            return None
        return principal


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


class PrincipalAdmin:
    """Write side, for the operator's CLI only.

    `extra_items` lets the caller put further TransactWriteItems entries (for example the audit append on
    each project's chain) into the same transaction as the change they record.
    """

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    # -- reads -----------------------------------------------------------------------------------

    def _get_item(self, principal_id: str) -> dict[str, Any] | None:
        try:
            answer = self._client.get_item(
                TableName=self._table, Key=principal_key(principal_id), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as error:
            raise _store_error(error) from error
        item: dict[str, Any] | None = answer.get("Item")
        return item

    def get(self, principal_id: str) -> dict[str, Any] | None:
        item = self._get_item(principal_id)
        return None if item is None else public_view(item)

    def principals(self) -> list[dict[str, Any]]:
        principals: list[dict[str, Any]] = []
        request: dict[str, Any] = {
            "TableName": self._table,
            "ConsistentRead": True,
            "FilterExpression": "begins_with(#pk, :prefix)",
            "ExpressionAttributeNames": {"#pk": PK},
            "ExpressionAttributeValues": {":prefix": _s(PRINCIPAL_PREFIX)},
        }
        try:
            while True:
                page = self._client.scan(**request)
                principals.extend(public_view(item) for item in page.get("Items", []))
                if "LastEvaluatedKey" not in page:
                    break
                request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        except (ClientError, BotoCoreError) as error:
            raise _store_error(error) from error
        return sorted(principals, key=lambda principal: principal["id"])

    # -- writes ----------------------------------------------------------------------------------

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
    ) -> str:
        """Create a principal and return its first token (the only time it exists in clear)."""
        if not isinstance(principal_id, str) or not _IDENT.fullmatch(principal_id):
            raise PrincipalRefused("INVALID_ID", f"a principal id must match {IDENT}")
        if kind not in ROLES_BY_KIND:
            raise PrincipalRefused("INVALID_KIND", f"kind must be one of {sorted(ROLES_BY_KIND)}")
        clean_roles = _check_roles(kind, roles)
        ttl = _check_ttl(kind, ttl_seconds)
        if sponsor is not None and kind == "human":
            raise PrincipalRefused("SPONSOR_NOT_ALLOWED", "a human principal has no sponsor")
        if sponsor is not None:
            self._check_sponsor(sponsor)
        if self._get_item(principal_id) is not None:
            raise PrincipalRefused(
                "PRINCIPAL_EXISTS", f"principal {principal_id} exists (ids are never reused)"
            )

        token = new_token()
        hashed = token_hmac(key, token)
        created_at = format_time(now)
        expires_at = _expiry(now, ttl)
        principal = {
            PK: _s(PRINCIPAL_PREFIX + principal_id),
            "id": _s(principal_id),
            "kind": _s(kind),
            "sponsor": _s(sponsor) if sponsor is not None else {"NULL": True},
            "roles": _roles_attribute(clean_roles),
            "revoked": {"BOOL": False},
            "compromised": {"BOOL": False},
            "created_at": _s(created_at),
            "revoked_at": {"NULL": True},
            "token_hmac": _s(hashed),
            "token_expires_at": _s(expires_at),
        }
        items: list[dict[str, Any]] = [
            {"Put": self._put_new(principal)},
            {"Put": self._put_new(_token_item(hashed, principal_id, expires_at))},
        ]
        if sponsor is not None:
            # Checked again inside the transaction: a sponsor revoked meanwhile must not slip through.
            items.append(
                {
                    "ConditionCheck": {
                        "TableName": self._table,
                        "Key": principal_key(sponsor),
                        "ConditionExpression": "attribute_exists(#pk) AND #kind = :human AND #revoked = :no",
                        "ExpressionAttributeNames": {"#pk": PK, "#kind": "kind", "#revoked": "revoked"},
                        "ExpressionAttributeValues": {":human": _s("human"), ":no": {"BOOL": False}},
                    }
                }
            )
        failed = self._transact(items + list(extra_items))
        if failed == 0:
            raise PrincipalRefused(
                "PRINCIPAL_EXISTS", f"principal {principal_id} exists (ids are never reused)"
            )
        if failed == 2:
            raise PrincipalRefused(
                "SPONSOR_INVALID", f"sponsor {sponsor} is not an existing, unrevoked human"
            )
        if failed is not None:
            raise PrincipalRefused("CONFLICT", "the principals table changed meanwhile; try again")
        return token

    def rotate(
        self,
        principal_id: str,
        ttl_seconds: int | None,
        key: bytes,
        now: datetime,
        *,
        extra_items: Sequence[dict[str, Any]] = (),
    ) -> str:
        """Issue a new token and void the old one, in one transaction."""
        item = self._existing(principal_id)
        view = public_view(item)
        if view["revoked"]:
            raise PrincipalRefused("PRINCIPAL_REVOKED", f"principal {principal_id} is revoked")
        ttl = _check_ttl(view["kind"], ttl_seconds)
        old = item.get("token_hmac", {}).get("S")
        token = new_token()
        hashed = token_hmac(key, token)
        expires_at = _expiry(now, ttl)
        update: dict[str, Any] = {
            "TableName": self._table,
            "Key": principal_key(principal_id),
            "UpdateExpression": "SET #hmac = :new, #expires = :expires, #rotated = :now",
            "ConditionExpression": "#revoked = :no",
            "ExpressionAttributeNames": {
                "#hmac": "token_hmac",
                "#expires": "token_expires_at",
                "#rotated": "rotated_at",
                "#revoked": "revoked",
            },
            "ExpressionAttributeValues": {
                ":new": _s(hashed),
                ":expires": _s(expires_at),
                ":now": _s(format_time(now)),
                ":no": {"BOOL": False},
            },
        }
        # Optimistic: two rotations racing must not both win and leave two live tokens.
        if old:
            update["ConditionExpression"] += " AND #hmac = :old"
            update["ExpressionAttributeValues"][":old"] = _s(old)
        else:
            update["ConditionExpression"] += " AND attribute_not_exists(#hmac)"
        items: list[dict[str, Any]] = [
            {"Update": update},
            {"Put": self._put_new(_token_item(hashed, principal_id, expires_at))},
        ]
        if old:
            items.append({"Delete": {"TableName": self._table, "Key": token_key(old)}})
        if self._transact(items + list(extra_items)) is not None:
            raise PrincipalRefused("CONFLICT", f"principal {principal_id} changed meanwhile; try again")
        return token

    def revoke(
        self,
        principal_id: str,
        compromised: bool,
        now: datetime,
        *,
        extra_items: Sequence[dict[str, Any]] = (),
    ) -> dict[str, Any]:
        """Revoke for good (ids are never reused). Revoking again may only add `compromised`."""
        item = self._existing(principal_id)
        view = public_view(item)
        old = item.get("token_hmac", {}).get("S")
        compromised = bool(compromised) or view["compromised"]
        revoked_at = view["revoked_at"] or format_time(now)
        update: dict[str, Any] = {
            "TableName": self._table,
            "Key": principal_key(principal_id),
            "UpdateExpression": "SET #revoked = :yes, #compromised = :compromised, #revoked_at = :at"
            + " REMOVE #hmac",
            "ConditionExpression": "attribute_exists(#pk)",
            "ExpressionAttributeNames": {
                "#pk": PK,
                "#revoked": "revoked",
                "#compromised": "compromised",
                "#revoked_at": "revoked_at",
                "#hmac": "token_hmac",
            },
            "ExpressionAttributeValues": {
                ":yes": {"BOOL": True},
                ":compromised": {"BOOL": compromised},
                ":at": _s(revoked_at),
            },
        }
        if old:
            update["ConditionExpression"] += " AND #hmac = :old"
            update["ExpressionAttributeValues"][":old"] = _s(old)
        else:
            update["ConditionExpression"] += " AND attribute_not_exists(#hmac)"
        items: list[dict[str, Any]] = [{"Update": update}]
        if old:
            items.append({"Delete": {"TableName": self._table, "Key": token_key(old)}})
        if self._transact(items + list(extra_items)) is not None:
            raise PrincipalRefused("CONFLICT", f"principal {principal_id} changed meanwhile; try again")
        return {**view, "revoked": True, "compromised": compromised, "revoked_at": revoked_at}

    # -- internals -------------------------------------------------------------------------------

    def _existing(self, principal_id: str) -> dict[str, Any]:
        item = self._get_item(principal_id) if isinstance(principal_id, str) else None
        if item is None:
            raise PrincipalRefused("NOT_FOUND", f"no principal {principal_id}")
        return item

    def _check_sponsor(self, sponsor: str) -> None:
        item = self._get_item(sponsor) if isinstance(sponsor, str) and _IDENT.fullmatch(sponsor) else None
        view = None if item is None else public_view(item)
        if view is None or view["kind"] != "human" or view["revoked"]:
            raise PrincipalRefused(
                "SPONSOR_INVALID", f"sponsor {sponsor} is not an existing, unrevoked human"
            )

    def _put_new(self, item: dict[str, Any]) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(#pk)",
            "ExpressionAttributeNames": {"#pk": PK},
        }

    def _transact(self, items: list[dict[str, Any]]) -> int | None:
        """Run one transaction; None when it committed, else the index of the first failed condition."""
        try:
            self._client.transact_write_items(TransactItems=items)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise _store_error(error) from error
            reasons = error.response.get("CancellationReasons") or []
            for index, reason in enumerate(reasons):
                if reason.get("Code") == "ConditionalCheckFailed":
                    return index
            if any(reason.get("Code") not in (None, "None") for reason in reasons):
                raise _store_error(error) from error
            return -1
        except BotoCoreError as error:
            raise _store_error(error) from error
        return None


def _token_item(hashed: str, principal_id: str, expires_at: str) -> dict[str, Any]:
    return {
        PK: _s(TOKEN_PREFIX + hashed),
        "principal_id": _s(principal_id),
        "expires_at": _s(expires_at),
        # DynamoDB's TTL sweep removes expired token items eventually; authentication still checks expires_at.
        "ttl_epoch": {"N": str(int(parse_time(expires_at).timestamp()) + 1)},
    }


def _expiry(now: datetime, ttl_seconds: int) -> str:
    return format_time(now + timedelta(seconds=ttl_seconds))


def _check_ttl(kind: str, ttl_seconds: int | None) -> int:
    if ttl_seconds is None:
        return default_ttl_seconds(kind)
    if (
        isinstance(ttl_seconds, bool)
        or not isinstance(ttl_seconds, int)
        or not 0 < ttl_seconds <= MAX_TTL_SECONDS
    ):
        raise PrincipalRefused("INVALID_TTL", f"ttl must be between 1 second and {MAX_TTL_SECONDS} seconds")
    return ttl_seconds


def _check_roles(kind: str, roles: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
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
