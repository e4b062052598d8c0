"""Part 4: AuditChain.verify throughput over synthetic valid chains of 10,000 and 100,000 events, built with
audit.next_event (small facts, as a decision or a report leaves them). Building is timed apart."""

import time
from typing import Any

from bench.common import ensure_repo_on_path, median, r, section_main, timed

SIZES = (10_000, 100_000)


def build_chain(
    n: int, project: str = "bench", candidate_id: str | None = "cand_audit"
) -> tuple[list[dict[str, Any]], dict[int, str], dict[str, Any]]:
    from sentinel_domain import audit
    from sentinel_domain.canonical import canonical_text

    events: list[dict[str, Any]] = []
    facts: dict[int, str] = {}
    prev_hash = None
    for seq in range(1, n + 1):
        at = f"2026-11-29T12:{seq // 1_000_000 % 60:02d}:00.{seq % 1_000_000:06d}Z"  # increasing up to 60M
        text = canonical_text(
            {"type": "task.reported", "task_id": f"T{seq}", "attempt": 1, "passes": True, "recorded_at": at}
        )
        event = audit.next_event(
            project, candidate_id, seq - 1, prev_hash, "task.reported", "agent-bench", at, text
        )
        events.append(event)
        facts[seq] = text
        prev_hash = event["hash"]
    head = {"seq": n, "hash": prev_hash}
    return events, facts, head


def run(quick: bool) -> dict[str, Any]:
    ensure_repo_on_path()
    from sentinel_domain.audit import AuditChain

    sizes = (10_000, 30_000) if quick else SIZES
    rows = []
    for n in sizes:
        t0 = time.perf_counter()
        events, facts, head = build_chain(n)
        build = time.perf_counter() - t0
        checkpoint = {"seq": n // 2, "hash": events[n // 2 - 1]["hash"]}
        result = AuditChain.verify("bench", "cand_audit", events, facts, head, checkpoint)
        assert result.valid, result
        runs = timed(
            lambda e=events, f=facts, h=head, c=checkpoint: AuditChain.verify(
                "bench", "cand_audit", e, f, h, c
            ),
            3 if n <= 10_000 else 1,
            budget_s=20,
        )
        seconds = median(runs)
        rows.append(
            {
                "events": n,
                "build_s": r(build, 2),
                "verify_s": r(seconds, 3),
                "events_per_s": r(n / seconds, 0),
                "us_per_event": r(seconds / n * 1e6, 1),
                "runs": len(runs),
            }
        )
    ratio = rows[-1]["verify_s"] / rows[0]["verify_s"]
    return {
        "rows": rows,
        "growth": {"size_ratio": sizes[-1] / sizes[0], "time_ratio": r(ratio, 2)},
        "note": "each event costs one RFC 8785 canonicalisation and two SHA-256 (event hash, fact digest); "
        "the chain is checked end to end with its head and a checkpoint",
    }


if __name__ == "__main__":
    section_main("audit_verify", run)
