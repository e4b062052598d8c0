"""Tamper evidence in AWS (issue 13, DOMAIN.md rule 25): the chain key, the witness and who may touch them.

- The chain key: a Secrets Manager secret apart from the token key (64 hex characters, 32 bytes), readable
  only by the functions that write or verify chains: the API's chain writers and the chain verifier.
- The witness: an S3 bucket under Object Lock in compliance mode (default retention `witnessRetentionDays`,
  400 days), versioned (Object Lock needs it), private, TLS only, with a bucket policy that refuses every
  deletion and retention change to everyone and every PutObject without If-None-Match. No statement in the
  template allows s3:DeleteObject*, s3:PutObjectRetention, s3:BypassGovernanceRetention or
  s3:PutBucketObjectLockConfiguration (tests/infrastructure/test_stack_integrity.py).
- The signing key: a KMS ECC_NIST_P256 key (SIGN_VERIFY). The witness writer and the verifier may Sign (both
  write records: checkpoints, and tamper findings); the verifier may GetPublicKey; nobody else may use it.
- The witness writer: fed by its own pipe on the state table's stream (the state table allows two readers
  per shard: the outbox relay's pipe and this one). It receives checkpoint outbox items and every change to
  a chain's events or head, never a raw HEAD as "the checkpoint" (a tamperer writes HEADs too). It may put
  objects under checkpoints/, changed/ and tampered/ and nothing else: no table access at all.
- The chain verifier: run every 5 minutes by an EventBridge schedule; reads the state table, reads the
  witness, puts objects under tampered/ and verifier/.
"""

import json
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_pipes as pipes
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sentinel_infra.constructs.events import MAX_RETRY_ATTEMPTS
from sentinel_infra.constructs.service_function import ServiceFunction
from sentinel_service import names
from sentinel_service.names import SK

# What no one may do to a witnessed record while its retention runs (and nobody is allowed it anyway).
NEVER_ALLOWED = (
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:PutObjectRetention",
    "s3:PutObjectLegalHold",
    "s3:BypassGovernanceRetention",
)
# The witness's key prefixes (sentinel_service.adapters.s3_witness) and who writes under them.
WRITER_PREFIXES = ("checkpoints/", "changed/", "tampered/")
VERIFIER_PREFIXES = ("tampered/", "verifier/")
READ_OBJECT_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion")
LIST_ACTIONS = ("s3:ListBucket", "s3:ListBucketVersions")
CHAIN_KEY_LENGTH = 64  # hex characters: 32 bytes
WRITER_BATCH_SIZE = 10  # every step of the writer is idempotent: a failed batch is retried whole

CHECKPOINT_ITEMS_FILTER = {
    "eventName": ["INSERT"],
    "dynamodb": {
        "NewImage": {
            SK: {"S": [{"prefix": "O#"}]},
            "outbox_kind": {"S": [names.OUTBOX_KIND_CHECKPOINT]},
        }
    },
}
# Every write to a chain's events, facts or head, whoever made it (a REMOVE has keys but no new image).
CHAIN_CHANGES_FILTER = {"dynamodb": {"Keys": {SK: {"S": [{"prefix": "E#"}, "HEAD"]}}}}


