"""Acceptance before traffic, in the template: a deploy gives its new versions to the `next` aliases (the
acceptance API) and leaves `live` (the production API) on the versions it already served, which `make deploy`
reads from Lambda and passes as -c liveVersions; only the promote step moves `live`."""

import json
from pathlib import Path

import pytest

from sentinel_service import names
from support.infra import ALL_FUNCTIONS, CONTEXT, STACK, functions_by_name, ref_name


def aliases(template: dict, function_logical_id: str) -> dict[str, object]:
    return {
        r["Properties"]["Name"]: r["Properties"]["FunctionVersion"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Alias"
        and ref_name(r["Properties"]["FunctionName"]) == function_logical_id
    }


def test_a_deploy_over_serving_versions_leaves_live_on_them_and_gives_next_the_new_ones(
    built: Path, tmp_path: Path
) -> None:
    from app import build_app
    from support.infra import Synthesized

    # Given the versions each function's live alias serves now
    serving = {name: str(10 + i) for i, name in enumerate(ALL_FUNCTIONS)}
    # When the stack is synthesized with them
    app, _ = build_app(
        {**CONTEXT, "liveVersions": json.dumps(serving)}, outdir=str(tmp_path), build_dir=built
    )
    app.synth()
    template = json.loads((tmp_path / f"{STACK}.template.json").read_text())
    synth = Synthesized(
        outdir=tmp_path, build_dir=built, template=template, nag_findings=set(), acknowledgements=[]
    )
    for name, (logical_id, _) in functions_by_name(synth).items():
        found = aliases(template, logical_id)
        # Then live stays on the version it served: the deploy moves no production traffic
        assert found[names.LIVE_ALIAS] == serving[name], name
        # And next names the version this deploy publishes, which the acceptance API calls
        (version_id,) = [
            k
            for k, r in template["Resources"].items()
            if r["Type"] == "AWS::Lambda::Version" and ref_name(r["Properties"]["FunctionName"]) == logical_id
        ]
        assert ref_name(found[names.NEXT_ALIAS]) == version_id, name
    # And the acceptance API's URL is an output, beside production's
    assert {names.OUTPUT_API_URL, names.OUTPUT_NEXT_API_URL} <= set(template["Outputs"])


@pytest.mark.parametrize("raw", ['{"gating": "$LATEST"}', '["7"]', '{"gating": 7}', "not json"])
def test_live_versions_that_are_not_published_version_numbers_are_refused(raw: str) -> None:
    from app import live_versions

    # Given a liveVersions value that does not name published versions, when it is read, then it is refused
    with pytest.raises(ValueError):
        live_versions(raw)
