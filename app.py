"""The CDK app: reads the deployment settings from context, builds the Sentinel stack from the packages
`make build` produced, and runs cdk-nag's AwsSolutions checks on every synth (a finding fails the synth).

`python app.py` synthesizes into cdk.out/ with no network and no AWS credentials; the CDK CLI runs the same
file (cdk.json "app") and adds its own context on top of cdk.json's.
"""

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from sentinel_infra import packaging, regions
from sentinel_infra.config import DeploymentConfig
from sentinel_infra.stack import SentinelStack
from sentinel_service import names

CDK_JSON = Path(__file__).resolve().parent / "cdk.json"


def cdk_json_context() -> dict[str, Any]:
    """cdk.json's context: the CLI passes it itself, a plain `python app.py` needs it read here."""
    return dict(json.loads(CDK_JSON.read_text()).get("context", {}))


def live_versions(raw: Any) -> dict[str, str]:
    """-c liveVersions='{"gating": "7", ...}': the versions the `live` aliases serve now, which `make deploy`
    reads from Lambda so the deploy leaves them where they are (absent: a first deployment)."""
    if raw in (None, ""):
        return {}
    versions = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(versions, dict) or not all(
        isinstance(v, str) and v.isdigit() for v in versions.values()
    ):
        raise ValueError(f"liveVersions must map function names to published version numbers, not {raw!r}")
    return {str(k): str(v) for k, v in versions.items()}


def build_app(
    context: Mapping[str, Any] | None = None, *, outdir: str | None = None, build_dir: Path = packaging.BUILD
) -> tuple[cdk.App, SentinelStack]:
    """The app and its one stack. `context` overrides cdk.json (the CLI's -c values override both)."""
    app = cdk.App(context={**cdk_json_context(), **dict(context or {})}, outdir=outdir)
    config = DeploymentConfig.from_context(app.node.try_get_context)
    raw_live = app.node.try_get_context("liveVersions")
    stack = SentinelStack(
        app,
        names.stack_name(config.stage),
        config=config,
        packages=packaging.read_digests(build_dir),
        # Absent (a plain synth): `live` follows each new version. Given (`make deploy` always gives it), a
        # function missing from it serves nothing yet, and the production API keeps its routes closed.
        live_versions=(None if raw_live in (None, "") else live_versions(raw_live)),
        description=f"Sentinel ({config.stage}): a fail-closed readiness gate for changes made by coding "
        "agents",
    )
    # Last, once the stack holds every resource: the rule lists the regions that have every type it declares.
    regions.guard(stack, regions.region_at_synth())
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack


if __name__ == "__main__":
    # The CLI names its output folder in CDK_OUTDIR; a plain `python app.py` writes cdk.out/ like it would.
    build_app(outdir=None if os.environ.get("CDK_OUTDIR") else "cdk.out")[0].synth()
