"""The alarm delivery check: the canary alarm's ALARM notification must arrive on a subscription the run
creates, and the run cleans up whatever happens. Against fakes of CloudWatch, SNS and SQS that deliver only
when the topic admits CloudWatch (moto delivers no alarm notification at all)."""

import json
from typing import Any

import pytest

from sentinel_acceptance.canary import alarm_delivery, canary_name
from sentinel_acceptance.checks import NOT_EMULATED, CheckFailed, CheckSkipped
from sentinel_acceptance.deployment import Deployment
from sentinel_acceptance.target import AWS, EMULATION, Emulation, Target
from sentinel_service import names

TOPIC = "arn:aws:sns:eu-west-1:123456789012:alarms"


class Cloud:
    """CloudWatch, SNS and SQS as far as the check uses them; `admits` is whether the topic's policy and key
    let CloudWatch publish."""

    def __init__(self, admits: bool) -> None:
        self.admits = admits
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.inbox: list[dict[str, Any]] = []
        self.subscribed: set[str] = set()
        self.queues: set[str] = set()

    # SQS
    def create_queue(self, **kw: Any) -> dict[str, Any]:
        self.calls.append(("create_queue", kw))
        self.queues.add(kw["QueueName"])
        return {"QueueUrl": f"https://sqs/{kw['QueueName']}"}

    def get_queue_attributes(self, **kw: Any) -> dict[str, Any]:
        return {
            "Attributes": {"QueueArn": "arn:aws:sqs:eu-west-1:123456789012:" + kw["QueueUrl"].split("/")[-1]}
        }

    def set_queue_attributes(self, **kw: Any) -> None:
        self.calls.append(("set_queue_attributes", kw))

    def receive_message(self, **kw: Any) -> dict[str, Any]:
        messages, self.inbox = self.inbox, []
        return {"Messages": messages}

    def delete_queue(self, **kw: Any) -> None:
        self.calls.append(("delete_queue", kw))
        self.queues.discard(kw["QueueUrl"].split("/")[-1])

    # SNS
    def subscribe(self, **kw: Any) -> dict[str, Any]:
        self.calls.append(("subscribe", kw))
        self.subscribed.add("sub-1")
        return {"SubscriptionArn": "sub-1"}

    def unsubscribe(self, **kw: Any) -> None:
        self.calls.append(("unsubscribe", kw))
        self.subscribed.discard(kw["SubscriptionArn"])

    # CloudWatch
    def set_alarm_state(self, **kw: Any) -> None:
        self.calls.append(("set_alarm_state", kw))
        if kw["StateValue"] == "ALARM" and self.admits and self.subscribed:
            notice = {"AlarmName": kw["AlarmName"], "NewStateValue": "ALARM"}
            self.inbox.append({"Body": json.dumps({"Type": "Notification", "Message": json.dumps(notice)})})


def target(cloud: Cloud) -> Target:
    return Target(
        kind=AWS,
        stack_name="Sentinel-test",
        region="eu-west-1",
        _clients={"sqs": cloud, "sns": cloud, "cloudwatch": cloud},
    )


def found() -> Deployment:
    deployment = Deployment()
    deployment.outputs[names.OUTPUT_ALARM_TOPIC_ARN] = TOPIC
    return deployment


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 10.0  # each poll waits up to 10 s
        return self.now


def test_a_canary_notification_that_arrives_passes_and_everything_is_cleaned_up() -> None:
    # Given a topic that admits CloudWatch
    cloud = Cloud(admits=True)
    # When the check runs
    detail, evidence = alarm_delivery(target(cloud), found(), wait_seconds=60, clock=Clock())
    # Then the canary's notification arrived on the run's own subscription
    assert canary_name("test") in detail and evidence["alarm"] == "sentinel-test-acceptance-canary"
    # And the queue admits only this topic
    (policy,) = [
        json.loads(kw["Attributes"]["Policy"]) for op, kw in cloud.calls if op == "set_queue_attributes"
    ]
    assert policy["Statement"][0]["Condition"] == {"ArnEquals": {"aws:SourceArn": TOPIC}}
    # And the canary is back to OK, the subscription and the queue are gone
    states = [kw["StateValue"] for op, kw in cloud.calls if op == "set_alarm_state"]
    assert states == ["ALARM", "OK"]
    assert not cloud.subscribed and not cloud.queues
    assert evidence["cleaned_up"] == ["canary back to OK", "subscription removed", "queue deleted"]


def test_a_topic_that_does_not_admit_cloudwatch_fails_the_check_and_still_cleans_up() -> None:
    # Given a topic whose policy leaves CloudWatch out (the defect this check exists for)
    cloud = Cloud(admits=False)
    # When the check runs, then it fails saying what is wrong
    with pytest.raises(CheckFailed, match="does not let CloudWatch publish") as failed:
        alarm_delivery(target(cloud), found(), wait_seconds=30, clock=Clock())
    # And it cleaned up all the same
    assert not cloud.subscribed and not cloud.queues
    assert failed.value.evidence["cleaned_up"] == [
        "canary back to OK",
        "subscription removed",
        "queue deleted",
    ]


def test_the_emulation_says_not_emulated() -> None:
    # Given the emulation (moto delivers no alarm notification), then the check is not emulated, never passed
    emulated = Target(
        kind=EMULATION,
        stack_name="Sentinel-test",
        region="us-east-1",
        endpoint_url="http://127.0.0.1:1",
        emulation=Emulation(template={}, skipped={}, adaptations=[]),
    )
    with pytest.raises(CheckSkipped) as skipped:
        alarm_delivery(emulated, found())
    assert skipped.value.status == NOT_EMULATED
