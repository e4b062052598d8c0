"""`sentinel`: one command line for every persona.

The client distribution (this package, standard library only) gives every persona command; they speak HTTP
with the caller's token. The server distribution adds its subcommands (`serve`, `projects`, `principals`,
`audit`, `keys`, `receipt`, `eval`, `apply`, `export`) through the `sentinel.commands` entry-point group:
each entry point is a callable `register(commands)` that adds parsers through `Commands`, so a group such as
`audit` can hold client and server subcommands side by side, and neither distribution's script overwrites the
other's. Every failure ends as `error: CODE: message` and a next step (sentinel_client.cli_output), never a
traceback (`SENTINEL_DEBUG=1` shows one)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from .cli_output import EXIT_INTERRUPTED, CommandRefused, fail
from .settings import SentinelClientError

ENTRY_POINT_GROUP = "sentinel.commands"
SERVER_DISTRIBUTION = "sentinel-readiness"


class Commands:
    """The `sentinel` parser as registrations see it: top-level commands, and groups that more than one
    registration may add subcommands to."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser
        self._sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        self._groups: dict[str, Any] = {}
        self._names: set[str] = set()
        # Each says what an exception of its registration's means, as (code, message, next step), or None.
        self.translators: list[Callable[[BaseException], tuple[str, str, str | None] | None]] = []
        parser.set_defaults(translators=self.translators)

    def command(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if name in self._names:
            raise ValueError(f"`sentinel {name}` is registered twice")
        self._names.add(name)
        return self._sub.add_parser(name, description=kwargs.get("help"), **kwargs)

    def group(self, name: str, **kwargs: Any) -> Any:
        """The subcommand group `name` (created on first use): `.add_parser(...)` adds to it."""
        if name not in self._groups:
            parser = self.command(name, **kwargs)
            self._groups[name] = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        return self._groups[name]


def build_parser(
    registrations: Iterable[Callable[[Commands], None]] | None = None,
) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser with the client's commands and every registration found (the server's, when installed).
    Returns the parser and the registrations that could not load, one line each."""
    parser = argparse.ArgumentParser(
        prog="sentinel",
        description="Sentinel: may this change advance? Commands for requesters, publishers, reviewers, "
        "auditors and operators (docs/cli.md).",
    )
    commands = Commands(parser)
    broken: list[str] = []
    for module in _client_commands():
        module.register(commands)
    if registrations is not None:
        for register in registrations:
            register(commands)
        return parser, broken
    for register in _entry_points(broken):
        try:
            register(commands)
        except Exception as error:  # an installed server that cannot register leaves the client's commands
            label = getattr(register, "label", None) or getattr(register, "__module__", register)
            broken.append(f"{label}: {type(error).__name__}: {error}")
    return parser, broken


def _client_commands() -> list[Any]:
    """The client's own command modules, each with `register(commands)`; imported only when `sentinel` runs
    (the hook imports this package on every tool call and needs none of them)."""
    from . import (
        cli_candidate,
        cli_completion,
        cli_context,
        cli_evidence,
        cli_plan,
        cli_report,
        cli_review,
        cli_status,
    )

    return [
        cli_context,
        cli_candidate,
        cli_plan,
        cli_evidence,
        cli_report,
        cli_review,
        cli_status,
        cli_completion,
    ]


class _Registration:
    """An entry point's `register`, with the distribution and object it came from (named when it fails)."""

    def __init__(self, label: str, register: Callable[[Commands], None]) -> None:
        self.label, self.register = label, register

    def __call__(self, commands: Commands) -> None:
        self.register(commands)


def _distribution(entry: Any) -> str:
    dist = getattr(entry, "dist", None)
    return str(getattr(dist, "name", "") or "").lower().replace("_", "-")


def _entry_points(broken: list[str]) -> list[Callable[[Commands], None]]:
    """The registrations installed: the server distribution's first, so that a name another package also
    registers (a clash, or an impostor of `audit verify` named to sort first) is refused for that package
    (its registration fails and is named), never for the server's own command."""
    import importlib.metadata

    listed = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    found = []
    for entry in sorted(listed, key=lambda e: (_distribution(e) != SERVER_DISTRIBUTION, e.name)):
        try:
            found.append(_Registration(f"{_distribution(entry) or '?'} {entry.value}", entry.load()))
        except Exception as error:  # a broken server install must not take the client's commands with it
            broken.append(f"{entry.value}: {type(error).__name__}: {error}")
    return found


def main(
    argv: list[str] | None = None, registrations: Iterable[Callable[[Commands], None]] | None = None
) -> int:
    try:
        parser, broken = build_parser(registrations)
        args = parser.parse_args(argv)
    except SystemExit as leaving:  # --help, --version and usage errors: argparse has spoken
        return int(leaving.code or 0) if not isinstance(leaving.code, str) else 2
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    for line in broken:
        print(f"warning: server commands unavailable ({line})", file=sys.stderr)
    return run(args)


def run(args: argparse.Namespace) -> int:
    try:
        return int(args.run(args))
    except CommandRefused as refused:
        return fail(refused.code, refused.message, refused.next_step, exit_code=refused.exit_code)
    except SentinelClientError as error:
        return fail(error.code, error.message)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`): nothing more to say, and nothing to say it to.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as error:
        if os.environ.get("SENTINEL_DEBUG"):
            raise
        for translate in getattr(args, "translators", ()):
            said = translate(error)
            if said is not None:
                return fail(*said)
        return fail("INTERNAL_ERROR", f"{type(error).__name__}: {error}")


if __name__ == "__main__":
    sys.exit(main())
