"""Alarms reach a person: the live run proves delivery end to end through a canary alarm on the alarm topic.

Reading an alarm's configuration shows it names the topic, not that the topic's policy and key let CloudWatch
publish. So the run creates an SQS queue and subscribes it to the topic, sets the stack's canary alarm
(`sentinel-<stage>-acceptance-canary`, on a metric nothing emits) to ALARM with `SetAlarmState`, and waits for
that notification on its queue; then it puts the canary back to OK and removes the subscription and the queue,
whatever happened. The operator's e-mail subscription filters the canary out: nobody is paged by a deploy.

moto delivers no alarm notification, so in the emulation the check is "not emulated" and the topic policy is
covered by template assertions (tests/infrastructure/test_stack_monitoring.py).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from typing import Any

from sentinel_service import names

from .checks import NOT_EMULATED, UNAVAILABLE, CheckFailed, CheckSkipped
from .deployment import DENIED, Deployment, _error_code
from .target import Target

WAIT_SECONDS = 120  # CloudWatch notifies within seconds; SNS to SQS adds little


def canary_name(stage: str) -> str:
    return f"sentinel-{stage}-{names.CANARY_ALARM}"


def _queue_policy(queue_arn: str, topic_arn: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "sns.amazonaws.com"},
                    "Action": "sqs:SendMessage",
                    "Resource": queue_arn,
                    "Condition": {"ArnEquals": {"aws:SourceArn": topic_arn}},
                }
            ],
        }
    )


def _notified(message: dict[str, Any], alarm: str) -> bool:
    """Whether one SQS message is the SNS envelope of the canary's ALARM notification."""
    try:
        envelope = json.loads(message["Body"])
        notice = json.loads(envelope["Message"])
    except (KeyError, TypeError, ValueError):
        return False
    return bool(notice.get("AlarmName") == alarm and notice.get("NewStateValue") == "ALARM")


def alarm_delivery(
    target: Target,
    found: Deployment,
    wait_seconds: float = WAIT_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[str, dict[str, Any]]:
    if target.emulation is not None:
        raise CheckSkipped(
            NOT_EMULATED,
            "moto delivers no alarm notification: the topic policy admitting CloudWatch is covered by "
            "template assertions",
        )
    topic = found.output(names.OUTPUT_ALARM_TOPIC_ARN)
    alarm = canary_name(target.stage)
    sqs, sns, cloudwatch = target.client("sqs"), target.client("sns"), target.client("cloudwatch")
    evidence: dict[str, Any] = {"alarm": alarm, "waited_s": 0.0, "cleaned_up": []}
    try:
        queue_url = sqs.create_queue(
            QueueName=f"sentinel-{target.stage}-canary-{secrets.token_hex(4)}",
            Attributes={"MessageRetentionPeriod": "600", "SqsManagedSseEnabled": "true"},
        )["QueueUrl"]
    except Exception as error:
        if _error_code(error) in DENIED:
            raise CheckSkipped(UNAVAILABLE, f"sqs:CreateQueue is denied ({_error_code(error)})") from None
        raise
    subscription = None
    started = clock()
    try:
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"Policy": _queue_policy(queue_arn, topic)})
        subscription = sns.subscribe(
            TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, ReturnSubscriptionArn=True
        )["SubscriptionArn"]
        cloudwatch.set_alarm_state(
            AlarmName=alarm, StateValue="ALARM", StateReason="acceptance: proving alarm delivery"
        )
        delivered = False
        while not delivered and clock() - started < wait_seconds:
            answer = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=10)
            delivered = any(_notified(m, alarm) for m in answer.get("Messages", []))
        evidence["waited_s"] = round(clock() - started, 1)
    finally:
        for step, call in (
            (
                "canary back to OK",
                lambda: cloudwatch.set_alarm_state(
                    AlarmName=alarm, StateValue="OK", StateReason="acceptance: delivery check over"
                ),
            ),
            ("subscription removed", lambda: subscription and sns.unsubscribe(SubscriptionArn=subscription)),
            ("queue deleted", lambda: sqs.delete_queue(QueueUrl=queue_url)),
        ):
            try:
                call()
                evidence["cleaned_up"].append(step)
            except Exception as error:  # cleanup goes on: each step is independent
                evidence["cleanup_failed"] = [*evidence.get("cleanup_failed", []), f"{step}: {error}"]
    if not delivered:
        raise CheckFailed(
            f"no notification of {alarm} arrived on a subscription of the alarm topic within "
            f"{wait_seconds:.0f} s: the topic or its key does not let CloudWatch publish",
            evidence,
        )
    return (
        f"{alarm}'s ALARM notification reached a subscription of the topic in {evidence['waited_s']} s",
        evidence,
    )
