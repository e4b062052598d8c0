"""The forge check publisher in AWS (issue 15, docs/github.md "Why the check cannot go stale").

- The function `forge_checks` (sentinel_service.handlers.forge_checks): evaluates a candidate's decision at
  the service clock and publishes it as the check run `sentinel/<environment>` through the GitHub App.
- A rule on the Sentinel bus for outbox items of kind `forge_check` and `forge_recheck` (every write to a
  GitHub-mapped candidate, and project-wide re-checks after a configuration or policy amendment or a
  revocation), with the target's retry policy and a dead-letter queue for events that cannot be delivered.
  EventBridge invokes Lambda asynchronously, so a function error (GitHub unreachable: ForgeUnavailable) is
  retried by Lambda's own asynchronous retries on the `live` alias, with backoff, and then sent to the same
  dead-letter queue; its alarm pages. Meanwhile the check's record has fallen due and the sweep publishes it
  once GitHub answers: a fault delays a check, never turns one success.
- A schedule (every FORGE_SWEEP_SCHEDULE_MINUTES) runs the sweep: every check whose decision changes with
  time (an approval or evidence expiring) before the next run is published again.

Least privilege: the state table's items are read (GetItem, Query: chains and check records); the only write
is PutItem on the check records' partition (`dynamodb:LeadingKeys` = FORGE#CHECKS); the chain key (to verify
chains) and the GitHub App's private key (`app_key_secret_arn`, a construct parameter: the secret is made in
constructs/forge.py) may be read, and the witness read as every release path reads it (the stack grants it:
a required check lets a change merge, so it judges each chain against the witness, never advisorily);
nothing else."""

from collections.abc import Mapping, Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from sentinel_infra.constructs.consumers import consumer_rule
from sentinel_infra.constructs.dead_letters import dead_letter_queue
from sentinel_infra.constructs.service_function import ServiceFunction
from sentinel_service import names

CHECK_RECORDS_PK = "FORGE#CHECKS"  # sentinel_service.adapters.state_layout.CHECK_RECORDS_PK
STATE_READ_ACTIONS = ("dynamodb:GetItem", "dynamodb:Query")
RECORD_WRITE_ACTIONS = ("dynamodb:PutItem",)
DELIVERY_RETRIES = 10  # EventBridge -> Lambda (throttled or unavailable service), before the dead letter
DELIVERY_MAX_AGE = Duration.hours(6)
FUNCTION_RETRIES = 2  # Lambda's asynchronous retries of a function error (its maximum), with backoff
FUNCTION_MAX_AGE = Duration.hours(6)
# The publisher's items, in the stream image the pipe relays (consumer_rule excludes synthetic ones).
FORGE_ITEMS_IMAGE = {"outbox_kind": {"S": [names.OUTBOX_KIND_FORGE_CHECK, names.OUTBOX_KIND_FORGE_RECHECK]}}


class ForgeChecks(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        layers: Sequence[lambda_.ILayerVersion],
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
        table: dynamodb.ITable,
        bus: events.IEventBus,
        chain_key_secret_arn: str,
        app_key_secret_arn: str | None = None,
        live_version: str | None = None,
    ) -> None:
        """`environment`: the common function environment with the state table and the chain key's ARN.
        `app_key_secret_arn`: the GitHub App's private key secret (constructs/forge.py); None grants none and
        sets no variable (the function then publishes nothing: every item is retried, then dead-lettered)."""
        super().__init__(scope, construct_id)
        env = dict(environment)
        if app_key_secret_arn:
            env[names.ENV_GITHUB_APP_KEY_SECRET_ARN] = app_key_secret_arn
        self.function = ServiceFunction(
            self,
            "Publisher",
            name=names.FORGE_CHECKS_FUNCTION,
            code=code,
            layers=layers,
            environment=env,
            log_retention=log_retention,
            description="Sentinel forge check publisher (decisions as GitHub check runs)",
            live_version=live_version,
        )
        fn = self.function
        fn.grant(STATE_READ_ACTIONS, [table.table_arn])
        fn.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(RECORD_WRITE_ACTIONS),
                resources=[table.table_arn],
                conditions={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [CHECK_RECORDS_PK]}},
            )
        )
        fn.grant(
            ["secretsmanager:GetSecretValue"], [chain_key_secret_arn, *filter(None, [app_key_secret_arn])]
        )
        self.dead_letters = dead_letter_queue(
            self,
            "This queue is itself the forge check publisher's dead-letter queue: an event lands "
            "here only after every retry, an alarm fires on its first message, and the sweep publishes "
            "the check again regardless; a further queue behind it would add nothing.",
        )
        fn.alias.configure_async_invoke(
            retry_attempts=FUNCTION_RETRIES,
            max_event_age=FUNCTION_MAX_AGE,
            on_failure=destinations.SqsDestination(self.dead_letters),
        )
        self.items = consumer_rule(
            self,
            "Items",
            bus=bus,
            new_image=FORGE_ITEMS_IMAGE,
            targets=[
                targets.LambdaFunction(
                    fn.alias,
                    retry_attempts=DELIVERY_RETRIES,
                    max_event_age=DELIVERY_MAX_AGE,
                    dead_letter_queue=self.dead_letters,
                )
            ],
            description="Sentinel: forge_check and forge_recheck outbox items to the forge check publisher",
        )
        # The bus by its ARN (EventBusName takes a name or an ARN): the acceptance emulation's CloudFormation
        # on moto resolves a bus's Ref to an object rather than its name, and an ARN reads the same in AWS.
        rule = self.items.node.default_child
        assert isinstance(rule, events.CfnRule)
        rule.add_property_override("EventBusName", bus.event_bus_arn)
        self.sweep = events.Rule(
            self,
            "Sweep",
            schedule=events.Schedule.rate(Duration.minutes(names.FORGE_SWEEP_SCHEDULE_MINUTES)),
            targets=[targets.LambdaFunction(fn.alias, retry_attempts=0)],
            description="Sentinel: publish again every forge check whose decision expires before next run",
        )

    def alarm(self, topic: sns.ITopic, prefix: str) -> cloudwatch.Alarm:
        """The dead-letter alarm, on the stack's alarm topic (the function's own alarms are the monitoring
        construct's, as every function's)."""
        alarm = cloudwatch.Alarm(
            self,
            "DeadLettersAlarm",
            alarm_name=f"{prefix}-forge-check-dead-letters",
            metric=self.dead_letters.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(5), statistic="Maximum"
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description="A forge check publication failed after every retry (GitHub unreachable or "
            "refusing, or the app key unreadable). The check on the pull request is stale but never falsely "
            "success: its record is due and the sweep publishes it once GitHub answers. The dead letter "
            "names the candidate; the function's log says why.",
        )
        alarm.add_alarm_action(actions.SnsAction(topic))
        return alarm
