"""Notifications out of the bus (docs/notifications.md): an SNS topic and a webhook, each switched on by
context (`-c notifySns=true`, `-c notifyWebhookUrl=https://...`), both off by default.

Notifications are outbox items of kind `notification`, written in the transaction of the decision or plan that
caused them; the outbox pipe (events.py) relays them to the bus like every side effect, as the DynamoDB stream
record (detail-type sentinel.outbox). One rule picks them out by their item's `outbox_kind` (the pipe needs no
third reader of the stream: DynamoDB throttles more than two per shard) and sends each target a body of its
own: the topic gets `{event, text, notification}` (the whole event as its JSON text), the webhook a chat body,
`{"text": ...}`, whose text the core escaped for chat (sentinel_domain.notifications).

- The topic is encrypted with a key of its own; only this rule may publish to it (the topic policy and the
  key policy name the rule's ARN and the account), and only over TLS.
- The webhook is an EventBridge API destination: HTTPS only (config.py refuses anything else), rate-limited,
  authorised by an API key header held in a Secrets Manager secret the operator fills (never in the
  template, never in the context); EventBridge keeps its own copy, refreshed on each deploy.
- Both targets retry for a day, then leave the event in a dead-letter queue (encrypted, TLS only) whose
  first message raises an alarm on the stack's alarm topic.
"""

from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sentinel_infra.config import DeploymentConfig
from sentinel_infra.constructs.consumers import consumer_pattern, consumer_rule
from sentinel_infra.constructs.dead_letters import dead_letter_queue
from sentinel_service import names

RETRY_ATTEMPTS = 24
MAX_EVENT_AGE = Duration.hours(24)
_IMAGE = "$.detail.dynamodb.NewImage"
TEXT_PATH = f"{_IMAGE}.{names.NOTIFICATION_TEXT_ATTRIBUTE}.S"
EVENT_PATH = f"{_IMAGE}.{names.NOTIFICATION_EVENT_ATTRIBUTE}.S"
ITEM_PATH = f"{_IMAGE}.item.S"
# What the rule matches: a new notification outbox item relayed by the outbox pipe.
PATTERN: dict[str, Any] = consumer_pattern(
    {"outbox_kind": {"S": [names.OUTBOX_KIND_NOTIFICATION]}}, eventName=["INSERT"]
)


def enabled(config: DeploymentConfig) -> bool:
    return config.notify_sns or bool(config.notify_webhook_url)


@jsii.implements(events.IRuleTarget)
class _TopicTarget:
    """The topic as the rule's target, authorised by the topic's own policy, which names this rule, rather
    than by the grant `targets.SnsTopic` adds, which names no rule and no account."""

    def __init__(self, topic: sns.ITopic, dead_letters: sqs.IQueue, message: events.RuleTargetInput) -> None:
        self.topic, self.dead_letters, self.message = topic, dead_letters, message

    def bind(self, _rule: events.IRule, _id: str | None = None) -> events.RuleTargetConfig:
        return events.RuleTargetConfig(
            arn=self.topic.topic_arn,
            input=self.message,
            retry_policy=events.CfnRule.RetryPolicyProperty(
                maximum_retry_attempts=RETRY_ATTEMPTS,
                maximum_event_age_in_seconds=int(MAX_EVENT_AGE.to_seconds()),
            ),
            dead_letter_config=events.CfnRule.DeadLetterConfigProperty(arn=self.dead_letters.queue_arn),
        )


