"""The outbox relay: the state table's stream -> EventBridge Pipes -> the Sentinel bus, which an archive
keeps.

Side effects and chain checkpoints leave only through items written in the same transaction as the change
they belong to (ARCHITECTURE.md); this is the AWS half of that promise. One pipe reads the stream for side
effects, and each event's detail-type says what it is without a transformation that could drop a field:

  outbox      sk begins with "O#", outbox_pending is present and the kind is not a checkpoint
                                                                  -> detail-type sentinel.outbox

Chain checkpoints do not come this way: a HEAD image is whatever the table holds, a tamperer's too, so the
checkpoint outbox items (written in the accepted write's transaction, tagged under the chain key) feed the
witness writer through its own pipe (sentinel_infra/constructs/integrity.py).

Delivery is at least once (consumers dedupe by the item's id). A record that still fails after the retries
goes to a dead-letter queue, and its alarm pages: a side effect or a checkpoint must never vanish silently.
DynamoDB recommends at most two readers per stream shard: this pipe and the witness feed are those two.
"""

import json

import aws_cdk as cdk
from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_pipes as pipes
from constructs import Construct

from sentinel_infra.constructs.dead_letters import dead_letter_queue
from sentinel_service import names
from sentinel_service.names import SK

OUTBOX_SK_PREFIX = "O#"
HEAD_SK = "HEAD"
_WRITES = ["INSERT", "MODIFY"]  # a REMOVE carries no new image and is nothing to relay

OUTBOX_FILTER = {
    "eventName": _WRITES,
    "dynamodb": {
        "NewImage": {
            SK: {"S": [{"prefix": OUTBOX_SK_PREFIX}]},
            "outbox_pending": {"S": [{"exists": True}]},
            "outbox_kind": {"S": [{"anything-but": [names.OUTBOX_KIND_CHECKPOINT]}]},
        }
    },
}
MAX_RETRY_ATTEMPTS = 10


class OutboxRelay(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        table: dynamodb.Table,
        archive_retention_days: int,
    ) -> None:
        super().__init__(scope, construct_id)
        if table.table_stream_arn is None:
            raise ValueError("the outbox relay needs the state table's stream")
        self.bus = events.EventBus(self, "Bus", description=f"Sentinel {stage}: side effects and checkpoints")
        self.archive = events.Archive(
            self,
            "Archive",
            source_event_bus=self.bus,
            event_pattern=events.EventPattern(source=[names.EVENT_SOURCE]),
            retention=Duration.days(archive_retention_days) if archive_retention_days else None,
            description="Every relayed side effect and chain checkpoint; verification compares chains "
            "against the newest checkpoint kept here",
        )
        self.dead_letters = dead_letter_queue(
            self,
            "This queue is itself the relay pipes' dead-letter queue: a record lands here only "
            f"after {MAX_RETRY_ATTEMPTS} failed deliveries, an alarm fires on its first message, and the "
            "operator replays it by hand; a further queue behind it would add nothing.",
        )
        account = cdk.Stack.of(self).account
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "pipes.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": account}}
            ),
            description="Sentinel outbox relay: read the state table's stream, put events on the "
            "Sentinel bus",
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "dynamodb:DescribeStream",
                    "dynamodb:GetRecords",
                    "dynamodb:GetShardIterator",
                ],
                resources=[table.table_stream_arn],
            )
        )
        # ListStreams names no resource in IAM (the service authorises it on "*" only): a stream ARN there
        # grants nothing. It lists stream ARNs and labels, never their records.
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["dynamodb:ListStreams"], resources=["*"])
        )
        cdk.Validations.of(self.role).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="dynamodb:ListStreams supports no resource-level permission (the Service "
                "Authorization Reference lists it on '*'); it reveals stream ARNs, not records.",
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["events:PutEvents"], resources=[self.bus.event_bus_arn])
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.dead_letters.queue_arn])
        )
        self.outbox = self._pipe("Outbox", table, OUTBOX_FILTER, names.DETAIL_TYPE_OUTBOX)

    def _pipe(
        self, construct_id: str, table: dynamodb.Table, pattern: dict, detail_type: str
    ) -> pipes.CfnPipe:
        pipe = pipes.CfnPipe(
            self,
            construct_id,
            role_arn=self.role.role_arn,
            source=table.table_stream_arn or "",
            source_parameters=pipes.CfnPipe.PipeSourceParametersProperty(
                filter_criteria=pipes.CfnPipe.FilterCriteriaProperty(
                    filters=[pipes.CfnPipe.FilterProperty(pattern=json.dumps(pattern, sort_keys=True))]
                ),
                dynamo_db_stream_parameters=pipes.CfnPipe.PipeSourceDynamoDBStreamParametersProperty(
                    # From the oldest record the stream keeps: a pipe created after the first writes (or
                    # restarted) still relays them rather than skipping to "now".
                    starting_position="TRIM_HORIZON",
                    batch_size=1,  # one record, one event: a failure never re-sends a record's neighbours
                    maximum_retry_attempts=MAX_RETRY_ATTEMPTS,
                    dead_letter_config=pipes.CfnPipe.DeadLetterConfigProperty(
                        arn=self.dead_letters.queue_arn
                    ),
                ),
            ),
            target=self.bus.event_bus_arn,
            target_parameters=pipes.CfnPipe.PipeTargetParametersProperty(
                event_bridge_event_bus_parameters=pipes.CfnPipe.PipeTargetEventBridgeEventBusParametersProperty(
                    source=names.EVENT_SOURCE, detail_type=detail_type
                ),
            ),
            description=f"Sentinel outbox relay: {detail_type} records of the state table's stream",
        )
        # The pipe validates its role when it is created: the policy must exist first.
        pipe.node.add_dependency(self.role)
        return pipe
