"""The composition root: builds the gate once per cold start, lazily, so importing a handler builds no client."""

from functools import lru_cache
from typing import Any

from sentinel.usecases import Gate

from .settings import Settings

_override: Gate | None = None


@lru_cache(maxsize=1)
def settings() -> Settings:
    return Settings.from_env()


@lru_cache(maxsize=1)
def dynamodb_client() -> Any:
    import boto3
    from botocore.config import Config

    s = settings()
    # Tight timeouts and few retries: a slow store becomes STATE_UNAVAILABLE well inside API Gateway's limit.
    config = Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 3, "mode": "standard"})
    return boto3.client("dynamodb", region_name=s.region, endpoint_url=s.dynamodb_endpoint, config=config)


def gate() -> Gate:
    if _override is not None:
        return _override
    return _built_gate()


@lru_cache(maxsize=1)
def _built_gate() -> Gate:
    from .dynamodb_store import DynamoStateStore
    from .system_ports import RandomIds, SystemClock

    return Gate(DynamoStateStore(dynamodb_client(), settings().state_table), SystemClock(), RandomIds())


def use_gate(replacement: Gate | None) -> None:
    """Tests and the scenario harness run the real handlers over a gate of their choosing."""
    global _override
    _override = replacement
