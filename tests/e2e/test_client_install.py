"""The two distributions, built and installed as a user would: the client (`sentinel-readiness-client`, from
client/) installed alone in a fresh virtual environment runs `sentinel-hook` and `sentinel` with nothing but
the standard library; the server (`sentinel-readiness`) installs only `sentinel_*` names of its own, adds its
subcommands through the `sentinel.commands` entry point, and never installs a `sentinel` script.

Offline throughout: the wheels are built from a copy of the sources with the dev environment's own build
backend (`pip wheel --no-build-isolation`), and installed with `--no-index --no-deps`."""

from __future__ import annotations

import configparser
import json
import shutil
import socket
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.hook_harness import bash_event, make_repo
from support.paths import REPO

TOKEN = "snt_" + "A" * 49
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")


def pip(*args: str, cwd: Path) -> None:
    """The dev environment's pip, offline."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": "/dev/null"},
    )
    assert done.returncode == 0, done.stdout + done.stderr


def wheel(source: Path, scratch: Path) -> Path:
    """Build one wheel from a copy of `source` (a tree's stale build/ or egg-info never leaks into it)."""
    copy = scratch / f"sources-of-{source.name}"
    copy.mkdir()
    shutil.copy(source / "pyproject.toml", copy)
    shutil.copytree(source / "src", copy / "src", ignore=IGNORED)
    out = scratch / "wheels"
    pip("wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(out), str(copy), cwd=scratch)
    [built] = out.glob("*.whl")
    return built


@dataclass
class Installed:
    venv: Path
    home: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def run(self, *argv: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(self.home), "LC_ALL": "C.UTF-8"}
        return subprocess.run(
            [str(self.bin / argv[0]), *argv[1:]],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
            cwd=cwd or self.home,
        )


@pytest.fixture(scope="module")
def client_alone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """The client's wheel, installed with nothing else into a fresh virtual environment without pip."""
    scratch = tmp_path_factory.mktemp("client-install")
    venv = scratch / "venv"
    made = subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if made.returncode != 0:
        reason = f"cannot create a virtual environment here: {made.stderr.strip()}"
        print(reason)
        pytest.skip(reason)
    built = wheel(REPO / "client", scratch)
    assert built.name.startswith("sentinel_readiness_client-"), built
    # The dev environment's pip installs into the new environment, which has no pip of its own
    target = str(venv / "bin" / "python")
    pip("--python", target, "install", "--no-index", "--no-deps", str(built), cwd=scratch)
    home = scratch / "home"
    home.mkdir()
    yield Installed(venv, home)


def site_packages(venv: Path) -> Path:
    [found] = venv.glob("lib/python3*/site-packages")
    return found


def test_the_client_environment_holds_the_standard_library_and_the_client_only(
    client_alone: Installed,
) -> None:
    # When its site-packages is listed: the client's package and its metadata, nothing else
    names = sorted(p.name for p in site_packages(client_alone.venv).iterdir())
    assert names == ["sentinel_client", "sentinel_readiness_client-0.1.0.dist-info"], names
    # And the interpreter knows one distribution, finds no server, and imports the client from there
    probe = (
        "import importlib.metadata as m, importlib.util as u, json, sentinel_client;"
        "print(json.dumps({'dists': sorted(d.metadata['Name'] for d in m.distributions()),"
        "'server': [n for n in ('sentinel_runner', 'sentinel_service', 'sentinel_domain') if u.find_spec(n)],"
        "'groups': [e.value for e in m.entry_points(group='sentinel.commands')],"
        "'client': sentinel_client.__file__}))"
    )
    done = client_alone.run("python", "-c", probe)
    seen = json.loads(done.stdout)
    assert seen["dists"] == ["sentinel-readiness-client"] and seen["server"] == [] and seen["groups"] == []
    assert seen["client"].startswith(str(site_packages(client_alone.venv)))


def test_the_hook_runs_from_the_client_alone(client_alone: Installed) -> None:
    repo = client_alone.home / "repo"
    make_repo(repo, "hello")
    settings = client_alone.home / "absent-managed-settings.json"
    # Given a harmless command: the hook lets it through, silently
    harmless = json.dumps(bash_event("ls -la", repo))
    allowed = client_alone.run("sentinel-hook", "--settings", str(settings), stdin=harmless)
    assert (allowed.returncode, allowed.stdout, allowed.stderr) == (0, "", "")
    # Given a release command and no managed settings: denied (exit 2), saying the settings are missing
    release = json.dumps(bash_event("git push origin main", repo))
    denied = client_alone.run("sentinel-hook", "--settings", str(settings), stdin=release)
    assert denied.returncode == 2 and "Sentinel denied `git push origin main`" in denied.stderr
    assert "SETTING_MISSING" in denied.stderr and "Traceback" not in denied.stderr


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_sentinel_runs_from_the_client_alone_without_the_server_commands(client_alone: Installed) -> None:
    # `sentinel --help` lists the persona commands, and no server command
    helped = client_alone.run("sentinel", "--help")
    assert helped.returncode == 0 and "whoami" in helped.stdout and "completion" in helped.stdout
    assert "serve" not in helped.stdout and "warning" not in helped.stderr
    # `sentinel whoami` against a gate that is not there: one error line, a next step, exit 3
    token = client_alone.home / "token"
    token.write_text(TOKEN + "\n")
    url = f"http://127.0.0.1:{closed_port()}/v1"
    unreachable = client_alone.run("sentinel", "whoami", "--url", url, "--token-file", str(token))
    lines = unreachable.stderr.splitlines()
    assert unreachable.returncode == 3 and unreachable.stdout == "", unreachable.stderr
    assert lines[0].startswith("error: UNREACHABLE: ") and lines[1].startswith("next: ") and len(lines) == 2
    # `sentinel serve` is not there: argparse says so (exit 2), no traceback
    serve = client_alone.run("sentinel", "serve")
    assert serve.returncode == 2 and "invalid choice: 'serve'" in serve.stderr
    assert "Traceback" not in serve.stderr
    # And completion offers what is installed: the client's commands, not the server's
    completion = client_alone.run("sentinel", "completion", "bash")
    assert completion.returncode == 0 and '"sentinel context use"' in completion.stdout
    assert '"sentinel serve"' not in completion.stdout


def wheel_names(built: Path) -> tuple[set[str], configparser.ConfigParser, str]:
    """The top-level names a wheel installs (from its RECORD), its entry points and its METADATA."""
    with zipfile.ZipFile(built) as archive:
        [info] = {name.split("/")[0] for name in archive.namelist() if ".dist-info/" in name}
        record = archive.read(f"{info}/RECORD").decode()
        points = configparser.ConfigParser()
        points.optionxform = str  # type: ignore[assignment, method-assign]
        if f"{info}/entry_points.txt" in archive.namelist():
            points.read_string(archive.read(f"{info}/entry_points.txt").decode())
        metadata = archive.read(f"{info}/METADATA").decode()
    tops = {line.split(",")[0].split("/")[0] for line in record.splitlines() if line}
    tops.discard(info)
    return {name.removesuffix(".py") for name in tops}, points, metadata


def test_the_server_wheel_installs_its_own_names_and_no_sentinel_script(tmp_path: Path) -> None:
    # Given the server distribution's wheel, built from the repository root
    built = wheel(REPO, tmp_path)
    assert built.name.startswith("sentinel_readiness-0.1.0-"), built
    tops, points, metadata = wheel_names(built)
    # Then every top-level name is a sentinel_* package, and the client is not one of them
    assert tops and all(name.startswith("sentinel_") for name in tops), tops
    assert "sentinel_client" not in tops
    assert {"sentinel_domain", "sentinel_service", "sentinel_runner"} <= tops
    # And it adds its subcommands through the entry-point group, and installs no `sentinel` script
    assert dict(points["sentinel.commands"]) == {"server": "sentinel_runner.cli:register"}
    scripts = dict(points["console_scripts"]) if points.has_section("console_scripts") else {}
    assert "sentinel" not in scripts and "sentinel-hook" not in scripts
    # And it depends on the client distribution (which brings `sentinel`)
    assert "Requires-Dist: sentinel-readiness-client==0.1.0" in metadata


def test_the_client_wheel_installs_sentinel_and_the_hook(tmp_path: Path) -> None:
    tops, points, metadata = wheel_names(wheel(REPO / "client", tmp_path))
    assert tops == {"sentinel_client"}
    assert dict(points["console_scripts"]) == {
        "sentinel": "sentinel_client.cli:main",
        "sentinel-hook": "sentinel_client.hook:main",
    }
    assert "Requires-Dist" not in metadata
