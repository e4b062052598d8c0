"""The composition root: builds the gate once per cold start, lazily, so importing a handler builds no client."""

import os
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from sentinel_domain.ports import Proposer
from sentinel_domain.usecases import Gate
from sentinel_service.adapters.proposers import (
    BedrockProposer,
    ModelLimits,
    NoModel,
    OpenAICompatibleProposer,
    bedrock_runtime_client,
)
from sentinel_service.settings import Settings

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


def build_proposer(s: Settings, environ: Mapping[str, str] | None = None) -> Proposer:
    """The model adapter the settings name. An incomplete configuration is no model at all: proposals then
    fall back with MODEL_NOT_CONFIGURED rather than fail. No client is built here, only on first use."""
    limits = ModelLimits.from_settings(s)
    if s.model_provider == "bedrock" and s.model_id:
        region = s.model_region or s.region
        return BedrockProposer(s.model_id, lambda: bedrock_runtime_client(region, limits, s.model_endpoint_url),
                               limits)
    if s.model_provider == "openai" and s.model_id and s.model_endpoint_url:
        env = os.environ if environ is None else environ
        # Read at call time: the key is never held in the settings, so neither repr nor health can show it.
        return OpenAICompatibleProposer(s.model_id, s.model_endpoint_url, lambda: env.get(s.model_api_key_env),
                                        limits)
    return NoModel()


@lru_cache(maxsize=1)
def proposer() -> Proposer:
    return build_proposer(settings())


def gate() -> Gate:
    if _override is not None:
        return _override
    return _built_gate()


@lru_cache(maxsize=1)
def _built_gate() -> Gate:
    from sentinel_service.adapters.dynamodb_store import DynamoStateStore
    from sentinel_service.adapters.system_ports import RandomIds, SystemClock

    return Gate(DynamoStateStore(dynamodb_client(), settings().state_table), SystemClock(), RandomIds(),
                proposer=proposer())


def use_gate(replacement: Gate | None) -> None:
    """Tests and the scenario harness run the real handlers over a gate of their choosing."""
    global _override
    _override = replacement
