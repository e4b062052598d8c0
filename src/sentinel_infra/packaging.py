"""Reproducible Lambda packages: the same sources give the same zip bytes, so a digest names a release.

`python -m sentinel_infra.packaging build` (what `make build` runs) writes into build/:

    functions.zip    the `sentinel_service` package (every handler:
                     `sentinel_service.handlers.<name>.handler`)
    core-layer.zip   python/sentinel_domain/...  the domain core
    deps-layer.zip   python/<packages>    third-party runtime dependencies for the Lambda runtime
    digests.json     per zip: sha256 (hex), code_sha256 (base64, as Lambda reports CodeSha256), bytes

Why the bytes are stable: entries are sorted, every entry has the same timestamp (1980-01-01, the oldest a
zip can hold), mode 0644 and "Unix" as its creator system; no bytecode goes in (the build interpreter is not
the runtime's, and Lambda compiles on first import anyway); directory entries are left out. Deflate at a
fixed level gives the same output for the same zlib, so digests.json records the zlib version it used.

The deps layer is [project].dependencies minus what the runtime provides (boto3 and botocore), resolved once
into infra/deps-layer.txt: exact versions and sha256 hashes of the manylinux2014_aarch64 / CPython 3.13
wheels (`python -m sentinel_infra.packaging lock`, i.e. `make deps-lock`, regenerates it). Builds install from
that lock with --require-hashes, so a new upstream release never changes a layer silently. Downloaded wheels
are cached under build/cache/, keyed by the lock's digest; a rebuild needs no network.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from sentinel_infra import runtime

REPO = Path(__file__).resolve().parents[2]  # src/<package>/<module>.py
BUILD = REPO / "build"
CACHE = BUILD / "cache"
DIGESTS_FILE = "digests.json"
DEPS_LOCK = REPO / "src" / "sentinel_infra" / "deps-layer.txt"

FUNCTIONS_ZIP = "functions.zip"
CORE_LAYER_ZIP = "core-layer.zip"
DEPS_LAYER_ZIP = "deps-layer.zip"
PACKAGES = {"functions": FUNCTIONS_ZIP, "core_layer": CORE_LAYER_ZIP, "deps_layer": DEPS_LAYER_ZIP}

# The Lambda Python runtime ships boto3 and botocore (and their own dependencies); the code uses only long-
# standing DynamoDB and Secrets Manager calls, so the layer leaves them out (about 25 MB unzipped saved).
PROVIDED_BY_RUNTIME = frozenset({"boto3", "botocore", "s3transfer"})

ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)
FILE_MODE = 0o100644  # a regular file, rw-r--r--
COMPRESS_LEVEL = 6  # zlib's default: level 9 costs three times the time for about 1% less
# Only these leave the source tree: stray editor files or local notes never change a digest.
SOURCE_SUFFIXES = frozenset({".py", ".json", ".typed"})
_SKIP_DIRS = frozenset({"__pycache__"})


@dataclass(frozen=True)
class Package:
    name: str
    path: str  # relative to the repository when inside it, else absolute
    sha256: str
    code_sha256: str
    bytes: int
    entries: int


# ---- zips ----------------------------------------------------------------------------------------------


def source_entries(root: Path, prefix: str) -> list[tuple[str, Path]]:
    """(name in the zip, file) for every source file under `root`, named `prefix/<relative path>`."""
    entries = []
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if any(part in _SKIP_DIRS for part in relative.parts) or not path.is_file():
            continue
        if path.suffix in SOURCE_SUFFIXES:
            entries.append((f"{prefix}/{relative.as_posix()}", path))
    return entries


def site_entries(site: Path) -> list[tuple[str, Path]]:
    """Every installed file of a pip --target directory, under python/, without bytecode or scripts."""
    entries = []
    for path in site.rglob("*"):
        relative = path.relative_to(site)
        if relative.parts[0] == "bin" or any(part in _SKIP_DIRS for part in relative.parts):
            continue  # console scripts are useless in a layer and carry the build machine's interpreter path
        if not path.is_file() or path.suffix == ".pyc":
            continue
        entries.append((f"python/{relative.as_posix()}", path))
    return entries


def write_zip(entries: Iterable[tuple[str, Path]], dest: Path) -> Package:
    """Write the entries sorted by name with fixed metadata; replace `dest` atomically."""
    ordered = sorted(entries)
    names = [name for name, _ in ordered]
    if len(names) != len(set(names)):
        raise ValueError(f"{dest.name}: two files map to one zip entry")
    dest.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=dest.name + ".", dir=dest.parent)
    os.close(handle)
    try:
        with zipfile.ZipFile(temporary, "w") as archive:
            for name, path in ordered:
                info = zipfile.ZipInfo(name, date_time=ZIP_DATE_TIME)
                info.create_system = 3  # Unix, whatever the build machine is, so the mode bits mean the same
                info.external_attr = FILE_MODE << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes(), compresslevel=COMPRESS_LEVEL)
        os.chmod(temporary, 0o644)  # mkstemp makes it private; the zip is no secret
        os.replace(temporary, dest)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return describe(dest, len(ordered))


def describe(path: Path, entries: int) -> Package:
    digest = hashlib.sha256(path.read_bytes()).digest()
    shown = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)
    return Package(
        name=path.name,
        path=shown,
        sha256=digest.hex(),
        code_sha256=base64.b64encode(digest).decode("ascii"),
        bytes=path.stat().st_size,
        entries=entries,
    )


# ---- the deps layer --------------------------------------------------------------------------------------


def _pip_target_args() -> list[str]:
    return [
        "--platform",
        runtime.PIP_PLATFORM,
        "--python-version",
        runtime.PYTHON_VERSION,
        "--implementation",
        runtime.PIP_IMPLEMENTATION,
        "--only-binary=:all:",
    ]


def _pip(*args: str) -> None:
    command = [sys.executable, "-m", "pip", *args]
    done = subprocess.run(
        command, capture_output=True, text=True, env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip {args[0]} failed ({done.returncode}):\n{done.stderr.strip()}")


@contextlib.contextmanager
def exclusive(lock_file: Path) -> Iterator[None]:
    """Serialise processes sharing a folder: builders sharing the cache (make, parallel test workers), and
    test workers sharing one build or synth."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def lock_digest(lock: Path = DEPS_LOCK) -> str:
    return hashlib.sha256(lock.read_bytes()).hexdigest()


