"""Runtime settings of the functions and the local runner, read from the environment once per cold start."""

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

MODEL_PROVIDERS = ("none", "bedrock", "openai")
# API Gateway answers at 30 s whatever the function does; the model gets at most this much of it, so the
# reads and the write around the model call still fit.
MODEL_BUDGET_CEILING_SECONDS = 25.0
KEY_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,127}$")


def _number(e: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    """A bad value keeps the default and every value is clamped: a typo never lifts the time bounds."""
    try:
        value = float(e.get(name, default))
    except ValueError:
        value = default
    if value != value:  # NaN
        value = default
    return min(max(value, low), high)


def _key_name(value: str | None) -> str:
    # The setting names the variable that holds the key, never the key. AWS_* names are refused so a
    # misconfiguration cannot send the function's own credentials to a model endpoint.
    if not value or not KEY_NAME.match(value) or value.startswith("AWS_"):
        return "SENTINEL_MODEL_API_KEY"
    return value


@dataclass(frozen=True)
class Settings:
    state_table: str
    principals_table: str
    region: str
    dynamodb_endpoint: str | None
    token_key_file: str | None
    token_key_secret_arn: str | None
    runtime: str
    model_provider: str
    model_id: str
    package_digest: str
    service: str = "sentinel"
    version: str = "0.1.0"
    # Model proposals (docs/proposals.md). Every attempt is bounded by the connect and read timeouts, and
    # retries start only while a whole further attempt still fits in the budget.
    model_region: str | None = None  # Bedrock's region when it differs from the function's
    model_endpoint_url: str | None = None  # the OpenAI-compatible base URL; for Bedrock, an optional override
    model_api_key_env: str = "SENTINEL_MODEL_API_KEY"  # the NAME of the variable holding the OpenAI-style key
    model_connect_timeout_seconds: float = 2.0
    model_read_timeout_seconds: float = 15.0
    model_max_attempts: int = 2
    model_budget_seconds: float = 20.0
    model_max_output_tokens: int = 8192
    # The audit chains' seal and witness (sentinel_domain.integrity): the chain key (a 0600 file locally, a
    # Secrets Manager secret in AWS, never the token key) and, in AWS, the S3 bucket under Object Lock that
    # keeps the checkpoints, and the KMS key that signs its records.
    chain_key_file: str | None = None
    chain_key_secret_arn: str | None = None
    witness_bucket: str | None = None
    witness_signing_key_id: str | None = None
    # The GitHub webhook's secret (docs/github.md): a 0600 file locally, a Secrets Manager secret in AWS.
    github_webhook_secret_file: str | None = None
    github_webhook_secret_arn: str | None = None
    # Signed decision receipts (docs/receipts.md): the asymmetric KMS key in AWS, a PEM key file locally;
    # neither means no receipt, so no `ready` decision is recorded (there is no default key).
    receipt_key_id: str | None = None
    receipt_key_file: str | None = None
    receipt_max_seconds: int = 86400
    # Notification items in the outbox (docs/notifications.md): on locally (the event log shows them); in
    # AWS only where the stack routes them (it sets SENTINEL_NOTIFICATIONS=on with notifySns or
    # notifyWebhookUrl), since each is one more item in the decision's or plan's transaction.
    notifications: bool = True
    # The GitHub App (docs/github.md): its private key (a 0600 PEM file locally, a Secrets Manager secret in
    # AWS) and the REST API's base URL (GitHub Enterprise Server: https://HOST/api/v3). The app and
    # installation ids are the project's configuration, not the deployment's.
    github_app_key_file: str | None = None
    github_app_key_secret_arn: str | None = None
    github_api_url: str = "https://api.github.com"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Settings":
        e: Mapping[str, str] = os.environ if env is None else env
        provider = e.get("SENTINEL_MODEL_PROVIDER", "none").strip().lower()
        budget = _number(e, "SENTINEL_MODEL_BUDGET_SECONDS", 20.0, 1.0, MODEL_BUDGET_CEILING_SECONDS)
        connect = _number(e, "SENTINEL_MODEL_CONNECT_TIMEOUT_SECONDS", 2.0, 0.1, min(10.0, budget / 2))
        return cls(
            state_table=e.get("SENTINEL_STATE_TABLE", "sentinel-state"),
            principals_table=e.get("SENTINEL_PRINCIPALS_TABLE", "sentinel-principals"),
            region=e.get("AWS_REGION") or e.get("AWS_DEFAULT_REGION") or "us-east-1",
            dynamodb_endpoint=e.get("SENTINEL_DYNAMODB_ENDPOINT") or None,
            token_key_file=e.get("SENTINEL_TOKEN_KEY_FILE") or None,
            token_key_secret_arn=e.get("SENTINEL_TOKEN_KEY_SECRET_ARN") or None,
            runtime=e.get("SENTINEL_RUNTIME", "aws_lambda" if e.get("AWS_LAMBDA_FUNCTION_NAME") else "local"),
            # An unknown provider runs without a model, and the health route says so.
            model_provider=provider if provider in MODEL_PROVIDERS else "none",
            model_id=e.get("SENTINEL_MODEL_ID", "").strip(),
            package_digest=e.get("SENTINEL_PACKAGE_DIGEST", "source-tree"),
            model_region=e.get("SENTINEL_MODEL_REGION") or None,
            model_endpoint_url=e.get("SENTINEL_MODEL_ENDPOINT_URL") or None,
            model_api_key_env=_key_name(e.get("SENTINEL_MODEL_API_KEY_ENV")),
            model_connect_timeout_seconds=connect,
            # One attempt (connect + read) always fits in the budget.
            model_read_timeout_seconds=_number(
                e, "SENTINEL_MODEL_READ_TIMEOUT_SECONDS", 15.0, 0.1, budget - connect
            ),
            model_max_attempts=int(_number(e, "SENTINEL_MODEL_MAX_ATTEMPTS", 2, 1, 3)),
            model_budget_seconds=budget,
            model_max_output_tokens=int(_number(e, "SENTINEL_MODEL_MAX_OUTPUT_TOKENS", 8192, 256, 32768)),
            chain_key_file=e.get("SENTINEL_CHAIN_KEY_FILE") or None,
            chain_key_secret_arn=e.get("SENTINEL_CHAIN_KEY_SECRET_ARN") or None,
            witness_bucket=e.get("SENTINEL_WITNESS_BUCKET") or None,
            witness_signing_key_id=e.get("SENTINEL_WITNESS_SIGNING_KEY_ID") or None,
            github_webhook_secret_file=e.get("SENTINEL_GITHUB_WEBHOOK_SECRET_FILE") or None,
            github_webhook_secret_arn=e.get("SENTINEL_GITHUB_WEBHOOK_SECRET_ARN") or None,
            receipt_key_id=e.get("SENTINEL_RECEIPT_KEY_ID") or None,
            receipt_key_file=e.get("SENTINEL_RECEIPT_KEY_FILE") or None,
            receipt_max_seconds=int(_number(e, "SENTINEL_RECEIPT_MAX_SECONDS", 86400, 60, 30 * 86400)),
            notifications=e.get(
                "SENTINEL_NOTIFICATIONS", "off" if e.get("AWS_LAMBDA_FUNCTION_NAME") else "on"
            )
            .strip()
            .lower()
            == "on",
            github_app_key_file=e.get("SENTINEL_GITHUB_APP_KEY_FILE") or None,
            github_app_key_secret_arn=e.get("SENTINEL_GITHUB_APP_KEY_SECRET_ARN") or None,
            github_api_url=e.get("SENTINEL_GITHUB_API_URL") or "https://api.github.com",
        )
