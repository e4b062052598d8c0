"""The GitHub webhook secret: what every delivery's `X-Hub-Signature-256` is checked against.

Locally it is a file (SENTINEL_GITHUB_WEBHOOK_SECRET_FILE) held to the chain key's rules: a regular file this
user owns, mode 0600 or stricter (`chain_key.read_owner_only_file`). In AWS it is a Secrets Manager secret
(SENTINEL_GITHUB_WEBHOOK_SECRET_ARN) the operator fills with the same string typed into the GitHub App's
settings; only the forge function may read it. The secret is the text as typed (GitHub keys the HMAC with its
UTF-8 bytes), surrounding whitespace dropped, at least MIN_SECRET_BYTES long. Read on first use and cached;
nothing here builds a client at import, and the secret never appears in an exception or a log line."""

import os
import threading
from typing import Any

from sentinel_service.adapters.chain_key import read_owner_only_file, read_secret_bytes

MIN_SECRET_BYTES = 32  # docs/github.md asks the app for at least 32 bytes


class WebhookSecretUnavailable(Exception):
    """No secret, or one that cannot be read: every delivery is refused (503), none is believed."""


_cache: dict[str, bytes] = {}
_lock = threading.Lock()


def load_webhook_secret(settings: Any, *, secrets_client: Any = None) -> bytes:
    if settings.github_webhook_secret_file:
        source = "file:" + os.path.expanduser(settings.github_webhook_secret_file)
    elif settings.github_webhook_secret_arn:
        source = "secret:" + settings.github_webhook_secret_arn
    else:
        raise WebhookSecretUnavailable(
            "no webhook secret configured (SENTINEL_GITHUB_WEBHOOK_SECRET_FILE or "
            "SENTINEL_GITHUB_WEBHOOK_SECRET_ARN)"
        )
    with _lock:
        cached = _cache.get(source)
        if cached is not None:
            return cached
        kind, _, location = source.partition(":")
        if kind == "file":
            material = read_owner_only_file(location, "webhook secret", WebhookSecretUnavailable)
        else:
            material = _read_secret(location, settings.region, secrets_client)
        secret = material.strip()
        if len(secret) < MIN_SECRET_BYTES:
            raise WebhookSecretUnavailable(f"the webhook secret is shorter than {MIN_SECRET_BYTES} bytes")
        _cache[source] = secret
        return secret


def clear_webhook_secret_cache() -> None:
    with _lock:
        _cache.clear()


def _read_secret(arn: str, region: str, client: Any) -> bytes:
    return read_secret_bytes(arn, region, client, "the webhook secret", WebhookSecretUnavailable)
