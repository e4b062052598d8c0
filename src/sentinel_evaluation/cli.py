"""`sentinel eval` / `python -m sentinel_evaluation.cli`: run the scenario catalog twice through the real
handlers and print the report. Exit 0 when every gate holds, 1 when one fails, 2 on a usage or catalog error.

The report and its digest hold nothing that varies between runs or machines; the elapsed time is printed
after the digest line (or to standard error with --json) and is not part of it."""

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from .backings import STORES

EXIT_FAILED = 1
EXIT_USAGE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
    parser.add_argument(
        "--scenario",
        action="append",
        metavar="NAME",
        help="run only this scenario (repeatable); the catalog-wide gates are skipped",
    )
    parser.add_argument("--report", metavar="FILE", help="also write the JSON report to FILE")
    parser.add_argument(
        "--store",
        choices=STORES,
        default="memory",
        help="back every run with this store: in memory (default) or SQLite files in a temporary directory; "
        "the report and its digest do not depend on it",
    )


def render(report: dict[str, Any]) -> str:
    catalog = report["catalog"]
    lines = [
        "Sentinel scenario evaluation",
        f"catalog: {catalog['scenarios']} scenarios x {catalog['runs_per_scenario']} runs = "
        f"{catalog['runs']} runs ({catalog['critical']} critical{', subset' if catalog['subset'] else ''})",
        "",
    ]
    width = max([len(s["name"]) for s in report["scenarios"]] + [8])
    lines.append(
        f"  {'verdict':7}  {'scenario':{width}}  {'category':14}  {'decision':8}  {'side':4}  "
        f"{'digest':12}  findings"
    )
    for s in report["scenarios"]:
        verdict = "pass" if s["passed"] else "FAIL"
        name = s["name"] + ("*" if s["critical"] else "")
        lines.append(
            f"  {verdict:7}  {name:{width}}  {s['category']:14}  {str(s['decision'] or '-'):8}  "
            f"{s['side_effects']:<4}  {s['digests'][0][:12]}  {', '.join(s['findings']) or '-'}"
        )
    lines += ["", "  (* critical)", "", "counters"]
    for name, value in report["counters"].items():
        lines.append(f"  {name:34} {value}")
    lines += ["", "gates"]
    for name, gate in report["gates"].items():
        state = "skip" if gate["skipped"] else ("pass" if gate["passed"] else "FAIL")
        lines.append(f"  {state:4}  {name:38} {gate['detail']}")
    failures = [(s["name"], f) for s in report["scenarios"] for f in s["failures"]]
    lines += ["", "failures" + ("" if failures else ": none")]
    lines += [f"  {name}: {failure}" for name, failure in failures]
    lines += [
        "",
        f"batch: {'PASS' if report['passed'] else 'FAIL'}",
        f"report digest: {report['report_digest']}",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from .batch import run_batch
    from .catalog import CatalogError, load_catalog

    started = time.monotonic()
    try:
        catalog = load_catalog()
    except CatalogError as error:
        print(f"error: CATALOG_INVALID: {error}", file=sys.stderr)
        return EXIT_USAGE
    chosen = None
    if args.scenario:
        by_name = {s.name: s for s in catalog}
        unknown = [n for n in args.scenario if n not in by_name]
        if unknown:
            print(f"error: NOT_FOUND: no scenario {', '.join(unknown)}", file=sys.stderr)
            return EXIT_USAGE
        chosen = [by_name[n] for n in args.scenario]
    store = getattr(args, "store", "memory")
    report = run_batch(chosen, store=store)  # None: the whole catalog, with the catalog-wide gates
    elapsed = f"store: {store}; elapsed: {time.monotonic() - started:.1f} s (not part of the report digest)"
    text = json.dumps(report, indent=2, sort_keys=True)
    if args.report:
        Path(args.report).write_text(text + "\n", encoding="utf-8")
    if args.json:
        print(text)
        print(elapsed, file=sys.stderr)
    else:
        print(render(report))
        print(elapsed)
    return 0 if report["passed"] else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="sentinel eval",
        description="Replay the scenario catalog twice through the real handlers and judge it by hard gates",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
