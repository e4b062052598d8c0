"""Notification targets (sentinel_infra/constructs/notifications.py, docs/notifications.md): off by default;
with `notifySns` and `notifyWebhookUrl` an SNS topic only the notification rule may publish to, and an HTTPS
API destination that receives a chat body, both retried into a dead-letter queue that raises an alarm.

The rule and its input transformers are checked against a real notification: built by the core, written as
the DynamoDB adapter writes it, and relayed as the outbox pipe relays it."""

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from infrastructure.test_stack_state import matches

from sentinel_domain import notifications
from sentinel_domain.decision import Decision, Finding
from sentinel_infra import regions
from sentinel_infra.config import ConfigError, DeploymentConfig
from sentinel_infra.packaging import exclusive
from sentinel_service import names
from sentinel_service.adapters.dynamodb_items import outbox_item
from support.infra import (
    CONTEXT,
    STACK,
    Synthesized,
    WithheldAcknowledgements,
    functions_by_name,
    nag_findings,
    ref_name,
)

CFN_LINT = Path(sys.executable).with_name("cfn-lint")

RULE_NAME = "sentinel-test-notifications"
WEBHOOK_URL = "https://chat.example.com/hooks/sentinel"
# The test context with both targets on, in a synth of its own: the stack's other tests read one alarm topic
# and one rule, and stay as they are.
NOTIFYING = {**CONTEXT, "notifySns": "true", "notifyWebhookUrl": WEBHOOK_URL}
HOSTILE_TEST = 'test_x <!channel> [click](https://evil.example) "quoted" \\ back'


@pytest.fixture(scope="session")
def notifying(built: Path, shared_dir: Path) -> Synthesized:
    """The stack with both notification targets, synthesized once per run as conftest synthesizes the test
    context: with acknowledgements recorded instead of applied (`nag_findings`, `acknowledgements`), then
    applied, when cdk-nag must pass (`failure`)."""
    outdir, done = shared_dir / "cdk.out.notifying", shared_dir / "synth-notifying.json"
    with exclusive(shared_dir / ".synth-notifying.lock"):
        if not done.exists():
            import aws_cdk as cdk

            from app import build_app

            recorded: list[tuple[str, str, str]] = []
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(
                    cdk.Validations, "of", WithheldAcknowledgements(cdk.Validations.of, recorded).of
                )
                app, _ = build_app(NOTIFYING, outdir=str(outdir / "withheld"), build_dir=built)
                with pytest.raises(RuntimeError, match="ValidationFailed"):
                    app.synth()
            app, _ = build_app(NOTIFYING, outdir=str(outdir), build_dir=built)
            try:
                app.synth()
                failure = ""
            except RuntimeError as error:
                failure = str(error)
            done.write_text(json.dumps({"acknowledgements": recorded, "failure": failure}))
    run = json.loads(done.read_text())
    return Synthesized(
        outdir=outdir,
        build_dir=built,
        template=json.loads((outdir / f"{STACK}.template.json").read_text()),
        nag_findings=nag_findings(outdir / "withheld"),
        acknowledgements=[tuple(a) for a in run["acknowledgements"]],
        failure=run["failure"],
    )


def statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    return document["Statement"]


def rule(synth: Synthesized) -> dict[str, Any]:
    [found] = [
        r for r in synth.properties("AWS::Events::Rule") if r.get("Name", "").endswith("-notifications")
    ]
    return found


def relayed(entry: dict[str, Any], event_name: str = "INSERT") -> dict[str, Any]:
    """The event the outbox pipe puts on the bus for one outbox item, as the DynamoDB adapter writes it."""
    image = outbox_item("P#demo#C#cand_1", entry.get("seq", 3), 0, entry, entry.get("recorded_at", ""))
    record = {"eventName": event_name, "dynamodb": {"Keys": {}, "NewImage": image}}
    return {"source": names.EVENT_SOURCE, "detail-type": names.DETAIL_TYPE_OUTBOX, "detail": record}


