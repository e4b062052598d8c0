"""Part 4: AuditChain.verify throughput over synthetic valid chains of 10,000 and 100,000 events, built with
audit.next_event (small facts, as a decision or a report leaves them) and sealed as the gate seals them (every
event's and the head's tag under the chain key, checked against a checkpoint), next to the verifier as it was
at e908c9a (bench/baselines.py) on the same chain unsealed, in the same run. Building is timed apart; the
garbage collector is frozen and off around the timed part, and both verifiers run in turn."""

import gc
import time
from typing import Any

from bench.common import ensure_repo_on_path, median, r, section_main

SIZES = (10_000, 100_000)
TARGET = (100_000, 1.6)  # at 100,000 events, today's verifier at least 1.6x faster than the baseline


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


def sealed(
    events: list[dict[str, Any]], head: dict[str, Any], seal: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The same chain as the gate writes it: each event with its tag, the head with its checkpoint's."""
    tagged = [dict(event, mac=seal.event_mac(event["hash"])) for event in events]
    last = events[-1]
    mac = seal.checkpoint(last["project"], last["candidate_id"], last["seq"], last["hash"], last["at"])["mac"]
    return tagged, dict(head, mac=mac)


def run(quick: bool) -> dict[str, Any]:
    ensure_repo_on_path()
    from functools import partial

    from bench.baselines import AuditChainBaseline
    from sentinel_domain.audit import AuditChain
    from sentinel_domain.integrity import ChainSeal

    seal = ChainSeal(b"bench-chain-key-of-thirty-two-bytes!")

    sizes = SIZES
    rows = []
    for n in sizes:
        t0 = time.perf_counter()
        events, facts, head = build_chain(n)
        build = time.perf_counter() - t0
        middle = events[n // 2 - 1]
        checkpoint = seal.checkpoint("bench", "cand_audit", n // 2, middle["hash"], middle["at"])
        tagged, tagged_head = sealed(events, head, seal)
        verifiers = {"product": partial(AuditChain.verify, seal=seal), "baseline": AuditChainBaseline.verify}
        inputs = {"product": (tagged, tagged_head, checkpoint), "baseline": (events, head, checkpoint)}

        def check(
            name: str, fact_texts: dict[int, str], inputs: Any = inputs, verifiers: Any = verifiers
        ) -> Any:
            chain, chain_head, cp = inputs[name]
            return verifiers[name]("bench", "cand_audit", chain, fact_texts, chain_head, cp)

        answers = {k: check(k, facts) for k in verifiers}
        assert answers["product"].valid and answers["product"] == answers["baseline"], answers
        # A chain with one edited fact: both verifiers must name the same seq.
        edited = dict(facts)
        edited[n // 3] = edited[n // 3].replace('"passes":true', '"passes":false')
        caught = {k: check(k, edited) for k in verifiers}
        assert caught["product"] == caught["baseline"] and caught["product"].first_bad_seq == n // 3
        cpu: dict[str, list[float]] = {k: [] for k in verifiers}
        wall: dict[str, list[float]] = {k: [] for k in verifiers}
        gc.collect()
        gc.freeze()
        gc.disable()
        try:
            started = time.perf_counter()
            for _ in range(7 if n <= 10_000 else (3 if not quick else 1)):
                for name in verifiers:
                    c0, w0 = time.thread_time(), time.perf_counter()
                    check(name, facts)
                    cpu[name].append(time.thread_time() - c0)
                    wall[name].append(time.perf_counter() - w0)
                if time.perf_counter() - started > 40:
                    break
        finally:
            gc.enable()
            gc.unfreeze()
        product, baseline = median(cpu["product"]), median(cpu["baseline"])
        rows.append(
            {
                "events": n,
                "build_s": r(build, 2),
                "verify_s": r(product, 4),
                "baseline_s": r(baseline, 4),
                "verify_wall_s": r(median(wall["product"]), 4),
                "baseline_wall_s": r(median(wall["baseline"]), 4),
                "speedup": r(baseline / product, 2),
                "events_per_s": r(n / product, 0),
                "us_per_event": r(product / n * 1e6, 2),
                "runs": len(cpu["product"]),
                "same_answers": True,
            }
        )
    ratio = rows[-1]["verify_s"] / rows[0]["verify_s"]
    events_at, bound = TARGET
    at_target = next((row for row in rows if row["events"] == events_at), None)
    return {
        "rows": rows,
        "growth": {"size_ratio": sizes[-1] / sizes[0], "time_ratio": r(ratio, 2)},
        "target": {
            "rule": f"verifying {events_at:,} events at least {bound:g}x faster than the baseline",
            "speedup": at_target["speedup"] if at_target else None,
            "met": bool(at_target and at_target["speedup"] >= bound),
        },
        "note": "each event costs one canonical form of its hashed fields, two SHA-256 (event hash, fact "
        "digest) and one HMAC-SHA256 (its tag under the chain key, issue 13); the chain is checked end to "
        "end with its head's tag and a checkpoint's. The baseline checks the same chain without tags. Times "
        "are this thread's CPU time (wall clock shown too), medians, both verifiers in turn after checking "
        "that they give the same answers, on the chain and on a copy with one fact edited",
        "baseline": "AuditChain.verify at e908c9a (bench/baselines.py): each event's hashed fields went "
        "through rfc8785's pure-Python writer",
        "fix": "src/sentinel_domain/audit.py event_hash writes the RFC 8785 form of the usual event (text "
        "fields, an integer seq) straight from the event's own fields with json's C string writer, whose "
        "escapes are RFC 8785's, and hashes those bytes; anything else still goes through the general "
        "canonicaliser. The fact digest was already the hash of the stored text",
    }


if __name__ == "__main__":
    section_main("audit_verify", run)
