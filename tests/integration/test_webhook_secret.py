"""The webhook secret (sentinel_service.adapters.webhook_secret): a 0600 file of this user locally, a Secrets
Manager secret in AWS (moto), the text as typed (GitHub keys its HMAC with those bytes), never a short one."""

from pathlib import Path
from typing import Any

import pytest

from sentinel_service.adapters.webhook_secret import (
    WebhookSecretUnavailable,
    clear_webhook_secret_cache,
    load_webhook_secret,
)
from sentinel_service.settings import Settings


@pytest.fixture(autouse=True)
def fresh() -> Any:
    clear_webhook_secret_cache()
    yield
    clear_webhook_secret_cache()


def settings(**env: str) -> Settings:
    return Settings.from_env(env)


def secret_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "webhook.secret"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_0600_file_gives_its_text_as_typed(tmp_path: Path) -> None:
    path = secret_file(tmp_path, "not-hex-decoded-0123456789abcdef\n")
    loaded = load_webhook_secret(settings(SENTINEL_GITHUB_WEBHOOK_SECRET_FILE=str(path)))
    assert loaded == b"not-hex-decoded-0123456789abcdef"


def test_a_file_open_to_group_or_others_is_refused(tmp_path: Path) -> None:
    path = secret_file(tmp_path, "0123456789abcdef0123456789", mode=0o644)
    with pytest.raises(WebhookSecretUnavailable, match="0600"):
        load_webhook_secret(settings(SENTINEL_GITHUB_WEBHOOK_SECRET_FILE=str(path)))


def test_a_short_secret_and_no_secret_are_refused(tmp_path: Path) -> None:
    path = secret_file(tmp_path, "short")
    with pytest.raises(WebhookSecretUnavailable, match="shorter"):
        load_webhook_secret(settings(SENTINEL_GITHUB_WEBHOOK_SECRET_FILE=str(path)))
    with pytest.raises(WebhookSecretUnavailable, match="no webhook secret configured"):
        load_webhook_secret(settings())


def test_a_secrets_manager_secret_is_read_with_the_given_client() -> None:
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("secretsmanager", region_name="us-east-1")
        arn = client.create_secret(Name="webhook", SecretString="from-secrets-manager-0123456789abcdef")[
            "ARN"
        ]
        s = settings(SENTINEL_GITHUB_WEBHOOK_SECRET_ARN=arn, AWS_REGION="us-east-1")
        assert load_webhook_secret(s, secrets_client=client) == b"from-secrets-manager-0123456789abcdef"
        clear_webhook_secret_cache()
        missing = settings(SENTINEL_GITHUB_WEBHOOK_SECRET_ARN=arn + "-gone", AWS_REGION="us-east-1")
        with pytest.raises(WebhookSecretUnavailable, match="cannot read"):
            load_webhook_secret(missing, secrets_client=client)
