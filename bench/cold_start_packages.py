"""Part 1b: the cold import of every handler from the packages as built, bytecode included, under the pinned
CPython 3.13 that compiled that bytecode, next to the same packages without their bytecode and the naive
baseline, all under that same interpreter.

`python -m bench.cold_start_packages [--quick] [--json FILE]` reads build/ (`make build`; a build made with
--no-bytecode, or no pinned 3.13 here, is reported as such, not measured). The trees, in a temporary folder:

  built    functions.zip as /var/task and both layers as /opt/python, unzipped as Lambda unzips them (every
           module with its .cpython-313.pyc beside it)
  source   the same trees with every .pyc removed: what the zips held before they shipped bytecode
  naive    bench/naive_handler.py (no bytecode, as the naive way ships), over the `source` layers plus the
           packages only the baseline needs (aws_xray_sdk, wrapt: copied from this venv, pure Python)
  sdk      what the Lambda runtime provides (boto3, botocore and their dependencies), copied from this venv
           and compiled by the same 3.13, as the runtime's image ships them compiled

The deps layer's compiled extensions are built for linux/aarch64; each is swapped for this machine's x86_64
build of the same version for CPython 3.13 (pip download, cached in build/cache/). Each figure is the median
import CPU of fresh `python3.13 -S -B` interpreters, interleaved in a shuffled order so every row shares the
same noise; the import includes the first-request setup bench/cold_start.py measures (SETUP).
"""

import json
import random
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from bench.cold_start import BASELINE_ONLY, CODE, RUNTIME_PROVIDED, SETUP, Job, _env, discover_third_party
from bench.common import REPO, ensure_repo_on_path, median, r, section_main

BUILD = REPO / "build"
SWAP_CACHE = BUILD / "cache"
ROWS = ("built", "source")


def _unzip(archive: Path, into: Path, keep_bytecode: bool) -> None:
    with zipfile.ZipFile(archive) as zipped:
        for name in zipped.namelist():
            if keep_bytecode or not name.endswith(".pyc"):
                zipped.extract(name, into)


def _swap_extensions(opt: Path, lock_pins: dict[str, str]) -> list[str]:
    """Replace every aarch64 extension module under opt/python with the x86_64 CPython 3.13 build of the
    same locked version; returns what was swapped."""
    from sentinel_infra import packaging

    foreign = sorted((opt / "python").rglob("*-aarch64-linux-gnu.so"))
    if not foreign:
        return []
    wheels = SWAP_CACHE / f"bench-x86_64-cp313-{packaging.lock_digest()[:16]}"
    if not (wheels / ".complete").exists():
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--platform",
                "manylinux2014_x86_64",
                "--python-version",
                "3.13",
                "--implementation",
                "cp",
                "--dest",
                str(wheels),
                *(f"{name}=={version}" for name, version in sorted(lock_pins.items())),
            ],
            check=True,
            capture_output=True,
        )
        (wheels / ".complete").write_text("\n")
    swapped = []
    for so in foreign:
        folder = so.parent.relative_to(opt / "python")
        stem = so.name.split(".cpython-")[0]
        for wheel in wheels.glob("*.whl"):
            with zipfile.ZipFile(wheel) as zipped:
                for name in zipped.namelist():
                    if name.startswith(f"{folder.as_posix()}/{stem}.cpython-313-x86_64-linux-gnu"):
                        zipped.extract(name, opt / "python")
                        so.unlink()
                        swapped.append(f"{folder.as_posix()}/{so.name} -> {Path(name).name} ({wheel.name})")
    return swapped


