"""`sentinel completion`: scripts made from the live parser. The bash script is run in a real bash, with the
words a person would have typed, so what is checked is what the shell would offer."""

import argparse
import io
import shlex
import shutil
import subprocess
from contextlib import redirect_stdout
from typing import Any

import pytest

from sentinel_client.cli import build_parser, main
from sentinel_runner.cli import register as server

TOP_LEVEL = {"login", "whoami", "context", "completion", "serve", "projects", "principals", "audit"}


def widgets(commands: Any) -> None:
    """A registration made after the completion command was: its group must still be offered."""
    spin = commands.group("widgets", help="a group added by another registration").add_parser("spin")
    spin.add_argument("--speed", choices=["slow", "fast"])
    spin.set_defaults(run=lambda args: 0)


def paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    found = {path} if path else set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found |= paths(child, (*path, name))
    return found


def script(shell: str, *registrations: Any) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["completion", shell], registrations=list(registrations)) == 0
    return out.getvalue()


def offered(text: str, *words: str) -> set[str]:
    """What bash's completion function offers after `words` (the last one being completed)."""
    quoted = " ".join("'" + w + "'" for w in words)
    run = f'source /dev/stdin <<<"$SCRIPT"; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; '
    run += '_sentinel_complete; printf "%s\\n" "${COMPREPLY[@]}"'
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", run],
        env={"SCRIPT": text, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return {line for line in done.stdout.splitlines() if line}


requires_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed here")


@requires_bash
def test_bash_offers_the_top_level_commands_and_a_groups_actions() -> None:
    # Given the script for the client and the server's commands
    text = script("bash", server)
    # When `sentinel <TAB>` is completed: every top-level command, client and server
    assert TOP_LEVEL <= offered(text, "sentinel", "")
    # And `sentinel principals <TAB>`: the group's actions, and nothing of other groups
    actions = offered(text, "sentinel", "principals", "")
    assert {"add", "rotate", "revoke", "list"} <= actions and "exposure" not in actions
    # And a prefix narrows it
    assert offered(text, "sentinel", "pro") == {"projects"}
    # And an option's fixed choices are offered as its value, wherever the option sits
    assert offered(text, "sentinel", "principals", "add", "--id", "x", "--kind", "") == {
        "human",
        "agent",
        "ci",
    }
    # And a leaf command offers its options
    assert {"--id", "--kind", "--ttl"} <= offered(text, "sentinel", "principals", "add", "--")


@requires_bash
def test_the_script_is_made_from_the_live_parser() -> None:
    # Given the client alone: no server command is offered
    alone = script("bash")
    assert "serve" not in offered(alone, "sentinel", "")
    # Given another registration after the client's own: its group, actions and choices are offered
    more = script("bash", server, widgets)
    assert "widgets" in offered(more, "sentinel", "")
    assert offered(more, "sentinel", "widgets", "") >= {"spin"}
    assert offered(more, "sentinel", "widgets", "spin", "--speed", "f") == {"fast"}


@requires_bash
def test_the_bash_and_zsh_scripts_parse() -> None:
    for shell in ("bash", "zsh"):
        text = script(shell, server)
        checked = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, check=False)
        assert checked.returncode == 0, (shell, checked.stderr)
    assert script("zsh", server).startswith("#compdef sentinel\n")


def test_fish_completes_every_command_and_group_action() -> None:
    text = script("fish", server, widgets)
    parser, _ = build_parser(registrations=[server, widgets])
    assert "complete -c sentinel -n '__sentinel_at \\'sentinel\\'' -a serve -d " in text
    assert "complete -c sentinel -n '__sentinel_at \\'sentinel widgets\\'' -a spin" in text
    assert "-l speed -x -a 'slow fast'" in text
    # And every command and group of the parser is a path the script knows, and no other
    known = text.split("set -g __sentinel_paths ", 1)[1].splitlines()[0]
    assert set(shlex.split(known)) == {"sentinel " + " ".join(path) for path in paths(parser)}


def test_an_unknown_shell_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "tcsh"], registrations=[]) == 2
    assert "invalid choice" in capsys.readouterr().err