def cached_wheels(lock: Path = DEPS_LOCK, cache: Path = CACHE) -> Path:
    """The wheels the lock names, downloaded once per lock digest (hash-checked by pip)."""
    wheels = cache / f"deps-wheels-{lock_digest(lock)[:16]}"
    done = wheels / ".complete"
    with exclusive(cache / ".lock"):
        if not done.exists():
            shutil.rmtree(wheels, ignore_errors=True)
            _pip(
                "download",
                "--quiet",
                "--no-deps",
                "--require-hashes",
                "-r",
                str(lock),
                "--dest",
                str(wheels),
                *_pip_target_args(),
            )
            done.write_text(lock_digest(lock) + "\n")
    return wheels


def install_deps(site: Path, lock: Path = DEPS_LOCK, cache: Path = CACHE) -> Path:
    """Install the locked wheels into `site` (a pip --target directory) without network or bytecode."""
    wheels = cached_wheels(lock, cache)
    _pip(
        "install",
        "--quiet",
        "--no-index",
        "--find-links",
        str(wheels),
        "--no-deps",
        "--require-hashes",
        "--no-compile",
        "--target",
        str(site),
        "-r",
        str(lock),
        *_pip_target_args(),
    )
    provided = sorted(p.name for p in site.iterdir() if _normal(p.name.split("-")[0]) in PROVIDED_BY_RUNTIME)
    if provided:
        raise RuntimeError(f"the deps layer must not ship what the runtime provides: {provided}")
    return site


# ---- the lock ------------------------------------------------------------------------------------------


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_requirements(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """[project].dependencies minus what the runtime provides, as written in pyproject.toml."""
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return [
        d
        for d in dependencies
        if _normal(re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0]) not in PROVIDED_BY_RUNTIME
    ]


def parse_lock(lock: Path = DEPS_LOCK) -> dict[str, str]:
    """{normalised name: version} of every pinned package in the lock."""
    pins = {}
    for line in lock.read_text().splitlines():
        found = re.match(r"^([A-Za-z0-9_.-]+)==([^ \\]+)", line)
        if found:
            pins[_normal(found.group(1))] = found.group(2)
    return pins


