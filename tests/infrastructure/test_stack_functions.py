"""Functions: one per concern, all on the one runtime, with logs, tracing, timeouts inside API Gateway's
limit, the packages `make build` produced, and a published version behind the alias the API calls."""

import hashlib
import json
from typing import Any

import pytest

from sentinel_infra import runtime
from sentinel_infra.config import DeploymentConfig
from sentinel_infra.constructs.service_function import API_GATEWAY_LIMIT_SECONDS, timeout_seconds
from sentinel_service import names
from sentinel_service.settings import Settings
from support.infra import (
    ALL_FUNCTIONS,
    EVERY_FUNCTION,
    MODEL_ID,
    STACK,
    Synthesized,
    functions_by_name,
    ref_name,
)


def digests(synth: Synthesized) -> dict[str, Any]:
    return json.loads((synth.build_dir / "digests.json").read_text())["packages"]


def test_one_function_per_concern_plus_the_authorizer(synthesized: Synthesized) -> None:
    # Given the synthesized stack
    functions = functions_by_name(synthesized)
    # Then there is exactly one function per name in the route table, the authorizer, the witness writer and
    # the chain verifier
    assert sorted(functions) == sorted(ALL_FUNCTIONS)
    for name, (_, props) in functions.items():
        assert props["Handler"] == f"sentinel_service.handlers.{name}.handler"


def test_every_function_runs_on_the_one_runtime_with_json_logs_tracing_and_bounded_timeouts(
    synthesized: Synthesized,
) -> None:
    for name, (_, props) in functions_by_name(synthesized).items():
        # Given one function, then it runs Python 3.13 on arm64 (named once, in infra/runtime.py)
        assert props["Runtime"] == runtime.LAMBDA_RUNTIME == "python3.13"
        assert props["Architectures"] == ["arm64"]
        # And logs JSON to its own log group, is traced, and answers before API Gateway gives up
        assert props["LoggingConfig"]["LogFormat"] == "JSON"
        assert ref_name(props["LoggingConfig"]["LogGroup"]) in synthesized.of_type("AWS::Logs::LogGroup")
        assert props["TracingConfig"] == {"Mode": "Active"}
        limit = API_GATEWAY_LIMIT_SECONDS if name in EVERY_FUNCTION else names.VERIFIER_SCHEDULE_MINUTES * 60
        assert props["Timeout"] == timeout_seconds(name) < limit


def test_every_log_group_has_the_configured_retention(synthesized: Synthesized) -> None:
    # Given the function and access log groups, then each keeps logs for logRetentionDays, not forever
    retention = {p.get("RetentionInDays") for p in synthesized.properties("AWS::Logs::LogGroup")}
    assert retention == {DeploymentConfig().log_retention_days}


def test_functions_run_the_built_zip_with_both_layers_and_report_its_digest(synthesized: Synthesized) -> None:
    # Given the build's digests and the layers in the template
    packages = digests(synthesized)
    layers = synthesized.of_type("AWS::Lambda::LayerVersion")
    layer_ids = sorted(layers)
    descriptions = " ".join(layer["Properties"]["Description"] for layer in layers.values())
    # Then the layers are the core and the deps zips, named by their digests
    assert len(layers) == 2
    assert (
        packages["core_layer"]["sha256"] in descriptions and packages["deps_layer"]["sha256"] in descriptions
    )
    for layer in layers.values():
        assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
        assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    for _, props in functions_by_name(synthesized).values():
        # And every function carries both layers and learns its package digest for /v1/health
        assert sorted(ref_name(layer) for layer in props["Layers"]) == layer_ids
        assert props["Environment"]["Variables"][names.ENV_PACKAGE_DIGEST] == packages["functions"]["sha256"]
        assert props["Environment"]["Variables"][names.ENV_RUNTIME] == "aws_lambda"
    # And the assets CDK uploads are the built zips byte for byte, so Lambda's CodeSha256 is the build's
    assets = json.loads((synthesized.outdir / f"{STACK}.assets.json").read_text())["files"].values()
    uploaded = {
        hashlib.sha256((synthesized.outdir / a["source"]["path"]).read_bytes()).hexdigest()
        for a in assets
        if a["source"]["path"].endswith(".zip")
    }
    assert uploaded == {packages[k]["sha256"] for k in ("functions", "core_layer", "deps_layer")}


def test_the_environment_is_what_the_settings_read(synthesized: Synthesized) -> None:
    functions = functions_by_name(synthesized)
    for name, (_, props) in functions.items():
        # Given a function's environment with its references replaced by markers
        env = {
            k: v if isinstance(v, str) else f"<{ref_name(v)}>"
            for k, v in props["Environment"]["Variables"].items()
        }
        # When sentinel_service.settings reads it
        settings = Settings.from_env(env)
        # Then the function runs as aws_lambda with the model the context named
        assert settings.runtime == "aws_lambda"
        assert (settings.model_provider, settings.model_id) == ("bedrock", MODEL_ID)
        if name == names.AUTHORIZER_FUNCTION:
            # And the authorizer finds the principals table and the token key secret
            assert settings.principals_table.startswith("<TablesPrincipals")
            assert settings.token_key_secret_arn and settings.token_key_secret_arn.startswith("<TokenKey")
            # And runs as a version tied to the token key's generation (a rotation publishes a new one)
            assert env[names.ENV_TOKEN_KEY_GENERATION] == "1"
        else:
            # And every other function finds the state table, and never the token key
            assert settings.state_table.startswith("<TablesState")
            assert settings.token_key_secret_arn is None
    # And only the plans function gets the model's budget
    assert {
        n
        for n, (_, p) in functions.items()
        if names.ENV_MODEL_BUDGET_SECONDS in p["Environment"]["Variables"]
    } == {"plans"}


@pytest.mark.parametrize("name", EVERY_FUNCTION)
def test_the_api_invokes_a_published_version_through_the_live_alias(
    synthesized: Synthesized, name: str
) -> None:
    # Given the function, its versions and aliases
    logical_id, _ = functions_by_name(synthesized)[name]
    versions = {
        k
        for k, v in synthesized.of_type("AWS::Lambda::Version").items()
        if ref_name(v["Properties"]["FunctionName"]) == logical_id
    }
    aliases = {
        k: v["Properties"]
        for k, v in synthesized.of_type("AWS::Lambda::Alias").items()
        if ref_name(v["Properties"]["FunctionName"]) == logical_id
    }
    # Then one version is published and the `live` alias points at it
    assert len(versions) == 1 and len(aliases) == 1
    alias_id, alias = next(iter(aliases.items()))
    assert alias["Name"] == names.LIVE_ALIAS
    assert ref_name(alias["FunctionVersion"]) in versions
    # And every API Gateway permission to invoke it names the alias, never the bare function
    permissions = [
        p
        for p in synthesized.properties("AWS::Lambda::Permission")
        if ref_name(p["FunctionName"]) in (logical_id, alias_id)
    ]
    assert permissions and all(ref_name(p["FunctionName"]) == alias_id for p in permissions)


def test_only_the_plans_function_reserves_concurrency(synthesized: Synthesized) -> None:
    # Given every function, then only plans (proposals may call a paid model) has reserved concurrency
    reserved = {
        name: props.get("ReservedConcurrentExecutions")
        for name, (_, props) in functions_by_name(synthesized).items()
    }
    assert reserved.pop("plans") == DeploymentConfig().plans_reserved_concurrency
    assert set(reserved.values()) == {None}
