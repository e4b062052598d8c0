"""The checks every synth must pass: cdk-nag's AwsSolutions pack (each finding acknowledged for a stated
reason, no acknowledgement left idle), cfn-lint, the stable output keys, and the walls between rooms."""

import ast
import json
import subprocess
import sys
from pathlib import Path

from sentinel_infra import regions
from sentinel_service import names
from support.infra import ALL_FUNCTIONS, REPO, STACK, Synthesized

CFN_LINT = Path(sys.executable).with_name("cfn-lint")


def test_cdk_nag_findings_are_exactly_the_acknowledged_ones_each_with_a_reason(
    synthesized: Synthesized,
) -> None:
    # Given the findings cdk-nag raised with every acknowledgement withheld, and the acknowledgements the
    # code makes (conftest records them instead of applying them)
    findings, acknowledgements = synthesized.nag_findings, synthesized.acknowledgements

    def covers(ack: tuple[str, str, str], finding: tuple[str, str]) -> bool:
        # An acknowledgement on a construct covers that construct and everything under it
        (path, rule, _), (finding_rule, finding_path) = ack, finding
        return finding_rule == rule and (finding_path == path or finding_path.startswith(path + "/"))

    # Then the findings are real, and every one of them is acknowledged (so the synth passes with them)
    assert findings
    assert [f for f in findings if not any(covers(a, f) for a in acknowledgements)] == []
    # And every acknowledgement answers a finding (none is stale) and says why in a sentence or more
    assert [a for a in acknowledgements if not any(covers(a, f) for f in findings)] == []
    assert all(len(reason) >= 80 for _, _, reason in acknowledgements)
    assert {rule.split("[")[0] for _, rule, _ in acknowledgements} == {
        "AwsSolutions-IAM5",
        "AwsSolutions-L1",
        "AwsSolutions-APIG4",
        "AwsSolutions-SMG4",
        "AwsSolutions-SQS3",
        "AwsSolutions-S1",
    }


def test_the_default_settings_synthesize_cleanly(synthesized_defaults: Synthesized) -> None:
    # Given cdk.json's defaults (no alarm e-mail, no model): what `make synth` builds on a fresh clone
    synth = synthesized_defaults
    # When it was synthesized with the acknowledgements applied, then cdk-nag passed (a finding would fail it)
    assert synth.failure == "" and synth.nag_findings == set()
    # And nothing depends on the optional settings: no e-mail subscription, no Bedrock grant
    assert not synth.of_type("AWS::SNS::Subscription")
    assert "bedrock" not in json.dumps(synth.template)
    # And the synth warned that alarms reach only the topic
    metadata = json.loads((synth.outdir / f"{names.stack_name('dev')}.metadata.json").read_text())
    assert any(
        "alarmEmail is empty" in str(entry["data"])
        for entries in metadata.values()
        for entry in entries
        if entry["type"] == "aws:cdk:warning"
    )


def test_cfn_lint_passes_on_the_synthesized_template_in_every_region_it_accepts(
    synthesized: Synthesized,
) -> None:
    # Given the synthesized template, and the regions its region guard accepts
    template = synthesized.outdir / f"{STACK}.template.json"
    accepted = regions.rule_regions(synthesized.template)
    assert "us-east-1" in accepted and "eu-west-1" in accepted
    # When cfn-lint checks it for each of them (W3005, a dependency CDK states twice, is the one rule ignored)
    done = subprocess.run(
        [str(CFN_LINT), "-i", "W3005", "--regions", *accepted, "--", str(template)],
        capture_output=True,
        text=True,
    )
    # Then it finds nothing
    assert done.returncode == 0, done.stdout + done.stderr


def production_api(synthesized: Synthesized) -> str:
    (api_id,) = [
        k
        for k, r in synthesized.of_type("AWS::ApiGatewayV2::Api").items()
        if not r["Properties"]["Name"].endswith(f"-{names.NEXT_ALIAS}")
    ]
    return api_id


