"""Alarms (every function, the API, the authorizer, the tables, the relay, decisions), the topic they go to,
the dashboard, and the cost budget."""

import fnmatch
import json
from typing import Any

import pytest

from sentinel_infra.config import DeploymentConfig
from sentinel_infra.constructs.service_function import timeout_seconds
from sentinel_service import names
from sentinel_service.adapters import decision_metrics
from sentinel_service.http.routes import ROUTES
from support.infra import (
    ALARM_EMAIL,
    ALL_FUNCTIONS,
    CONTEXT,
    Synthesized,
    as_list,
    functions_by_name,
    ref_name,
)


def alarms(synth: Synthesized) -> dict[str, dict[str, Any]]:
    return {p["AlarmName"]: p for p in synth.properties("AWS::CloudWatch::Alarm")}


def alarm(synth: Synthesized, name: str) -> dict[str, Any]:
    return alarms(synth)[f"sentinel-test-{name}"]


def function_dimension(props: dict[str, Any]) -> str | None:
    return ref_name(next(d["Value"] for d in props["Dimensions"] if d["Name"] == "FunctionName"))


@pytest.mark.parametrize("function", ALL_FUNCTIONS)
def test_every_function_alarms_on_errors_throttles_spikes_and_slow_p95(
    synthesized: Synthesized, function: str
) -> None:
    # Given one function
    logical_id, _ = functions_by_name(synthesized)[function]
    expected = {
        "errors": ("Errors", "Sum", 1, "GreaterThanOrEqualToThreshold"),
        "throttles": ("Throttles", "Sum", 1, "GreaterThanOrEqualToThreshold"),
        "invocation-spike": (
            "Invocations",
            "Sum",
            DeploymentConfig().invocation_spike_threshold,
            "GreaterThanThreshold",
        ),
        # p95 above 80% of the function's own timeout, in milliseconds
        "duration-p95": ("Duration", "p95", timeout_seconds(function) * 1000 * 0.8, "GreaterThanThreshold"),
    }
    for suffix, (metric, statistic, threshold, comparison) in expected.items():
        # When its alarm is looked up, then it watches that metric of that function
        props = alarm(synthesized, f"{function}-{suffix}")
        assert (props["Namespace"], props["MetricName"]) == ("AWS/Lambda", metric)
        assert props.get("Statistic", props.get("ExtendedStatistic")) == statistic
        assert function_dimension(props) == logical_id
        assert (props["Threshold"], props["ComparisonOperator"]) == (threshold, comparison)
        assert props["Period"] == 300 and props["TreatMissingData"] == "notBreaching"


def test_every_alarm_notifies_the_alarm_topic(synthesized: Synthesized) -> None:
    # Given the one topic, then every alarm sends to it
    (topic_id,) = synthesized.of_type("AWS::SNS::Topic")
    found = alarms(synthesized)
    # + the tamper and forged-checkpoint alarms, + the acceptance canary, + the forge check publisher's and
    # the forge worker's dead letters
    assert len(found) == 4 * len(ALL_FUNCTIONS) + 9 + 2 + 1 + 1 + 1
    for name, props in found.items():
        assert [ref_name(a) for a in props["AlarmActions"]] == [topic_id], name
        assert props["AlarmDescription"], name


def test_api_alarms_on_5xx_and_on_the_4xx_rate(synthesized: Synthesized) -> None:
    # Given the API alarms
    # (the production API's: the acceptance API's traffic never counts toward an alarm)
    (api_id,) = [
        k
        for k, r in synthesized.of_type("AWS::ApiGatewayV2::Api").items()
        if r["Properties"]["Name"] == "sentinel-test"
    ]
    server = alarm(synthesized, "api-5xx")
    # Then 5xx answers page
    assert (server["Namespace"], server["MetricName"], server["Statistic"]) == (
        "AWS/ApiGateway",
        "5xx",
        "Sum",
    )
    assert ref_name(server["Dimensions"][0]["Value"]) == api_id
    # And the 4xx rate pages above 25% of requests, once there are at least 20 of them
    rate = alarm(synthesized, "api-4xx-rate")
    (expression,) = [m for m in rate["Metrics"] if "Expression" in m]
    assert expression["Expression"] == "IF(requests >= 20, 100 * errors / requests, 0)"
    assert {
        m["Id"]: m["MetricStat"]["Metric"]["MetricName"] for m in rate["Metrics"] if "MetricStat" in m
    } == {"errors": "4xx", "requests": "Count"}
    assert (rate["Threshold"], rate["ComparisonOperator"]) == (25, "GreaterThanThreshold")


