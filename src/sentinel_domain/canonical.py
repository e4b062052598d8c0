"""RFC 8785 canonical JSON and the SHA-256 digests built on it (the only digest the gate uses)."""

import hashlib
from typing import Any

import rfc8785


def canonical_bytes(value: Any) -> bytes:
    return rfc8785.dumps(value)


def canonical_text(value: Any) -> str:
    return canonical_bytes(value).decode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """SHA-256 (lowercase hex) of the canonical form of a JSON value."""
    return sha256_hex(canonical_bytes(value))
