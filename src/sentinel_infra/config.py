"""Deployment settings: read from CDK context (cdk.json, or `-c key=value` on the CLI), checked once.

Every key has a default here, and cdk.json states the same defaults so they can be read and changed in one
file (a test keeps the two equal). Values given with `-c` arrive as strings; numbers and flags are parsed
from them. A value out of range stops the synth with a message naming the key: a typo must never deploy a
looser gate than intended.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlsplit

# The retention periods CloudWatch Logs accepts (days).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
# API Gateway gives up on an HTTP API integration after 30 s; the authorizer's answer may be cached for at
# most this long, and that is the revocation window API.md promises.
MAX_AUTHORIZER_CACHE_SECONDS = 30
# The ceiling sentinel_service.settings applies to the model's budget (MODEL_BUDGET_CEILING_SECONDS).
MAX_MODEL_BUDGET_SECONDS = 25
# The AWS deployment supports Bedrock (IAM, no key to keep) or no model. An OpenAI-compatible endpoint needs
# an API key in the function's environment, which would sit in the template in plain text.
DEPLOYABLE_MODEL_PROVIDERS = ("none", "bedrock")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
STAGE = re.compile(r"^[a-z][a-z0-9-]{0,15}$")
MODEL_ID = re.compile(r"^[A-Za-z0-9._:/-]{0,200}$")
REGION = re.compile(r"^([a-z]{2}(-[a-z]+)+-\d)?$")
# An HTTP header name (RFC 9110 token), as EventBridge connections take the API key's header.
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,512}$")
# What an EventBridge API destination accepts as its invocation endpoint, at most (2,048 characters).
MAX_ENDPOINT_LENGTH = 2048
FLAGS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class ConfigError(ValueError):
    """A context value the deployment refuses; the message names the key and what it accepts."""


@dataclass(frozen=True)
class DeploymentConfig:
    stage: str = "dev"
    alarm_email: str = ""  # empty: alarms and budget notices go to the SNS topic only (synth warns)
    monthly_budget_usd: int = 25
    model_provider: str = "none"
    model_id: str = ""
    model_region: str = ""  # Bedrock's region when it differs from the stack's
    model_budget_seconds: int = 20
    log_retention_days: int = 30
    authorizer_cache_seconds: int = 30
    # Throttles (requests per second, burst). The stage bounds the whole API; writes, proposals (each may
    # call a model, which costs money) and the two anonymous routes have tighter per-route limits.
    api_rate_limit: int = 20
    api_burst_limit: int = 40
    write_rate_limit: int = 10
    write_burst_limit: int = 20
    proposal_rate_limit: int = 1
    proposal_burst_limit: int = 3
    public_rate_limit: int = 5
    public_burst_limit: int = 10
    plans_reserved_concurrency: int = 5
    # Invocations of one function in 5 minutes above which the spike alarm fires: 5 requests per second held
    # for five minutes, far above a team's hooks and CI, well below the stage throttle.
    invocation_spike_threshold: int = 1500
    # Authorizer refusals in 5 minutes above which the denial alarm fires (token guessing, a revoked agent
    # retrying in a loop).
    authorizer_denials_threshold: int = 25
    event_archive_retention_days: int = 0  # 0 keeps events (and so chain checkpoints) indefinitely
    # Raise by one after replacing the token key secret's value: the authorizer caches the key for the life of
    # each execution environment, and a changed setting publishes a new version whose environments start
    # fresh and read the new key (docs/deploy.md, "Rotating the token key").
    token_key_generation: int = 1
    # How long S3 Object Lock (compliance mode) keeps each witnessed checkpoint and tamper finding: nobody,
    # the account's root user included, can delete or shorten it before then.
    witness_retention_days: int = 400
    # Notifications (docs/notifications.md), off by default: an SNS topic for them, and a webhook (an
    # EventBridge API destination, HTTPS only, its API key a secret the operator fills) with a chat message.
    notify_sns: bool = False
    notify_webhook_url: str = ""
    notify_webhook_api_key_header: str = "x-api-key"
    notify_webhook_rate_per_second: int = 1

    @staticmethod
    def context_key(field_name: str) -> str:
        """`monthly_budget_usd` -> `monthlyBudgetUsd`, the name used in cdk.json."""
        head, *rest = field_name.split("_")
        return head + "".join(part.capitalize() for part in rest)

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """{context key: default}: what cdk.json states."""
        return {cls.context_key(f.name): f.default for f in fields(cls)}

    @classmethod
    def from_context(cls, lookup: Callable[[str], Any] | Mapping[str, Any]) -> DeploymentConfig:
        get = lookup.get if isinstance(lookup, Mapping) else lookup
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = cls.context_key(f.name)
            raw = get(key)
            if raw is None:
                continue
            if isinstance(f.default, bool):  # before int: a bool is an int
                values[f.name] = _flag(key, raw)
            else:
                values[f.name] = _int(key, raw) if isinstance(f.default, int) else str(raw).strip()
        config = cls(**values)
        config.check()
        return config

    def check(self) -> None:
        _require(
            STAGE.match(self.stage),
            "stage",
            "lower-case letters, digits and '-', starting with a letter, at most 16 characters",
        )
        _require(
            not self.alarm_email or EMAIL.match(self.alarm_email), "alarmEmail", "an e-mail address or ''"
        )
        _require(1 <= self.monthly_budget_usd <= 100_000, "monthlyBudgetUsd", "whole US dollars, 1 to 100000")
        _require(
            self.model_provider in DEPLOYABLE_MODEL_PROVIDERS,
            "modelProvider",
            " or ".join(DEPLOYABLE_MODEL_PROVIDERS) + " (an OpenAI-compatible endpoint would need its API "
            "key in the template)",
        )
        _require(MODEL_ID.match(self.model_id), "modelId", "a Bedrock model or inference profile id")
        _require(
            self.model_provider == "none" or self.model_id,
            "modelId",
            f"a model id when modelProvider is {self.model_provider}",
        )
        _require(REGION.match(self.model_region), "modelRegion", "an AWS region such as us-east-1, or ''")
        _require(
            1 <= self.model_budget_seconds <= MAX_MODEL_BUDGET_SECONDS,
            "modelBudgetSeconds",
            f"1 to {MAX_MODEL_BUDGET_SECONDS}",
        )
        _require(
            self.log_retention_days in LOG_RETENTION_DAYS,
            "logRetentionDays",
            "one of " + ", ".join(map(str, LOG_RETENTION_DAYS)),
        )
        _require(
            0 <= self.authorizer_cache_seconds <= MAX_AUTHORIZER_CACHE_SECONDS,
            "authorizerCacheSeconds",
            f"0 to {MAX_AUTHORIZER_CACHE_SECONDS} (the revocation window)",
        )
        for name in ("api", "write", "proposal", "public"):
            rate, burst = getattr(self, f"{name}_rate_limit"), getattr(self, f"{name}_burst_limit")
            _require(1 <= rate <= 10_000, f"{name}RateLimit", "1 to 10000 requests per second")
            _require(rate <= burst <= 10_000, f"{name}BurstLimit", f"{name}RateLimit to 10000")
            _require(
                name == "api" or (rate <= self.api_rate_limit and burst <= self.api_burst_limit),
                f"{name}RateLimit",
                "no more than the stage's apiRateLimit/apiBurstLimit",
            )
        _require(1 <= self.plans_reserved_concurrency <= 1000, "plansReservedConcurrency", "1 to 1000")
        _require(self.invocation_spike_threshold >= 1, "invocationSpikeThreshold", "at least 1")
        _require(self.authorizer_denials_threshold >= 1, "authorizerDenialsThreshold", "at least 1")
        _require(
            self.event_archive_retention_days >= 0, "eventArchiveRetentionDays", "0 (indefinite) or more"
        )
        _require(self.token_key_generation >= 1, "tokenKeyGeneration", "1 or more")
        _require(1 <= self.witness_retention_days <= 36_500, "witnessRetentionDays", "1 to 36500 days")
        _require(
            not self.notify_webhook_url or _https_endpoint(self.notify_webhook_url),
            "notifyWebhookUrl",
            f"an https:// URL with a host, no credentials and no spaces, at most {MAX_ENDPOINT_LENGTH} "
            "characters, or ''",
        )
        _require(
            HEADER_NAME.match(self.notify_webhook_api_key_header),
            "notifyWebhookApiKeyHeader",
            "an HTTP header name",
        )
        _require(
            1 <= self.notify_webhook_rate_per_second <= 300,
            "notifyWebhookRatePerSecond",
            "1 to 300 invocations per second",
        )


def _https_endpoint(url: str) -> bool:
    """An endpoint a notification may go to: HTTPS (never plain HTTP), a host, no user:password@ (a secret
    in the template), nothing a URL parser and EventBridge could read differently."""
    if len(url) > MAX_ENDPOINT_LENGTH or any(c.isspace() or ord(c) < 0x21 or ord(c) > 0x7E for c in url):
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return False
    return parts.scheme == "https" and bool(parts.hostname) and "@" not in parts.netloc and "\\" not in url


def _flag(key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    value = FLAGS.get(str(raw).strip().lower())
    if value is None:
        raise ConfigError(f"context {key}: expected true or false, got {raw!r}")
    return value


def _int(key: str, raw: Any) -> int:
    if isinstance(raw, bool):
        raise ConfigError(f"context {key}: expected a whole number, got {raw!r}")
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"context {key}: expected a whole number, got {raw!r}") from None
    return value


def _require(ok: Any, key: str, accepted: str) -> None:
    if not ok:
        raise ConfigError(f"context {key}: expected {accepted}")
