"""The forge in the template (sentinel_infra/constructs/forge.py): the webhook route without an authorizer,
the two GitHub secrets each readable by one function, the bus rule to the forge worker with retries and a
dead-letter queue, the worker's asynchronous retries to the same queue, and the alarm on it."""

import json
from typing import Any

from infrastructure.test_stack_iam import grants

from sentinel_infra.constructs.forge import RULE_RETRY_ATTEMPTS, WORKER_RETRY_ATTEMPTS
from sentinel_service import names
from support.infra import ALL_FUNCTIONS, Synthesized, functions_by_name, ref_name

WEBHOOK = "POST /v1/forge/github/webhook"


def secret(synth: Synthesized, part: str) -> tuple[str, dict[str, Any]]:
    (found,) = [(k, r) for k, r in synth.of_type("AWS::SecretsManager::Secret").items() if part in k]
    return found


def alias_function(synth: Synthesized, alias_id: str) -> str:
    aliases = synth.of_type("AWS::Lambda::Alias")
    by_id = {logical: name for name, (logical, _) in functions_by_name(synth).items()}
    return by_id[ref_name(aliases[alias_id]["Properties"]["FunctionName"])]


def test_the_webhook_route_has_no_authorizer_and_reaches_the_forge_function(synthesized: Synthesized) -> None:
    found = [r for r in synthesized.properties("AWS::ApiGatewayV2::Route") if r["RouteKey"] == WEBHOOK]
    assert len(found) == 2  # production and acceptance
    for route in found:
        assert route["AuthorizationType"] == "NONE" and "AuthorizerId" not in route
    integrations = synthesized.of_type("AWS::ApiGatewayV2::Integration")
    for route in found:
        target = route["Target"]["Fn::Join"][1][1]
        uri = json.dumps(integrations[ref_name(target)]["Properties"]["IntegrationUri"])
        alias_id = next(a for a in synthesized.of_type("AWS::Lambda::Alias") if a in uri)
        assert alias_function(synthesized, alias_id) == names.FORGE_FUNCTION


def test_each_github_secret_is_read_only_by_the_functions_that_need_it(synthesized: Synthesized) -> None:
    webhook_id, webhook = secret(synthesized, "WebhookSecret")
    app_key_id, app_key = secret(synthesized, "AppPrivateKey")
    # The webhook secret is generated (the operator copies it into GitHub); the app key is the operator's
    assert webhook["Properties"]["GenerateSecretString"]["PasswordLength"] == 48
    assert webhook["DeletionPolicy"] == app_key["DeletionPolicy"] == "Retain"
    readers = {
        key: {f for f in ALL_FUNCTIONS if key in grants(synthesized, f)} for key in (webhook_id, app_key_id)
    }
    # The webhook secret by the webhook's function alone; the app key by the two that call GitHub as the app
    assert readers == {
        webhook_id: {names.FORGE_FUNCTION},
        app_key_id: {names.FORGE_WORKER_FUNCTION, names.FORGE_CHECKS_FUNCTION},
    }
    functions = functions_by_name(synthesized)
    webhook_env = functions[names.FORGE_FUNCTION][1]["Environment"]["Variables"]
    worker_env = functions[names.FORGE_WORKER_FUNCTION][1]["Environment"]["Variables"]
    assert ref_name(webhook_env[names.ENV_GITHUB_WEBHOOK_SECRET_ARN]) == webhook_id
    assert ref_name(worker_env[names.ENV_GITHUB_APP_KEY_SECRET_ARN]) == app_key_id
    publisher_env = functions[names.FORGE_CHECKS_FUNCTION][1]["Environment"]["Variables"]
    assert ref_name(publisher_env[names.ENV_GITHUB_APP_KEY_SECRET_ARN]) == app_key_id
    assert names.ENV_GITHUB_APP_KEY_SECRET_ARN not in webhook_env
    assert names.ENV_GITHUB_WEBHOOK_SECRET_ARN not in worker_env


