"""The forge check publisher in the template (issue 15): its function reads the state table and writes only
its check records' partition, reads the chain key and (when given) the GitHub App's key and nothing else; the
bus's rule hands it exactly the forge items, with a retry policy and a dead-letter queue; Lambda's own retries
of a function error end in the same queue; a schedule runs the sweep; the queue has its alarm."""

import json

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Match, Template
from test_stack_iam import grants

from sentinel_domain.forge_checks import FORGE_CHECK_KIND, FORGE_RECHECK_KIND
from sentinel_infra.constructs.forge_checks import CHECK_RECORDS_PK, ForgeChecks
from sentinel_service import names
from sentinel_service.adapters.state_layout import CHECK_RECORDS_PK as STORE_RECORDS_PK
from support.infra import Synthesized, functions_by_name, ref_name

APP_KEY_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sentinel-github-app-key-AbCdEf"
CHAIN_KEY_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sentinel-chain-key-AbCdEf"


def construct_template(app_key: str | None = APP_KEY_ARN) -> Template:
    """The construct alone in a stack of its own (seconds, not a full synth)."""
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    table = dynamodb.Table(
        stack, "State", partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING)
    )
    ForgeChecks(
        stack,
        "ForgeChecks",
        code=lambda_.Code.from_inline("def handler(e, c): pass"),
        layers=[],
        environment={names.ENV_STATE_TABLE: "state"},
        log_retention=logs.RetentionDays.ONE_MONTH,
        table=table,
        bus=events.EventBus(stack, "Bus"),
        chain_key_secret_arn=CHAIN_KEY_ARN,
        app_key_secret_arn=app_key,
    )
    return Template.from_stack(stack)


def test_the_names_the_infrastructure_uses_are_the_domains() -> None:
    assert (names.OUTBOX_KIND_FORGE_CHECK, names.OUTBOX_KIND_FORGE_RECHECK) == (
        FORGE_CHECK_KIND,
        FORGE_RECHECK_KIND,
    )
    assert CHECK_RECORDS_PK == STORE_RECORDS_PK


def test_the_publisher_writes_only_its_records_and_reads_only_its_secrets() -> None:
    template = construct_template()
    statements = [
        s
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    writes = [s for s in statements if "dynamodb:PutItem" in json.dumps(s["Action"])]
    assert len(writes) == 1
    assert writes[0]["Condition"] == {
        "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [CHECK_RECORDS_PK]}
    }
    assert writes[0]["Action"] == "dynamodb:PutItem"
    secrets = [s for s in statements if "secretsmanager" in json.dumps(s["Action"])]
    assert [sorted(s["Resource"]) for s in secrets] == [sorted([CHAIN_KEY_ARN, APP_KEY_ARN])]
    dynamo = {
        a
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
        if a.startswith("dynamodb:")
    }
    assert dynamo == {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem"}
    env = next(iter(template.find_resources("AWS::Lambda::Function").values()))["Properties"]["Environment"]
    assert env["Variables"][names.ENV_GITHUB_APP_KEY_SECRET_ARN] == APP_KEY_ARN


def test_without_an_app_key_no_secret_but_the_chain_key_is_readable() -> None:
    template = construct_template(app_key=None)
    text = json.dumps(template.find_resources("AWS::IAM::Policy"))
    assert APP_KEY_ARN not in text and CHAIN_KEY_ARN in text


def test_the_rule_hands_over_exactly_the_forge_items_with_retries_and_a_dead_letter_queue() -> None:
    template = construct_template()
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": [names.EVENT_SOURCE],
                "detail-type": [names.DETAIL_TYPE_OUTBOX],
                "detail": {
                    "dynamodb": {"NewImage": {"outbox_kind": {"S": [FORGE_CHECK_KIND, FORGE_RECHECK_KIND]}}}
                },
            },
            "Targets": [
                Match.object_like(
                    {
                        "RetryPolicy": {"MaximumRetryAttempts": 10, "MaximumEventAgeInSeconds": 21600},
                        "DeadLetterConfig": {"Arn": Match.any_value()},
                    }
                )
            ],
        },
    )
    # Lambda's own retries of a function error (GitHub down) end in the same queue
    template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {
            "MaximumRetryAttempts": 2,
            "Qualifier": Match.any_value(),  # the live alias (a token of its ARN)
            "DestinationConfig": {"OnFailure": {"Destination": Match.any_value()}},
        },
    )
    template.has_resource_properties(
        "AWS::Events::Rule", {"ScheduleExpression": f"rate({names.FORGE_SWEEP_SCHEDULE_MINUTES} minutes)"}
    )


def test_in_the_stack_the_publisher_runs_on_its_alias_with_its_alarms(synthesized: Synthesized) -> None:
    # Given the whole stack
    publisher_id, props = functions_by_name(synthesized)[names.FORGE_CHECKS_FUNCTION]
    aliases = synthesized.of_type("AWS::Lambda::Alias")
    rules = [
        r
        for r in synthesized.properties("AWS::Events::Rule")
        if any(
            ref_name(t["Arn"]) in aliases
            and ref_name(aliases[ref_name(t["Arn"])]["Properties"]["FunctionName"]) == publisher_id
            for t in r.get("Targets", [])
        )
    ]
    # Then the items rule (on the Sentinel bus) and the schedule both invoke its live alias
    assert sorted("ScheduleExpression" in r for r in rules) == [False, True]
    (items,) = [r for r in rules if "EventPattern" in r]
    assert ref_name(items["EventBusName"]) in synthesized.of_type("AWS::Events::EventBus")
    # And it reads the state table, writes only its records, and reads the witness (as a release path
    # does: a required check lets a change merge) without writing it
    allowed = grants(synthesized, names.FORGE_CHECKS_FUNCTION)
    (table,) = [k for k, r in synthesized.of_type("AWS::DynamoDB::Table").items() if "State" in k]
    assert allowed[table] == {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem"}
    s3 = {a for actions in allowed.values() for a in actions if a.startswith("s3:")}
    assert s3 and all(a.startswith(("s3:Get", "s3:List")) for a in s3)
    assert names.ENV_WITNESS_BUCKET in props["Environment"]["Variables"]
    # And its dead-letter queue has an alarm on the stack's topic
    alarms = [
        a
        for a in synthesized.properties("AWS::CloudWatch::Alarm")
        if "forge-check-dead-letters" in a["AlarmName"]
    ]
    assert len(alarms) == 1 and alarms[0]["AlarmActions"]
    assert props["Timeout"] == 120
