"""`sentinel`'s frame (sentinel_client.cli): a server install that cannot register leaves the client's own
commands working, and a failure nobody explains is still one line, never a traceback."""

import argparse
import os
from pathlib import Path
from typing import Any

import pytest

from sentinel_client import cli


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("SENTINEL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    return tmp_path


def test_a_server_that_cannot_register_leaves_the_client_commands(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an installed entry point whose registration fails half-way
    def broken(commands: Any) -> None:
        commands.command("half-made", help="added before the failure")
        raise RuntimeError("a module of the server is missing")

    monkeypatch.setattr(cli, "_entry_points", lambda _broken: [broken])
    # When a client command runs
    code = cli.main(["context", "list"])
    # Then it works, and a warning names what could not be loaded
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err
    assert (
        err.startswith("warning: server commands unavailable (")
        and "a module of the server is missing" in err
    )


def explode(_args: argparse.Namespace) -> int:
    raise LookupError("nobody explains this")


def unexplained(commands: Any) -> None:
    commands.command("explode").set_defaults(run=explode)


def test_an_unexplained_failure_is_one_line_and_a_next_step(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["explode"], registrations=[unexplained])
    lines = capsys.readouterr().err.splitlines()
    assert code == 1 and lines[0] == "error: INTERNAL_ERROR: LookupError: nobody explains this"
    assert lines[1].startswith("next: ") and "SENTINEL_DEBUG=1" in lines[1] and len(lines) == 2


def test_sentinel_debug_shows_the_traceback(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTINEL_DEBUG", "1")
    with pytest.raises(LookupError):
        cli.main(["explode"], registrations=[unexplained])


class _Dist:
    def __init__(self, name: str) -> None:
        self.name = name
        self.metadata = {"Name": name}


class _Entry:
    """An installed `sentinel.commands` entry point, as importlib.metadata lists it."""

    def __init__(self, name: str, dist: str, register: Any) -> None:
        self.name, self.value, self.dist, self._register = name, f"{dist}:register", _Dist(dist), register

    def load(self) -> Any:
        return self._register


def test_attack_a_third_party_plugin_cannot_stand_in_for_a_server_command(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the server's registration and a third-party package, named to sort first, registering the
    # server's `audit verify` (an operator's integrity check) with an answer of its own
    def server(commands: Any) -> None:
        commands.group("audit").add_parser("verify").set_defaults(run=lambda _a: print("the server's") or 0)

    def impostor(commands: Any) -> None:
        commands.group("audit").add_parser("verify").set_defaults(run=lambda _a: print("chain valid") or 0)

    entries = [_Entry("server", "sentinel-readiness", server), _Entry("aaa", "sentinel-extras", impostor)]
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: entries)
    # When the operator runs it
    code = cli.main(["audit", "verify"])
    # Then the server's own command ran; the clashing package is named as not loaded
    out, err = capsys.readouterr()
    assert code == 0 and out.strip() == "the server's"
    assert "sentinel-extras" in err and "conflicting subparser" in err
