"""The forge (GitHub): the webhook's secret and the GitHub App's private key, the forge worker, and the bus
rule that hands it the forge outbox items (docs/github.md, "Webhooks and who acts").

The webhook route itself is a row of the route table (`POST /v1/forge/github/webhook`, public: GitHub signs
each delivery, so API Gateway runs no authorizer) served by the `forge` function, which the stack builds like
every routed function. This construct gives that function the webhook secret and nothing else of GitHub's; it
never calls GitHub. The worker, fed by the bus, holds the app's private key, reads the principal directory
(the app's principal, as it is now) and writes the state table; nothing routes a request to it.

Delivery to the worker: the outbox relay puts every outbox item on the bus (detail-type sentinel.outbox, the
stream record as detail); this rule takes the verified deliveries (`forge_delivery`). The rule retries its
own delivery and parks what it cannot deliver in the forge dead-letter queue; the worker's asynchronous
invocation retries a failure (GitHub unavailable or rate-limited: ForgeUnavailable is raised) twice with
Lambda's backoff and then sends the event to the same queue. An alarm pages on its first message; the operator
redrives it once GitHub answers (the worker is idempotent: a candidate that exists is not an error)."""

import aws_cdk as cdk
from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from constructs import Construct

from sentinel_infra.constructs.consumers import consumer_rule
from sentinel_infra.constructs.dead_letters import dead_letter_queue
from sentinel_infra.constructs.service_function import ServiceFunction
from sentinel_service import names

# Only verified deliveries: `forge_check` items (a candidate's check to publish) belong to the check
# publisher, whose own rule takes them.
FORGE_KINDS = (names.OUTBOX_KIND_FORGE_DELIVERY,)
RULE_RETRY_ATTEMPTS = 8  # EventBridge's own retries of a delivery to Lambda (throttled, unavailable)
RULE_MAX_EVENT_AGE = Duration.hours(24)
WORKER_RETRY_ATTEMPTS = 2  # Lambda's asynchronous retries of a failed run (the most it allows)
WORKER_MAX_EVENT_AGE = Duration.hours(6)
ALARM_PERIOD = Duration.minutes(5)


# The worker's items, in the stream image the pipe relays (consumer_rule excludes synthetic ones).
FORGE_IMAGE = {"outbox_kind": {"S": list(FORGE_KINDS)}}


class Forge(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        bus: events.IEventBus,
        webhook: ServiceFunction,
        worker: ServiceFunction,
    ) -> None:
        super().__init__(scope, construct_id)
        self.webhook_secret = secretsmanager.Secret(
            self,
            "WebhookSecret",
            description=f"Sentinel {stage}: the GitHub App's webhook secret. Generated here; type the same "
            "value into the app's settings (docs/deploy.md).",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=48, exclude_punctuation=True, include_space=False
            ),
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        self.app_key = secretsmanager.Secret(
            self,
            "AppPrivateKey",
            description=f"Sentinel {stage}: the GitHub App's private key (PEM). The operator puts it in "
            "(docs/deploy.md); until then the worker cannot reach GitHub and deliveries wait.",
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        for secret, why in (
            (self.webhook_secret, "GitHub holds the same value: a rotation is a planned change made in both"),
            (self.app_key, "GitHub issues app private keys; a new one is generated in the app's settings"),
        ):
            cdk.Validations.of(secret).acknowledge(
                cdk.Acknowledgment(
                    id="AwsSolutions-SMG4",
                    reason=f"{why} (docs/deploy.md), never a timer that would break the integration.",
                )
            )
        # The webhook: the secret, nothing of GitHub's API.
        webhook.function.add_environment(names.ENV_GITHUB_WEBHOOK_SECRET_ARN, self.webhook_secret.secret_arn)
        webhook.grant(["secretsmanager:GetSecretValue"], [self.webhook_secret.secret_arn])
        # The worker: the app's key.
        worker.function.add_environment(names.ENV_GITHUB_APP_KEY_SECRET_ARN, self.app_key.secret_arn)
        worker.grant(["secretsmanager:GetSecretValue"], [self.app_key.secret_arn])

        self.dead_letters = dead_letter_queue(
            self,
            "This queue is itself the forge worker's dead-letter queue (the rule's and the "
            "asynchronous invocation's): an alarm fires on its first message and the operator redrives "
            "it; a further queue behind it would add nothing.",
        )
        worker.alias.configure_async_invoke(
            retry_attempts=WORKER_RETRY_ATTEMPTS,
            max_event_age=WORKER_MAX_EVENT_AGE,
            on_failure=destinations.SqsDestination(self.dead_letters),
        )
        # The bus by its Name attribute (GetAtt), which is what a Ref gives too: moto's CloudFormation, which
        # the local acceptance deploys to, resolves a Ref to the bus object instead of its name.
        cfn_bus = bus.node.default_child
        named = (
            events.EventBus.from_event_bus_name(self, "SentinelBus", cfn_bus.attr_name)
            if isinstance(cfn_bus, events.CfnEventBus)
            else bus
        )
        self.rule = consumer_rule(
            self,
            "WorkerRule",
            bus=named,
            new_image=FORGE_IMAGE,
            targets=[
                targets.LambdaFunction(
                    worker.alias,
                    retry_attempts=RULE_RETRY_ATTEMPTS,
                    max_event_age=RULE_MAX_EVENT_AGE,
                    dead_letter_queue=self.dead_letters,
                )
            ],
            description="Sentinel: verified GitHub deliveries (forge_delivery items) to the forge worker",
        )

    def alarm_to(self, topic: sns.ITopic, prefix: str) -> cloudwatch.Alarm:
        """The dead-letter alarm, on the stack's alarm topic (Monitoring alarms on every function)."""
        alarm = cloudwatch.Alarm(
            self,
            "DeadLettersAlarm",
            alarm_name=f"{prefix}-forge-dead-letters",
            metric=self.dead_letters.metric_approximate_number_of_messages_visible(
                period=ALARM_PERIOD, statistic="Maximum"
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description="A forge outbox item (a verified GitHub delivery, or a check to publish) "
            "failed every retry: GitHub unreachable or refusing for hours, the app's key missing, or the "
            "worker failing. No candidate was created for it. Fix the cause, then redrive the queue (the "
            "worker is idempotent).",
        )
        alarm.add_alarm_action(actions.SnsAction(topic))
        return alarm
