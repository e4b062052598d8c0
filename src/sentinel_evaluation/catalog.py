"""The scenario catalog: YAML files under `evaluation/scenarios/`, read and checked before anything runs.

A scenario is data: a fixture (configuration and policy overrides, a scripted model), a list of steps from a
closed vocabulary (VERBS), per-step expectations and a final expectation. A typo in a key is an error at
load time, never a step that silently does something else."""

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .fixture import POLICIES, PROPOSER_BEHAVIOURS

SCENARIOS_DIR = Path(__file__).resolve().parent / "scenarios"
PRELUDES_FILE = "_preludes.yaml"

# Keys every request step may carry besides its verb's own.
COMMON = frozenset({"do", "as", "expect", "label", "note", "extra", "headers", "key"})
VERBS: dict[str, frozenset[str]] = {
    "create": frozenset({"files", "openapi", "subject", "revision", "base_revision", "environment"}),
    "context": frozenset({"files", "openapi"}),
    "attest": frozenset({"files", "openapi"}),
    "propose": frozenset({"if_match"}),
    "plan": frozenset({"tasks", "actions", "base", "raw", "if_match", "plan_extra"}),
    "approve": frozenset({"digest", "revision", "comment"}),
    "reject": frozenset({"digest", "revision", "comment"}),
    "execute": frozenset({"action", "params", "digest"}),
    "evidence": frozenset(
        {"check", "junit", "result", "subject", "revision", "environment", "scope", "observed"}
    ),
    "report": frozenset({"task", "status", "claims", "digest", "blocked_reason", "summary"}),
    "settle": frozenset({"task", "digest", "note"}),
    "decide": frozenset({"as_of"}),
    "record": frozenset({"as_of"}),
    "read": frozenset(),
    "policy": frozenset({"id", "set"}),
    "config": frozenset({"set", "if_match"}),
    "call": frozenset({"method", "path", "body", "query", "token"}),
    # Out-of-band steps: the clock, the operator, the store behind the gate's back, concurrent writers.
    "advance": frozenset({"seconds"}),
    "revoke": frozenset({"principal", "compromised"}),
    "tamper": frozenset({"chain", "fact", "replace", "remove_event"}),
    "fault": frozenset({"incomplete"}),
    "race": frozenset({"kind", "seconds"}),
}
OUT_OF_BAND = frozenset({"advance", "revoke", "tamper", "fault", "race"})
# What a step's `expect` mapping may name (evaluation/step_checks.py StepChecks.check_step judges each).
EXPECT_KEYS = frozenset(
    {
        "status",
        "refusal",
        "decision",
        "findings",
        "preflight",
        "replayed",
        "mismatches",
        "actions",
        "obligations",
        "as_of",
        "existing_candidate",
        "mode",
        "fallback_reason",
        "outcome",
        "trust",
        "recorded_status",
        "passes",
        "attempt",
        "as_of_source",
        "change_context",
    }
)
RACES = ("amend_before_execution_write", "expire_before_execution_write")
CATEGORIES = (
    "flow",
    "evidence",
    "model",
    "binding",
    "freshness",
    "trust",
    "change_context",
    "reviews",
    "identity",
    "actions",
    "idempotency",
    "tasks",
    "plans",
    "time",
    "tamper",
    "candidates",
)


class CatalogError(Exception):
    pass


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Fixture(Strict):
    config: dict[str, Any] = Field(default_factory=dict)  # overrides of fixture.CONFIG
    policies: dict[str, dict[str, Any]] = Field(default_factory=dict)  # overrides of fixture.POLICIES
    proposer: list[str] | None = None  # the scripted model's behaviours, in call order


class FinalExpectation(Strict):
    decision: Literal["ready", "hold"] | None  # None: no candidate was ever established
    findings: list[str]
    side_effects: int = 0
    audit_valid: bool = True
    project_audit_valid: bool = True
    approval_accepted: bool | None = None
    executed: bool | None = None


class Scenario(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_]{2,80}$")
    category: str
    critical: bool = False
    description: str = Field(min_length=10)
    fixture: Fixture = Fixture()
    steps: list[dict[str, Any]] = Field(min_length=1)
    expect: FinalExpectation
    source: str = ""  # the file it came from (not part of any digest)


