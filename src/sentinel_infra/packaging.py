"""Reproducible Lambda packages: the same sources give the same zip bytes, so a digest names a release.

`python -m sentinel_infra.packaging build` (what `make build` runs) writes into build/:

    functions.zip    the `sentinel_service` package (every handler:
                     `sentinel_service.handlers.<name>.handler`)
    core-layer.zip   python/sentinel_domain/...  the domain core
    deps-layer.zip   python/<packages>    third-party runtime dependencies for the Lambda runtime
    digests.json     per zip: sha256 (hex), code_sha256 (base64, as Lambda reports CodeSha256), bytes

Why the bytes are stable: entries are sorted, every entry has the same timestamp (1980-01-01, the oldest a
zip can hold), mode 0644 and "Unix" as its creator system; directory entries are left out. Deflate at a
fixed level gives the same output for the same zlib, so digests.json records the zlib version it used.

Bytecode: every module of every zip ships its `__pycache__/<module>.cpython-313.pyc`, because Lambda's
/var/task and /opt are read-only and a cold start would otherwise compile pydantic, Powertools and the core
from source on every new execution environment (about 280 ms of a handler's 500 ms of import CPU). It is
compiled by one pinned CPython (`runtime.BYTECODE_PYTHON`, found by `find_bytecode_python`) with
`--invalidation-mode unchecked-hash` (the loader never compares it with the source, whose mtime a zip does not
keep), `PYTHONHASHSEED=0` (set and frozenset constants are marshalled in hash order), and the staging folder
stripped and replaced by the path Lambda loads from (`/var/task`, `/opt`), so the build folder leaves no trace
in the bytes. Without that interpreter the build stops and says how to get it; `--no-bytecode` builds slower
packages knowingly, and digests.json records which kind it is.

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


# ---- bytecode --------------------------------------------------------------------------------------------

# Where Lambda puts each zip: the function package at /var/task, a layer's python/ at /opt/python.
FUNCTION_ROOT = "/var/task"
LAYER_ROOT = "/opt"
PYTHON_OVERRIDE_ENV = "SENTINEL_PYTHON313"  # a command that runs the pinned CPython, when it is elsewhere


class BytecodeUnavailable(RuntimeError):
    """No interpreter of the pinned version: the build refuses rather than ship packages without bytecode."""


@dataclass(frozen=True)
class BytecodePython:
    command: tuple[str, ...]
    version: str
    found_by: str  # which rule found it, for the build's report


def _probe(command: list[str]) -> str | None:
    """The version `command` runs, or None when it does not run."""
    try:
        done = subprocess.run(
            [*command, "-c", "import platform; print(platform.python_version())"],
            capture_output=True,
            text=True,
            timeout=60,
            env=_bytecode_env(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _bytecode_env() -> dict[str, str]:
    # A fixed hash seed (set and frozenset constants are marshalled in hash order); pyenv's shim needs to be
    # told which version to run; nothing else of the caller's environment reaches the compiler.
    env = {"PYTHONHASHSEED": "0", "PYENV_VERSION": runtime.BYTECODE_PYTHON, "LC_ALL": "C.UTF-8"}
    for name in ("PATH", "HOME", "PYENV_ROOT"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def bytecode_candidates() -> list[tuple[str, list[str]]]:
    """(rule, command) in the order they are tried: an explicit command, pyenv's copy of the pinned version
    (TOOLCHAIN.md: these machines carry one), then `python3.13` on the PATH (a user's machine)."""
    candidates = []
    if os.environ.get(PYTHON_OVERRIDE_ENV):
        candidates.append((PYTHON_OVERRIDE_ENV, os.environ[PYTHON_OVERRIDE_ENV].split()))
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates.append(("pyenv", [str(pyenv_root / "versions" / runtime.BYTECODE_PYTHON / "bin" / "python3")]))
    on_path = shutil.which("python" + runtime.PYTHON_VERSION)
    if on_path:
        candidates.append(("PATH", [on_path]))
    return candidates


def find_bytecode_python() -> BytecodePython:
    """The pinned CPython that compiles the packages' bytecode, or BytecodeUnavailable saying how to get
    it."""
    seen = []
    for rule, command in bytecode_candidates():
        version = _probe(command)
        if version == runtime.BYTECODE_PYTHON:
            return BytecodePython(tuple(command), version, rule)
        seen.append(f"{rule}: {' '.join(command)} -> {version or 'does not run'}")
    raise BytecodeUnavailable(
        f"the packages ship CPython {runtime.BYTECODE_PYTHON} bytecode and no such interpreter was found "
        f"(tried {'; '.join(seen) or 'nothing'}). Install it (`pyenv install {runtime.BYTECODE_PYTHON}`), or "
        f"set {PYTHON_OVERRIDE_ENV} to a command that runs it (docs/deploy.md, TOOLCHAIN.md); "
        "`python -m sentinel_infra.packaging build --no-bytecode` builds slower packages knowingly."
    )


def with_bytecode(
    entries: list[tuple[str, Path]], load_root: str, python: BytecodePython, scratch: Path
) -> list[tuple[str, Path]]:
    """`entries` plus the `__pycache__/*.cpython-313.pyc` of each `.py` among them, compiled in a staging
    copy whose path is replaced by `load_root` (where Lambda loads the zip from) in every code object."""
    stage = scratch / "stage"
    for name, path in entries:
        target = stage / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    done = subprocess.run(
        [
            *python.command,
            "-s",  # no user site: only the standard library compiles
            "-m",
            "compileall",
            "-q",
            "-f",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            "-s",
            str(stage),
            "-p",
            load_root,
            str(stage),
        ],
        capture_output=True,
        text=True,
        env=_bytecode_env(),
    )
    if done.returncode != 0:
        raise RuntimeError(f"compileall failed ({done.returncode}):\n{(done.stdout + done.stderr).strip()}")
    compiled = [
        (path.relative_to(stage).as_posix(), path)
        for path in stage.rglob("*.pyc")
        if path.parent.name == "__pycache__"
    ]
    missing = {name for name, _ in entries if name.endswith(".py")} - {
        source_of(name) for name, _ in compiled
    }
    if missing:
        raise RuntimeError(f"no bytecode was compiled for {sorted(missing)[:5]} ({len(missing)} in all)")
    return [*entries, *compiled]


def bytecode_name(source: str) -> str:
    """The zip entry of a module's bytecode: `a/b.py` -> `a/__pycache__/b.cpython-313.pyc`."""
    folder, _, file = source.rpartition("/")
    compiled = f"__pycache__/{file.removesuffix('.py')}.{runtime.BYTECODE_CACHE_TAG}.pyc"
    return f"{folder}/{compiled}" if folder else compiled


def source_of(compiled: str) -> str:
    """The inverse of `bytecode_name`."""
    folder, _, file = compiled.rpartition("/")
    parent = folder.removesuffix("__pycache__").rstrip("/")
    module = file.removesuffix(f".{runtime.BYTECODE_CACHE_TAG}.pyc")
    return f"{parent}/{module}.py" if parent else f"{module}.py"


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


# This repository's own client distribution (client/): the server's `sentinel` command needs it, the functions
# never import it (tests/infrastructure/test_handler_imports.py), so the layer does not carry it.
OWN_CLIENT = "sentinel-readiness-client"


def runtime_requirements(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """[project].dependencies minus what the runtime provides and minus the client, as written in
    pyproject.toml."""
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    left_out = {*PROVIDED_BY_RUNTIME, OWN_CLIENT}
    return [d for d in dependencies if _normal(re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0]) not in left_out]


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


def build(
    out: Path = BUILD, cache: Path = CACHE, lock: Path = DEPS_LOCK, *, bytecode: bool = True
) -> dict[str, Package]:
    """Build the three zips into `out` and write `out/digests.json`. With `bytecode` (the default) the
    pinned CPython must be found, or BytecodeUnavailable says how to get it."""
    python = find_bytecode_python() if bytecode else None
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="packages-", dir=out) as scratch_dir:
        scratch = Path(scratch_dir)

        def package(entries: list[tuple[str, Path]], load_root: str, name: str) -> Package:
            if python is not None:
                entries = with_bytecode(entries, load_root, python, scratch / name)
            return write_zip(entries, out / name)

        site = install_deps(scratch / "deps-site", lock, cache)
        packages = {
            "functions": package(
                source_entries(REPO / "src" / "sentinel_service", "sentinel_service"),
                FUNCTION_ROOT,
                FUNCTIONS_ZIP,
            ),
            "core_layer": package(
                source_entries(REPO / "src" / "sentinel_domain", "python/sentinel_domain"),
                LAYER_ROOT,
                CORE_LAYER_ZIP,
            ),
            "deps_layer": package(site_entries(site), LAYER_ROOT, DEPS_LAYER_ZIP),
        }
    manifest = {
        "packages": {key: asdict(package) for key, package in packages.items()},
        "runtime": {
            "python": runtime.PYTHON_VERSION,
            "architecture": runtime.LAMBDA_ARCHITECTURE,
            "pip_platform": runtime.PIP_PLATFORM,
        },
        # None: built with --no-bytecode (every cold start compiles from source)
        "bytecode": None
        if python is None
        else {
            "python": python.version,
            "cache_tag": runtime.BYTECODE_CACHE_TAG,
            "invalidation_mode": "unchecked-hash",
            "load_roots": {"functions": FUNCTION_ROOT, "layers": LAYER_ROOT},
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
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help=f"ship no CPython {runtime.BYTECODE_PYTHON} bytecode (every cold start compiles from source)",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.command == "lock":
        print(f"wrote {write_lock()}")
        return 0
    try:
        packages = build(args.out, bytecode=not args.no_bytecode)
    except BytecodeUnavailable as error:
        print(f"build: {error}", file=sys.stderr)
        return 2
    for key, package in packages.items():
        print(f"{key:<11} {package.path:<28} {package.bytes:>10,} bytes  sha256 {package.sha256}")
    print(f"wrote {args.out / DIGESTS_FILE} in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
