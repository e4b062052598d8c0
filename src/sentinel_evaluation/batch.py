"""The batch: every scenario run twice, the five counters, the gates, and a report whose digest is the same
from run to run and machine to machine (it holds no durations, paths, ports or random ids)."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sentinel_domain.canonical import digest

from .backings import backings
from .catalog import Scenario, load_catalog
from .run_state import RunResult
from .runner import run_scenario

RUNS_PER_SCENARIO = 2
MIN_SCENARIOS = 40

# The scenarios the batch cannot pass without (the list). Kept here, not in the data, so that
# deleting a scenario file cannot quietly remove its coverage.
CRITICAL: tuple[str, ...] = (
    "ready_flow_end_to_end",
    "evidence_missing",
    "evidence_negative",
    "evidence_unknown",
    "model_transport_error_fallback",
    "model_invalid_output_fallback",
    "evidence_wrong_subject",
    "evidence_wrong_scope",
    "evidence_wrong_environment",
    "evidence_wrong_revision",
    "evidence_stale_at_the_limit",
    "evidence_unverified_from_the_agent",
    "evidence_untrusted_publisher",
    "evidence_query_incomplete",
    "approval_missing",
    "approval_rejected",
    "approval_expired",
    "review_wrong_digest",
    "review_wrong_revision",
    "plan_changed_after_approval",
    "action_undeclared",
    "idempotency_conflicting_replay",
    "forged_reviewer_in_the_body",
    "self_approval_by_the_creator",
    "self_approval_through_a_sponsor",
    "reviewer_without_the_role",
    "agent_as_reviewer",
    "report_claims_unproven_checks",
    "task_blocked",
    "task_dependency_not_passing",
    "evidence_future_dated",
    "caller_chosen_time",
    "declared_context_leaves_files_out",
    "check_id_reused_for_another_policy",
    "amendment_between_approval_and_execution",
    "expiry_between_approval_and_execution",
    "action_past_its_limit",
    "fact_edited_behind_the_chain",
)

COUNTERS = (
    "false_ready_count",
    "unauthorized_side_effect_count",
    "nondeterministic_replay_count",
    "wrong_binding_failure_count",
    "identity_boundary_failure_count",
)


@dataclass
class ScenarioOutcome:
    scenario: Scenario
    runs: list[RunResult]

    @property
    def deterministic(self) -> bool:
        return len({r.digest for r in self.runs}) == 1

    @property
    def passed(self) -> bool:
        return self.deterministic and all(r.passed for r in self.runs)

    def as_dict(self) -> dict[str, Any]:
        first = self.runs[0]
        decision = first.observation.get("decision") or {}
        failures: list[str] = []
        for n, run in enumerate(self.runs, 1):
            for kind, items in (
                ("expectation", run.failures),
                ("false_ready", run.false_ready),
                ("unauthorized_side_effect", run.unauthorized_side_effects),
                ("wrong_binding", run.wrong_binding),
                ("identity_boundary", run.identity_boundary),
                ("negative_unknown", run.outcome_mixups),
                ("fallback", run.fallback_problems),
            ):
                failures.extend(f"run {n}: {kind}: {item}" for item in items)
        if not self.deterministic:
            digests = ", ".join(r.digest[:16] for r in self.runs)
            failures.append(f"nondeterministic replay: observation digests {digests}")
        return {
            "name": self.scenario.name,
            "category": self.scenario.category,
            "critical": self.scenario.critical,
            "passed": self.passed,
            "digests": [r.digest for r in self.runs],
            "decision": decision.get("decision"),
            "findings": decision.get("findings", []),
            "side_effects": len(first.observation.get("side_effects", [])),
            "failures": failures,
        }


def _gate(passed: bool, detail: str, skipped: bool = False) -> dict[str, Any]:
    return {"passed": passed or skipped, "skipped": skipped, "detail": detail}


def run_batch(
    scenarios: Sequence[Scenario] | None = None, *, runs: int = RUNS_PER_SCENARIO, store: str = "memory"
) -> dict[str, Any]:
    """Runs the catalog (or the given scenarios) and returns the report, `report_digest` included.

    A subset (any explicit list) skips the gates that only mean something for the whole catalog: its size
    and the presence of every critical scenario. `store` ("memory" or "sqlite") backs every run; the report
    does not name it, so the same behaviour on either store gives the same digest."""
    subset = scenarios is not None
    chosen = list(scenarios) if scenarios is not None else load_catalog()
    with backings(store) as backing:
        outcomes = [ScenarioOutcome(s, [run_scenario(s, backing) for _ in range(runs)]) for s in chosen]
    all_runs = [r for o in outcomes for r in o.runs]

    counters = {
        "false_ready_count": sum(len(r.false_ready) for r in all_runs),
        "unauthorized_side_effect_count": sum(len(r.unauthorized_side_effects) for r in all_runs),
        "nondeterministic_replay_count": sum(1 for o in outcomes if not o.deterministic),
        "wrong_binding_failure_count": sum(len(r.wrong_binding) for r in all_runs),
        "identity_boundary_failure_count": sum(len(r.identity_boundary) for r in all_runs),
    }
    by_name = {o.scenario.name: o for o in outcomes}
    missing = [name for name in CRITICAL if name not in by_name or not by_name[name].scenario.critical]
    expectation_failures = sum(len(r.failures) for r in all_runs)
    mixups = sum(len(r.outcome_mixups) for r in all_runs)
    fallback_problems = sum(len(r.fallback_problems) for r in all_runs)
    observed_reasons = sorted(
        {
            m["fallback_reason"]
            for r in all_runs
            for m in r.observation.get("modes", [])
            if m.get("mode") == "fallback"
        }
    )
    exercised = {"MODEL_TRANSPORT_ERROR", "MODEL_OUTPUT_INVALID"} <= set(observed_reasons)
    apart = {
        name: by_name[name].runs[0].observation.get("decision", {}).get("findings", [])
        for name in ("evidence_negative", "evidence_unknown")
        if name in by_name
    }
    apart_shown = (
        apart.get("evidence_negative", []).count("EVIDENCE_NEGATIVE") == 1
        and "EVIDENCE_UNKNOWN" not in apart.get("evidence_negative", [])
        and "EVIDENCE_UNKNOWN" in apart.get("evidence_unknown", [])
        and "EVIDENCE_NEGATIVE" not in apart.get("evidence_unknown", [])
    )

    gates: dict[str, dict[str, Any]] = {}
    for name in COUNTERS:
        gates[f"{name} == 0"] = _gate(counters[name] == 0, str(counters[name]))
    gates["catalog size"] = _gate(
        len(chosen) >= MIN_SCENARIOS and len(all_runs) >= 2 * MIN_SCENARIOS,
        f"{len(chosen)} scenarios, {len(all_runs)} runs (at least {MIN_SCENARIOS} and {2 * MIN_SCENARIOS})",
        skipped=subset,
    )
    gates["every critical scenario present"] = _gate(
        not missing,
        f"{len(CRITICAL) - len(missing)}/{len(CRITICAL)}"
        + (f"; missing {', '.join(missing)}" if missing else ""),
        skipped=subset,
    )
    gates["every expectation exact"] = _gate(
        expectation_failures == 0, f"{expectation_failures} expectation failure(s)"
    )
    gates["negative and unknown kept apart"] = _gate(
        mixups == 0 and (apart_shown or subset),
        f"{mixups} mix-up(s)"
        + ("" if apart_shown else "; evidence_negative/evidence_unknown not shown apart"),
    )
    gates["fallback fail-closed"] = _gate(
        fallback_problems == 0 and (exercised or subset),
        f"{fallback_problems} problem(s); fallback reasons seen: {', '.join(observed_reasons) or 'none'}",
    )
    gates["every scenario passed"] = _gate(
        all(o.passed for o in outcomes), f"{sum(o.passed for o in outcomes)}/{len(outcomes)}"
    )

    report: dict[str, Any] = {
        "catalog": {
            "scenarios": len(chosen),
            "runs": len(all_runs),
            "runs_per_scenario": runs,
            "critical": sum(1 for s in chosen if s.critical),
            "subset": subset,
        },
        "counters": counters,
        "gates": gates,
        "scenarios": [o.as_dict() for o in outcomes],
        "passed": all(g["passed"] for g in gates.values()),
    }
    report["report_digest"] = digest(report)
    return report
