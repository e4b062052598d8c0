"""The one shape of a dead-letter queue in this stack: encrypted, TLS only, 14 days. Each is itself the last
stop of its retries, so cdk-nag's "a queue needs its own dead-letter queue" is acknowledged with why."""

import aws_cdk as cdk
from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct


def dead_letter_queue(scope: Construct, why: str) -> sqs.Queue:
    """The `DeadLetters` queue of `scope`; `why` says what lands there and who acts on it."""
    queue = sqs.Queue(
        scope,
        "DeadLetters",
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=Duration.days(14),
    )
    cdk.Validations.of(queue).acknowledge(cdk.Acknowledgment(id="AwsSolutions-SQS3", reason=why))
    return queue