def a_notification() -> dict[str, Any]:
    verdict = Decision(
        decision="hold",
        findings=[Finding(code="EVIDENCE_NEGATIVE", detail=f"failing test: {HOSTILE_TEST}")],
        plan_digest="d" * 64,
        revision="a" * 40,
        as_of="2026-11-29T12:00:00.000000Z",
        facts_digest="f" * 64,
    )
    candidate = {"candidate_id": "cand_1", "subject": "payments", "revision": "a" * 40, "environment": "prod"}
    [changed] = notifications.decision_notifications("demo", candidate, None, verdict, 3)
    return changed


def transform(transformer: dict[str, Any], event: dict[str, Any]) -> Any:
    """EventBridge's input transformer for the paths the rule uses: each <name> becomes the JSON value at its
    path, and the template must then be JSON."""
    values = {}
    for name, path in transformer["InputPathsMap"].items():
        value: Any = event
        for part in path.removeprefix("$.").split("."):
            value = value[part]
        values[name] = value
    body = re.sub(r"<([^<>]+)>", lambda m: json.dumps(values[m.group(1)]), transformer["InputTemplate"])
    return json.loads(body)


def target_of(synth: Synthesized, kind: str) -> dict[str, Any]:
    ids = set(synth.of_type(kind))
    [found] = [t for t in rule(synth)["Targets"] if ref_name(t["Arn"]) in ids]
    return found


# ---- off by default ----------------------------------------------------------------------------------------


def test_notifications_are_off_by_default(synthesized_defaults: Synthesized) -> None:
    # Given cdk.json's defaults, Then no notification rule, topic, webhook or secret exists
    for kind in ("AWS::Events::ApiDestination", "AWS::Events::Connection"):
        assert synthesized_defaults.of_type(kind) == {}, kind
    assert not [r for r in synthesized_defaults.properties("AWS::Events::Rule") if "Name" in r]
    assert [t.get("DisplayName") for t in synthesized_defaults.properties("AWS::SNS::Topic")] == [
        "Sentinel dev alarms"
    ]
    assert not any("Notifications" in key for key in synthesized_defaults.resources)


def test_the_functions_write_notification_items_only_where_the_stack_routes_them(
    synthesized_defaults: Synthesized, notifying: Synthesized
) -> None:
    # Given the defaults (nothing routes them) and a stack with both targets
    # Then every function is told: off by default (no transaction pays for an item nobody delivers), on there
    for synth, wanted in ((synthesized_defaults, "off"), (notifying, "on")):
        for name, (_id, props) in functions_by_name(synth).items():
            assert props["Environment"]["Variables"][names.ENV_NOTIFICATIONS] == wanted, name


