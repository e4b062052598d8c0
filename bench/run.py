"""`make bench`: run every section in its own interpreter, then write bench/results/report.json and
bench/results/report.md (and, with --docs FILE, refresh the figures block of that file).

    .venv/bin/python -m bench [--quick] [--only cold_start,store_cost,...] [--docs docs/benchmarks.md]

A section that fails is reported with its error and the others still run; the exit status is then 1.
Unmet targets never fail the run: benchmarks print figures, they are not timed tests.

bench/bench_ingestion.py (owned elsewhere) is run when present, as `python bench/bench_ingestion.py` with
BENCH_RESULT_JSON naming where it may write its JSON; otherwise the last line of its standard output is
taken when it is a JSON object."""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/run.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, RESULTS  # noqa: E402
from bench.report import render, replace_block  # noqa: E402

SECTIONS: tuple[tuple[str, str, int], ...] = (
    ("cold_start", "cold import of every handler against the naive baseline", 900),
    # Needs build/ (`make build`, bytecode and a CPython 3.13.0): without them it says why, measuring nothing.
    ("cold_start_packages", "cold import of the packages as built, bytecode included, CPython 3.13", 900),
    ("store_cost", "store cost per operation and per million", 600),
    ("decision_scaling", "decide() from 10 to 10,000 obligations", 600),
    ("audit_verify", "audit chain verification throughput", 300),
    ("e2e", "the hook's decision call end to end", 300),
    ("packages", "function and layer zips against Lambda's limits", 120),
    ("witness_cost", "the AWS witness per million writes: per-record signing against digests", 120),
)
INGESTION = REPO / "bench" / "bench_ingestion.py"


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def run_section(name: str, quick: bool, timeout: int) -> dict[str, Any]:
    out = RESULTS / f"{name}.json"
    out.unlink(missing_ok=True)
    args = [sys.executable, "-m", f"bench.{name}", "--json", str(out), *(["--quick"] if quick else [])]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    t0 = time.perf_counter()
    try:
        done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    seconds = round(time.perf_counter() - t0, 1)
    if done.returncode != 0 or not out.exists():
        return {"error": (done.stderr or done.stdout).strip()[-3000:], "seconds": seconds}
    result: dict[str, Any] = json.loads(out.read_text())
    result["seconds"] = seconds
    return result


def run_ingestion(quick: bool) -> dict[str, Any] | None:
    if not INGESTION.exists():
        return None
    out = RESULTS / "ingestion.json"
    out.unlink(missing_ok=True)
    env = dict(
        os.environ, PYTHONDONTWRITEBYTECODE="1", BENCH_RESULT_JSON=str(out), BENCH_QUICK="1" if quick else ""
    )
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, str(INGESTION)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
        )
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 600 s"}
    seconds = round(time.perf_counter() - t0, 1)
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip()[-3000:], "seconds": seconds}
    if out.exists():
        try:
            return {**json.loads(out.read_text()), "seconds": seconds}
        except ValueError:
            pass
    lines = done.stdout.strip().splitlines()
    try:
        parsed = json.loads(lines[-1]) if lines else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return {**parsed, "seconds": seconds}
    return {"output": "\n".join(lines[-40:]), "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and smaller sizes (a smoke test)")
    parser.add_argument("--only", help="comma-separated sections: " + ", ".join(s[0] for s in SECTIONS))
    parser.add_argument("--docs", help="also refresh the figures block of this Markdown file")
    args = parser.parse_args(argv)
    wanted = set(args.only.split(",")) if args.only else {s[0] for s in SECTIONS}
    unknown = wanted - {s[0] for s in SECTIONS}
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    cli = list(argv if argv is not None else sys.argv[1:])
    command = os.environ.get("BENCH_COMMAND") or " ".join([".venv/bin/python -m bench", *cli])
    report: dict[str, Any] = {
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command,
        "quick": args.quick,
        "git": {"commit": _git("rev-parse", "--short", "HEAD"), "dirty": bool(_git("status", "--porcelain"))},
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_at_start": _load(),
        },
        "sections": {},
    }
    started = time.perf_counter()
    failed = []
    for name, title, timeout in SECTIONS:
        if name not in wanted:
            continue
        print(f"bench: {name}: {title} …", flush=True)
        result = run_section(name, args.quick, timeout)
        report["sections"][name] = result
        if name == "cold_start" and "error" not in result:  # store_cost prices INIT from this run only
            os.environ["BENCH_COLD_START_JSON"] = str(RESULTS / "cold_start.json")
        status = "FAILED" if "error" in result else "done"
        if result.get("measured") is False:
            status = f"skipped ({result.get('note', 'no reason given')})"
        print(f"bench: {name}: {status} in {result.get('seconds', '?')} s", flush=True)
        if "error" in result:
            failed.append(name)
            print(result["error"], file=sys.stderr)
    if not args.only or "ingestion" in wanted:
        ingestion = run_ingestion(args.quick)
        if ingestion is not None:
            report["sections"]["ingestion"] = ingestion
            print(f"bench: ingestion: {'FAILED' if 'error' in ingestion else 'done'}", flush=True)
    report["machine"]["load_at_end"] = _load()
    report["seconds"] = round(time.perf_counter() - started, 1)
    (RESULTS / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True, default=str) + "\n")
    markdown = render(report)
    (RESULTS / "report.md").write_text(markdown)
    if args.docs:
        path = Path(args.docs)
        path.write_text(replace_block(path.read_text() if path.exists() else "", markdown))
    print(
        f"bench: wrote {(RESULTS / 'report.json').relative_to(REPO)} and "
        f"{(RESULTS / 'report.md').relative_to(REPO)} in {report['seconds']} s",
        flush=True,
    )
    for line in markdown.split("## ")[1].splitlines()[1:]:  # the targets table
        if line.startswith("|"):
            print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
