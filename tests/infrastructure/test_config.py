"""Deployment settings: cdk.json states the defaults, CLI strings are parsed, anything looser is refused."""

import json

import pytest

from sentinel_infra.config import MAX_AUTHORIZER_CACHE_SECONDS, ConfigError, DeploymentConfig
from support.infra import REPO


def test_cdk_json_states_every_default_the_code_uses() -> None:
    # Given cdk.json's context
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    # Then every deployment setting appears there with the default the code falls back to
    defaults = DeploymentConfig.defaults()
    assert {key: context.get(key) for key in defaults} == defaults
    # And the app command is the one a fresh clone's `make setup` provides
    assert json.loads((REPO / "cdk.json").read_text())["app"] == ".venv/bin/python app.py"


def test_values_given_with_dash_c_arrive_as_strings_and_are_parsed() -> None:
    # Given context values as the CDK CLI passes `-c key=value`
    context = {
        "stage": "prod",
        "monthlyBudgetUsd": "120",
        "authorizerCacheSeconds": "10",
        "alarmEmail": "ops@example.com",
    }
    # When the settings are read
    config = DeploymentConfig.from_context(context)
    # Then numbers are numbers and the rest keeps its defaults
    assert (config.stage, config.monthly_budget_usd, config.authorizer_cache_seconds) == ("prod", 120, 10)
    assert config.log_retention_days == DeploymentConfig().log_retention_days


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("authorizerCacheSeconds", MAX_AUTHORIZER_CACHE_SECONDS + 1, "revocation window"),
        ("modelProvider", "openai", "API key"),
        ("modelProvider", "bedrock", "modelId"),  # a provider without a model id
        ("alarmEmail", "not-an-address", "alarmEmail"),
        ("logRetentionDays", 10, "logRetentionDays"),
        ("stage", "Prod_1", "stage"),
        ("monthlyBudgetUsd", "ten", "whole number"),
        ("writeBurstLimit", 100, "stage's"),  # a route allowed more than the whole stage
        ("plansReservedConcurrency", 0, "plansReservedConcurrency"),
        ("modelBudgetSeconds", 29, "modelBudgetSeconds"),
    ],
)
def test_a_setting_outside_its_range_stops_the_synth_naming_the_key(
    key: str, value: object, named: str
) -> None:
    # Given one setting outside what the deployment accepts
    # When the settings are read, then the synth stops with a message naming the key and what it accepts
    with pytest.raises(ConfigError, match=named):
        DeploymentConfig.from_context({key: value})