def test_authorizer_denials_are_counted_from_access_logs_and_alarm_on_a_spike(
    synthesized: Synthesized,
) -> None:
    # Given the metric filter on the access logs
    (metric_filter,) = synthesized.properties("AWS::Logs::MetricFilter")
    (transformation,) = metric_filter["MetricTransformations"]
    # Then it counts 403s that never reached an integration (the authorizer refused them), per API
    assert metric_filter["FilterPattern"] == '{ ($.status = "403") && ($.integrationStatus = "-") }'
    assert (transformation["MetricNamespace"], transformation["MetricName"]) == (
        names.GATEWAY_NAMESPACE,
        names.AUTHORIZER_DENIALS_METRIC,
    )
    assert transformation["Dimensions"] == [{"Key": names.GATEWAY_API_DIMENSION, "Value": "$.apiId"}]
    # And an alarm fires above the configured number in 5 minutes
    props = alarm(synthesized, "authorizer-denials")
    assert (props["Namespace"], props["MetricName"]) == (
        names.GATEWAY_NAMESPACE,
        names.AUTHORIZER_DENIALS_METRIC,
    )
    assert props["Threshold"] == DeploymentConfig().authorizer_denials_threshold


@pytest.mark.parametrize("table", ["state", "principals"])
@pytest.mark.parametrize("metric", ["ThrottledRequests", "SystemErrors"])
def test_dynamodb_throttles_and_system_errors_alarm_per_table(
    synthesized: Synthesized, table: str, metric: str
) -> None:
    # Given the table's alarm on that metric
    suffix = "throttles" if metric == "ThrottledRequests" else "system-errors"
    props = alarm(synthesized, f"{table}-table-{suffix}")
    stats = [m["MetricStat"]["Metric"] for m in props["Metrics"] if "MetricStat" in m]
    # Then it sums that DynamoDB metric over the operations the functions issue, and fires on the first one
    assert {(s["Namespace"], s["MetricName"]) for s in stats} == {("AWS/DynamoDB", metric)}
    assert {d["Value"] for s in stats for d in s["Dimensions"] if d["Name"] == "Operation"} == {
        "GetItem",
        "Query",
        "PutItem",
        "DeleteItem",
        "TransactWriteItems",
    }
    assert props["Threshold"] == 1


def test_the_relay_dead_letter_queue_and_hold_errors_page_on_the_first_one(synthesized: Synthesized) -> None:
    # Given the dead-letter alarm: any message waiting means a side effect or checkpoint was not relayed
    dead = alarm(synthesized, "relay-dead-letters")
    assert (dead["MetricName"], dead["Threshold"]) == ("ApproximateNumberOfMessagesVisible", 1)
    # And its runbook matches what the queue holds: a stream source's dead letter is the batch's metadata,
    # never the record, and the stream keeps records for 24 hours, so replays start from the state table
    runbook = dead["AlarmDescription"]
    assert (
        "not the record" in runbook
        and "24 hours" in runbook
        and "state table is the source of truth" in runbook
    )
    assert "replay it from the queue" not in runbook.lower() and len(runbook) <= 1024
    # Given the decisions alarm: a hold the gate caused itself (the store failed, or a chain was tampered)
    held = alarm(synthesized, "decisions-hold-error")
    assert (held["Namespace"], held["MetricName"], held["Threshold"]) == ("Sentinel", "Decisions", 1)
    assert held["Dimensions"] == [{"Name": "Outcome", "Value": "hold_error"}]


