"""Sentinel's HTTP client: standard library only, because it runs inside agent sandboxes.

Names are loaded on first use: the hook runs on every tool call, and most calls never need the HTTP client."""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Response": "sentinel_client.api",
    "SentinelClient": "sentinel_client.api",
    "TransportError": "sentinel_client.api",
    "iter_pages": "sentinel_client.api",
    "new_idempotency_key": "sentinel_client.api",
    "quote_etag": "sentinel_client.api",
    "DEFAULT_RELEASE_PATTERNS": "sentinel_client.settings",
    "ClientConfigError": "sentinel_client.settings",
    "ClientSettings": "sentinel_client.settings",
    "SentinelClientError": "sentinel_client.settings",
    "check_url": "sentinel_client.settings",
    "load_settings": "sentinel_client.settings",
    "read_token": "sentinel_client.settings",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'client' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