def _trees(root: Path, python: list[str], tops: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    from sentinel_infra import packaging

    pins = packaging.parse_lock()
    swapped: list[str] = []
    for row in ROWS:
        _unzip(BUILD / packaging.FUNCTIONS_ZIP, root / row / "task", keep_bytecode=row == "built")
        for layer in (packaging.CORE_LAYER_ZIP, packaging.DEPS_LAYER_ZIP):
            _unzip(BUILD / layer, root / row / "opt", keep_bytecode=row == "built")
        swapped = _swap_extensions(root / row / "opt", pins)
    site = Path(sysconfig.get_paths()["purelib"])
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so")  # wrapt falls back to pure Python
    for top in tops:
        target = (
            "sdk" if top.split(".")[0] in RUNTIME_PROVIDED else "naive-extra" if top in BASELINE_ONLY else ""
        )
        if target and (site / top).is_dir():
            shutil.copytree(site / top, root / target / top, ignore=ignore)
        elif target and (site / top).is_file():
            (root / target).mkdir(parents=True, exist_ok=True)
            shutil.copy2(site / top, root / target / top)
    (root / "naive" / "task").mkdir(parents=True)
    shutil.copy2(REPO / "bench" / "naive_handler.py", root / "naive" / "task" / "naive_handler.py")
    subprocess.run(
        [*python, "-m", "compileall", "-q", "-j", "2", str(root / "sdk")], check=True, capture_output=True
    )
    paths = {
        row: [str(root / row / "task"), str(root / row / "opt" / "python"), str(root / "sdk")] for row in ROWS
    }
    paths["naive"] = [
        str(root / "naive" / "task"),
        str(root / "source" / "opt" / "python"),
        str(root / "naive-extra"),
        str(root / "sdk"),
    ]
    return paths, swapped


def _measure(python: list[str], job: Job, prefix: list[str], env: dict[str, str], cwd: str) -> dict[str, Any]:
    code = CODE.format(paths=prefix, module=job.module, setup=SETUP[job.kind])
    out = subprocess.run(
        [*python, "-S", "-B", "-c", code], env=env, capture_output=True, text=True, cwd=cwd, timeout=120
    )
    if out.returncode != 0:
        raise RuntimeError(f"{job.name} failed to import under 3.13: {out.stderr.strip()[-1500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(quick: bool) -> dict[str, Any]:
    ensure_repo_on_path()
    from bench.cold_start import jobs_and_variants
    from sentinel_infra import packaging

    manifest_file = BUILD / packaging.DIGESTS_FILE
    if not manifest_file.exists():
        return {"measured": False, "note": "not built: run `make build`"}
    manifest = json.loads(manifest_file.read_text())
    if not manifest.get("bytecode"):
        return {"measured": False, "note": "build/ was built with --no-bytecode: nothing to measure"}
    try:
        found = packaging.find_bytecode_python()
    except packaging.BytecodeUnavailable as why:
        return {"measured": False, "note": str(why)}
    python = list(found.command)
    runs = 3 if quick else 7
    jobs, _ = jobs_and_variants()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sentinel-bench-cold313-") as tmp:
        root = Path(tmp)
        key_file = root / "token.key"
        key_file.write_text(secrets.token_hex(32))
        key_file.chmod(0o600)
        env = _env(key_file)
        paths, swapped = _trees(root, python, discover_third_party(jobs, env))
        plan = [(job, row) for job in jobs if job.kind != "naive" for row in ROWS]
        plan += [(job, "naive") for job in jobs if job.kind == "naive"]
        for job, row in plan[:3]:  # warm the page cache
            _measure(python, job, paths[row], env, tmp)
        samples: dict[tuple[str, str], list[float]] = {}  # import + first-request setup CPU ms
        imports: dict[tuple[str, str], list[float]] = {}  # import alone
        rng = random.Random(13)
        for _round in range(runs):
            order = list(plan)
            rng.shuffle(order)
            for job, row in order:
                result = _measure(python, job, paths[row], env, tmp)
                samples.setdefault((job.name, row), []).append(
                    result["import_cpu_ms"] + result["setup_cpu_ms"]
                )
                imports.setdefault((job.name, row), []).append(result["import_cpu_ms"])
    naive = median(samples[("naive", "naive")])
    handlers = {}
    for job in jobs:
        if job.kind == "naive":
            continue
        built, source = median(samples[(job.name, "built")]), median(samples[(job.name, "source")])
        handlers[job.name] = {
            "built_import_cpu_ms": r(median(imports[(job.name, "built")]), 1),
            "without_bytecode_import_cpu_ms": r(median(imports[(job.name, "source")]), 1),
            "built_cpu_ms": r(built, 1),
            "without_bytecode_cpu_ms": r(source, 1),
            "saved_ms": r(source - built, 1),
            "built_vs_naive": r(built / naive, 2),
        }
    return {
        "measured": True,
        "python": found.version,
        "interpreter": " ".join(python),
        "runs": runs,
        "naive_baseline_cpu_ms": r(naive, 1),
        "naive_baseline_import_cpu_ms": r(median(imports[("naive", "naive")]), 1),
        "measures": "CPU ms of a fresh interpreter: *_import_* the handler module's import alone, the others "
        "import plus the first request's setup (store client, or the authorizer's directory and key)",
        "handlers": handlers,
        "extensions_swapped": swapped,
        "package_digests": {k: v["sha256"] for k, v in manifest["packages"].items()},
        "seconds": r(time.perf_counter() - started, 1),
    }


if __name__ == "__main__":
    section_main("cold_start_packages", run)
