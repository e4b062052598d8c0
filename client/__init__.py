"""Sentinel's HTTP client: standard library only, because it runs inside agent sandboxes."""

from client.api import Response, SentinelClient, TransportError, iter_pages, new_idempotency_key, quote_etag
from client.settings import (
    DEFAULT_RELEASE_PATTERNS,
    ClientConfigError,
    ClientSettings,
    SentinelClientError,
    check_url,
    load_settings,
    read_token,
)

__all__ = [
    "DEFAULT_RELEASE_PATTERNS",
    "ClientConfigError",
    "ClientSettings",
    "Response",
    "SentinelClient",
    "SentinelClientError",
    "TransportError",
    "check_url",
    "iter_pages",
    "load_settings",
    "new_idempotency_key",
    "quote_etag",
    "read_token",
]