def test_the_worker_may_write_the_state_and_read_one_principal_and_nothing_more(
    synthesized: Synthesized,
) -> None:
    allowed = grants(synthesized, names.FORGE_WORKER_FUNCTION)
    tables = synthesized.of_type("AWS::DynamoDB::Table")
    principals = next(k for k, t in tables.items() if len(t["Properties"]["KeySchema"]) == 1)
    assert allowed[principals] == {"dynamodb:GetItem"}
    queues = synthesized.of_type("AWS::SQS::Queue")
    # And its asynchronous failure destination, the forge dead-letter queue, it may only send to
    sent = {k: v for k, v in allowed.items() if k in queues}
    assert len(sent) == 1
    assert {a for v in sent.values() for a in v} <= {
        "sqs:SendMessage",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
    }


def test_forge_outbox_items_reach_the_worker_with_retries_and_a_dead_letter_queue(
    synthesized: Synthesized,
) -> None:
    (rule,) = [
        r
        for r in synthesized.properties("AWS::Events::Rule")
        if "EventPattern" in r and names.OUTBOX_KIND_FORGE_DELIVERY in json.dumps(r["EventPattern"])
    ]
    # On the Sentinel bus, for the forge deliveries among the relayed outbox items
    buses = synthesized.of_type("AWS::Events::EventBus")
    assert ref_name(rule["EventBusName"]) in buses
    pattern = rule["EventPattern"]
    assert pattern["source"] == [names.EVENT_SOURCE] and pattern["detail-type"] == [names.DETAIL_TYPE_OUTBOX]
    # (verified deliveries only: a candidate's check to publish is the check publisher's)
    assert pattern["detail"]["dynamodb"]["NewImage"]["outbox_kind"]["S"] == [names.OUTBOX_KIND_FORGE_DELIVERY]
    (target,) = rule["Targets"]
    assert alias_function(synthesized, ref_name(target["Arn"])) == names.FORGE_WORKER_FUNCTION
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == RULE_RETRY_ATTEMPTS
    dead_letters = ref_name(target["DeadLetterConfig"]["Arn"])
    assert dead_letters in synthesized.of_type("AWS::SQS::Queue")
    # And a failed run is retried by Lambda, then lands in the same queue
    (config,) = [
        c
        for c in synthesized.properties("AWS::Lambda::EventInvokeConfig")
        if alias_function(synthesized, ref_name(c["Qualifier"]["Fn::Select"][1]["Fn::Split"][1]))
        == names.FORGE_WORKER_FUNCTION
    ]
    assert config["MaximumRetryAttempts"] == WORKER_RETRY_ATTEMPTS
    qualified = ref_name(config["Qualifier"]["Fn::Select"][1]["Fn::Split"][1])  # the alias ARN's last part
    assert synthesized.resources[qualified]["Properties"]["Name"] == names.LIVE_ALIAS
    assert ref_name(config["DestinationConfig"]["OnFailure"]["Destination"]) == dead_letters
    # And its first message pages
    (alarm,) = [
        a
        for a in synthesized.properties("AWS::CloudWatch::Alarm")
        if a["AlarmName"].endswith("forge-dead-letters")
    ]
    assert alarm["Threshold"] == 1 and "QueueName" in json.dumps(alarm["Dimensions"])
    assert dead_letters in json.dumps(alarm["Dimensions"])


def test_the_worker_is_never_behind_the_api(synthesized: Synthesized) -> None:
    _, worker = functions_by_name(synthesized)[names.FORGE_WORKER_FUNCTION]
    assert worker["Timeout"] == 60
    worker_aliases = {
        a
        for a in synthesized.of_type("AWS::Lambda::Alias")
        if alias_function(synthesized, a) == "forge_worker"
    }
    for permission in synthesized.properties("AWS::Lambda::Permission"):
        if ref_name(permission["FunctionName"]) in worker_aliases:
            assert permission["Principal"] == "events.amazonaws.com"
