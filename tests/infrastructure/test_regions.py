"""The region guard: the stack refuses a region that lacks a resource type it declares, at synth when the
region is known and in the template (a rule on AWS::Region) when it is not, with the regions read from
cfn-lint's own per-region resource schemas."""

import json
from pathlib import Path

import cfnlint
import pytest
from cfnlint.helpers import REGIONS

from sentinel_infra import regions
from support.infra import CONTEXT, Synthesized

GUARDED = {"AWS::Budgets::Budget", "AWS::Pipes::Pipe"}


def schema_types(region: str) -> set[str] | None:
    """The resource types cfn-lint's bundled schema lists for a region, read here on its own."""
    schema = Path(cfnlint.__file__).parent / "data" / "schemas" / "providers" / f"{region}.json"
    return set(json.loads(schema.read_text())) if schema.exists() else None


def lacking() -> list[str]:
    return [r for r in REGIONS if (types := schema_types(r)) is not None and not GUARDED <= types]


def test_the_template_admits_exactly_the_regions_with_every_type_it_declares(
    synthesized: Synthesized,
) -> None:
    # Given the template's rules, and every type it declares
    rule = synthesized.template["Rules"][regions.RULE_ID]
    (assertion,) = rule["Assertions"]
    accepted, region = assertion["Assert"]["Fn::Contains"]
    declared = {r["Type"] for r in synthesized.resources.values()}
    assert GUARDED <= declared
    # Then the rule holds the stack's region (its pseudo parameter) to a list
    assert region == {"Ref": "AWS::Region"}
    # And the list is every region whose cfn-lint schema has every declared type, and no other
    expected = sorted(r for r in REGIONS if (types := schema_types(r)) is not None and declared <= types)
    assert accepted == expected
    # And the regions without AWS Budgets or EventBridge Pipes (about twenty) are out
    assert len(lacking()) >= 10 and not set(lacking()) & set(accepted)
    assert {"us-east-1", "eu-west-1", "eu-central-1", "ap-southeast-2"} <= set(accepted)
    # And a refused deployment says why, naming the types some region lacks
    description = assertion["AssertDescription"]
    assert "AWS::Budgets::Budget" in description and "AWS::Pipes::Pipe" in description


def test_a_known_region_without_a_needed_type_is_refused_at_synth(
    built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app import build_app

    # Given the CDK CLI about to deploy to a region without EventBridge Pipes or AWS Budgets
    region = lacking()[0]
    monkeypatch.setenv("CDK_DEFAULT_REGION", region)
    # When the app is built, then it refuses, naming the region, what it lacks, and where it can go
    with pytest.raises(regions.UnsupportedRegion) as refused:
        build_app(CONTEXT, build_dir=built)
    message = str(refused.value)
    assert f"cannot be deployed in {region}" in message
    assert any(t in message for t in GUARDED) and "us-east-1" in message
    # And a region with both is accepted
    monkeypatch.setenv("CDK_DEFAULT_REGION", "eu-west-1")
    _, stack = build_app(CONTEXT, build_dir=built)
    assert stack.node.try_find_child(regions.RULE_ID) is not None


def test_the_command_line_prints_the_regions_every_template_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two templates whose guards accept overlapping regions
    def template(accepted: list[str]) -> str:
        rule = {"Assertions": [{"Assert": {"Fn::Contains": [accepted, {"Ref": "AWS::Region"}]}}]}
        path = tmp_path / f"{len(accepted)}.json"
        path.write_text(json.dumps({"Rules": {regions.RULE_ID: rule}}))
        return str(path)

    first, second = template(["eu-west-1", "us-east-1", "us-west-2"]), template(["us-east-1", "eu-west-1"])
    # When the command line reads them, then it prints the regions both accept (what cfn-lint lints for)
    assert regions.main([first, second]) == 0
    assert capsys.readouterr().out.split() == ["eu-west-1", "us-east-1"]
