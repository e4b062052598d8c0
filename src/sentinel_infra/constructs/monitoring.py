"""Alarms to one SNS topic (and the operator's e-mail), and a dashboard of the same metrics.

Every alarm treats missing data as fine: a quiet gate is a healthy gate. Thresholds are static and stated
here (or in cdk.json), so a reader can tell what pages and why; anomaly detection needs weeks of steady
traffic to learn a band, and a gate driven by bursts of CI runs would page on its own usage.
"""

from collections.abc import Mapping
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sentinel_infra.config import DeploymentConfig
from sentinel_infra.constructs.api import Api
from sentinel_infra.constructs.service_function import ServiceFunction
from sentinel_service import names

PERIOD = Duration.minutes(5)
DURATION_ALARM_FRACTION = 0.8  # p95 duration above 80% of the timeout: timeouts are next
API_5XX_THRESHOLD = 5  # 5xx answers in 5 minutes (a function error, timeout or a store outage)
API_4XX_RATE_PERCENT = 25  # of requests in 5 minutes, judged only once there are enough of them
API_4XX_MIN_REQUESTS = 20
# The DynamoDB operations the functions issue (see test_stack_iam); throttles and errors are summed over them.
TABLE_OPERATIONS = ("GetItem", "Query", "PutItem", "DeleteItem", "TransactWriteItems")


def table_metric(label: str, table: dynamodb.Table, metric_name: str) -> cloudwatch.MathExpression:
    """One of DynamoDB's per-operation metrics summed over the operations the functions issue. The ids name
    the table and the metric, so several of these can share one graph."""
    parts = {
        f"{label}_{metric_name}_{operation}".lower(): cloudwatch.Metric(
            namespace="AWS/DynamoDB",
            metric_name=metric_name,
            statistic="Sum",
            period=PERIOD,
            dimensions_map={"TableName": table.table_name, "Operation": operation},
        )
        for operation in TABLE_OPERATIONS
    }
    return cloudwatch.MathExpression(
        expression=" + ".join(f"FILL({i}, 0)" for i in parts),
        using_metrics=parts,
        period=PERIOD,
        label=f"{label} {metric_name}",
    )


