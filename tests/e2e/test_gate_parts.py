"""The gate's parts that need no deployment: attempt reports, check outcomes, token sources, health's leak
scan and the template adaptation for moto."""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sentinel_acceptance.checks import (
    BLOCKED,
    FAILED,
    NOT_EMULATED,
    PASSED,
    CheckFailed,
    CheckLog,
    CheckSkipped,
)
from sentinel_acceptance.emulation import Synth, adapt
from sentinel_acceptance.report import AttemptReport, attempts
from sentinel_acceptance.service import leaks
from sentinel_acceptance.tokens import Tokens, TokensUnavailable, lifetime_problems, load_tokens


def test_each_run_takes_the_next_attempt_number_and_never_overwrites_an_earlier_one(tmp_path: Path) -> None:
    # Given a failed attempt on record
    first = AttemptReport(tmp_path)
    first.claim({"target": "t"})
    first.write({"status": "failed"})
    before = (tmp_path / "attempt-0001.json").read_text()
    # When two more runs claim, one of them after someone else took number 3 behind its back
    second = AttemptReport(tmp_path)
    second.claim({})
    (tmp_path / "attempt-0003.json").write_text("{}")
    third = AttemptReport(tmp_path)
    third.claim({})
    third.write({"status": "passed"})
    # Then each has its own file, and the failed attempt is unchanged next to the passing one
    assert (second.attempt, third.attempt) == (2, 4)
    assert [p.name for p in attempts(tmp_path)] == [f"attempt-000{n}.json" for n in (1, 2, 3, 4)]
    assert (tmp_path / "attempt-0001.json").read_text() == before
    assert json.loads((tmp_path / "attempt-0002.json").read_text())["status"] == "running"
    assert json.loads((tmp_path / "attempt-0004.json").read_text())["status"] == "passed"


def test_a_check_that_raises_fails_and_blocked_fails_the_gate_like_failed() -> None:
    # Given checks that pass, fail, crash, are not emulated, and are blocked
    log = CheckLog()
    log.run("a", "A", "x", lambda: ("fine", {}))
    log.run("b", "B", "x", lambda: (_ for _ in ()).throw(KeyError("outputs")))
    log.run("c", "C", "x", lambda: (_ for _ in ()).throw(CheckSkipped(NOT_EMULATED, "moto lacks it")))
    # Then the crash is a failure that says what it was, and the gate fails
    assert [r.status for r in log.results] == [PASSED, FAILED, NOT_EMULATED]
    assert "KeyError" in log.results[1].detail and not log.passed
    # And a run with only passes and not-emulated checks passes, but one blocked check fails it
    ok = CheckLog()
    ok.run("a", "A", "x", lambda: ("fine", {}))
    ok.run("c", "C", "x", lambda: (_ for _ in ()).throw(CheckSkipped(NOT_EMULATED, "moto lacks it")))
    assert ok.passed
    ok.run("d", "D", "x", lambda: (_ for _ in ()).throw(CheckSkipped(BLOCKED, "no outputs")))
    assert not ok.passed
    # And nothing at all is not a pass
    assert not CheckLog().passed
    with pytest.raises(ValueError):
        CheckSkipped(FAILED, "a skip is never a failure in disguise")
    assert CheckFailed("why").detail == "why"


class FakeSecrets:
    def __init__(self, payload: dict | None) -> None:
        self.payload, self.asked = payload, []

    def get_secret_value(self, SecretId: str) -> dict:  # noqa: N803 - boto3's parameter name
        self.asked.append(SecretId)
        if self.payload is None:
            raise RuntimeError("ResourceNotFoundException")
        return {"SecretString": json.dumps(self.payload)}


def test_tokens_come_from_the_environment_or_the_secret_and_never_half_from_each() -> None:
    roles = ("REQUESTER", "PUBLISHER", "REVIEWER")
    env = {f"SENTINEL_ACCEPTANCE_TOKEN_{r}": f"snt_{r.lower()}" for r in roles}
    # Given every variable, Then the environment is the source and no secret is read
    secrets = FakeSecrets({"tokens": {}})
    assert load_tokens(env, "dev", secrets).source == "environment" and secrets.asked == []
    # Given only some variables, Then the run refuses rather than mixing sources
    with pytest.raises(TokensUnavailable, match="only SENTINEL_ACCEPTANCE_TOKEN_REQUESTER"):
        load_tokens({"SENTINEL_ACCEPTANCE_TOKEN_REQUESTER": "snt_x"}, "dev", secrets)
    # Given no variables, Then the stage's secret is read (or the one named), with its recorded expiries
    payload = {
        "tokens": {"requester": "a", "publisher": "b", "reviewer": "c"},
        "expires_at": {"requester": "x"},
    }
    secrets = FakeSecrets(payload)
    tokens = load_tokens({}, "prod", secrets)
    assert secrets.asked == ["sentinel/prod/acceptance-tokens"] and tokens.tokens["reviewer"] == "c"
    assert (
        load_tokens({"SENTINEL_ACCEPTANCE_TOKENS_SECRET": "mine"}, "prod", FakeSecrets(payload)).source
        == "secret mine"
    )
    # And an unreadable or incomplete secret is no tokens at all
    with pytest.raises(TokensUnavailable, match="cannot be read"):
        load_tokens({}, "dev", FakeSecrets(None))
    with pytest.raises(TokensUnavailable, match="lacks a token for publisher"):
        load_tokens({}, "dev", FakeSecrets({"tokens": {"requester": "a", "reviewer": "c"}}))


