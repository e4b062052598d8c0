"""Ingestion figures (issue 3): JUnit parse throughput on the largest corpus report, next to the junitparser
library parsing the same text in the same run; the time and Python memory to refuse hostile inputs; and the
time to diff each OpenAPI corpus pair.

    .venv/bin/python bench/bench_ingestion.py [--repeat N]

Prints the figures and writes bench/results/ingestion.json. A benchmark reports, it does not judge: the
bounds that must hold are asserted in tests/unit/test_hostile_inputs.py. The corpus is read in place from
the `shared` folder beside the repository; without it the corpus sections are skipped with a reason.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from sentinel_domain.derivation import derive  # noqa: E402
from sentinel_domain.errors import Refusal  # noqa: E402
from sentinel_domain.evidence import EvidenceRefused, judge  # noqa: E402
from sentinel_domain.junit import parse_junit  # noqa: E402
from sentinel_domain.models import Change, EvidenceRequest, Policy, ProjectConfig  # noqa: E402
from sentinel_domain.openapi import diff_openapi  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"
LARGEST = CORPUS / "junit" / "producers" / "jest-junit-jest-repo-4239-tests-large.xml"
RESULTS = REPO / "bench" / "results" / "ingestion.json"
LIMIT = 2 * 1024 * 1024

POLICY = Policy.model_validate(
    {
        "check_type": "junit",
        "command": "pytest -q {scope}",
        "expected_exit_code": 0,
        "max_evidence_age_seconds": 86400,
        "min_tests": 1,
    }
)
CONFIG = ProjectConfig.model_validate(
    {
        "environments": ["staging"],
        "unclassified_policy": "unit-tests",
        "derivation_rules": [{"openapi": "api", "policy_id": "unit-tests", "per": "operation"}],
    }
)


def timings(action: Callable[[], Any], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        out.append(time.perf_counter() - started)
    return out


def summary(seconds: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(seconds) * 1000, 3),
        "min_ms": round(min(seconds) * 1000, 3),
        "max_ms": round(max(seconds) * 1000, 3),
        "runs": len(seconds),
    }


# ---- JUnit throughput -----------------------------------------------------------------------------------


def junit_throughput(repeat: int) -> dict[str, Any]:
    if not LARGEST.is_file():
        reason = f"JUnit corpus not found at {LARGEST}"
        print(f"  skipped: {reason}")
        return {"skipped": reason}
    import junitparser
    from junitparser import JUnitXml

    text = LARGEST.read_bytes().decode("utf-8")
    size = len(text.encode("utf-8"))

    def with_junitparser() -> tuple[int, int, int, int]:
        # The same work: parse, then classify every case (junitparser counts skipped cases as tests).
        report = JUnitXml.fromstring(text)
        passed = failed = errored = skipped = 0
        for suite in report:
            for case in suite:
                kinds = {type(r).__name__ for r in case.result}
                if "Failure" in kinds:
                    failed += 1
                elif "Error" in kinds:
                    errored += 1
                elif "Skipped" in kinds:
                    skipped += 1
                else:
                    passed += 1
        return passed + failed + errored, failed, errored, skipped

    ours = parse_junit(text)
    theirs = with_junitparser()
    actions = {
        "sentinel_domain.junit.parse_junit": lambda: parse_junit(text),
        "junitparser.JUnitXml.fromstring + classify": with_junitparser,
        "junitparser.JUnitXml.fromstring only": lambda: JUnitXml.fromstring(text),
    }
    for action in actions.values():
        action()  # warm
    # The parsers run in turn (a, b, c, a, b, c...) with the garbage collector frozen and off, each timed by
    # this thread's CPU time (on a shared machine the wall clock also counts the wait for a core).
    cpu: dict[str, list[float]] = {name: [] for name in actions}
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        for _ in range(max(repeat, 30)):
            for name, action in actions.items():
                started = time.thread_time()
                action()
                cpu[name].append(time.thread_time() - started)
    finally:
        gc.enable()
        gc.unfreeze()
    rows = {}
    for name, action in actions.items():
        seconds = cpu[name]
        median = statistics.median(seconds)
        rows[name] = {
            **summary(seconds),
            "mb_per_s": round(size / median / 1e6, 1),
            "cases_per_s": round(4239 / median),
        }
        tracemalloc.start()
        action()
        rows[name]["peak_python_mb"] = round(tracemalloc.get_traced_memory()[1] / 1e6, 2)
        tracemalloc.stop()
    ratio = (
        rows["junitparser.JUnitXml.fromstring + classify"]["median_ms"]
        / rows["sentinel_domain.junit.parse_junit"]["median_ms"]
    )
    return {
        "file": LARGEST.name,
        "bytes": size,
        "junitparser_version": junitparser.version,
        "counts": {
            "sentinel": [ours.tests, ours.failures, ours.errors, ours.skipped],
            "junitparser": list(theirs),
        },
        "parsers": rows,
        "timing": "this thread's CPU time, parsers in turn, garbage collector frozen and off",
        "speedup_vs_junitparser": round(ratio, 2),
        "target": {
            "rule": "parse and classify at least 2x as fast as junitparser on the largest corpus report",
            "met": ratio >= 2,
        },
    }


# ---- hostile inputs ---------------------------------------------------------------------------------------


def hostile_junit() -> dict[str, str]:
    lol = "".join(f'<!ENTITY l{i} "{("&l" + str(i - 1) + ";") * 10}">' for i in range(1, 10))
    return {
        "junit: XXE external entity": (
            '<!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]><testsuite name="&x;"/>'
        ),
        "junit: billion laughs": f'<!DOCTYPE t [<!ENTITY l0 "lol">{lol}]><testsuite name="&l9;"/>',
        "junit: nesting bomb (150k levels)": "<testsuites>" + "<testsuite>" * 150_000,
        "junit: attribute over 2 MiB": '<testsuite><testcase name="' + "a" * LIMIT + '"/></testsuite>',
        "junit: UTF-7 declaration": (
            '<?xml version="1.0" encoding="UTF-7"?><testsuite><testcase/></testsuite>'
        ),
        "junit: merge-conflict debris": "<testsuite>\n<<<<<<< HEAD\n<testcase/>\n=======\n</testsuite>",
        "junit: truncated": '<testsuite><testcase name="a"/><testcase name="b"><skipped',
    }


def hostile_openapi() -> dict[str, str]:
    head = "openapi: 3.0.0\ninfo: {title: t, version: '1'}\n"
    lol = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lol += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    merges = ["m0: &m0 {k0: 1, k1: 2, k2: 3, k3: 4, k4: 5, k5: 6, k6: 7, k7: 8}"]
    merges += [
        f"m{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 8) + f"], own{i}: 1}}" for i in range(1, 12)
    ]
    chain = "".join(f"    S{i}: {{$ref: '#/components/schemas/S{i + 1}'}}\n" for i in range(1000))
    return {
        "openapi: YAML alias bomb": head + "x-bomb:\n  " + "\n  ".join(lol) + "\npaths: {}\n",
        "openapi: YAML merge-key bomb": head + "x-m:\n  " + "\n  ".join(merges) + "\npaths: {}\n",
        "openapi: recursive alias": head + "paths: {}\nx: &r [*r]\n",
        "openapi: deep YAML (200k)": head + "paths: " + "[" * 200_000 + "]" * 200_000 + "\n",
        "openapi: deep JSON (500k)": '{"openapi": "3.0.0", "paths": ' + "[" * 500_000 + "]" * 500_000 + "}",
        "openapi: external $ref (URL)": head
        + "paths: {}\ncomponents: {schemas: {A: {$ref: 'http://x.invalid/a'}}}\n",
        "openapi: circular $ref": head
        + "paths: {}\ncomponents:\n  schemas:\n    A: {$ref: '#/components/schemas/B'}\n"
        "    B: {$ref: '#/components/schemas/A'}\n",
        "openapi: $ref chain of 1000": head
        + "paths: {}\ncomponents:\n  schemas:\n"
        + chain
        + "    S1000: {}\n",
        "openapi: oversized (2 MiB + 1)": head + "paths: {}\nx: '" + "a" * LIMIT + "'\n",
        "openapi: 300k nodes (JSON)": '{"openapi": "3.0.0", "x": [' + ",".join(["1"] * 300_000) + "]}",
        "openapi: 210k nodes (YAML)": head + "paths: {}\nx: [" + ",".join(["1"] * 210_000) + "]\n",
    }


def refuse(action: Callable[[], Any]) -> str:
    try:
        action()
    except (Refusal, EvidenceRefused) as error:
        return error.code if isinstance(error, Refusal) else error.code
    raise AssertionError("accepted")


def hostile(repeat: int) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    cases: list[tuple[str, Callable[[], Any]]] = []
    for name, xml in hostile_junit().items():
        request = EvidenceRequest.model_validate(
            {
                "check_id": "C1",
                "subject": "s",
                "revision": "a" * 40,
                "environment": "staging",
                "scope": ["x"],
                "observed_at": "2026-11-29T12:00:00Z",
                "source": {"system": "bench"},
                "junit_xml": xml,
            }
        )
        cases.append((name, lambda r=request: judge(r, POLICY)))
    for name, text in hostile_openapi().items():
        change = Change.model_validate({"openapi": [{"name": "api", "before": text, "after": text}]})
        cases.append((name, lambda c=change: derive(c, CONFIG)))
    for name, action in cases:
        code = refuse(action)
        seconds = []
        for _ in range(repeat):
            started = time.perf_counter()
            refuse(action)
            seconds.append(time.perf_counter() - started)
        tracemalloc.start()
        refuse(action)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rows[name] = {"code": code, **summary(seconds), "peak_python_mb": round(peak / 1e6, 2)}
    return rows


# ---- OpenAPI corpus ---------------------------------------------------------------------------------------


def openapi_corpus(repeat: int) -> dict[str, Any]:
    folder = CORPUS / "openapi"
    if not folder.is_dir():
        reason = f"OpenAPI corpus not found at {folder}"
        print(f"  skipped: {reason}")
        return {"skipped": reason}
    rows = {}
    for pair in sorted(p for p in folder.iterdir() if p.is_dir()):
        files = {f.stem: f.read_text(encoding="utf-8") for f in pair.iterdir()}
        diff = diff_openapi(files["old"], files["new"])
        seconds = timings(lambda f=files: diff_openapi(f["old"], f["new"]), repeat)
        rows[pair.name] = {
            **summary(seconds),
            "bytes": sum(len(t.encode()) for t in files.values()),
            "operations_changed": len(diff.operations),
            "changes": len(diff.changes),
            "breaking": diff.breaking,
        }
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="timed runs per figure (median reported)")
    args = parser.parse_args()
    print(
        f"Ingestion benchmark ({platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}, {args.repeat} runs per figure, median)"
    )

    print("\nJUnit: the largest corpus report")
    junit = junit_throughput(args.repeat)
    if "parsers" in junit:
        print(
            f"  {junit['file']} ({junit['bytes'] / 1e3:.0f} KB, 4,239 test cases); counts "
            f"(tests, failures, errors, skipped): sentinel {junit['counts']['sentinel']} "
            f"(tests = executed), junitparser {junit['counts']['junitparser']}"
        )
        for name, row in junit["parsers"].items():
            print(
                f"  {name:45} {row['median_ms']:8.1f} ms  {row['mb_per_s']:6.1f} MB/s  "
                f"{row['cases_per_s']:>9,} cases/s  peak {row['peak_python_mb']:6.1f} MB"
            )

    print("\nHostile inputs: time to refuse (median), and peak Python memory of one refusal")
    refusals = hostile(args.repeat)
    for name, row in refusals.items():
        print(
            f"  {name:38} {row['code']:26} {row['median_ms']:8.2f} ms  peak {row['peak_python_mb']:6.2f} MB"
        )

    print("\nOpenAPI corpus: diff of each pair (parse both sides, resolve, compare)")
    corpus = openapi_corpus(args.repeat)
    for name, row in corpus.items():
        if isinstance(row, dict):
            print(
                f"  {name:42} {row['median_ms']:7.2f} ms  {row['operations_changed']:3} operations, "
                f"{row['changes']:3} changes, breaking={row['breaking']}"
            )

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "command": ".venv/bin/python bench/bench_ingestion.py",
                "python": platform.python_version(),
                "machine": platform.machine(),
                "repeat": args.repeat,
                "junit": junit,
                "hostile": refusals,
                "openapi_corpus": corpus,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwrote {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