def _expand(
    steps: list[Any], preludes: dict[str, list[Any]], where: str, depth: int = 0
) -> list[dict[str, Any]]:
    """`{use: NAME}` steps are replaced by the named prelude's steps (preludes may use preludes)."""
    if depth > 8:
        raise CatalogError(f"{where}: preludes nest too deep")
    out: list[dict[str, Any]] = []
    for step in steps:
        if not isinstance(step, dict):
            raise CatalogError(f"{where}: a step is a mapping, not {step!r}")
        if "use" in step:
            if set(step) != {"use"} or step["use"] not in preludes:
                raise CatalogError(f"{where}: unknown prelude {step.get('use')!r}")
            out.extend(_expand(preludes[step["use"]], preludes, where, depth + 1))
        else:
            out.append(dict(step))
    return out


def _check_step(step: dict[str, Any], where: str) -> None:
    verb = step.get("do")
    if verb not in VERBS:
        raise CatalogError(f"{where}: unknown verb {verb!r}")
    allowed = VERBS[verb] | ({"do", "note"} if verb in OUT_OF_BAND else COMMON)
    unknown = sorted(set(step) - allowed)
    if unknown:
        raise CatalogError(f"{where}: verb {verb} takes no {', '.join(unknown)}")
    if verb == "race" and step.get("kind") not in RACES:
        raise CatalogError(f"{where}: race kind must be one of {', '.join(RACES)}")
    expect = step.get("expect")
    if expect is not None and not isinstance(expect, int | str | dict):
        raise CatalogError(f"{where}: expect is a status, a refusal code or a mapping")
    if isinstance(expect, dict) and set(expect) - EXPECT_KEYS:
        raise CatalogError(f"{where}: expect takes no {', '.join(sorted(set(expect) - EXPECT_KEYS))}")


def _check_scenario(scenario: Scenario) -> None:
    where = f"{scenario.source}: {scenario.name}"
    if scenario.category not in CATEGORIES:
        raise CatalogError(f"{where}: unknown category {scenario.category}")
    for policy_id in scenario.fixture.policies:
        if policy_id not in POLICIES:
            raise CatalogError(f"{where}: the fixture has no policy {policy_id}")
    for behaviour in scenario.fixture.proposer or []:
        if behaviour not in PROPOSER_BEHAVIOURS:
            raise CatalogError(f"{where}: unknown proposer behaviour {behaviour}")
    decision, findings = scenario.expect.decision, scenario.expect.findings
    if (
        (decision == "ready" and findings)
        or (decision == "hold" and not findings)
        or (decision is None and findings)
    ):
        raise CatalogError(f"{where}: ready means no findings, hold at least one, no decision none")
    for n, step in enumerate(scenario.steps, 1):
        _check_step(step, f"{where} step {n}")


def _read(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise CatalogError(f"{path.name}: not YAML: {error}") from error


def load_catalog(directory: Path = SCENARIOS_DIR) -> list[Scenario]:
    """Every scenario, in file order then document order; names are unique across the catalog."""
    preludes_path = directory / PRELUDES_FILE
    preludes = (_read(preludes_path) or {}) if preludes_path.exists() else {}
    scenarios: list[Scenario] = []
    seen: dict[str, str] = {}
    for path in sorted(directory.glob("*.yaml")):
        if path.name == PRELUDES_FILE:
            continue
        documents = _read(path) or []
        if not isinstance(documents, list):
            raise CatalogError(f"{path.name}: a scenario file is a list of scenarios")
        for raw in documents:
            if not isinstance(raw, dict):
                raise CatalogError(f"{path.name}: a scenario is a mapping")
            where = f"{path.name}: {raw.get('name', '?')}"
            raw = dict(raw, steps=_expand(raw.get("steps") or [], preludes, where), source=path.name)
            try:
                scenario = Scenario.model_validate(raw)
            except ValidationError as error:
                raise CatalogError(f"{where}: {error}") from error
            if scenario.name in seen:
                raise CatalogError(f"{where}: the name is used in {seen[scenario.name]} too")
            seen[scenario.name] = path.name
            _check_scenario(scenario)
            scenarios.append(scenario)
    return scenarios


def scenario_from_data(raw: dict[str, Any], preludes: dict[str, list[Any]] | None = None) -> Scenario:
    """One scenario from a mapping (tests build deliberately broken ones this way)."""
    if preludes is None:
        path = SCENARIOS_DIR / PRELUDES_FILE
        preludes = (_read(path) or {}) if path.exists() else {}
    where = f"(data): {raw.get('name', '?')}"
    scenario = Scenario.model_validate(
        dict(
            raw,
            steps=_expand(raw.get("steps") or [], preludes or {}, where),
            source=raw.get("source", "(data)"),
        )
    )
    _check_scenario(scenario)
    return scenario
