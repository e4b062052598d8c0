"""The state and principals tables: the gate's only state, so both survive everything but a deliberate act."""

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from sentinel_service import names
from sentinel_service.names import PK, SK, STATE_STREAM_VIEW

# Every chain, fact and head an audit can ask for lives here; point-in-time recovery gives 35 days of
# restorable history, deletion protection and RETAIN keep a stack deletion or a replacement from dropping
# them.
_PROTECTED = {
    "billing_mode": dynamodb.BillingMode.PAY_PER_REQUEST,
    "encryption": dynamodb.TableEncryption.AWS_MANAGED,
    "point_in_time_recovery_specification": dynamodb.PointInTimeRecoverySpecification(
        point_in_time_recovery_enabled=True
    ),
    "deletion_protection": True,
    "removal_policy": RemovalPolicy.RETAIN,
}


class Tables(Construct):
    """`state`: chains, idempotency records, outbox items and claims (pk, sk), with a NEW_IMAGE stream that
    feeds the outbox relay. `principals`: principals and token hashes (pk), written only by the operator."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.state = dynamodb.Table(
            self,
            "State",
            partition_key=dynamodb.Attribute(name=PK, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=SK, type=dynamodb.AttributeType.STRING),
            stream=dynamodb.StreamViewType(STATE_STREAM_VIEW),
            **_PROTECTED,
        )
        self.principals = dynamodb.Table(
            self,
            "Principals",
            partition_key=dynamodb.Attribute(name=PK, type=dynamodb.AttributeType.STRING),
            time_to_live_attribute=names.PRINCIPALS_TTL_ATTRIBUTE,
            **_PROTECTED,
        )