def test_the_outputs_are_the_stable_keys_of_the_names_module(synthesized: Synthesized) -> None:
    # Given the stack's outputs
    outputs = synthesized.template["Outputs"]
    # Then every key the acceptance suite reads is there, one per function included
    expected = {value for key, value in vars(names).items() if key.startswith("OUTPUT_")}
    expected |= {names.function_output_key(f) for f in ALL_FUNCTIONS}
    assert set(outputs) == expected
    assert names.function_output_key("gating") == "GatingFunctionName"
    # And the API URL is the API's endpoint (no stage path, no trailing slash: clients append /v1/...)
    assert outputs[names.OUTPUT_API_URL]["Value"] == {
        "Fn::GetAtt": [production_api(synthesized), "ApiEndpoint"]
    }
    assert names.stack_name("test") == STACK == "Sentinel-test"


def test_the_names_module_and_the_route_table_build_no_client_and_import_nothing_of_infra() -> None:
    # Given the modules infra imports from the service (names and the route table, and what they pull in)
    probe = (
        "import boto3, boto3.session\n"
        "def refuse(*a, **k): raise SystemExit('an AWS client was built at import time')\n"
        "boto3.client = boto3.resource = boto3.session.Session.client = refuse\n"
        "import sentinel_service.names, sentinel_service.http.routes\n"
        "import sys; print(sorted(m for m in sys.modules if m == 'sentinel_infra' or "
        "m.startswith('sentinel_infra.')))"
    )
    # When they are imported with client construction refused
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO)
    # Then no client was built, and no infra module came along
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    # And the names module imports nothing but the standard library's __future__ at most
    tree = ast.parse((REPO / "src" / "sentinel_service" / "names.py").read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


def test_no_function_module_imports_infra() -> None:
    # Given every module of the functions package (the wall import-linter will enforce)
    offenders = []
    for path in (REPO / "src" / "sentinel_service").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [
                f"{path.relative_to(REPO)}: {m}"
                for m in modules
                if m == "sentinel_infra" or m.startswith("sentinel_infra.")
            ]
    # Then none imports infra
    assert offenders == []


def test_make_deploy_uses_the_pinned_cli_and_writes_outputs_where_the_names_module_says() -> None:
    # Given the infrastructure verbs and package.json
    verbs = (REPO / "mk" / "infra.mk").read_text()
    pinned = json.loads((REPO / "package.json").read_text())["devDependencies"]["aws-cdk"]
    # Then `make deploy` runs exactly the CLI version package.json pins
    assert f"CDK_CLI_VERSION := {pinned}" in verbs and "npx --yes aws-cdk@$(CDK_CLI_VERSION)" in verbs
    # And writes the stack outputs to the file the acceptance suite reads
    assert f"STACK_OUTPUTS := {names.STACK_OUTPUTS_FILE}" in verbs
    # And `make deploy` is build -> deploy with live left where it is -> accept next -> promote, in that order
    deploy = verbs[verbs.index("deploy: build") :]
    steps = [
        "sentinel_acceptance live-versions",
        '-c liveVersions="$$LIVE"',
        'acceptance ACCEPTANCE_FLAGS="--alias next',
        "live was not moved",
        "sentinel_acceptance promote",
        # then, only where a function was served for the first time, the deploy that opens its routes
        "sentinel_acceptance live-versions",
        '-c liveVersions="$$LIVE"',
    ]
    positions, at = [], 0
    for step in steps:
        at = deploy.index(step, at)
        positions.append(at)
        at += len(step)
    assert positions == sorted(positions)
    # And `make acceptance` mints tokens of minutes before the run and voids them after it, whatever happens
    acceptance = (REPO / "mk" / "acceptance.mk").read_text()
    acceptance = acceptance[acceptance.index("\nacceptance: setup") :]
    order = [
        "sentinel_acceptance mint --ttl 15m",
        "sentinel_acceptance run",
        "|| status=$$?",
        "retire",
        "exit $$status",
    ]
    assert [acceptance.index(step) for step in order] == sorted(acceptance.index(step) for step in order)
    # And `make synth` runs cfn-lint with only W3005 ignored, for the regions the template's guard accepts
    assert (
        "cfn-lint -i W3005 --regions $$($(BIN)/python -m sentinel_infra.regions cdk.out/*.template.json)"
        in (verbs)
    )
