"""Runtime settings of the functions and the local runner, read from the environment once per cold start."""

import os
from dataclasses import dataclass


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

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Settings":
        e = os.environ if env is None else env
        return cls(
            state_table=e.get("SENTINEL_STATE_TABLE", "sentinel-state"),
            principals_table=e.get("SENTINEL_PRINCIPALS_TABLE", "sentinel-principals"),
            region=e.get("AWS_REGION") or e.get("AWS_DEFAULT_REGION") or "us-east-1",
            dynamodb_endpoint=e.get("SENTINEL_DYNAMODB_ENDPOINT") or None,
            token_key_file=e.get("SENTINEL_TOKEN_KEY_FILE") or None,
            token_key_secret_arn=e.get("SENTINEL_TOKEN_KEY_SECRET_ARN") or None,
            runtime=e.get("SENTINEL_RUNTIME", "aws_lambda" if e.get("AWS_LAMBDA_FUNCTION_NAME") else "local"),
            model_provider=e.get("SENTINEL_MODEL_PROVIDER", "none"),
            model_id=e.get("SENTINEL_MODEL_ID", ""),
            package_digest=e.get("SENTINEL_PACKAGE_DIGEST", "source-tree"),
        )