@dataclass(frozen=True)
class Thresholds:
    invocation_spike: int
    authorizer_denials: int


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        functions: Mapping[str, ServiceFunction],
        api: Api,
        tables: Mapping[str, dynamodb.Table],
        dead_letters: sqs.Queue,
    ) -> None:
        super().__init__(scope, construct_id)
        self.prefix = f"sentinel-{config.stage}"
        self.thresholds = Thresholds(config.invocation_spike_threshold, config.authorizer_denials_threshold)
        self.topic = self._topic(config)
        self.alarms: dict[str, cloudwatch.Alarm] = {}

        for name, fn in functions.items():
            self._function_alarms(name, fn)
        self._api_alarms(api)
        self.denials = self._denials_metric(api)
        self._alarm(
            "authorizer-denials",
            self.denials,
            self.thresholds.authorizer_denials,
            "The authorizer refused more tokens than usual: token guessing, or a revoked or expired "
            "principal retrying in a loop. The access log names the source IPs.",
            cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        for label, table in tables.items():
            self._alarm(
                f"{label}-table-throttles",
                table_metric(label, table, "ThrottledRequests"),
                1,
                f"DynamoDB throttled requests on the {label} table: on-demand capacity is adapting "
                "or a hot partition is hit; callers see STATE_UNAVAILABLE and hold.",
            )
            self._alarm(
                f"{label}-table-system-errors",
                table_metric(label, table, "SystemErrors"),
                1,
                f"DynamoDB answered with 5xx on the {label} table; callers see STATE_UNAVAILABLE.",
            )
        self._alarm(
            "relay-dead-letters",
            dead_letters.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
            1,
            "A stream record could not be relayed to the bus after every retry: a side effect or a "
            "checkpoint is waiting in the dead-letter queue. Replay it, then purge it.",
        )
        self.decisions = {outcome: self._decisions_metric(outcome) for outcome in names.DECISION_OUTCOMES}
        self._alarm(
            "decisions-hold-error",
            self.decisions["hold_error"],
            1,
            "A decision held because the gate could not establish its facts (STATE_UNAVAILABLE, "
            "STATE_TAMPERED or EVIDENCE_QUERY_INCOMPLETE). Tampering is a security incident.",
        )
        self.integrity = {
            metric: self._integrity_metric(metric)
            for metric in (names.TAMPERED_CHAINS_METRIC, names.FORGED_CHECKPOINTS_METRIC)
        }
        self._alarm(
            "chain-tampered",
            self.integrity[names.TAMPERED_CHAINS_METRIC],
            1,
            "A chain failed verification against the witness (rolled back, truncated or rewritten), or the "
            "witness refused a fork: a security incident. The chain is marked tampered in the witness "
            "(tampered/<project>/<chain>.json) and its decisions hold; the verifier's log names it.",
        )
        self._alarm(
            "checkpoint-forged",
            self.integrity[names.FORGED_CHECKPOINTS_METRIC],
            1,
            "A checkpoint outbox item's tag did not verify under the chain key: someone without the key "
            "wrote the state table. The witness writer dropped it; its log names the partition and seq.",
        )
        self.dashboard = self._dashboard(functions, api, tables, dead_letters)

    # ---- the topic -------------------------------------------------------------------------------------

    def _topic(self, config: DeploymentConfig) -> sns.Topic:
        # A customer managed key, because CloudWatch and AWS Budgets cannot publish to a topic encrypted with
        # the AWS managed SNS key (its policy cannot be changed to admit them).
        # It protects alarm messages in flight only (SNS keeps nothing once delivered), so it may go with the
        # stack (KMS still waits 30 days before deleting it).
        key = kms.Key(
            self,
            "AlarmsKey",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.DESTROY,
            description="Sentinel alarm topic encryption (CloudWatch and Budgets may use it)",
        )
        account = cdk.Stack.of(self).account
        for service in ("cloudwatch.amazonaws.com", "budgets.amazonaws.com"):
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal(service)],
                    actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                    resources=["*"],
                    conditions={"StringEquals": {"aws:SourceAccount": account}},
                )
            )
        topic = sns.Topic(
            self,
            "AlarmTopic",
            display_name=f"Sentinel {config.stage} alarms",
            master_key=key,
            enforce_ssl=True,
        )
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("budgets.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": account}},
            )
        )
        if config.alarm_email:
            topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        else:
            cdk.Annotations.of(self).add_warning_v2(
                "sentinel:no-alarm-email",
                "alarmEmail is empty: alarms and budget notices reach only the SNS topic. Deploy with "
                "-c alarmEmail=you@example.com, then confirm the subscription e-mail.",
            )
        return topic

    # ---- alarms ----------------------------------------------------------------------------------------

    def _alarm(
        self,
        name: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        description: str,
        comparison: cloudwatch.ComparisonOperator = (
            cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        ),
        evaluation_periods: int = 1,
        datapoints: int = 1,
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            "Alarm-" + name,
            alarm_name=f"{self.prefix}-{name}",
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=datapoints,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        self.alarms[name] = alarm
        return alarm

    def _function_alarms(self, name: str, fn: ServiceFunction) -> None:
        f = fn.function
        self._alarm(
            f"{name}-errors",
            f.metric_errors(period=PERIOD, statistic="Sum"),
            1,
            f"The {name} function raised or timed out (an unhandled error, not a refusal).",
        )
        self._alarm(
            f"{name}-throttles",
            f.metric_throttles(period=PERIOD, statistic="Sum"),
            1,
            f"Lambda throttled the {name} function: account or reserved concurrency is exhausted.",
        )
        self._alarm(
            f"{name}-invocation-spike",
            f.metric_invocations(period=PERIOD, statistic="Sum"),
            self.thresholds.invocation_spike,
            f"The {name} function ran more than {self.thresholds.invocation_spike} times in 5 minutes: "
            "a client in a loop, or traffic this deployment was not sized for.",
            cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        limit_ms = fn.timeout.to_milliseconds() * DURATION_ALARM_FRACTION
        self._alarm(
            f"{name}-duration-p95",
            f.metric_duration(period=PERIOD, statistic="p95"),
            limit_ms,
            f"p95 duration of the {name} function is above 80% of its {fn.timeout.to_seconds()} s "
            "timeout: timeouts (and 503s from API Gateway) are next.",
            cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=3,
            datapoints=2,
        )

    def _api_alarms(self, api: Api) -> None:
        http_api = api.http_api
        self._alarm(
            "api-5xx",
            http_api.metric_server_error(period=PERIOD, statistic="Sum"),
            API_5XX_THRESHOLD,
            "The API answered 5xx: function errors or timeouts, or the store is unavailable.",
        )
        rate = cloudwatch.MathExpression(
            expression=f"IF(requests >= {API_4XX_MIN_REQUESTS}, 100 * errors / requests, 0)",
            using_metrics={
                "errors": http_api.metric_client_error(period=PERIOD, statistic="Sum"),
                "requests": http_api.metric_count(period=PERIOD, statistic="Sum"),
            },
            period=PERIOD,
            label="4xx rate (%)",
        )
        self._alarm(
            "api-4xx-rate",
            rate,
            API_4XX_RATE_PERCENT,
            f"More than {API_4XX_RATE_PERCENT}% of requests were refused (4xx) over 5 minutes: a "
            "misconfigured client, expired tokens, or probing.",
            cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=2,
            datapoints=2,
        )

    # ---- metrics the stack defines -----------------------------------------------------------------------

    def _denials_metric(self, api: Api) -> cloudwatch.Metric:
        # A refusal by the authorizer is a 403 that never reached an integration; a 403 from a function
        # (FORBIDDEN_ROLE and the like) has an integration status and is not counted.
        logs.MetricFilter(
            self,
            "AuthorizerDenials",
            log_group=api.access_logs,
            filter_pattern=logs.FilterPattern.all(
                logs.FilterPattern.string_value("$.status", "=", "403"),
                logs.FilterPattern.string_value("$.integrationStatus", "=", "-"),
            ),
            metric_namespace=names.GATEWAY_NAMESPACE,
            metric_name=names.AUTHORIZER_DENIALS_METRIC,
            # Per API, so two stages in one account never add up in one metric.
            metric_value="1",
            dimensions={names.GATEWAY_API_DIMENSION: "$.apiId"},
        )
        return cloudwatch.Metric(
            namespace=names.GATEWAY_NAMESPACE,
            metric_name=names.AUTHORIZER_DENIALS_METRIC,
            dimensions_map={names.GATEWAY_API_DIMENSION: api.http_api.api_id},
            period=PERIOD,
            statistic="Sum",
        )

    def _decisions_metric(self, outcome: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=names.DECISIONS_NAMESPACE,
            metric_name=names.DECISIONS_METRIC,
            dimensions_map={names.DECISIONS_DIMENSION: outcome},
            period=PERIOD,
            statistic="Sum",
        )

    def _integrity_metric(self, metric: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=names.INTEGRITY_NAMESPACE,
            metric_name=metric,
            dimensions_map={names.INTEGRITY_DIMENSION: names.SERVICE},
            period=PERIOD,
            statistic="Sum",
        )

    # ---- the dashboard ---------------------------------------------------------------------------------

    def _dashboard(
        self,
        functions: Mapping[str, ServiceFunction],
        api: Api,
        tables: Mapping[str, dynamodb.Table],
        dead_letters: sqs.Queue,
    ) -> cloudwatch.Dashboard:
        dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=self.prefix)
        graph = cloudwatch.GraphWidget

        def per_function(title: str, metric_of: str, statistic: str) -> cloudwatch.GraphWidget:
            return graph(
                title=title,
                width=8,
                left=[
                    getattr(fn.function, metric_of)(period=PERIOD, statistic=statistic, label=name)
                    for name, fn in functions.items()
                ],
            )

        http_api = api.http_api
        dashboard.add_widgets(
            graph(
                title="Decisions by outcome",
                width=8,
                stacked=True,
                left=[metric.with_(label=outcome) for outcome, metric in self.decisions.items()],
            ),
            graph(
                title="API requests and errors",
                width=8,
                left=[
                    http_api.metric_count(period=PERIOD, statistic="Sum", label="requests"),
                    http_api.metric_client_error(period=PERIOD, statistic="Sum", label="4xx"),
                    http_api.metric_server_error(period=PERIOD, statistic="Sum", label="5xx"),
                ],
            ),
            graph(
                title="Authorizer denials and API latency (p95)",
                width=8,
                left=[self.denials.with_(label="authorizer denials")],
                right=[http_api.metric_latency(period=PERIOD, statistic="p95", label="latency p95")],
            ),
        )
        dashboard.add_widgets(
            per_function("Invocations", "metric_invocations", "Sum"),
            per_function("Errors", "metric_errors", "Sum"),
            per_function("Throttles", "metric_throttles", "Sum"),
        )
        dashboard.add_widgets(
            per_function("Duration p95 (ms)", "metric_duration", "p95"),
            graph(
                title="DynamoDB throttles and system errors",
                width=8,
                left=[
                    table_metric(label, table, metric)
                    for label, table in tables.items()
                    for metric in ("ThrottledRequests", "SystemErrors")
                ],
            ),
            graph(
                title="Relay dead letters",
                width=8,
                left=[
                    dead_letters.metric_approximate_number_of_messages_visible(
                        period=PERIOD, statistic="Maximum"
                    )
                ],
            ),
        )
        dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", width=24, alarms=list(self.alarms.values()))
        )
        return dashboard
