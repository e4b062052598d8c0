"""Bearer tokens: their shape, their checksum, the keyed hash that is all the store ever holds, and TTLs.

A token is `snt_` + 43 base62 characters (256 random bits) + a 6-character base62 checksum of those 43.
The checksum lets the authorizer refuse a mistyped or forged-looking token without a store read, and the
fixed prefix lets secret scanners recognise a leaked one. Standard library only: the CLI, the authorizer
and the local runner share it.
"""

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Mapping
from typing import Any

PREFIX = "snt_"
ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
BODY_LENGTH = 43  # 62**43 > 2**256, so 43 base62 digits hold 256 bits
CHECKSUM_LENGTH = 6
TOKEN_LENGTH = len(PREFIX) + BODY_LENGTH + CHECKSUM_LENGTH
RANDOM_BITS = 256

_SHAPE = re.compile(rf"{PREFIX}[0-9A-Za-z]{{{BODY_LENGTH + CHECKSUM_LENGTH}}}")

HOUR = 3600
DAY = 24 * HOUR
# API.md, Principals: humans get short-lived tokens, machines longer ones.
DEFAULT_TTL_SECONDS: dict[str, int] = {"human": 12 * HOUR, "agent": 90 * DAY, "ci": 90 * DAY}
# A token living longer than this is a standing credential nobody remembers to rotate: refuse it.
MAX_TTL_SECONDS = 366 * DAY

_UNITS = {"s": 1, "m": 60, "h": HOUR, "d": DAY}
_DURATION = re.compile(r"([1-9][0-9]{0,9})([smhd])")


def _base62(value: int, width: int) -> str:
    digits = []
    while value:
        value, rest = divmod(value, 62)
        digits.append(ALPHABET[rest])
    text = "".join(reversed(digits))
    if len(text) > width:
        raise ValueError("value does not fit the width")
    return text.rjust(width, ALPHABET[0])


def _checksum(body: str) -> str:
    digest = hashlib.sha256(body.encode("ascii")).digest()
    return _base62(int.from_bytes(digest[:8], "big") % (62**CHECKSUM_LENGTH), CHECKSUM_LENGTH)


def new_token() -> str:
    body = _base62(secrets.randbits(RANDOM_BITS), BODY_LENGTH)
    return PREFIX + body + _checksum(body)


def well_formed(token: object) -> bool:
    """Shape and checksum only: true says nothing about whether the token was ever issued."""
    if not isinstance(token, str) or len(token) != TOKEN_LENGTH or not _SHAPE.fullmatch(token):
        return False
    body = token[len(PREFIX) : len(PREFIX) + BODY_LENGTH]
    if _from_base62(body) >= 2**RANDOM_BITS:
        return False
    return hmac.compare_digest(token[len(PREFIX) + BODY_LENGTH :], _checksum(body))


def _from_base62(text: str) -> int:
    value = 0
    for char in text:
        value = value * 62 + ALPHABET.index(char)
    return value


def token_hmac(key: bytes, token: str) -> str:
    """The only form of a token that is ever stored: HMAC-SHA256 under a key held outside the table."""
    if not key:
        raise ValueError("an empty token key is refused")
    return hmac.new(key, token.encode("utf-8"), hashlib.sha256).hexdigest()


# Where principals and token hashes share a file with data that anyone able to write it could change (the
# local gate's SQLite database), each principal row and each token's mapping carries a tag under a key derived
# from the token key with this label: distinct from the token HMACs themselves, so no tag is ever a token's
# hash and no token's hash a tag.
ROW_TAG_LABEL = b"sentinel/principal-row-tag/v1"
ROW_TAG_FIELDS = (
    "id",
    "kind",
    "sponsor",
    "roles",
    "revoked",
    "compromised",
    "token_hmac",
    "token_expires_at",
)


def row_tag_key(key: bytes) -> bytes:
    if not key:
        raise ValueError("an empty token key is refused")
    return hmac.new(key, ROW_TAG_LABEL, hashlib.sha256).digest()


def _canonical(kind: str, values: list[Any]) -> bytes:
    # JSON with sorted keys, no whitespace, ASCII only: one encoding for one set of values.
    return json.dumps([kind, *values], sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode(
        "ascii"
    )


def principal_row_tag(key: bytes, row: Mapping[str, Any]) -> str:
    """The tag over everything in a principal row that decides what the authorizer grants: its id, kind,
    sponsor, roles (each project's roles sorted), revoked and compromised flags, and its current token's hash
    and expiry. `key` is the token key itself; the tag key is derived from it."""
    roles = row["roles"] or {}
    values: list[Any] = [
        row["id"],
        row["kind"],
        row["sponsor"] or None,
        {project: sorted(granted) for project, granted in roles.items()},
        bool(row["revoked"]),
        bool(row["compromised"]),
        row["token_hmac"] or None,
        row["token_expires_at"] or None,
    ]
    return hmac.new(row_tag_key(key), _canonical("principal", values), hashlib.sha256).hexdigest()


def token_mapping_tag(key: bytes, hashed: str, principal_id: str, expires_at: str) -> str:
    """The tag binding a stored token hash to the principal it was issued to, and its expiry."""
    values = [hashed, principal_id, expires_at]
    return hmac.new(row_tag_key(key), _canonical("token", values), hashlib.sha256).hexdigest()


def tag_holds(stored: object, expected: str) -> bool:
    """A stored tag verifies: present, a string, and equal in constant time. A missing tag never does."""
    return isinstance(stored, str) and hmac.compare_digest(
        stored.encode("ascii", "replace"), expected.encode()
    )


def parse_duration(text: str) -> int:
    """`30m`, `12h`, `90d`, `3600s` -> seconds; anything else, zero, or over MAX_TTL_SECONDS is a
    ValueError."""
    match = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"not a duration: {text!r} (expected a positive number and one of s, m, h, d)")
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if seconds > MAX_TTL_SECONDS:
        raise ValueError(f"duration {text!r} exceeds the maximum of {MAX_TTL_SECONDS // DAY} days")
    return seconds


def default_ttl_seconds(kind: str) -> int:
    try:
        return DEFAULT_TTL_SECONDS[kind]
    except KeyError:
        raise ValueError(f"unknown principal kind: {kind!r}") from None
