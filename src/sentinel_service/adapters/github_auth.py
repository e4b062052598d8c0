"""How the GitHub App adapter proves who it is: the app's private key, the app JWT it signs, and the
installation access token GitHub trades for that JWT.

The key is a PEM RSA private key: locally a file that only its owner can read (the same checks as the chain
key: `chain_key.read_owner_only_file`), in AWS a Secrets Manager secret named by
SENTINEL_GITHUB_APP_KEY_SECRET_ARN. Nothing is read at construction: the key is loaded when the first token
is needed, and a key that cannot be read is `ForgeUnavailable` (an operator can fix it; the outbox retries),
never a guess. The key's bytes never appear in an exception, a log line or a repr.

The JWT follows GitHub's rules for apps: RS256, `iat` backdated 60 s against clock drift, `exp` at most ten
minutes ahead (we use nine, so a slow clock still lands inside GitHub's window), `iss` the app id."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sentinel_domain.forge import ForgeUnavailable

JWT_BACKDATE_SECONDS = 60
JWT_LIFETIME_SECONDS = 9 * 60
# An installation token lives an hour; it is replaced this long before GitHub would refuse it, so a call
# that starts with a cached token never runs into its expiry halfway.
TOKEN_REFRESH_MARGIN = timedelta(minutes=5)
MAX_KEY_BYTES = 16 * 1024


class AppKeyUnavailable(ForgeUnavailable):
    """The app's private key cannot be read or used: nothing can be asked of GitHub until it is fixed."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def load_private_key(pem: bytes) -> Any:
    """The RSA private key in `pem`, or AppKeyUnavailable (saying what is wrong, never what is there)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    if len(pem) > MAX_KEY_BYTES:
        raise AppKeyUnavailable("the GitHub App private key is larger than any RSA key GitHub issues")
    try:
        key = serialization.load_pem_private_key(pem.strip() + b"\n", password=None)
    except (ValueError, TypeError):
        raise AppKeyUnavailable("the GitHub App private key is not an unencrypted PEM private key") from None
    if not isinstance(key, rsa.RSAPrivateKey) or key.key_size < 2048:
        raise AppKeyUnavailable("the GitHub App private key must be an RSA key of at least 2048 bits")
    return key


def app_jwt(app_id: int, key: Any, now: datetime) -> str:
    """The app's JSON Web Token for `now` (RS256), as GitHub's "authenticating as a GitHub App" asks."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    issued = int(now.timestamp()) - JWT_BACKDATE_SECONDS
    header = {"alg": "RS256", "typ": "JWT"}
    claims = {"iat": issued, "exp": issued + JWT_BACKDATE_SECONDS + JWT_LIFETIME_SECONDS, "iss": str(app_id)}
    signing_input = ".".join(
        _b64url(json.dumps(part, separators=(",", ":")).encode("utf-8")) for part in (header, claims)
    )
    signature = key.sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
    return signing_input + "." + _b64url(signature)


def key_from_file(path: str) -> bytes:
    from sentinel_service.adapters.chain_key import read_owner_only_file

    return read_owner_only_file(path, "GitHub App private key", AppKeyUnavailable)


def key_from_secret(arn: str, region: str, client: Any = None) -> bytes:
    from sentinel_service.adapters.chain_key import read_secret_bytes

    return read_secret_bytes(arn, region, client, "the GitHub App key secret", AppKeyUnavailable)


def key_source(settings: Any, secrets_client: Any = None) -> Callable[[], bytes]:
    """Where the settings say the app's key is: `github_app_key_file`, else `github_app_key_secret_arn`.
    Neither is AppKeyUnavailable when the key is first needed (there is no default key)."""
    if settings.github_app_key_file:
        path = settings.github_app_key_file
        return lambda: key_from_file(path)
    if settings.github_app_key_secret_arn:
        arn, region = settings.github_app_key_secret_arn, settings.region
        return lambda: key_from_secret(arn, region, secrets_client)

    def missing() -> bytes:
        raise AppKeyUnavailable(
            "no GitHub App key configured "
            "(SENTINEL_GITHUB_APP_KEY_FILE or SENTINEL_GITHUB_APP_KEY_SECRET_ARN)"
        )

    return missing


@dataclass(frozen=True)
class InstallationToken:
    token: str
    expires_at: datetime

    def __repr__(self) -> str:  # the token is a credential: never in a repr
        return f"InstallationToken(expires_at={self.expires_at.isoformat()})"


class AppCredentials:
    """The app's key (loaded once, on first use) and its installation token (cached until shortly before
    it expires, or until GitHub refuses it). `mint` is the call that trades a JWT for a token; it belongs to
    the HTTP side and is handed in."""

    def __init__(
        self,
        app_id: int,
        installation_id: int,
        read_key: Callable[[], bytes],
        clock: Callable[[], datetime],
    ) -> None:
        self.app_id = app_id
        self.installation_id = installation_id
        self._read_key = read_key
        self._clock = clock
        self._key: Any = None
        self._token: InstallationToken | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"AppCredentials(app_id={self.app_id}, installation_id={self.installation_id})"

    def jwt(self) -> str:
        with self._lock:
            if self._key is None:
                self._key = load_private_key(self._read_key())
            key = self._key
        return app_jwt(self.app_id, key, self._clock())

    def token(self, mint: Callable[[str], InstallationToken]) -> str:
        """A token that is valid for at least TOKEN_REFRESH_MARGIN more, minting one when needed."""
        with self._lock:
            cached = self._token
        if cached is not None and cached.expires_at - TOKEN_REFRESH_MARGIN > self._clock():
            return cached.token
        fresh = mint(self.jwt())
        with self._lock:
            self._token = fresh
        return fresh.token

    def forget(self, token: str) -> None:
        """GitHub refused `token` (revoked, or the installation changed): the next call mints another."""
        with self._lock:
            if self._token is not None and self._token.token == token:
                self._token = None


def parse_expiry(value: object) -> datetime:
    if not isinstance(value, str):
        raise ValueError("expires_at is not a string")
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
