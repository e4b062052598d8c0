"""`make acceptance-local` end to end, and the deployments it must refuse.

Each test creates the one synthesized stack on its own moto server, starts the local runner from the built
packages in front of it, and runs the whole gate. The changed deployments are the ones the gate exists to
catch: another package uploaded than was built, a stack left in a failed state, a route left open, a wrong
package digest in health. Each must fail the gate with the right check named, and only that check.
"""

import json
import re
from pathlib import Path
from typing import Any

import pytest

from sentinel_acceptance.__main__ import main as acceptance_main
from sentinel_acceptance.checks import BLOCKED, FAILED, NOT_EMULATED, PASSED
from sentinel_acceptance.emulation import LocalRun, Synth, run_local
from sentinel_acceptance.gate import CHECK_NAMES
from sentinel_acceptance.report import attempts
from sentinel_acceptance.target import read_build
from sentinel_infra.config import DeploymentConfig
from sentinel_service import names
from sentinel_service.http.routes import ROUTES
from support.tamper import build_with_functions, functions_asset, retarget, set_package_digest, zip_with

NOT_EMULATED_HERE = {"route_integrations", "alarms", "alarm_delivery", "budget"}


def report_of(path: Path) -> dict:
    return json.loads(path.read_text())


def test_acceptance_local_passes_and_writes_its_attempt_report(
    built: Path, synthesized: Synth, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the built packages and the stack synthesized from them
    reports = tmp_path / "reports"
    # When `python -m sentinel_acceptance local` runs (what `make acceptance-local` runs), reusing that synth
    code = acceptance_main(
        [
            "local",
            "--build-dir",
            str(built),
            "--reports-dir",
            str(reports),
            "--cdk-out",
            str(synthesized.outdir),
            "--stack",
            synthesized.stack_name,
        ]
    )
    # Then it passes and writes attempt 1
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert [p.name for p in attempts(reports)] == ["attempt-0001.json"]
    report = report_of(reports / "attempt-0001.json")
    assert report["status"] == "passed" and report["attempt"] == 1
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert list(statuses) == list(CHECK_NAMES)
    # And what moto cannot create is said to be not emulated, never passed; everything else passed
    assert {n for n, s in statuses.items() if s == NOT_EMULATED} == NOT_EMULATED_HERE
    assert {n for n, s in statuses.items() if s == PASSED} == set(CHECK_NAMES) - NOT_EMULATED_HERE
    emulation = report["target"]["emulation"]
    assert {
        "AWS::ApiGatewayV2::Route",
        "AWS::CloudWatch::Alarm",
        "AWS::Budgets::Budget",
        "AWS::Lambda::Alias",
    } <= set(emulation["resources_not_emulated"])
    assert emulation["template_adaptations"]
    # And the stack status and CodeSha256 are reads of the emulated API, matching the built digests
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["stack_status"]["evidence"]["stack_status"] == "CREATE_COMPLETE"
    assert "moto" in checks["package_digests"]["ran_against"]
    code_sha = read_build(built)["functions"].code_sha256
    assert {f["code_sha256"] for f in report["digests"]["deployed"].values()} == {code_sha}
    # And the runner imported the service and the domain core from the unzipped packages, not the source tree
    imports = emulation["runner"]["imports"]
    assert imports["sentinel_service"].startswith("<scratch>/packages/task/sentinel_service")
    assert imports["sentinel_domain"].startswith("<scratch>/packages/opt/python/sentinel_domain")
    assert report["digests"]["health_package_digest"] == read_build(built)["functions"].sha256
    # And the flow ran on a fresh candidate with timings, and no token reached the report
    assert report["flow"]["candidate_id"].startswith("cand_") and len(report["flow"]["steps"]) == 8
    assert "snt_" not in (reports / "attempt-0001.json").read_text()
    assert "acceptance-local: passed" in printed


def run(built: Path, synthesized: Synth, reports: Path, options: LocalRun) -> dict:
    outcome = run_local(built, reports, synthesized, options, say=lambda _line: None)
    report = report_of(outcome.report)
    assert outcome.passed is False and report["status"] == "failed"
    return report


def statuses(report: dict) -> dict[str, str]:
    return {c["name"]: c["status"] for c in report["checks"]}


def detail(report: dict, name: str) -> str:
    return next(c["detail"] for c in report["checks"] if c["name"] == name)


def test_another_package_uploaded_than_was_built_fails_package_digests(
    built: Path, synthesized: Synth, tmp_path: Path
) -> None:
    # Given a functions zip that is not the built one (one file more) uploaded in place of the built one
    asset = functions_asset(synthesized, built)
    other = zip_with(
        asset.path, tmp_path / "other-functions.zip", extra={"sentinel_service/extra.py": "X = 1\n"}
    )

    def swap(assets: list) -> None:
        for a in assets:
            if a.key == asset.key:
                a.path = other

    # When acceptance runs against that deployment
    report = run(built, synthesized, tmp_path / "reports", LocalRun(tamper_assets=swap))
    # Then package_digests fails, naming the CodeSha256 that runs and the built one, and nothing else fails
    assert report["failing_checks"] == ["package_digests"]
    assert read_build(built)["functions"].code_sha256 in detail(report, "package_digests")
    assert "what runs is not what was built" in detail(report, "package_digests")


def test_a_template_cloudformation_refuses_leaves_no_stack_and_blocks_every_later_check(
    built: Path, synthesized: Synth, tmp_path: Path
) -> None:
    # Given a deployment CloudFormation refuses (an output reading an attribute the table does not have)
    def break_template(template: dict) -> None:
        table = next(k for k, r in template["Resources"].items() if r["Type"] == "AWS::DynamoDB::Table")
        template["Outputs"]["Broken"] = {"Value": {"Fn::GetAtt": [table, "NoSuchAttribute"]}}

    # When acceptance runs against what the deployment left behind
    report = run(built, synthesized, tmp_path / "reports", LocalRun(tamper_template=break_template))
    found = statuses(report)
    # Then stack_status fails, no runner was started, and no check after it passes
    assert found["stack_status"] == FAILED
    assert report["target"]["emulation"]["runner"]["started"] is False
    assert report["target"]["emulation"]["runner"]["deploy_error"]
    assert (
        found["package_digests"] == BLOCKED and found["health"] == BLOCKED and found["candidate"] == BLOCKED
    )
    assert found["acceptance_principals"] == FAILED
    assert [n for n, s in found.items() if s == PASSED] == ["build"]


def test_a_stack_left_in_a_failed_state_fails_stack_status(
    built: Path, synthesized: Synth, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a deployment whose last update failed and rolled back (what runs is the previous version)
    from moto.cloudformation import models

    real_deploy = __import__("sentinel_acceptance.emulation", fromlist=["deploy"]).deploy

    def deploy_then_fail_an_update(cloud, synth, template):
        real_deploy(cloud, synth, template)
        for backend in models.cloudformation_backends.values():
            for stack in backend["us-east-1"].stacks.values():
                if stack.name == synth.stack_name:
                    stack.status = "UPDATE_ROLLBACK_COMPLETE"
        return "UPDATE_ROLLBACK_COMPLETE"

    monkeypatch.setattr("sentinel_acceptance.emulation.deploy", deploy_then_fail_an_update)
    # When acceptance runs
    report = run(built, synthesized, tmp_path / "reports", LocalRun())
    # Then stack_status alone fails, naming the status, although the old version still answers
    assert report["failing_checks"] == ["stack_status"]
    assert "UPDATE_ROLLBACK_COMPLETE" in detail(report, "stack_status")


def test_a_route_left_open_fails_auth_refusals_naming_the_route(
    built: Path, synthesized: Synth, tmp_path: Path
) -> None:
    # Given a build whose route table leaves `GET .../policies` public, built, synthesized and deployed as is
    asset = functions_asset(synthesized, built)
    old = read_build(built)["functions"].sha256
    opened = zip_with(
        asset.path,
        tmp_path / "functions.zip",
        replace={
            "sentinel_service/http/routes.py": lambda text: text.replace(
                '"List policies")', '"List policies", public=True)'
            )
        },
    )
    build = build_with_functions(built, opened, tmp_path / "build")
    new = read_build(build)["functions"].sha256

    def swap(assets: list) -> None:
        for a in assets:
            if a.key == asset.key:
                a.path = opened

    # When acceptance runs against it
    report = run(
        build,
        synthesized,
        tmp_path / "reports",
        LocalRun(tamper_template=lambda t: retarget(t, old, new), tamper_assets=swap),
    )
    # Then auth_refusals alone fails, and says which route answered without a token
    assert report["failing_checks"] == ["auth_refusals"]
    assert "GET /v1/projects/{project}/policies without a token" in detail(report, "auth_refusals")
    assert statuses(report)["package_digests"] == PASSED


def test_a_wrong_package_digest_in_health_fails_health(
    built: Path, synthesized: Synth, tmp_path: Path
) -> None:
    # Given functions that run the built zip but are configured to report another digest
    wrong = "0" * 64
    # When acceptance runs
    report = run(
        built,
        synthesized,
        tmp_path / "reports",
        LocalRun(tamper_template=lambda t: set_package_digest(t, wrong)),
    )
    # Then health alone fails, naming the digest it reported and the built one
    assert report["failing_checks"] == ["health"]
    assert wrong in detail(report, "health") and read_build(built)["functions"].sha256 in detail(
        report, "health"
    )


@pytest.fixture(scope="module")
def inspected(built: Path, synthesized: Synth, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One passing emulated run, with what it left in the emulated state table and the relay's event log
    (read once the gate has run and its tokens were retired, before the emulated cloud stops)."""
    seen: dict[str, Any] = {}

    def inspect(cloud: Any, outputs: dict[str, Any], events_path: Path) -> None:
        client = cloud.client("dynamodb")
        pages = client.get_paginator("scan").paginate(TableName=outputs[names.OUTPUT_STATE_TABLE])
        seen["items"] = [i for page in pages for i in page["Items"]]
        lines = events_path.read_text().splitlines() if events_path.exists() else []
        seen["events"] = [json.loads(line) for line in lines]

    options = LocalRun(after_run=inspect)
    outcome = run_local(
        built, tmp_path_factory.mktemp("reports"), synthesized, options, say=lambda _line: None
    )
    assert outcome.passed
    seen["report"] = report_of(outcome.report)
    return seen


def test_the_acceptance_projects_side_effects_are_synthetic_and_reach_no_consumer_rule(
    inspected: dict[str, Any], synthesized: Synth
) -> None:
    from moto.events.models import EventPattern

    # Given the emulated deployment, inspected once the gate has run and its tokens were retired
    seen = inspected
    # Then every side effect the run wrote (outbox items other than checkpoints) is the acceptance project's
    # and carries the synthetic attribute, and its item says so under the chain key's tag
    side_effects = [
        i
        for i in seen["items"]
        if i["sk"]["S"].startswith("O#") and i["outbox_kind"]["S"] != names.OUTBOX_KIND_CHECKPOINT
    ]
    assert side_effects, "the run dispatched no action: nothing was checked"
    assert all(i["pk"]["S"].startswith("P#acceptance") for i in side_effects)
    assert all(i.get(names.OUTBOX_SYNTHETIC_ATTRIBUTE) == {"S": "1"} for i in side_effects)
    assert all(json.loads(i["item"]["S"])["synthetic"] is True for i in side_effects)
    # And no consumer rule of the deployed template matches any of them as the outbox pipe relays them
    rules = [
        r["Properties"]["EventPattern"]
        for r in synthesized.template["Resources"].values()
        if r["Type"] == "AWS::Events::Rule"
        and names.EVENT_SOURCE in r["Properties"].get("EventPattern", {}).get("source", [])
    ]
    assert rules
    for item in side_effects:
        event = {
            "source": names.EVENT_SOURCE,
            "detail-type": names.DETAIL_TYPE_OUTBOX,
            "detail": {"eventName": "INSERT", "dynamodb": {"Keys": {}, "NewImage": item}},
        }
        assert not any(EventPattern(None, rule).matches_event(event) for rule in rules), item
        # (the same item as a forge check, had it not been synthetic, would reach the publisher's rule)
        plain = {k: v for k, v in item.items() if k != names.OUTBOX_SYNTHETIC_ATTRIBUTE}
        plain["outbox_kind"] = {"S": names.OUTBOX_KIND_FORGE_CHECK}
        event["detail"]["dynamodb"]["NewImage"] = plain
        assert any(EventPattern(None, rule).matches_event(event) for rule in rules)
    # And the local relay wrote them to the event log, marked, with no consumer's trace
    relayed = [e for e in seen["events"] if e["detail-type"] != "sentinel.checkpoint"]
    assert relayed and all(e["detail"].get("synthetic") is True for e in relayed)
    assert not any("consumer_failed" in e["detail"] for e in relayed)


def test_two_acceptance_runs_in_five_minutes_trip_no_alarm_of_the_stack(inspected: dict[str, Any]) -> None:
    """Counts what one run sends (every HTTP exchange it recorded) against the thresholds of the alarms that
    could see it. The function alarms watch each function's metrics across all its versions (Lambda's
    FunctionName dimension), so the `next` versions' invocations count there; the API alarms watch the
    production API only, which `make deploy`'s run (`--alias next`) never calls."""
    config = DeploymentConfig()
    exchanges = inspected["report"]["flow"]["exchanges"]
    assert exchanges
    # Given each exchange's function, by the route table (the authorizer runs for each token-bearing request
    # to a non-public route at most once: counted without its cache)
    routes = [(r, re.compile("^" + re.sub(r"\{[^/]+\}", "[^/]+", r.path) + "$")) for r in ROUTES]
    invocations: dict[str, int] = {}
    for x in exchanges:
        path = x["path"].split("?")[0]
        path = path if path.startswith("/v1/") else "/v1" + path
        route = next(r for r, pattern in routes if r.method == x["method"] and pattern.match(path))
        if x["role"] != "anonymous" and not route.public:
            invocations[names.AUTHORIZER_FUNCTION] = invocations.get(names.AUTHORIZER_FUNCTION, 0) + 1
        if x["status"] < 400 or x["role"] not in ("anonymous", "wrong-token"):
            invocations[route.function] = invocations.get(route.function, 0) + 1
    # Then two runs stay under every function's invocation-spike threshold, with room to spare
    assert max(invocations.values()) * 2 < config.invocation_spike_threshold / 5, invocations
    # And a passing run answers no 5xx (the errors and api-5xx alarms)
    assert not [x for x in exchanges if x["status"] >= 500]
    # And its refusals are what docs/acceptance.md says: a 401 and a 403 per stateful route, enough that two
    # runs against the production API would trip the denials alarm; `make deploy` sends them to the
    # acceptance API, which no alarm watches (tests/infrastructure/test_stack_monitoring.py)
    stateful = sum(1 for r in ROUTES if not r.public)
    refused = [
        x for x in exchanges if x["role"] in ("anonymous", "wrong-token") and x["status"] in (401, 403)
    ]
    assert len([x for x in refused if x["status"] == 403]) == stateful
    assert 2 * stateful > config.authorizer_denials_threshold