class Integrity(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        retention_days: int,
        table: dynamodb.Table,
        dead_letters: sqs.Queue,
    ) -> None:
        super().__init__(scope, construct_id)
        self.chain_key = secretsmanager.Secret(
            self,
            "ChainKey",
            description="Sentinel: the chain key (HMAC tags on chain heads and checkpoints). Never held by "
            "the state table; readable only by the functions that write or verify chains.",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=CHAIN_KEY_LENGTH,
                exclude_punctuation=True,
                exclude_uppercase=True,
                include_space=False,
                exclude_characters="ghijklmnopqrstuvwxyz",  # lower-case hex only
            ),
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        cdk.Validations.of(self.chain_key).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-SMG4",
                reason="Every chain head and witnessed checkpoint carries a tag under this key; a rotation "
                "needs every chain re-sealed under the new key with both keys held, a planned operator "
                "action, never a timer.",
            )
        )
        self.signing_key = kms.Key(
            self,
            "WitnessSigningKey",
            key_spec=kms.KeySpec.ECC_NIST_P256,
            key_usage=kms.KeyUsage.SIGN_VERIFY,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            description="Sentinel witness records: ECDSA P-256 signatures an auditor checks offline with the "
            "public key",
        )
        self.bucket = self._bucket(retention_days)
        self.table = table
        self.dead_letters = dead_letters

    # ---- the bucket --------------------------------------------------------------------------------------

    def _bucket(self, retention_days: int) -> s3.Bucket:
        bucket = s3.Bucket(
            self,
            "Witness",
            versioned=True,
            object_lock_enabled=True,
            object_lock_default_retention=s3.ObjectLockRetention.compliance(Duration.days(retention_days)),
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="NoDeletionOrRetentionChange",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=list(NEVER_ALLOWED),
                resources=[bucket.arn_for_objects("*")],
            )
        )
        bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CreateOnly",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"],
                resources=[bucket.arn_for_objects("*")],
                conditions={"Null": {"s3:if-none-match": "true"}},
            )
        )
        cdk.Validations.of(bucket).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-S1",
                reason="The witness is written only by the witness writer and the verifier, create-only, "
                "and every record is signed; what matters (who wrote what) is in the records and the "
                "functions' logs. Server access logs would need a second bucket of their own.",
            )
        )
        return bucket

    # ---- grants ------------------------------------------------------------------------------------------

    def grant_read(self, fn: ServiceFunction) -> None:
        """What a release path needs to compare a chain with the witness: the chain key, the newest
        checkpoint (one version listing and one read) and the chain's tamper finding."""
        fn.grant(["secretsmanager:GetSecretValue"], [self.chain_key.secret_arn])
        fn.grant(list(LIST_ACTIONS), [self.bucket.bucket_arn])
        fn.grant(list(READ_OBJECT_ACTIONS), [self.bucket.arn_for_objects("*")])
        self._acknowledge(fn, ["*"])

    def grant_write(self, fn: ServiceFunction, prefixes: Sequence[str]) -> None:
        """Create-only puts under these prefixes, signed with the signing key."""
        fn.grant(["s3:PutObject"], [self.bucket.arn_for_objects(f"{p}*") for p in prefixes])
        fn.grant(["kms:Sign"], [self.signing_key.key_arn])
        self._acknowledge(fn, [f"{p}*" for p in prefixes])

    def _acknowledge(self, fn: ServiceFunction, patterns: Sequence[str]) -> None:
        bucket_id = cdk.Stack.of(self).get_logical_id(self.bucket.node.default_child)  # type: ignore[arg-type]
        for pattern in patterns:
            cdk.Validations.of(fn.role).acknowledge(
                cdk.Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{pattern}]",
                    reason="Witness records are keyed by chain and seq, so the grant names a key prefix of "
                    "the one witness bucket; the bucket policy refuses any PutObject without If-None-Match "
                    "and every deletion or retention change.",
                )
            )

    def environment(self, *, signing: bool) -> dict[str, str]:
        env = {
            names.ENV_WITNESS_BUCKET: self.bucket.bucket_name,
            names.ENV_CHAIN_KEY_SECRET_ARN: self.chain_key.secret_arn,
        }
        if signing:
            env[names.ENV_WITNESS_SIGNING_KEY_ID] = self.signing_key.key_id
        return env

    # ---- the two functions' wiring ---------------------------------------------------------------------

    def feed_writer(self, writer: ServiceFunction) -> pipes.CfnPipe:
        """The witness writer's own pipe: checkpoint items and chain changes from the stream, to its alias."""
        grant_write_prefixes = WRITER_PREFIXES
        self.grant_write(writer, grant_write_prefixes)
        self.grant_read(writer)
        account = cdk.Stack.of(self).account
        role = iam.Role(
            self,
            "WriterPipeRole",
            assumed_by=iam.ServicePrincipal(
                "pipes.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": account}}
            ),
            description="Sentinel witness feed: read the state table's stream, invoke the witness writer",
        )
        stream_arn = self.table.table_stream_arn or ""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "dynamodb:DescribeStream",
                    "dynamodb:GetRecords",
                    "dynamodb:GetShardIterator",
                    "dynamodb:ListStreams",
                ],
                resources=[stream_arn],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[writer.alias.function_arn])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.dead_letters.queue_arn])
        )
        pipe = pipes.CfnPipe(
            self,
            "WitnessFeed",
            role_arn=role.role_arn,
            source=stream_arn,
            source_parameters=pipes.CfnPipe.PipeSourceParametersProperty(
                filter_criteria=pipes.CfnPipe.FilterCriteriaProperty(
                    filters=[
                        pipes.CfnPipe.FilterProperty(pattern=json.dumps(p, sort_keys=True))
                        for p in (CHECKPOINT_ITEMS_FILTER, CHAIN_CHANGES_FILTER)
                    ]
                ),
                dynamo_db_stream_parameters=pipes.CfnPipe.PipeSourceDynamoDBStreamParametersProperty(
                    starting_position="TRIM_HORIZON",
                    batch_size=WRITER_BATCH_SIZE,
                    maximum_batching_window_in_seconds=1,
                    maximum_retry_attempts=MAX_RETRY_ATTEMPTS,
                    dead_letter_config=pipes.CfnPipe.DeadLetterConfigProperty(
                        arn=self.dead_letters.queue_arn
                    ),
                ),
            ),
            target=writer.alias.function_arn,
            target_parameters=pipes.CfnPipe.PipeTargetParametersProperty(
                lambda_function_parameters=pipes.CfnPipe.PipeTargetLambdaFunctionParametersProperty(
                    invocation_type="REQUEST_RESPONSE"
                )
            ),
            description="Sentinel witness feed: checkpoint outbox items and chain changes to the witness "
            "writer",
        )
        pipe.node.add_dependency(role)
        return pipe

    def schedule_verifier(self, verifier: ServiceFunction) -> events.Rule:
        self.grant_write(verifier, VERIFIER_PREFIXES)
        self.grant_read(verifier)
        verifier.grant(["kms:GetPublicKey"], [self.signing_key.key_arn])
        return events.Rule(
            self,
            "VerifierSchedule",
            schedule=events.Schedule.rate(Duration.minutes(names.VERIFIER_SCHEDULE_MINUTES)),
            targets=[targets.LambdaFunction(verifier.alias, retry_attempts=0)],
            description="Sentinel: verify every chain changed since the last run against the witness",
        )

    def outputs(self) -> Mapping[str, tuple[str, str]]:
        return {
            names.OUTPUT_WITNESS_BUCKET: (self.bucket.bucket_name, "SENTINEL_WITNESS_BUCKET (the witness)"),
            names.OUTPUT_WITNESS_SIGNING_KEY_ID: (
                self.signing_key.key_id,
                "The witness signing key: its public key verifies exported records offline",
            ),
            names.OUTPUT_CHAIN_KEY_SECRET_ARN: (
                self.chain_key.secret_arn,
                "SENTINEL_CHAIN_KEY_SECRET_ARN for the CLI (the chain key)",
            ),
        }
