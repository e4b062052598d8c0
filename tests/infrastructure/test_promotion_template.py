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
    # And with every function serving an accepted version, no production route is closed
    assert closed_routes(template, "sentinel-test") == set()


@pytest.mark.parametrize("raw", ['{"gating": "$LATEST"}', '["7"]', '{"gating": 7}', "not json"])
def test_live_versions_that_are_not_published_version_numbers_are_refused(raw: str) -> None:
    from app import live_versions

    # Given a liveVersions value that does not name published versions, when it is read, then it is refused
    with pytest.raises(ValueError):
        live_versions(raw)


def stages(template: dict) -> dict[str, dict]:
    """Each HTTP API's stage, by the API's name."""
    apis = {
        k: r["Properties"]["Name"]
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::ApiGatewayV2::Api"
    }
    return {
        apis[ref_name(r["Properties"]["ApiId"])]: r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::ApiGatewayV2::Stage"
    }


def closed_routes(template: dict, api_name: str) -> set[str]:
    """The routes of one API throttled to zero: API Gateway answers them 429 and invokes nothing."""
    settings = stages(template)[api_name]["RouteSettings"]
    return {
        key
        for key, limits in settings.items()
        if (limits["ThrottlingRateLimit"], limits["ThrottlingBurstLimit"]) == (0, 0)
    }


def synthesized_with(built: Path, outdir: Path, live: dict[str, str]) -> dict:
    from app import build_app

    app, _ = build_app({**CONTEXT, "liveVersions": json.dumps(live)}, outdir=str(outdir), build_dir=built)
    app.synth()
    return json.loads((outdir / f"{STACK}.template.json").read_text())


def test_a_first_deploy_closes_every_production_route_until_the_first_promote(
    built: Path, tmp_path: Path
) -> None:
    from sentinel_infra.constructs.api import route_key
    from sentinel_service.http.routes import ROUTES

    # Given a stack's first deploy: make deploy read no live alias from Lambda (`{}`)
    template = synthesized_with(built, tmp_path / "first", {})
    production, acceptance = stages(template)["sentinel-test"], stages(template)["sentinel-test-next"]
    # Then every production route, public ones too, is throttled to zero (429, nothing invoked), and the stage
    assert closed_routes(template, "sentinel-test") == {route_key(r) for r in ROUTES}
    assert production["DefaultRouteSettings"]["ThrottlingBurstLimit"] == 0
    assert production["DefaultRouteSettings"]["ThrottlingRateLimit"] == 0
    # And the acceptance API, where the gate runs on `next`, is open
    assert closed_routes(template, "sentinel-test-next") == set()
    assert acceptance["DefaultRouteSettings"]["ThrottlingBurstLimit"] > 0


def test_a_function_new_in_this_deploy_has_its_production_routes_closed_and_no_other(
    built: Path, tmp_path: Path
) -> None:
    from sentinel_infra.constructs.api import route_key
    from sentinel_service.http.routes import ROUTES

    # Given every function serving an accepted version except the forge function, new in this release
    serving = {name: str(10 + i) for i, name in enumerate(ALL_FUNCTIONS) if name != names.FORGE_FUNCTION}
    template = synthesized_with(built, tmp_path / "new", serving)
    # Then exactly the forge function's production routes are closed
    expected = {route_key(r) for r in ROUTES if r.function == names.FORGE_FUNCTION}
    assert expected and closed_routes(template, "sentinel-test") == expected
    # And without the authorizer serving, every route but the public ones would be closed too
    serving.pop(names.AUTHORIZER_FUNCTION)
    template = synthesized_with(built, tmp_path / "authorizer", serving)
    assert closed_routes(template, "sentinel-test") == {
        route_key(r) for r in ROUTES if not r.public or r.function == names.FORGE_FUNCTION
    }