def test_the_dashboard_draws_decisions_by_outcome_as_the_functions_emit_them(
    synthesized: Synthesized,
) -> None:
    # Given the EMF line the decision endpoints print, and the dashboard
    line = json.loads(
        decision_metrics.emf_line({"decision": "ready", "findings": []}, recorded=True, now_ms=0)
    )
    (directive,) = line["_aws"]["CloudWatchMetrics"]
    (dashboard,) = synthesized.properties("AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["DashboardBody"])
    # Then the emitted namespace, metric and dimension set are the names module's
    assert (directive["Namespace"], directive["Metrics"][0]["Name"], directive["Dimensions"]) == (
        names.DECISIONS_NAMESPACE,
        names.DECISIONS_METRIC,
        [[names.DECISIONS_DIMENSION]],
    )
    # And the dashboard graphs that metric for each outcome
    for outcome in names.DECISION_OUTCOMES:
        assert (
            f'\\"{names.DECISIONS_NAMESPACE}\\",\\"{names.DECISIONS_METRIC}\\",'
            f'\\"{names.DECISIONS_DIMENSION}\\",\\"{outcome}\\"' in body
        ), outcome
    # And the per-function, API, authorizer, table and relay metrics the alarms watch
    for metric in (
        "Invocations",
        "Errors",
        "Throttles",
        "Duration",
        "5xx",
        "4xx",
        "Count",
        names.AUTHORIZER_DENIALS_METRIC,
        "ThrottledRequests",
        "SystemErrors",
        "ApproximateNumberOfMessagesVisible",
    ):
        assert f'\\"{metric}\\"' in body, metric


def test_the_alarm_topic_is_encrypted_mails_the_operator_and_admits_cloudwatch_and_budgets(
    synthesized: Synthesized,
) -> None:
    # Given the topic, its key and its subscription
    (topic,) = synthesized.properties("AWS::SNS::Topic")
    key_id = ref_name(topic["KmsMasterKeyId"])
    key = synthesized.resources[key_id]
    (subscription,) = synthesized.properties("AWS::SNS::Subscription")
    # Then the topic is encrypted with a rotating key CloudWatch and Budgets may use
    assert ref_name(topic["KmsMasterKeyId"]) == key_id
    assert key["Properties"]["EnableKeyRotation"] is True
    services = {
        service
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        for service in as_list(s["Principal"].get("Service", []))
    }
    assert {"cloudwatch.amazonaws.com", "budgets.amazonaws.com"} <= services
    # And the alarm e-mail from context is subscribed
    assert (subscription["Protocol"], subscription["Endpoint"]) == ("email", ALARM_EMAIL)


def test_the_budget_warns_on_actual_80_and_100_percent_and_forecast_100_percent(
    synthesized: Synthesized,
) -> None:
    # Given the budget
    (budget,) = synthesized.properties("AWS::Budgets::Budget")
    (topic_id,) = synthesized.of_type("AWS::SNS::Topic")
    # Then it is a monthly cost budget at the configured limit
    data = budget["Budget"]
    assert (data["BudgetType"], data["TimeUnit"]) == ("COST", "MONTHLY")
    assert data["BudgetLimit"] == {"Amount": DeploymentConfig().monthly_budget_usd, "Unit": "USD"}
    # And it notifies at 80% and 100% of actual spend and 100% of forecast spend
    notices = budget["NotificationsWithSubscribers"]
    assert sorted(
        (n["Notification"]["NotificationType"], n["Notification"]["Threshold"]) for n in notices
    ) == [("ACTUAL", 80), ("ACTUAL", 100), ("FORECASTED", 100)]
    for notice in notices:
        assert notice["Notification"]["ThresholdType"] == "PERCENTAGE"
        # And each goes to the alarm topic and to the alarm e-mail
        subscribers = {
            (s["SubscriptionType"], ref_name(s["Address"]) or s["Address"]) for s in notice["Subscribers"]
        }
        assert subscribers == {("SNS", topic_id), ("EMAIL", ALARM_EMAIL)}
    # And its name carries the region (budget names are unique per account, not per region)
    assert data["BudgetName"] == {
        "Fn::Join": ["", [f"sentinel-{CONTEXT['stage']}-", {"Ref": "AWS::Region"}, "-monthly"]]
    }


def _publish_grants(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    (policy,) = synthesized.properties("AWS::SNS::TopicPolicy")
    allowed = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    return {s["Principal"]["Service"]: s for s in allowed if s["Action"] == "sns:Publish"}


def test_cloudwatch_and_budgets_may_publish_to_the_alarm_topic_for_this_account_and_stack_only(
    synthesized: Synthesized,
) -> None:
    # Given the alarm topic's policy (it replaces SNS's default one: whoever it leaves out cannot publish)
    grants = _publish_grants(synthesized)
    (topic_id,) = synthesized.of_type("AWS::SNS::Topic")
    # Then exactly CloudWatch and AWS Budgets may publish, to this topic
    assert set(grants) == {"cloudwatch.amazonaws.com", "budgets.amazonaws.com"}
    for grant in grants.values():
        assert ref_name(grant["Resource"]) == topic_id
        # And each only on behalf of this account
        assert grant["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    # And CloudWatch only for this stack's alarms, in this region: every alarm's name matches the pattern
    pattern = _joined(grants["cloudwatch.amazonaws.com"]["Condition"]["ArnLike"]["aws:SourceArn"])
    arn = "arn:{AWS::Partition}:cloudwatch:{AWS::Region}:{AWS::AccountId}:alarm:"
    assert pattern == f"{arn}sentinel-{CONTEXT['stage']}-*"
    names = [a["AlarmName"] for a in synthesized.properties("AWS::CloudWatch::Alarm")]
    assert names and all(fnmatch.fnmatchcase(n, pattern.rsplit(":", 1)[1]) for n in names)
    # And AWS Budgets for this account's budgets (a budget's ARN has no region)
    assert _joined(grants["budgets.amazonaws.com"]["Condition"]["ArnLike"]["aws:SourceArn"]) == (
        "arn:{AWS::Partition}:budgets::{AWS::AccountId}:*"
    )


def test_the_alarm_key_admits_the_same_publishers_under_the_same_conditions(synthesized: Synthesized) -> None:
    # Given the alarm topic's KMS key (SNS encrypts with it on the publisher's behalf)
    grants = _publish_grants(synthesized)
    (topic,) = synthesized.properties("AWS::SNS::Topic")
    key = synthesized.resources[ref_name(topic["KmsMasterKeyId"])]["Properties"]
    services = {
        s["Principal"]["Service"]: s
        for s in key["KeyPolicy"]["Statement"]
        if isinstance(s["Principal"], dict) and "Service" in s["Principal"]
    }
    # Then each publisher of the topic may use the key, scoped exactly as on the topic
    for service, grant in grants.items():
        assert sorted(services[service]["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
        assert services[service]["Condition"] == grant["Condition"]


def _joined(value: Any) -> str:
    """A Fn::Join of strings and pseudo-parameter Refs, as text with `{AWS::Region}` placeholders."""
    if isinstance(value, str):
        return value
    separator, parts = value["Fn::Join"]
    return separator.join(p if isinstance(p, str) else "{" + p["Ref"] + "}" for p in parts)


def test_the_acceptance_runs_refusals_count_toward_no_alarm(synthesized: Synthesized) -> None:
    # Given what one acceptance run sends that is refused: every stateful route without a token and with a
    # token never issued (service.auth_refusals), as many as would trip the denial alarm in two runs
    refused = 2 * sum(1 for route in ROUTES if not route.public)
    assert 2 * refused > DeploymentConfig().authorizer_denials_threshold
    # And the two APIs: production, which the alarms are about, and acceptance, where `make deploy` runs the
    # gate
    apis = {r["Properties"]["Name"]: k for k, r in synthesized.of_type("AWS::ApiGatewayV2::Api").items()}
    production, acceptance = apis["sentinel-test"], apis[f"sentinel-test-{names.NEXT_ALIAS}"]
    # Then every alarm on API Gateway's metrics counts the production API only
    for name, props in alarms(synthesized).items():
        dimensions = [
            d
            for m in props.get("Metrics", [props])
            for d in m.get("MetricStat", {}).get("Metric", m).get("Dimensions", [])
        ]
        api_ids = [ref_name(d["Value"]) for d in dimensions if d["Name"] == "ApiId"]
        assert acceptance not in api_ids, name
        if "api-" in name:
            assert api_ids and set(api_ids) == {production}, name
    # And the denials are counted from the production API's access log, never from the acceptance API's
    (denials,) = synthesized.properties("AWS::Logs::MetricFilter")
    stages = {ref_name(p["ApiId"]): p for p in synthesized.properties("AWS::ApiGatewayV2::Stage")}
    logs_of = {api: json.dumps(stage["AccessLogSettings"]["DestinationArn"]) for api, stage in stages.items()}
    assert ref_name(denials["LogGroupName"]) in logs_of[production]
    assert ref_name(denials["LogGroupName"]) not in logs_of[acceptance]


def test_the_acceptance_canary_notifies_the_topic_but_pages_nobody(synthesized: Synthesized) -> None:
    # Given the canary alarm the live acceptance run sets to prove delivery (sentinel_acceptance/canary.py)
    canary = alarm(synthesized, names.CANARY_ALARM)
    (topic_id,) = synthesized.of_type("AWS::SNS::Topic")
    # Then it notifies the alarm topic, like every alarm, and watches a metric nothing emits
    assert [ref_name(a) for a in canary["AlarmActions"]] == [topic_id]
    assert (canary["Namespace"], canary["MetricName"]) == ("Sentinel/Acceptance", "Canary")
    assert canary["TreatMissingData"] == "notBreaching"
    # And its name is within the topic policy's pattern for this stack's alarms
    grants = _publish_grants(synthesized)
    pattern = _joined(grants["cloudwatch.amazonaws.com"]["Condition"]["ArnLike"]["aws:SourceArn"])
    assert fnmatch.fnmatchcase(canary["AlarmName"], pattern.rsplit(":", 1)[1])
    # And the operator's e-mail receives every alarm but the canary: a deploy pages nobody
    (subscription,) = synthesized.properties("AWS::SNS::Subscription")
    assert subscription["FilterPolicyScope"] == "MessageBody"
    assert subscription["FilterPolicy"] == {"AlarmName": [{"anything-but": [canary["AlarmName"]]}]}
