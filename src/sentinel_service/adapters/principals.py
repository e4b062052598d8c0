"""The principals table: who may call, with which roles, under which token hash.

Two item shapes share one string hash key `pk`:
  PRINCIPAL#{id}  id, kind, sponsor, roles (project -> [role]), revoked, compromised, created_at,
                  revoked_at, token_hmac, token_expires_at
  TOKEN#{hmac}    principal_id, expires_at
Only the HMAC of a token is ever stored. `PrincipalDirectory` is what the authorizer reads (read only, fails
closed); `PrincipalAdmin` is the operator's CLI writing with the operator's own credentials (no function may
write this table). The rules both apply, whatever stores the principals, are in `principal_rules`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sentinel_domain.times import format_time, parse_time
from sentinel_service.adapters.principal_rules import (
    PUBLIC_FIELDS,
    DirectoryUnavailable,
    PrincipalRefused,
    authorizer_response,
    bearer_token,
    changed_meanwhile,
    check_addition,
    check_rotation,
    check_sponsor,
    expiry,
    live_principal,
    not_found,
    principal_exists,
    revocation,
    sponsor_checkable,
    sponsor_holds,
    sponsor_invalid,
    token_expired,
)
from sentinel_service.adapters.principal_rules import public_view as public_fields
from sentinel_service.adapters.tables import PK  # the table's only key attribute (string hash key)
from sentinel_service.adapters.tokens import new_token, token_hmac, well_formed

__all__ = [
    "PUBLIC_FIELDS",
    "DirectoryUnavailable",
    "PrincipalAdmin",
    "PrincipalDirectory",
    "PrincipalRefused",
    "authorizer_response",
    "bearer_token",
    "public_view",
]

PRINCIPAL_PREFIX = "PRINCIPAL#"
TOKEN_PREFIX = "TOKEN#"


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
    return public_fields(_plain(item))


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
            expires_at = token_item["expires_at"]["S"]
            principal_id = token_item["principal_id"]["S"]
        except KeyError as error:
            raise DirectoryUnavailable("a token item is malformed") from error
        if token_expired(expires_at, now):
            return None
        principal_item = self._get(principal_key(principal_id))
        if principal_item is None:
            return None
        try:
            principal = public_view(principal_item)
            current = principal_item.get("token_hmac", {}).get("S", "")
        except (KeyError, ValueError, TypeError) as error:
            raise DirectoryUnavailable("a principal item is malformed") from error
        live = live_principal(principal, current, hashed)
        if live is None or not live["sponsor"]:
            return live
        # One more strongly consistent read, only for sponsored principals; the authorizer's answer (and so
        # this read) is cached with the first for the same 30 s.
        sponsor_item = self._get(principal_key(live["sponsor"]))
        try:
            sponsor = None if sponsor_item is None else public_view(sponsor_item)
        except (KeyError, ValueError, TypeError) as error:
            raise DirectoryUnavailable("a principal item is malformed") from error
        return live if sponsor_holds(sponsor) else None


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
        clean_roles, ttl = check_addition(principal_id, kind, sponsor, roles, ttl_seconds)
        if sponsor is not None:
            self._check_sponsor(sponsor)
        if self._get_item(principal_id) is not None:
            raise principal_exists(principal_id)

        token = new_token()
        hashed = token_hmac(key, token)
        created_at = format_time(now)
        expires_at = expiry(now, ttl)
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
            raise principal_exists(principal_id)
        if failed == 2 and sponsor is not None:  # index 2 is an extra item when there is no sponsor
            raise sponsor_invalid(sponsor)
        if failed is not None:
            raise changed_meanwhile()
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
        ttl = check_rotation(principal_id, view, ttl_seconds)
        if view["sponsor"]:
            # A token for a principal whose sponsor no longer stands would be refused at every use.
            self._check_sponsor(view["sponsor"])
        old = item.get("token_hmac", {}).get("S")
        token = new_token()
        hashed = token_hmac(key, token)
        expires_at = expiry(now, ttl)
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
            raise changed_meanwhile(principal_id)
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
        compromised, revoked_at = revocation(view, compromised, now)
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
            raise changed_meanwhile(principal_id)
        return {**view, "revoked": True, "compromised": compromised, "revoked_at": revoked_at}

    # -- internals -------------------------------------------------------------------------------

    def _existing(self, principal_id: str) -> dict[str, Any]:
        item = self._get_item(principal_id) if isinstance(principal_id, str) else None
        if item is None:
            raise not_found(principal_id)
        return item

    def _check_sponsor(self, sponsor: str) -> None:
        item = self._get_item(sponsor) if sponsor_checkable(sponsor) else None
        check_sponsor(sponsor, None if item is None else public_view(item))

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
