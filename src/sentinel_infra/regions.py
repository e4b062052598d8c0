"""The regions the stack can be deployed to, and the guard that refuses the others before anything is created.

Some resource types the stack declares do not exist in every region (AWS Budgets and EventBridge Pipes are
missing from about twenty): CloudFormation would create half the stack there and then fail and roll back.
Which regions have which types is not kept by hand here: it is read from cfn-lint's own per-region resource
schemas (`cfnlint/data/schemas/providers/<region>.json`, the bundled copy, never a user cache, so a synth is
a function of the installed cfn-lint version), for every type the synthesized stack declares.

The guard works twice: at synth, when the region is known (the stack's own, or the CLI's
CDK_DEFAULT_REGION, i.e. where `cdk deploy` is about to go), it refuses with a message naming the region, the
missing types and the accepted regions; and in the template itself, a CloudFormation rule on AWS::Region, for
the environment-agnostic template deployed by other means (the rule fails the change set before any
resource).
"""

from __future__ import annotations

import json
import os
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the command line below reads a template and needs no jsii start
    import aws_cdk as cdk

RULE_ID = "SentinelRegionGuard"


class UnsupportedRegion(ValueError):
    """The region lacks a resource type the stack declares."""


def _providers() -> Path:
    import cfnlint

    return Path(cfnlint.__file__).parent / "data" / "schemas" / "providers"


@cache
def resource_types_by_region() -> dict[str, frozenset[str]]:
    """{region: the resource types cfn-lint's bundled schemas list there}, for every region cfn-lint knows."""
    from cfnlint.helpers import REGIONS

    found = {}
    for region in REGIONS:
        schema = _providers() / f"{region}.json"
        if (
            schema.exists()
        ):  # cfn-lint falls back to us-east-1's list for a region without one: never trust that
            found[region] = frozenset(json.loads(schema.read_text()))
    return found


def accepted_regions(types: set[str]) -> list[str]:
    """The regions where every one of `types` exists, sorted."""
    return sorted(r for r, there in resource_types_by_region().items() if types <= there)


def declared_types(stack: cdk.Stack) -> set[str]:
    import aws_cdk as cdk

    return {child.cfn_resource_type for child in stack.node.find_all() if isinstance(child, cdk.CfnResource)}


def limiting_types(types: set[str]) -> list[str]:
    """Which of `types` some known region lacks: what the guard is about."""
    everywhere = set.intersection(*(set(t) for t in resource_types_by_region().values()))
    return sorted(types - everywhere)


def guard(stack: cdk.Stack, region: str | None = None) -> list[str]:
    """Refuse a known region that lacks a declared type; add the rule on AWS::Region to the template.
    Returns the accepted regions. Call it once the stack holds every resource."""
    import aws_cdk as cdk

    types = declared_types(stack)
    accepted = accepted_regions(types)
    limiting = limiting_types(types)
    known = region or (None if cdk.Token.is_unresolved(stack.region) else stack.region)
    if known and known not in accepted:
        missing = sorted(t for t in types if t not in resource_types_by_region().get(known, frozenset()))
        raise UnsupportedRegion(
            f"{stack.stack_name} cannot be deployed in {known}: "
            f"{', '.join(missing) or 'its resource types'} "
            f"{'does' if len(missing) == 1 else 'do'} not exist there (cfn-lint's region schemas). "
            f"Regions with every type the stack declares: {', '.join(accepted)}."
        )
    cdk.CfnRule(
        stack,
        RULE_ID,
        assertions=[
            cdk.CfnRuleAssertion(
                assert_=cdk.Fn.condition_contains(accepted, cdk.Aws.REGION),
                assert_description=f"Sentinel needs {', '.join(limiting) or 'its resource types'}, which "
                "this region lacks (the regions listed in this rule have them). See docs/deploy.md, "
                "'Regions'.",
            )
        ],
    )
    return accepted


def region_at_synth() -> str | None:
    """Where `cdk deploy` is about to deploy an environment-agnostic stack: the CLI sets CDK_DEFAULT_REGION
    from the profile before it runs the app. A plain `python app.py` knows no region."""
    return os.environ.get("CDK_DEFAULT_REGION") or None


def rule_regions(template: dict[str, Any]) -> list[str]:
    """The regions a synthesized template's guard accepts."""
    (assertion,) = template["Rules"][RULE_ID]["Assertions"]
    regions, _region = assertion["Assert"]["Fn::Contains"]
    return list(regions)


def main(argv: list[str] | None = None) -> int:
    """`python -m sentinel_infra.regions TEMPLATE...`: the regions every template's guard accepts, for
    `cfn-lint --regions` (what `make synth` lints the template for)."""
    templates = [json.loads(Path(t).read_text()) for t in (sys.argv[1:] if argv is None else argv)]
    if not templates:
        print("usage: python -m sentinel_infra.regions TEMPLATE...", file=sys.stderr)
        return 2
    common = set.intersection(*(set(rule_regions(t)) for t in templates))
    print(" ".join(sorted(common)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
