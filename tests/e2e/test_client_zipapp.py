"""The single-file client (`make client-zipapp`: build/sentinel-client.pyz): reproducible, only the client's
sources, and it runs `sentinel` and the hook with the standard library alone (`python -S`: no site-packages
at all, so nothing can come from an installed copy)."""

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from support.hook_harness import bash_event, make_repo
from support.paths import REPO

TOKEN = "snt_" + "A" * 49


def builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_pyz", REPO / "client" / "build_pyz.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pyz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy of the package that has bytecode lying about, as a worked-in tree does
    scratch = tmp_path_factory.mktemp("zipapp")
    package = scratch / "sentinel_client"
    shutil.copytree(REPO / "client" / "src" / "sentinel_client", package)
    (package / "__pycache__").mkdir(exist_ok=True)
    (package / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"stale")
    for path in package.rglob("*"):  # and files touched at another time than the repository's
        os.utime(path, (1_700_000_000, 1_700_000_000))
    return builder().build(scratch / "sentinel-client.pyz", package)  # type: ignore[no-any-return]


def run(pyz: Path, *argv: str, stdin: str = "", cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-S", str(pyz), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "LC_ALL": "C.UTF-8"},
    )


def test_the_archive_is_reproducible_and_holds_the_client_sources_only(pyz: Path, tmp_path: Path) -> None:
    # When it is built again from the repository's own sources, twice
    again = builder().build(tmp_path / "a.pyz")
    twice = builder().build(tmp_path / "b.pyz")
    # Then the bytes are the same, and the same as the copy's, whose files have other times and bytecode
    assert again.read_bytes() == twice.read_bytes() == pyz.read_bytes()
    assert pyz.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(pyz) as archive:
        entries = archive.infolist()
    names = [entry.filename for entry in entries]
    # And its entries are sorted, fixed in time, the client's modules and the entry point, and no bytecode
    assert names == sorted(names) and names[0] == "__main__.py"
    assert all(name.startswith("sentinel_client/") and name.endswith(".py") for name in names[1:]), names
    assert "sentinel_client/__main__.py" in names and "sentinel_client/hook.py" in names
    assert {entry.date_time for entry in entries} == {(1980, 1, 1, 0, 0, 0)}
    expected = sorted(
        p.relative_to(REPO / "client" / "src").as_posix()
        for p in (REPO / "client" / "src" / "sentinel_client").rglob("*.py")
        if "__pycache__" not in p.parts
    )
    assert names[1:] == expected


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_archive_runs_sentinel(pyz: Path, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    url = f"http://127.0.0.1:{closed_port()}/v1"
    done = run(pyz, "whoami", "--url", url, "--token-file", str(token), cwd=tmp_path)
    lines = done.stderr.splitlines()
    assert done.returncode == 3 and lines[0].startswith("error: UNREACHABLE: ") and len(lines) == 2, (
        done.stderr
    )
    helped = run(pyz, "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "whoami" in helped.stdout and "serve" not in helped.stdout


def test_the_archive_runs_the_hook(pyz: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, "hello")
    settings = str(tmp_path / "absent.json")
    allowed = run(pyz, "hook", "--settings", settings, stdin=json.dumps(bash_event("ls", repo)), cwd=tmp_path)
    assert (allowed.returncode, allowed.stdout, allowed.stderr) == (0, "", "")
    release = json.dumps(bash_event("git push origin main", repo))
    denied = run(pyz, "hook", "--settings", settings, stdin=release, cwd=tmp_path)
    assert denied.returncode == 2 and "SETTING_MISSING" in denied.stderr, denied.stderr
    # And `hook gate` is the CI gate: without settings, an error (2), never ready
    gate = run(pyz, "hook", "gate", "--revision", "0" * 40, cwd=tmp_path)
    assert gate.returncode == 2 and "Traceback" not in gate.stderr, gate.stderr