def write_lock(lock: Path = DEPS_LOCK, pyproject: Path = REPO / "pyproject.toml") -> Path:
    """Resolve the runtime requirements for the Lambda target and pin every wheel with its sha256."""
    requirements = runtime_requirements(pyproject)
    with tempfile.TemporaryDirectory() as scratch:
        _pip("download", "--quiet", "--dest", scratch, *_pip_target_args(), *requirements)
        lines = []
        for wheel in sorted(Path(scratch).glob("*.whl"), key=lambda w: _normal(w.name.split("-")[0])):
            name, version = wheel.name.split("-")[:2]
            if _normal(name) in PROVIDED_BY_RUNTIME:
                raise RuntimeError(f"{name} was resolved but the runtime provides it: drop what pulls it in")
            digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
            lines.append(f"{_normal(name)}=={version} \\\n    --hash=sha256:{digest}")
    header = [
        "# The deps layer: [project].dependencies of pyproject.toml minus boto3/botocore (the Lambda runtime",
        f"# provides them), resolved for {runtime.PIP_PLATFORM} / CPython {runtime.PYTHON_VERSION}.",
        "# Generated by `make deps-lock` (python -m sentinel_infra.packaging lock); do not edit by hand.",
        "# Top-level requirements: " + ", ".join(requirements),
    ]
    lock.write_text("\n".join(header + lines) + "\n")
    return lock


# ---- the build -------------------------------------------------------------------------------------------


def build(out: Path = BUILD, cache: Path = CACHE, lock: Path = DEPS_LOCK) -> dict[str, Package]:
    """Build the three zips into `out` and write `out/digests.json`."""
    out.mkdir(parents=True, exist_ok=True)
    packages = {
        "functions": write_zip(
            source_entries(REPO / "src" / "sentinel_service", "sentinel_service"), out / FUNCTIONS_ZIP
        ),
        "core_layer": write_zip(
            source_entries(REPO / "src" / "sentinel_domain", "python/sentinel_domain"), out / CORE_LAYER_ZIP
        ),
    }
    with tempfile.TemporaryDirectory(prefix="deps-site-", dir=out) as site:
        packages["deps_layer"] = write_zip(
            site_entries(install_deps(Path(site), lock, cache)), out / DEPS_LAYER_ZIP
        )
    manifest = {
        "packages": {key: asdict(package) for key, package in packages.items()},
        "runtime": {
            "python": runtime.PYTHON_VERSION,
            "architecture": runtime.LAMBDA_ARCHITECTURE,
            "pip_platform": runtime.PIP_PLATFORM,
        },
        "deps_lock_sha256": lock_digest(lock),
        "zlib": zlib.ZLIB_RUNTIME_VERSION,
    }
    (out / DIGESTS_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return packages


def read_digests(out: Path = BUILD) -> dict[str, Package]:
    """The packages of the last build in `out`; a missing or stale build is an error that says what to run."""
    manifest_file = out / DIGESTS_FILE
    if not manifest_file.exists():
        raise FileNotFoundError(f"{manifest_file} is missing: run `make build` first")
    manifest = json.loads(manifest_file.read_text())
    packages = {key: Package(**value) for key, value in manifest["packages"].items()}
    for package in packages.values():
        path = Path(package.path) if Path(package.path).is_absolute() else REPO / package.path
        if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != package.sha256:
            raise ValueError(f"{path} does not match {manifest_file}: run `make build` again")
    return packages


def package_path(package: Package) -> Path:
    path = Path(package.path)
    return path if path.is_absolute() else REPO / path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sentinel_infra.packaging", description=__doc__.splitlines()[0]
    )
    parser.add_argument("command", choices=["build", "lock"])
    parser.add_argument("--out", type=Path, default=BUILD, help="where the zips and digests.json go")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.command == "lock":
        print(f"wrote {write_lock()}")
        return 0
    for key, package in build(args.out).items():
        print(f"{key:<11} {package.path:<28} {package.bytes:>10,} bytes  sha256 {package.sha256}")
    print(f"wrote {args.out / DIGESTS_FILE} in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
