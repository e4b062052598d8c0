"""The promote step: move every function's `live` alias to the version its `next` alias names, only after a
passing acceptance run of exactly those versions, for exactly the built package digests.

A deploy publishes new versions behind `next` (the acceptance API) and leaves `live` (the production API)
where it was; `make deploy` then runs the gate against `next` and, only if it passes, this step. What it
refuses, before it moves anything:

- no attempt report, or the newest one did not pass, or it checked `live` rather than `next`, or another
  stack;
- a report whose built digests are not this build's (`build/digests.json`): it accepted other packages;
- `next` names other versions than the ones the run accepted (a deploy came in between);
- a version that does not run the built functions zip with the two built layers (CodeSha256, read again).

Then it calls `lambda:UpdateAlias` on each function. If one call fails, the aliases it already moved are put
back, so production serves either the old set or the new one, never a mix nobody accepted; if even that
fails, it says which functions serve what. Each promotion leaves `promotion-NNNN.json` beside the attempt
report it relied on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentinel_service import names
from sentinel_service.http.routes import FUNCTIONS

from .deployment import LAYER_ARN
from .report import attempts, now
from .target import BuiltPackage

EVERY_FUNCTION = (*FUNCTIONS, names.AUTHORIZER_FUNCTION)  # what the gate checks over HTTP
# Invoked by the stream and a schedule, never over HTTP: the gate does not call them, but they run the same
# functions zip, so their `next` versions are promoted with the others once each is read to run the accepted
# digests.
BACKGROUND_FUNCTIONS = (
    names.WITNESS_WRITER_FUNCTION,
    names.CHAIN_VERIFIER_FUNCTION,
    names.FORGE_CHECKS_FUNCTION,
    names.FORGE_WORKER_FUNCTION,  # fed by the bus (docs/github.md)
)
PROMOTED = (*EVERY_FUNCTION, *BACKGROUND_FUNCTIONS)


class PromotionRefused(Exception):
    """Nothing was moved: the message says why."""


class PromotionFailed(Exception):
    """An alias update failed part-way; the message says what was put back and what serves now."""


@dataclass(frozen=True)
class Promotion:
    stack: str
    report: Path
    accepted: dict[str, str]  # function -> version now behind live
    previous: dict[str, str | None]  # function -> version live served before (None: no alias yet)

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "report": str(self.report),
            "promoted_at": now(),
            "live": self.accepted,
            "previous_live": self.previous,
        }


def aliases(lam: Any, function_names: Mapping[str, str], alias: str) -> dict[str, str | None]:
    """{function: the version `alias` names, or None where the alias does not exist}."""
    found: dict[str, str | None] = {}
    for function, name in function_names.items():
        try:
            found[function] = str(lam.get_alias(FunctionName=name, Name=alias)["FunctionVersion"])
        except lam.exceptions.ResourceNotFoundException:
            found[function] = None
    return found


def newest_report(reports_dir: Path) -> tuple[Path, dict[str, Any]]:
    found = attempts(reports_dir)
    if not found:
        raise PromotionRefused(f"no acceptance report in {reports_dir}: run the gate against `next` first")
    return found[-1], json.loads(found[-1].read_text())


def accepted_versions(
    report: dict[str, Any], stack: str, built: Mapping[str, BuiltPackage]
) -> dict[str, str]:
    """The versions a passing run of `next` accepted for this stack and this build, or PromotionRefused."""
    target = report.get("target", {})
    if report.get("status") != "passed":
        failing = ", ".join(report.get("failing_checks", [])) or report.get("status", "no status")
        raise PromotionRefused(f"the newest acceptance run did not pass ({failing}): live stays where it is")
    if target.get("alias") != names.NEXT_ALIAS:
        raise PromotionRefused(
            f"the newest acceptance run checked {target.get('alias')!r}, not {names.NEXT_ALIAS!r}"
        )
    if target.get("stack") != stack:
        raise PromotionRefused(f"the newest acceptance run checked {target.get('stack')!r}, not {stack!r}")
    recorded = report.get("digests", {}).get("built", {})
    wanted = {k: {"sha256": p.sha256, "code_sha256": p.code_sha256} for k, p in built.items()}
    if recorded != wanted:
        raise PromotionRefused(
            "the newest acceptance run accepted other packages than this build's digests.json"
        )
    deployed = report.get("digests", {}).get("deployed") or {}
    versions = {fn: str(deployed.get(fn, {}).get("version") or "") for fn in EVERY_FUNCTION}
    missing = sorted(fn for fn, version in versions.items() if not version.isdigit())
    if missing:
        raise PromotionRefused(f"the acceptance report names no accepted version for {', '.join(missing)}")
    return versions


def _check_code(lam: Any, name: str, version: str, built: Mapping[str, BuiltPackage]) -> list[str]:
    config = lam.get_function(FunctionName=name, Qualifier=version)["Configuration"]
    problems = []
    if config.get("CodeSha256") != built["functions"].code_sha256:
        problems.append(f"{name}:{version} runs CodeSha256 {config.get('CodeSha256')}")
    layers = []
    for layer in config.get("Layers", []):
        parts = LAYER_ARN.match(layer["Arn"])
        if not parts:
            problems.append(f"{name}:{version} has a layer that is not a layer version: {layer['Arn']}")
            continue
        answer = lam.get_layer_version(LayerName=parts["name"], VersionNumber=int(parts["version"]))
        layers.append(str(answer["Content"]["CodeSha256"]))
    layers.sort()
    if layers != sorted([built["core_layer"].code_sha256, built["deps_layer"].code_sha256]):
        problems.append(f"{name}:{version} has layers {layers}")
    return problems


def promote(
    lam: Any,
    stack: str,
    function_names: Mapping[str, str],
    built: Mapping[str, BuiltPackage],
    reports_dir: Path,
) -> Promotion:
    """Move `live` to the accepted `next` versions, or refuse (nothing moved), or fail (moved ones put
    back)."""
    report_path, report = newest_report(reports_dir)
    accepted = accepted_versions(report, stack, built)
    behind_next = aliases(lam, function_names, names.NEXT_ALIAS)
    for fn in BACKGROUND_FUNCTIONS:
        if fn in function_names:  # checked below against the built digests like every other
            accepted[fn] = behind_next[fn] or ""
    if {fn: behind_next[fn] for fn in accepted} != accepted:
        moved = sorted(fn for fn in accepted if behind_next.get(fn) != accepted[fn])
        raise PromotionRefused(
            f"{names.NEXT_ALIAS} no longer names the accepted versions ({', '.join(moved)}): a deploy came "
            "in between; run the gate again"
        )
    problems = [p for fn in accepted for p in _check_code(lam, function_names[fn], accepted[fn], built)]
    if problems:
        raise PromotionRefused("the accepted versions do not run the built packages: " + "; ".join(problems))
    previous = aliases(lam, function_names, names.LIVE_ALIAS)
    moved: list[str] = []
    try:
        for fn in accepted:
            lam.update_alias(
                FunctionName=function_names[fn], Name=names.LIVE_ALIAS, FunctionVersion=accepted[fn]
            )
            moved.append(fn)
    except Exception as error:
        _put_back(lam, function_names, moved, previous, error)
    promotion = Promotion(stack, report_path, accepted, previous)
    record = report_path.with_name(report_path.name.replace("attempt-", "promotion-"))
    record.write_text(json.dumps(promotion.to_json(), indent=2) + "\n")
    return promotion


def _put_back(
    lam: Any,
    function_names: Mapping[str, str],
    moved: list[str],
    previous: Mapping[str, str | None],
    error: Exception,
) -> None:
    stuck = []
    for fn in reversed(moved):
        version = previous.get(fn)
        try:
            if version is not None:
                lam.update_alias(
                    FunctionName=function_names[fn], Name=names.LIVE_ALIAS, FunctionVersion=version
                )
        except Exception:
            stuck.append(fn)
    if stuck:
        raise PromotionFailed(
            f"promotion broke off ({error}) and {', '.join(stuck)} could not be put back: live serves the "
            f"new version for {', '.join(stuck)} and the previous one elsewhere; run the promote step again"
        ) from error
    raise PromotionFailed(
        f"promotion broke off ({error}); the {len(moved)} alias(es) it had moved are back on the previous "
        "versions: live is unchanged"
    ) from error
