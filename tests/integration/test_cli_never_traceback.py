"""Every `sentinel` command, with nothing to talk to, says no in one line and a next step: never a traceback.

The walker reads the live parser (the client's commands and the server's registration, recursing into
every group), so a command added later is walked without anyone listing it here. Each command runs in
process, its required arguments filled with plausible dummies, in a HOME with no config and no SENTINEL_*
variables:

  (a) no gate and no credentials: `--url` (when it has one) names a loopback port nothing listens on;
      `--aws-stage` (when it has one) names a stack with no AWS credentials to find it with;
  (b) the store cannot be opened: `--data` names a file, not a directory; `--dynamodb-endpoint` names a
      loopback port nothing listens on.

Each run must exit non-zero, its standard error must begin `error: CODE: message`, a `next:` line must
follow (unless the code is in NO_NEXT_STEP, which says why), and "Traceback" appears nowhere. The commands
that cannot be judged this way are listed in NOT_WALKED with the reason; `serve` has tests of its own
(tests/e2e/test_serve_refusals.py)."""

from __future__ import annotations

import argparse
import io
import re
import socket
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from sentinel_client.cli import build_parser, main
from sentinel_runner.cli import register

# Commands this test cannot judge, and why. Anything else the parser holds is walked.
NOT_WALKED = {
    ("serve",): "it starts serving; tests/e2e/test_serve_refusals.py covers a port in use, a public host "
    "and a data directory it cannot open",
    ("eval",): "it replays the scenario catalog offline (minutes); it needs neither a gate nor a store",
    ("completion",): "it prints a script from the parser alone and has nothing that can be unavailable",
    ("context", "list"): "it lists the saved contexts, and none is a correct answer",
    ("context", "show"): "it shows the settings a command would use, and none set is a correct answer",
}

# Refusal codes whose one line is the whole story: nothing the caller can do differently next.
NO_NEXT_STEP: dict[str, str] = {}

ERROR_LINE = re.compile(r"^error: [A-Z][A-Z0-9_]*: .+")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed: the kernel does not hand it out again at
    once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Command:
    path: tuple[str, ...]
    parser: argparse.ArgumentParser

    @property
    def options(self) -> set[str]:
        return {flag for action in self.parser._actions for flag in action.option_strings}


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Command]:
    """Every leaf command under `parser`, each once (aliases share a parser)."""
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        yield Command(path, parser)
        return
    for group in groups:
        seen: set[int] = set()
        for name, child in group.choices.items():
            if id(child) not in seen:
                seen.add(id(child))
                yield from walk(child, (*path, name))


def dummy(action: argparse.Action, scratch: Path) -> str:
    """A plausible value for one required argument, from its choices, type or name."""
    if action.choices:
        return str(next(iter(action.choices)))
    if action.type in (int, float):
        return "1"
    name = action.dest.lower()
    if "revision" in name or name in ("sha", "head", "base"):
        return "0" * 40
    if "digest" in name:
        return "0" * 64
    if name in ("out", "source", "report", "junit", "artifact", "from", "f") or "file" in name:
        return str(scratch / "absent-input")
    if "url" in name:
        return f"http://127.0.0.1:{closed_port()}/v1"
    if name in ("range", "from_git"):
        return "HEAD~1..HEAD"
    return "demo"


def fill(command: Command, scratch: Path, already: set[str]) -> list[str]:
    """The command's required arguments (and one choice of each required exclusive group), as argv."""
    argv: list[str] = []
    positionals: list[str] = []
    chosen = {id(g._group_actions[0]) for g in command.parser._mutually_exclusive_groups if g.required}
    for action in command.parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if not action.option_strings:
            if action.nargs not in ("?", "*"):
                positionals.append(dummy(action, scratch))
            continue
        if not (action.required or id(action) in chosen) or set(action.option_strings) & already:
            continue
        flag = action.option_strings[-1]
        if action.nargs == 0:
            argv.append(flag)
        else:
            argv += [flag, dummy(action, scratch)]
    # Positionals after `--`, so an option taking several values (--junit GLOB...) cannot swallow them.
    return [*argv, "--", *positionals] if positionals else argv


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv, registrations=[register])
        except BaseException as escaped:  # noqa: BLE001 - what escapes main is what the user would see
            import traceback

            traceback.print_exc(file=err)
            code = f"escaped: {type(escaped).__name__}"
    return code, out.getvalue(), err.getvalue()  # type: ignore[return-value]


