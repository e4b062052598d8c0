"""Part 3: the pure decide() for candidates of 10 to 10,000 obligations with as many evidence records
(bench/fixtures.py), its growth between sizes, and the same decisions through the indexed lookups the report
proposes (bench/proposals.py), whose output is checked equal to the product's first."""

import gc
import time
from typing import Any

from bench.common import ensure_repo_on_path, median, r, section_main, timed

SIZES = (10, 100, 1_000, 3_000, 10_000)
# A product decision is measured only when its projection stays under this; beyond it the figure is
# projected from the growth measured between the two largest sizes, never below quadratic once the growth is
# superlinear, and marked so (the quadratic decide took 30 s to 130 s at 10,000 on this 2-core machine).
PRODUCT_BUDGET_S = 15.0


def _growth(times: dict[int, float]) -> list[dict[str, Any]]:
    sizes = sorted(times)
    out = []
    for small, large in zip(sizes, sizes[1:], strict=False):
        ratio = times[large] / times[small]
        out.append(
            {
                "from": small,
                "to": large,
                "size_ratio": large / small,
                "time_ratio": r(ratio, 1),
                "exponent": r(_exponent(ratio, large / small), 2),
            }
        )
    return out


def _exponent(time_ratio: float, size_ratio: float) -> float:
    import math

    return math.log(time_ratio) / math.log(size_ratio)


def run(quick: bool) -> dict[str, Any]:
    ensure_repo_on_path()
    from bench import fixtures
    from bench.proposals import decide_indexed
    from sentinel_domain.decision import decide

    sizes = SIZES[:3] if quick else SIZES
    now = fixtures.fixed_now()
    # Equivalence first: a candidate whose decision holds with findings of many kinds.
    c, p, a = fixtures.states(300, now, mixed=True)
    product_mixed, indexed_mixed = decide(c, p, a), decide_indexed(c, p, a)
    equivalent = product_mixed.as_dict() == indexed_mixed.as_dict()
    rows = []
    product_s: dict[int, float] = {}
    indexed_s: dict[int, float] = {}
    for n in sizes:
        t0 = time.perf_counter()
        state, project, as_of = fixtures.states(n, now)
        build = time.perf_counter() - t0
        # The fixture is frozen out of the collector: what is timed is the decision's own work, not a
        # collection pass over tens of megabytes of fixture that a real cold read would not hold.
        gc.collect()
        gc.freeze()
        try:
            indexed_decision = decide_indexed(state, project, as_of)  # warm-up
            reps = max(1, min(200, int(20_000 / n)))
            indexed = timed(
                lambda s=state, pr=project, at=as_of: decide_indexed(s, pr, at), reps, budget_s=10
            )
            indexed_s[n] = median(indexed)
            row: dict[str, Any] = {
                "obligations": n,
                "evidence": n,
                "facts": 4 + 2 * n,
                "fixture_build_s": r(build, 2),
                "indexed_ms": r(indexed_s[n] * 1000, 3),
                "indexed_runs": len(indexed),
            }
            projected = None
            measured = sorted(product_s)
            if len(measured) >= 2:  # extrapolate with the growth between the two largest sizes measured
                a_, b_ = measured[-2], measured[-1]
                exponent = _exponent(product_s[b_] / product_s[a_], b_ / a_)
                projected = product_s[b_] * (n / b_) ** (
                    max(exponent, 2.0) if exponent > 1.3 else max(exponent, 1.0)
                )
            if projected is not None and projected > PRODUCT_BUDGET_S:
                row.update(
                    product_ms=None,
                    product_projected_ms=r(projected * 1000, 0),
                    product_runs=0,
                    decision=indexed_decision.decision,
                    findings=len(indexed_decision.findings),
                )
            else:
                runs: list[float] = []
                decision = None
                for _ in range(max(1, min(50, int(2_000 / n)))):
                    t1 = time.perf_counter()
                    decision = decide(state, project, as_of)
                    runs.append(time.perf_counter() - t1)
                    if sum(runs) > 10 and len(runs) >= 3:
                        break
                assert decision is not None
                product_s[n] = median(runs)
                row.update(
                    product_ms=r(product_s[n] * 1000, 3),
                    product_runs=len(runs),
                    decision=decision.decision,
                    findings=len(decision.findings),
                    indexed_equal=decision.as_dict() == indexed_decision.as_dict(),
                    speedup=r(product_s[n] / indexed_s[n], 1),
                )
        finally:
            gc.unfreeze()
        rows.append(row)
    linear = all(g["exponent"] is not None and g["exponent"] <= 1.15 for g in _growth(product_s))
    return {
        "sizes": list(sizes),
        "rows": rows,
        "growth_product": _growth(product_s),
        "growth_indexed": _growth(indexed_s),
        "product_linear": linear,
        "target": {
            "rule": "decide() time grows linearly or better with obligations and evidence (growth "
            "exponent <= 1.15 between sizes)",
            "met": linear,
        },
        "equivalence": {
            "fixture": "300 obligations, mixed outcomes",
            "decision": product_mixed.decision,
            "findings": len(product_mixed.findings),
            "indexed_equal": equivalent,
        },
        "quadratic_spot": (
            "sentinel/decision.py: decide() calls check_findings() once per (check, obligation), and "
            "check_findings() scans every evidence fact of the candidate (`bound = [e for e in "
            "state.evidence ...]`), so a plan of n checks over n evidence records costs n*n; decide() also "
            "calls state.reports_for() per task, which scans every report (n*n again), and project.policy() "
            "per check, which re-filters the project's facts and re-validates the Policy with pydantic."
        ),
        "fix": (
            "Index once per decision, then look up: group state.evidence by (check_id, obligation_id) over "
            "binding.obligation_ids (chain order kept), group state.reports by (plan_digest, task_id), and "
            "memoise project.policy(policy_ref, as_of) for the decision; pass the group to check_findings() "
            "instead of letting it filter state.evidence. The rules themselves do not change; "
            "bench/proposals.py prototypes exactly this over the product's own check_findings() and checks "
            "the output equal."
        ),
    }


if __name__ == "__main__":
    section_main("decision_scaling", run)
