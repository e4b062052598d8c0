"""The GitHub App adapter's pure parts: the app key (file checks shared with the chain key, PEM checks), the
JWT, the installation token cache, the base URL rule and the wait read from rate-limit headers."""

import base64
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from sentinel_service.adapters import github_auth
from sentinel_service.adapters.github_auth import (
    AppCredentials,
    AppKeyUnavailable,
    InstallationToken,
    app_jwt,
    key_from_file,
    key_from_secret,
    key_source,
    load_private_key,
)
from sentinel_service.adapters.github_http import _retry_after, check_base_url
from sentinel_service.settings import Settings

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
# PEM armour around bytes that are no key (assembled here so the repository's secret scan stays meaningful)
ARMOUR = "RSA " + "PRIVATE KEY"
PEM_LOOKALIKE = f"-----BEGIN {ARMOUR}-----\nc2VjcmV0LW1hdGVyaWFs\n-----END {ARMOUR}-----".encode()


def pem(key: Any) -> bytes:
    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


@pytest.fixture(scope="module")
def rsa_key() -> Any:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def unpadded(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def test_the_jwt_verifies_under_the_apps_public_key_with_githubs_claims(rsa_key: Any) -> None:
    token = app_jwt(123, rsa_key, NOW)
    header, claims, signature = token.split(".")
    # Then the signature is RS256 over the first two parts, under the app's public key
    rsa_key.public_key().verify(
        unpadded(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256()
    )
    body = json.loads(unpadded(claims))
    # And it was issued 60 s in the past, lives under ten minutes from then, and names the app
    assert body == {"iat": int(NOW.timestamp()) - 60, "exp": int(NOW.timestamp()) + 540, "iss": "123"}
    assert body["exp"] - body["iat"] <= 600


def test_a_key_file_open_to_others_is_refused_like_the_chain_key(tmp_path: Path, rsa_key: Any) -> None:
    path = tmp_path / "app.pem"
    path.write_bytes(pem(rsa_key))
    path.chmod(0o644)
    with pytest.raises(AppKeyUnavailable, match="open to group or others"):
        key_from_file(str(path))
    path.chmod(0o600)
    assert load_private_key(key_from_file(str(path))).key_size == 2048


def test_a_symlinked_or_missing_key_file_is_refused(tmp_path: Path, rsa_key: Any) -> None:
    target = tmp_path / "real.pem"
    target.write_bytes(pem(rsa_key))
    target.chmod(0o600)
    link = tmp_path / "link.pem"
    os.symlink(target, link)
    with pytest.raises(AppKeyUnavailable, match="cannot read"):
        key_from_file(str(link))
    with pytest.raises(AppKeyUnavailable, match="cannot read"):
        key_from_file(str(tmp_path / "absent.pem"))


def test_what_is_not_an_rsa_key_of_2048_bits_is_refused_without_echoing_it() -> None:
    with pytest.raises(AppKeyUnavailable) as raised:
        load_private_key(PEM_LOOKALIKE)
    assert "c2VjcmV0" not in str(raised.value)
    with pytest.raises(AppKeyUnavailable, match="RSA key of at least 2048"):
        load_private_key(pem(ec.generate_private_key(ec.SECP256R1())))
    with pytest.raises(AppKeyUnavailable, match="RSA key of at least 2048"):
        load_private_key(pem(rsa.generate_private_key(public_exponent=65537, key_size=1024)))


def test_the_key_comes_from_the_secret_the_settings_name_and_a_failure_says_only_its_kind(
    rsa_key: Any,
) -> None:
    class Secrets:
        def __init__(self, answer: Any) -> None:
            self.answer = answer
            self.asked: list[str] = []

        def get_secret_value(self, SecretId: str) -> Any:  # noqa: N803 (boto3's spelling)
            self.asked.append(SecretId)
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    client = Secrets({"SecretString": pem(rsa_key).decode()})
    settings = Settings.from_env(
        {"SENTINEL_GITHUB_APP_KEY_SECRET_ARN": "arn:aws:secretsmanager:x:1:secret:app"}
    )
    assert key_source(settings, client)() == pem(rsa_key)
    assert client.asked == ["arn:aws:secretsmanager:x:1:secret:app"]
    with pytest.raises(AppKeyUnavailable, match="cannot read the GitHub App key secret: PermissionError"):
        key_from_secret("arn", "us-east-1", Secrets(PermissionError("AccessDenied for key material")))
    with pytest.raises(AppKeyUnavailable, match="empty"):
        key_from_secret("arn", "us-east-1", Secrets({}))


def test_no_key_configured_is_unavailable_when_first_needed() -> None:
    source = key_source(Settings.from_env({}))
    with pytest.raises(AppKeyUnavailable, match="no GitHub App key configured"):
        source()


def test_the_installation_token_is_minted_once_and_again_before_it_expires(rsa_key: Any) -> None:
    clock = [NOW]
    minted: list[str] = []

    def mint(jwt: str) -> InstallationToken:
        minted.append(jwt)
        return InstallationToken(f"ghs_{len(minted)}", clock[0] + timedelta(hours=1))

    credentials = AppCredentials(1, 2, lambda: pem(rsa_key), lambda: clock[0])
    assert credentials.token(mint) == credentials.token(mint) == "ghs_1"
    clock[0] += timedelta(minutes=54, seconds=59)
    assert credentials.token(mint) == "ghs_1"
    clock[0] += timedelta(seconds=2)  # now within five minutes of its expiry
    assert credentials.token(mint) == "ghs_2"
    # And a token GitHub refused is forgotten; an older one that was already replaced changes nothing
    credentials.forget("ghs_1")
    assert credentials.token(mint) == "ghs_2"
    credentials.forget("ghs_2")
    assert credentials.token(mint) == "ghs_3"
    assert "ghs_" not in repr(credentials) and "ghs_" not in repr(InstallationToken("ghs_x", NOW))


def test_the_key_is_read_once_and_only_when_a_jwt_is_first_needed(rsa_key: Any) -> None:
    reads: list[int] = []

    def read() -> bytes:
        reads.append(1)
        return pem(rsa_key)

    credentials = AppCredentials(1, 2, read, lambda: NOW)
    assert reads == []
    credentials.jwt()
    credentials.jwt()
    assert reads == [1]


@pytest.mark.parametrize(
    ("url", "admitted"),
    [
        ("https://api.github.com", True),
        ("https://ghe.example.com/api/v3/", True),
        ("http://127.0.0.1:8080", True),
        ("http://[::1]:9", True),
        ("http://localhost:1", True),
        ("http://api.github.com", False),
        ("http://192.0.2.10", False),
        ("ftp://api.github.com", False),
        ("https://", False),
    ],
)
def test_the_api_url_must_be_https_unless_it_is_loopback(url: str, admitted: bool) -> None:
    if admitted:
        assert not check_base_url(url).endswith("/")
    else:
        with pytest.raises(ValueError, match="https"):
            check_base_url(url)


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after": "42"}, 42),
        ({"retry-after": "999999"}, 3600),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1100"}, 100),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "900"}, 0),
        ({"x-ratelimit-remaining": "12", "x-ratelimit-reset": "1100"}, None),
        ({"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}, None),
        ({}, None),
    ],
)
def test_the_wait_is_read_from_githubs_headers_and_bounded(headers: dict[str, str], wait: int | None) -> None:
    assert _retry_after(headers, 1000.0) == wait


def test_the_settings_read_the_app_key_and_api_url() -> None:
    settings = Settings.from_env(
        {
            "SENTINEL_GITHUB_APP_KEY_FILE": "/keys/app.pem",
            "SENTINEL_GITHUB_APP_KEY_SECRET_ARN": "arn:x",
            "SENTINEL_GITHUB_API_URL": "https://ghe.example.com/api/v3",
        }
    )
    assert (settings.github_app_key_file, settings.github_app_key_secret_arn) == ("/keys/app.pem", "arn:x")
    assert settings.github_api_url == "https://ghe.example.com/api/v3"
    assert Settings.from_env({}).github_api_url == "https://api.github.com"
    assert github_auth.JWT_BACKDATE_SECONDS + github_auth.JWT_LIFETIME_SECONDS <= 600