def test_a_token_must_be_short_lived_when_its_expiry_is_known() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    soon, late, past = (now + timedelta(hours=1)), (now + timedelta(days=90)), (now - timedelta(minutes=1))
    tokens = Tokens(
        {},
        "secret s",
        {"requester": soon.isoformat(), "publisher": late.isoformat(), "reviewer": past.isoformat()},
    )
    problems = lifetime_problems(tokens, now)
    assert len(problems) == 2
    assert any(p.startswith("publisher") and "not short-lived" in p for p in problems)
    assert any(p.startswith("reviewer") and "expired" in p for p in problems)


def test_twelve_digits_inside_a_hex_digest_are_not_an_account_id() -> None:
    # Given package digests that hold twelve digits in a row, at the start, the middle and the end
    for digest in (
        "123456789012" + "ab" * 26,
        "ab" * 13 + "123456789012" + "cd" * 13,
        "ef" * 26 + "123456789012",
    ):
        health = {"status": "ok", "runtime": "aws_lambda", "package_digest": digest}
        # When the anonymous answer is searched for what it must not carry
        found = leaks(health, json.dumps(health), [])
        # Then the digest is no account id
        assert found == [], digest
    # And twelve digits standing alone, in an ARN-like path or a field value, still are
    for text in ('{"note": "123456789012"}', '{"p": "iam::123456789012:role/x"}', '{"n": 123456789012}'):
        assert "a 12-digit number (an account id)" in leaks(json.loads(text), text, []), text


def test_health_may_carry_no_secret_token_or_account_id() -> None:
    clean = {
        "status": "ok",
        "runtime": "aws_lambda",
        "model": {"provider": "none", "model_id": ""},
        "package_digest": "ab" * 32,
        "region": "eu-west-1",
    }
    assert leaks(clean, json.dumps(clean), ["snt_secret"]) == []
    dirty = dict(
        clean, account="123456789012", token_key_secret_arn="arn:aws:secretsmanager:x", note="snt_secret"
    )
    found = leaks(dirty, json.dumps(dirty), ["snt_secret"])
    assert {
        "a field named account",
        "a field named token_key_secret_arn",
        "an ARN",
        "a 12-digit number (an account id)",
        "something shaped like a token (snt_…)",
        "a value it must never show",
    } <= set(found)


def test_the_template_moto_gets_keeps_every_resource_moto_creates_and_says_what_it_left_out(
    synthesized: Synth,
) -> None:
    # Given the synthesized template
    template = synthesized.template
    # When it is adapted for moto
    adapted, skipped, adaptations = adapt(template)
    # Then only what moto cannot create (and the permissions granting it) is left out, and said so
    kinds = set(skipped.values())
    assert {
        "AWS::ApiGatewayV2::Route",
        "AWS::Lambda::Alias",
        "AWS::CloudWatch::Alarm",
        "AWS::Budgets::Budget",
    } <= kinds
    assert not kinds & {
        "AWS::Lambda::Function",
        "AWS::Lambda::Version",
        "AWS::Lambda::LayerVersion",
        "AWS::DynamoDB::Table",
    }
    assert set(adapted["Resources"]) == set(template["Resources"]) - set(skipped)
    assert all(k in " ".join(adaptations) for k in kinds)
    # And nothing left refers to what is gone, except through a marked placeholder; the original is untouched
    text = json.dumps(adapted)
    assert not any(f'"Ref": "{logical}"' in text for logical in skipped)
    assert "not-emulated" in json.dumps(adapted["Outputs"]["ApiUrl"])
    assert (
        "ApiUrl" in template["Outputs"]
        and template["Outputs"]["ApiUrl"]["Value"] != adapted["Outputs"]["ApiUrl"]["Value"]
    )
