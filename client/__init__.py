"""Sentinel's HTTP client: standard library only, because it runs inside agent sandboxes.

Names are loaded on first use: the hook runs on every tool call, and most calls never need the HTTP client."""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Response": "client.api", "SentinelClient": "client.api", "TransportError": "client.api",
    "iter_pages": "client.api", "new_idempotency_key": "client.api", "quote_etag": "client.api",
    "DEFAULT_RELEASE_PATTERNS": "client.settings", "ClientConfigError": "client.settings",
    "ClientSettings": "client.settings", "SentinelClientError": "client.settings", "check_url": "client.settings",
    "load_settings": "client.settings", "read_token": "client.settings",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'client' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