def walked() -> list[Command]:
    parser, broken = build_parser(registrations=[register])
    assert not broken
    return [c for c in walk(parser) if c.path not in NOT_WALKED]


def faults(command: Command, scratch: Path) -> Iterator[tuple[str, list[str]]]:
    """The fault runs for one command: (a) no credentials, and no gate; (b) a store that cannot be opened.
    `--project` gets a value wherever it is an option (most commands need one before they try anything)."""
    options = command.options
    project = ["--project", "demo"] if "--project" in options else []
    no_credentials: list[str] = [*project]
    if "--url" in options:
        no_credentials += ["--url", f"http://127.0.0.1:{closed_port()}/v1"]
    if "--aws-stage" in options:
        no_credentials += ["--aws-stage", "nowhere", "--aws-region", "eu-west-1"]
    if not ({"--data", "--dynamodb-endpoint"} & options) or len(no_credentials) > len(project):
        yield "no credentials", no_credentials
    if {"--url", "--token-file"} <= options:
        token = scratch / "token"
        token.write_text("snt_" + "A" * 49 + "\n")
        token.chmod(0o600)
        unreachable = ["--url", f"http://127.0.0.1:{closed_port()}/v1", "--token-file", str(token)]
        yield "gate unreachable", [*project, *unreachable]
    if "--data" in options:
        a_file = scratch / "not-a-directory"
        a_file.write_text("a file where the data directory should be\n")
        yield "data directory is a file", [*project, "--data", str(a_file)]
    if "--dynamodb-endpoint" in options:
        yield "store down", [*project, "--dynamodb-endpoint", f"http://127.0.0.1:{closed_port()}"]


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user with nothing: an empty HOME and config, no SENTINEL_* settings, no AWS credentials."""
    import os

    home = tmp_path / "home"
    home.mkdir()
    for name in list(os.environ):
        if name.startswith(("SENTINEL_", "AWS_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("SENTINEL_DATA_DIR", str(home / "data"))
    # No credentials anywhere boto3 looks, and no instance metadata service to ask.
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    return tmp_path


def test_the_walker_finds_client_and_server_commands_and_groups() -> None:
    # Given the full parser; When it is walked
    paths = {c.path for c in walk(build_parser(registrations=[register])[0])}
    # Then it reaches top-level commands, group actions and a group created by a helper's own add_subparsers
    assert {("whoami",), ("context", "use"), ("principals", "add"), ("receipt", "verify")} <= paths
    assert ("serve",) in paths and ("principals",) not in paths


@pytest.mark.parametrize("command", walked(), ids=lambda c: " ".join(c.path))
def test_every_command_says_no_in_one_line_without_a_traceback(command: Command, nowhere: Path) -> None:
    said: list[str] = []
    for fault, extra in faults(command, nowhere):
        # Given nothing to talk to (fault); When the command runs with plausible required arguments
        argv = [*command.path, *extra, *fill(command, nowhere, set(extra))]
        code, out, err = run(argv)
        where = f"`sentinel {' '.join(argv)}` ({fault}) exited {code}\nstdout: {out}\nstderr: {err}"
        # Then it says no: a non-zero exit, one error line first, a next step, and no traceback
        assert "Traceback" not in out + err, where
        assert isinstance(code, int) and code != 0, where
        assert code != 2 or not err.startswith("usage:"), "the walker could not fill the arguments: " + where
        lines = err.splitlines()
        assert lines and ERROR_LINE.match(lines[0]), where
        error_code = lines[0].split(":")[1].strip()
        assert error_code != "INTERNAL_ERROR", "no translator explains this failure: " + where
        assert error_code in NO_NEXT_STEP or any(line.startswith("next: ") for line in lines[1:]), where
        said.append(error_code)
    assert said, f"no fault applies to `sentinel {' '.join(command.path)}`: add one, or list it in NOT_WALKED"
