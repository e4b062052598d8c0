"""The chain key: what every audit event, head and checkpoint is authenticated under
(`sentinel_domain.integrity.ChainSeal`). The state table never holds it, so whoever can write the table
cannot write a chain the gate will accept.

Locally it is a file in the data directory (hex or raw, at least 32 bytes), created atomically with mode 0600
and refused when its mode lets group or others in or when it belongs to another user; in AWS it is a Secrets
Manager secret named by SENTINEL_CHAIN_KEY_SECRET_ARN, separate from the token key, so a function that may
read one need not read the other. It is read once per process and cached; a key that cannot be read raises
ChainKeyUnavailable, and the gate then refuses every write and holds every decision (fail closed). The key's
bytes never appear in an exception, a log line or a repr.
"""

import os
import secrets
import stat
import string
import threading
from typing import Any

from sentinel_domain.integrity import MIN_CHAIN_KEY_BYTES, ChainKeyUnavailable, ChainSeal

CHAIN_KEY_FILE = "chain.key"

_cache: dict[str, bytes] = {}
_lock = threading.Lock()


def load_chain_key(settings: Any, *, create: bool = False, secrets_client: Any = None) -> bytes:
    """The chain key the settings name: `chain_key_file`, else `chain_key_secret_arn`; neither is
    ChainKeyUnavailable (there is no default: a gate that cannot say where its key is must not invent one).
    `create=True` writes a fresh random key file when it is absent: only for a new local store."""
    if settings.chain_key_file:
        source = "file:" + os.path.expanduser(settings.chain_key_file)
    elif settings.chain_key_secret_arn:
        source = "secret:" + settings.chain_key_secret_arn
    else:
        raise ChainKeyUnavailable(
            "no chain key configured (SENTINEL_CHAIN_KEY_FILE or SENTINEL_CHAIN_KEY_SECRET_ARN)"
        )
    with _lock:
        cached = _cache.get(source)
        if cached is not None:
            return cached
        kind, _, location = source.partition(":")
        if kind == "file":
            key = read_key_file(location, create)
        else:
            key = _read_secret(location, settings.region, secrets_client)
        _cache[source] = key
        return key


def load_chain_seal(settings: Any, *, create: bool = False, secrets_client: Any = None) -> ChainSeal:
    return ChainSeal(load_chain_key(settings, create=create, secrets_client=secrets_client))


def clear_chain_key_cache() -> None:
    with _lock:
        _cache.clear()


def _decode(material: bytes, where: str) -> bytes:
    text = material.strip()
    if text and len(text) % 2 == 0 and all(chr(b) in string.hexdigits for b in text):
        key = bytes.fromhex(text.decode("ascii"))
    else:
        key = material
    if len(key) < MIN_CHAIN_KEY_BYTES:
        raise ChainKeyUnavailable(f"the chain key in {where} is shorter than {MIN_CHAIN_KEY_BYTES} bytes")
    return key


def read_key_file(path: str, create: bool = False) -> bytes:
    """The key in `path`, after checking that only its owner (this user) can read or replace it."""
    if create:
        create_key_file(path)
    return _decode(read_owner_only_file(path, "chain key", ChainKeyUnavailable), path)


def read_owner_only_file(path: str, what: str, refusal: type[Exception]) -> bytes:
    """The bytes of a secret file (`what` names it in refusals), read only when it is a regular file of this
    user that neither group nor others can open; anything else raises `refusal`. Shared by every key file
    the service reads (the chain key here, the GitHub App's private key, the receipt signing key), so one set
    of checks guards all."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as error:
        raise refusal(f"cannot read the {what} file {path}: {error.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise refusal(f"the {what} file {path} is not a regular file")
        if status.st_uid != os.geteuid():
            raise refusal(f"the {what} file {path} belongs to another user: whoever owns it could replace it")
        if status.st_mode & 0o077:
            raise refusal(
                f"the {what} file {path} is open to group or others (mode "
                f"{stat.S_IMODE(status.st_mode):04o}): make it 0600 (chmod 600) after checking nobody else "
                "read it"
            )
        return handle.read()


def create_key_file(path: str) -> bool:
    """A fresh random chain key at `path`, unless a file is there already (False)."""
    return create_private_file(
        path,
        (secrets.token_hex(MIN_CHAIN_KEY_BYTES) + "\n").encode("ascii"),
        "chain key",
        ChainKeyUnavailable,
    )


def create_private_file(path: str, content: bytes, what: str, refuse: type[Exception]) -> bool:
    """`content` at `path`, unless a file is there already (False). Atomic: written and fsynced in a
    temporary file of the same directory, mode 0600 from its creation, then linked into place (link never
    replaces an existing file), so a reader never sees a half-written key and two processes racing to create
    it end up with one key."""
    if os.path.lexists(path):
        return False
    parent = os.path.dirname(path) or "."
    try:
        os.makedirs(parent, mode=0o700, exist_ok=True)
        temporary = os.path.join(parent, f".{os.path.basename(path)}.{secrets.token_hex(8)}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as error:
        raise refuse(f"cannot create the {what} file {path}: {error.strerror}") from None
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        except OSError as error:
            raise refuse(f"cannot create the {what} file {path}: {error.strerror}") from None
        _fsync_directory(parent)
        return True
    finally:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def _fsync_directory(path: str) -> None:
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _read_secret(arn: str, region: str, client: Any) -> bytes:
    material = read_secret_bytes(arn, region, client, "the chain key secret", ChainKeyUnavailable)
    return _decode(material, "the chain key secret")


def read_secret_bytes(arn: str, region: str, client: Any, what: str, refusal: type[Exception]) -> bytes:
    """A Secrets Manager secret's bytes (its string as UTF-8, or its binary). Any failure to fetch it, or an
    empty secret, raises `refusal` naming `what` and the error's type only: a secret's value never reaches an
    exception or a log line. The client is built here on first need, never at import."""
    try:
        if client is None:
            import boto3

            client = boto3.client("secretsmanager", region_name=region)
        answer = client.get_secret_value(SecretId=arn)
    except Exception as error:  # any failure to fetch it: whatever needs it refuses (fail closed)
        raise refusal(f"cannot read {what}: {type(error).__name__}") from None
    if answer.get("SecretString") is not None:
        return str(answer["SecretString"]).encode("utf-8")
    if answer.get("SecretBinary") is not None:
        return bytes(answer["SecretBinary"])
    raise refusal(f"{what} is empty")
