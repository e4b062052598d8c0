"""The key under which tokens are hashed: held outside the principals table, so a copy of the table is
useless.

Locally it is a file (hex or raw, at least 32 bytes, mode 0600); in AWS it is a Secrets Manager secret.
It is read once per process and cached; a key that cannot be read refuses everything (fail closed).
"""

import os
import secrets
import string
import threading
from typing import Any

MIN_KEY_BYTES = 32
DEFAULT_KEY_FILE = "~/.local/share/sentinel/token.key"


class TokenKeyUnavailable(Exception):
    """No usable token key: callers must refuse every token rather than guess."""


_cache: dict[str, bytes] = {}
_lock = threading.Lock()


def default_key_file() -> str:
    return os.path.expanduser(DEFAULT_KEY_FILE)


def load_token_key(settings: Any, *, create: bool = False, secrets_client: Any = None) -> bytes:
    """The token key for these settings.

    Order: `settings.token_key_file`, then `settings.token_key_secret_arn`, then (local runtime only) the
    default file. `create=True` writes a fresh random key file, mode 0600, when the file is absent; it is
    meant for the operator's CLI and the local runner, never for a Lambda function.
    """
    if settings.token_key_file:
        source = "file:" + os.path.expanduser(settings.token_key_file)
    elif settings.token_key_secret_arn:
        source = "secret:" + settings.token_key_secret_arn
    elif settings.runtime == "local":
        source = "file:" + default_key_file()
    else:
        raise TokenKeyUnavailable("no token key configured (SENTINEL_TOKEN_KEY_SECRET_ARN is not set)")
    with _lock:
        cached = _cache.get(source)
        if cached is not None:
            return cached
        kind, _, location = source.partition(":")
        if kind == "file":
            key = _read_file(location, create)
        else:
            key = _read_secret(location, settings.region, secrets_client)
        _cache[source] = key
        return key


def clear_token_key_cache() -> None:
    with _lock:
        _cache.clear()


def _decode(material: bytes, where: str) -> bytes:
    text = material.strip()
    if text and all(chr(b) in string.hexdigits for b in text) and len(text) % 2 == 0:
        key = bytes.fromhex(text.decode("ascii"))
    else:
        key = material
    if len(key) < MIN_KEY_BYTES:
        raise TokenKeyUnavailable(f"the token key in {where} is shorter than {MIN_KEY_BYTES} bytes")
    return key


def _read_file(path: str, create: bool) -> bytes:
    if create and not os.path.exists(path):
        _create_file(path)
    try:
        with open(path, "rb") as handle:
            material = handle.read()
    except OSError as error:
        raise TokenKeyUnavailable(f"cannot read the token key file {path}: {error.strerror}") from None
    return _decode(material, path)


def _create_file(path: str) -> None:
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, mode=0o700, exist_ok=True)
    try:
        # O_EXCL: two processes racing to create the key must not end up with different keys.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as error:
        raise TokenKeyUnavailable(f"cannot create the token key file {path}: {error.strerror}") from None
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(secrets.token_hex(MIN_KEY_BYTES) + "\n")


def _read_secret(arn: str, region: str, client: Any) -> bytes:
    # Imported here: the authorizer loads this module, and its cold start stays clear of the chain key's.
    from sentinel_service.adapters.chain_key import read_secret_bytes

    material = read_secret_bytes(arn, region, client, "the token key secret", TokenKeyUnavailable)
    return _decode(material, "the token key secret")