class Notifications(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        bus: events.IEventBus,
        alarm_topic: sns.ITopic,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.prefix = f"{names.SERVICE}-{config.stage}"
        rule_name = f"{self.prefix}-notifications"
        # Formatted, not read from the rule: the key's policy is part of the key, which the topic (a target of
        # the rule) needs first, so a reference to the rule would be a cycle.
        self.rule_arn = stack.format_arn(
            service="events", resource="rule", resource_name=f"{bus.event_bus_name}/{rule_name}"
        )
        self.dead_letters = dead_letter_queue(
            self,
            "This queue is itself the notification targets' dead-letter queue: an event lands "
            f"here after {RETRY_ATTEMPTS} retries over a day, its alarm fires on the first message.",
        )
        self.dead_letters.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["sqs:SendMessage"],
                resources=[self.dead_letters.queue_arn],
                conditions={"ArnEquals": {"aws:SourceArn": self.rule_arn}},
            )
        )
        self.rule = consumer_rule(
            self,
            "Rule",
            rule_name=rule_name,
            bus=bus,
            new_image={"outbox_kind": {"S": [names.OUTBOX_KIND_NOTIFICATION]}},
            detail={"eventName": ["INSERT"]},
            description="Sentinel notifications (decision.changed, review.requested, hold.needs_person) "
            "to the configured targets",
        )
        self.topic = self._topic(config) if config.notify_sns else None
        self.webhook = self._webhook(config) if config.notify_webhook_url else None
        alarm = cloudwatch.Alarm(
            self,
            "DeadLettersAlarm",
            alarm_name=f"{self.prefix}-notification-dead-letters",
            alarm_description="A notification could not be delivered to its target for a day: read the "
            "dead-letter queue (docs/notifications.md).",
            metric=self.dead_letters.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(5), statistic="Maximum"
            ),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(cloudwatch_actions.SnsAction(alarm_topic))

    def _scoped(self) -> dict[str, dict[str, str]]:
        return {
            "StringEquals": {"aws:SourceAccount": cdk.Stack.of(self).account},
            "ArnEquals": {"aws:SourceArn": self.rule_arn},
        }

    def _topic(self, config: DeploymentConfig) -> sns.Topic:
        # A customer managed key: EventBridge cannot publish to a topic under the AWS managed SNS key.
        key = kms.Key(
            self,
            "TopicKey",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.DESTROY,  # messages in flight only: SNS keeps nothing delivered
            description=f"Sentinel {config.stage} notification topic encryption (its rule may use it)",
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions=self._scoped(),
            )
        )
        topic = sns.Topic(
            self,
            "Topic",
            display_name=f"Sentinel {config.stage} notifications",
            master_key=key,
            enforce_ssl=True,
        )
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyTheNotificationRulePublishes",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions=self._scoped(),
            )
        )
        message = events.RuleTargetInput.from_object(
            {
                "event": events.EventField.from_path(EVENT_PATH),
                "text": events.EventField.from_path(TEXT_PATH),
                "notification": events.EventField.from_path(ITEM_PATH),
            }
        )
        self.rule.add_target(_TopicTarget(topic, self.dead_letters, message))
        return topic

    def _webhook(self, config: DeploymentConfig) -> events.ApiDestination:
        self.webhook_key = secretsmanager.Secret(
            self,
            "WebhookKey",
            description=f"Sentinel {config.stage}: the API key the notification webhook expects in its "
            f"{config.notify_webhook_api_key_header} header. Put the real key here, then deploy again "
            "(EventBridge copies it into the connection on each deploy).",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=48, exclude_punctuation=True, include_space=False
            ),
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        cdk.Validations.of(self.webhook_key).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-SMG4",
                reason="The key is issued by the chat or webhook service, not by AWS: the operator replaces "
                "it when that service rotates it, then redeploys (docs/notifications.md).",
            )
        )
        connection = events.Connection(
            self,
            "WebhookConnection",
            authorization=events.Authorization.api_key(
                config.notify_webhook_api_key_header,
                cdk.SecretValue.secrets_manager(self.webhook_key.secret_arn),
            ),
            description=f"Sentinel {config.stage} notification webhook: API key header",
        )
        destination = events.ApiDestination(
            self,
            "Webhook",
            connection=connection,
            endpoint=config.notify_webhook_url,
            http_method=events.HttpMethod.POST,
            rate_limit_per_second=config.notify_webhook_rate_per_second,
            description=f"Sentinel {config.stage} notifications as chat messages",
        )
        self.rule.add_target(
            targets.ApiDestination(
                destination,
                event=events.RuleTargetInput.from_object({"text": events.EventField.from_path(TEXT_PATH)}),
                header_parameters={"Content-Type": "application/json"},
                dead_letter_queue=self.dead_letters,
                retry_attempts=RETRY_ATTEMPTS,
                max_event_age=MAX_EVENT_AGE,
            )
        )
        return destination
