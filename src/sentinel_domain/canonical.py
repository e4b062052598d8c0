"""RFC 8785 canonical JSON and the SHA-256 digests built on it (the only digest the gate uses).

The `rfc8785` package defines the form. Most values the gate canonicalises are plain: text, integers a double
holds exactly, booleans, null, lists and objects whose keys are ASCII. For those, the standard library's JSON
writer (sorted keys, no spaces, non-ASCII kept as it is) writes the very same bytes several times faster: it
escapes strings exactly as RFC 8785 does (quote, backslash and the control characters: \\b \\f \\n \\r \\t by
name, the others as lower-case \\u00xx), and ASCII keys sort the same by code point as by UTF-16 code unit.
Anything else (a float, an integer beyond 2^53 - 1, a non-ASCII key, a subclass, an unknown type, a string
that is not valid Unicode) goes to `rfc8785`, which writes it or refuses it as it always did."""

import hashlib
import json
from typing import Any

import rfc8785

_SAFE_INTEGER = 2**53 - 1
_plain_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode


def _plain(value: Any) -> bool:
    """True when every part of the value is one the standard library writes exactly as RFC 8785 does."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_SAFE_INTEGER <= value <= _SAFE_INTEGER)
    if kind is list or kind is tuple:
        return all(_plain(item) for item in value)
    if kind is dict:
        return all(type(k) is str and k.isascii() and _plain(v) for k, v in value.items())
    return False


def canonical_bytes(value: Any) -> bytes:
    try:
        if _plain(value):
            return _plain_json(value).encode("utf-8")
    except (UnicodeEncodeError, RecursionError):
        pass  # a lone surrogate, or nesting too deep to check: rfc8785 refuses it as it always did
    return rfc8785.dumps(value)


def canonical_text(value: Any) -> str:
    return canonical_bytes(value).decode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """SHA-256 (lowercase hex) of the canonical form of a JSON value."""
    return sha256_hex(canonical_bytes(value))
