"""What every benchmark section shares: paths, statistics, the fake AWS environment, and the way a section
runs in its own interpreter and hands back one JSON document."""

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"

# Never real AWS: every client a benchmark builds talks to moto, or to nothing at all.
FAKE_AWS = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}


def ensure_repo_on_path() -> None:
    """`python bench/run.py` and `python -m bench` both find the repository's packages."""
    for path in (str(REPO), str(REPO / "src")):
        if path not in sys.path:
            sys.path.insert(0, path)


def set_fake_aws() -> None:
    os.environ.update(FAKE_AWS)


def median(values: Iterable[float]) -> float:
    data = list(values)
    return statistics.median(data) if data else float("nan")


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of the values."""
    data = sorted(values)
    if not data:
        return float("nan")
    rank = max(1, math.ceil(q / 100 * len(data)))
    return data[rank - 1]


def spread(values: Iterable[float]) -> dict[str, float]:
    data = sorted(values)
    if not data:
        return {"n": 0}
    return {
        "n": len(data),
        "median": median(data),
        "min": data[0],
        "max": data[-1],
        "p25": percentile(data, 25),
        "p75": percentile(data, 75),
    }


def timed(fn: Callable[[], Any], repeat: int, budget_s: float | None = None) -> list[float]:
    """Seconds per call, `repeat` times (fewer when a budget runs out after at least three)."""
    out = []
    started = time.perf_counter()
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
        if budget_s is not None and len(out) >= 3 and time.perf_counter() - started > budget_s:
            break
    return out


def r(value: float | None, digits: int = 2) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return round(value, digits)


def section_main(name: str, run: Callable[[bool], dict[str, Any]]) -> None:
    """`python -m bench.<section> [--quick] [--json FILE]`: run one section, print or write its JSON."""
    parser = argparse.ArgumentParser(prog=f"bench.{name}")
    parser.add_argument("--quick", action="store_true", help="fewer runs and smaller sizes (smoke test)")
    parser.add_argument("--json", help="write the result here instead of standard output")
    args = parser.parse_args()
    started = time.perf_counter()
    result = run(args.quick)
    result.setdefault("section_seconds", round(time.perf_counter() - started, 1))
    text = json.dumps(result, indent=1, sort_keys=True, default=str)
    if args.json:
        Path(args.json).write_text(text + "\n")
    else:
        print(text)