def test_with_both_targets_cdk_nag_finds_only_what_is_acknowledged_and_cfn_lint_passes(
    notifying: Synthesized,
) -> None:
    # Given cdk-nag's findings on the notification constructs with every acknowledgement withheld
    findings = {(rule, path) for rule, path in notifying.nag_findings if "/Notifications/" in path}
    acks = [
        a for a in notifying.acknowledgements if "/Notifications/" in a[0] or a[0].endswith("/Notifications")
    ]

    def covers(ack: tuple[str, str, str], finding: tuple[str, str]) -> bool:
        (path, rule, _), (finding_rule, finding_path) = ack, finding
        return finding_rule == rule and (finding_path == path or finding_path.startswith(path + "/"))

    # Then each is acknowledged with a reason, no acknowledgement is idle, and the stack synthesizes with them
    assert [f for f in findings if not any(covers(a, f) for a in acks)] == []
    assert acks and [a for a in acks if not any(covers(a, f) for f in findings)] == []
    assert all(len(reason) >= 80 for _, _, reason in acks)
    assert notifying.failure == ""
    # And cfn-lint finds nothing in any region the region guard accepts
    template = notifying.outdir / f"{STACK}.template.json"
    accepted = regions.rule_regions(notifying.template)
    done = subprocess.run(
        [str(CFN_LINT), "-i", "W3005", "--regions", *accepted, "--", str(template)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# ---- the rule ----------------------------------------------------------------------------------------------


def test_the_rule_takes_new_notification_items_from_the_bus_and_nothing_else(
    notifying: Synthesized,
) -> None:
    pattern = rule(notifying)["EventPattern"]
    note = a_notification()
    action = {"outbox_id": "cand_1/exe_1", "kind": "action", "action_type": "promote"}
    # Then a relayed notification matches, once (its insert), and an action or a checkpoint never does
    assert matches(pattern, relayed(note))
    assert not matches(pattern, relayed(note, "MODIFY"))
    assert not matches(pattern, relayed(action))
    assert not matches(pattern, relayed({"kind": names.OUTBOX_KIND_CHECKPOINT}))
    assert rule(notifying)["Name"] == RULE_NAME


def test_the_webhook_gets_a_chat_body_with_the_escaped_text(notifying: Synthesized) -> None:
    # Given the webhook target and a notification quoting a hostile test name
    target = target_of(notifying, "AWS::Events::ApiDestination")
    note = a_notification()
    # When the rule transforms the relayed event
    body = transform(target["InputTransformer"], relayed(note))
    # Then the webhook receives exactly {"text": ...}, the core's escaped text, as JSON
    assert body == {"text": note["text"]}
    assert "<!channel>" not in body["text"] and "https://" not in body["text"]
    assert target["HttpParameters"]["HeaderParameters"] == {"Content-Type": "application/json"}


def test_the_topic_gets_the_event_its_text_and_the_whole_notification(notifying: Synthesized) -> None:
    target = target_of(notifying, "AWS::SNS::Topic")
    note = a_notification()
    body = transform(target["InputTransformer"], relayed(note))
    assert body["event"] == "decision.changed" and body["text"] == note["text"]
    assert json.loads(body["notification"]) == note


def test_both_targets_retry_then_dead_letter_into_an_alarmed_encrypted_queue(
    notifying: Synthesized,
) -> None:
    queues = {k: q for k, q in notifying.of_type("AWS::SQS::Queue").items() if k.startswith("Notifications")}
    [(queue_id, queue)] = queues.items()
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    for kind in ("AWS::SNS::Topic", "AWS::Events::ApiDestination"):
        target = target_of(notifying, kind)
        assert ref_name(target["DeadLetterConfig"]["Arn"]) == queue_id, kind
        assert target["RetryPolicy"]["MaximumRetryAttempts"] > 0, kind
        assert target["RetryPolicy"]["MaximumEventAgeInSeconds"] <= 86400, kind
    # And the queue's policy lets only this rule send, and only over TLS
    [policy] = [
        p
        for p in notifying.properties("AWS::SQS::QueuePolicy")
        if [ref_name(q) for q in p["Queues"]] == [queue_id]
    ]
    allows = [s for s in statements(policy["PolicyDocument"]) if s["Effect"] == "Allow"]
    assert allows and all(s["Principal"] == {"Service": "events.amazonaws.com"} for s in allows)
    assert all("aws:SourceArn" in s["Condition"]["ArnEquals"] for s in allows)
    assert any(
        s["Effect"] == "Deny" and "aws:SecureTransport" in json.dumps(s)
        for s in statements(policy["PolicyDocument"])
    )
    # And its first message raises an alarm on the stack's alarm topic
    [alarm] = [
        a
        for a in notifying.properties("AWS::CloudWatch::Alarm")
        if a.get("AlarmName") == "sentinel-test-notification-dead-letters"
    ]
    assert alarm["Threshold"] == 1
    assert [d["Value"] for d in alarm["Dimensions"]] == [{"Fn::GetAtt": [queue_id, "QueueName"]}]
    assert alarm["AlarmActions"]


# ---- the topic ---------------------------------------------------------------------------------------------


def _names_this_rule(condition: dict[str, Any]) -> bool:
    arn = json.dumps(condition["ArnEquals"]["aws:SourceArn"])
    return arn.endswith(f'"/{RULE_NAME}"]]}}') and "AWS::AccountId" in json.dumps(condition["StringEquals"])


def test_only_the_rule_may_publish_to_the_encrypted_topic(notifying: Synthesized) -> None:
    [(topic_id, topic)] = [
        (k, t) for k, t in notifying.of_type("AWS::SNS::Topic").items() if k.startswith("Notifications")
    ]
    key_id = ref_name(topic["Properties"]["KmsMasterKeyId"])
    key = notifying.resources[key_id]["Properties"]
    assert key["EnableKeyRotation"] is True
    # Then the topic's policy has one Allow: EventBridge, on behalf of this rule in this account
    [policy] = [
        p
        for p in notifying.properties("AWS::SNS::TopicPolicy")
        if [ref_name(t) for t in p["Topics"]] == [topic_id]
    ]
    found = statements(policy["PolicyDocument"])
    allows = [s for s in found if s["Effect"] == "Allow"]
    assert len(allows) == 1 and allows[0]["Principal"] == {"Service": "events.amazonaws.com"}
    assert allows[0]["Action"] == "sns:Publish" and _names_this_rule(allows[0]["Condition"])
    # And publishing without TLS is denied
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in found
    )
    # And the key lets EventBridge use it only for this rule
    services = [
        s for s in statements(key["KeyPolicy"]) if s["Principal"] == {"Service": "events.amazonaws.com"}
    ]
    assert len(services) == 1 and _names_this_rule(services[0]["Condition"])


# ---- the webhook -------------------------------------------------------------------------------------------


def test_the_webhook_is_https_rate_limited_and_keyed_by_a_secret_the_operator_fills(
    notifying: Synthesized,
) -> None:
    [destination] = notifying.properties("AWS::Events::ApiDestination")
    assert destination["InvocationEndpoint"] == WEBHOOK_URL and WEBHOOK_URL.startswith("https://")
    assert destination["HttpMethod"] == "POST"
    assert 1 <= destination["InvocationRateLimitPerSecond"] <= 300
    [(connection_id, connection)] = notifying.of_type("AWS::Events::Connection").items()
    assert ref_name(destination["ConnectionArn"]) == connection_id
    auth = connection["Properties"]
    assert auth["AuthorizationType"] == "API_KEY"
    key = auth["AuthParameters"]["ApiKeyAuthParameters"]
    # The key is a dynamic reference to a secret of the stack, never a value in the template
    secrets = set(notifying.of_type("AWS::SecretsManager::Secret"))
    joined = key["ApiKeyValue"]["Fn::Join"][1]
    assert joined[0] == "{{resolve:secretsmanager:" and ref_name(joined[1]) in secrets
    assert key["ApiKeyName"] == DeploymentConfig().notify_webhook_api_key_header


@pytest.mark.parametrize(
    "url",
    [
        "http://chat.example.com/hook",  # not HTTPS
        "https://user:pass@chat.example.com/hook",  # a credential in the template
        "https:///hook",  # no host
        "https://chat.example.com/a b",
        "ftp://chat.example.com",
        "https://chat.example.com:port/x",
        "https://" + "a" * 2100 + ".example.com",
    ],
)
def test_a_webhook_that_is_not_plain_https_stops_the_synth(url: str) -> None:
    with pytest.raises(ConfigError, match="notifyWebhookUrl"):
        DeploymentConfig.from_context({"notifyWebhookUrl": url})


@pytest.mark.parametrize(("raw", "value"), [("true", True), ("false", False), ("1", True), (True, True)])
def test_the_sns_switch_reads_a_flag(raw: object, value: bool) -> None:
    assert DeploymentConfig.from_context({"notifySns": raw}).notify_sns is value


def test_a_switch_that_is_not_a_flag_stops_the_synth() -> None:
    with pytest.raises(ConfigError, match="notifySns"):
        DeploymentConfig.from_context({"notifySns": "maybe"})
