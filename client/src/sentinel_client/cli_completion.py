"""`sentinel completion bash|zsh|fish`: a shell completion script made from the live parser, so it offers
exactly the commands installed (the server's subcommands appear when the server distribution is there too).

Install it where the shell looks (docs/cli.md, "Completion"):

    sentinel completion bash > ~/.local/share/bash-completion/completions/sentinel
    sentinel completion zsh > "${fpath[1]}/_sentinel"          # uses zsh's bashcompinit
    sentinel completion fish > ~/.config/fish/completions/sentinel.fish

The script completes command and group names, each command's options, and the values of options (and
positionals) that have a fixed set of choices; any other value falls back to the shell's own completion of
file names. A word that a shell would have to quote is left out rather than quoted wrongly."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from typing import Any

from .cli_output import emit

SHELLS = ("bash", "zsh", "fish")
# What a completion script may hold unquoted: command names, option strings and choices as Sentinel makes
# them. Anything else (spaces, quotes, `$`) is skipped, never half-escaped into a script that runs in a shell.
_PLAIN_WORD = re.compile(r"^[A-Za-z0-9_.:/@+=,-]+$")


@dataclass
class Option:
    flags: list[str]
    help: str
    takes_value: bool
    choices: list[str]


@dataclass
class Node:
    """One command or group: its path from `sentinel`, the words after it, and what each option takes."""

    path: tuple[str, ...]
    help: str
    commands: list[tuple[str, str]] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)
    positional_choices: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return " ".join(("sentinel", *self.path))


def _plain(words: Any) -> list[str]:
    return [str(word) for word in words if _PLAIN_WORD.match(str(word))]


def _help(text: Any) -> str:
    if not text or text == argparse.SUPPRESS:
        return ""
    return " ".join(str(text).split())


def tree(parser: argparse.ArgumentParser, path: tuple[str, ...] = (), about: str = "") -> list[Node]:
    """Every command and group under `parser`, parents before children."""
    node = Node(path, about)
    children: list[Node] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: _help(choice.help) for choice in action._choices_actions}
            seen: set[int] = set()
            for name, child in action.choices.items():
                if not _PLAIN_WORD.match(name):
                    continue
                node.commands.append((name, helps.get(name, "")))
                if id(child) not in seen:
                    seen.add(id(child))
                    children += tree(child, (*path, name), helps.get(name, ""))
        elif action.option_strings:
            if action.help == argparse.SUPPRESS:
                continue
            node.options.append(
                Option(
                    flags=_plain(action.option_strings),
                    help=_help(action.help),
                    takes_value=action.nargs != 0,
                    choices=_plain(action.choices or ()),
                )
            )
        elif action.choices:
            node.positional_choices += _plain(action.choices)
    return [node, *children]


# ---- bash (and zsh, through bashcompinit) -------------------------------------------------------------


def bash(nodes: list[Node]) -> str:
    groups = [n.key for n in nodes if n.path]
    values: list[str] = []
    for node in nodes:
        for option in node.options:
            if not option.takes_value:
                continue
            patterns = "|".join(f'"{node.key}|{flag}"' for flag in option.flags)
            if not patterns:
                continue
            if option.choices:
                reply = f'COMPREPLY=($(compgen -W "{" ".join(option.choices)}" -- "$cur"))'
            else:
                reply = "COMPREPLY=()"  # the shell's own completion (file names), by `complete -o default`
            values.append(f"        {patterns}) {reply}; return ;;")
    words = []
    for node in nodes:
        offered = [name for name, _ in node.commands] + node.positional_choices
        offered += [flag for option in node.options for flag in option.flags]
        words.append(f'        "{node.key}") words="{" ".join(offered)}" ;;')
    known = "|".join(f'"{key}"' for key in groups) or '""'
    return "\n".join(
        [
            "# sentinel completion for bash: made by `sentinel completion bash` from the installed commands.",
            "_sentinel_complete() {",
            '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
            '    local path="sentinel" words="" i',
            "    for ((i = 1; i < COMP_CWORD; i++)); do",
            '        case "$path ${COMP_WORDS[i]}" in',
            f'            {known}) path="$path ${{COMP_WORDS[i]}}" ;;',
            "        esac",
            "    done",
            '    case "$path|$prev" in',
            *values,
            "    esac",
            '    case "$path" in',
            *words,
            "    esac",
            '    COMPREPLY=($(compgen -W "$words" -- "$cur"))',
            "}",
            "complete -o default -F _sentinel_complete sentinel",
            "",
        ]
    )


def zsh(nodes: list[Node]) -> str:
    return "\n".join(
        [
            "#compdef sentinel",
            "# sentinel completion for zsh: made by `sentinel completion zsh`; zsh's bashcompinit runs the",
            "# bash completion below.",
            "autoload -U +X bashcompinit && bashcompinit",
            bash(nodes),
        ]
    )


# ---- fish ------------------------------------------------------------------------------------------------


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(nodes: list[Node]) -> str:
    groups = " ".join(_fish_quote(n.key) for n in nodes if n.path)
    lines = [
        "# sentinel completion for fish: made by `sentinel completion fish` from the installed commands.",
        f"set -g __sentinel_paths {groups}",
        "function __sentinel_path",
        "    set -l path sentinel",
        "    for word in (commandline -opc)[2..-1]",
        '        if contains -- "$path $word" $__sentinel_paths',
        '            set path "$path $word"',
        "        end",
        "    end",
        "    echo $path",
        "end",
        "function __sentinel_at",
        '    test (__sentinel_path) = "$argv[1]"',
        "end",
        "complete -c sentinel -f",
    ]
    for node in nodes:
        at = _fish_quote(f"__sentinel_at {_fish_quote(node.key)}")
        for name, about in node.commands:
            lines.append(f"complete -c sentinel -n {at} -a {name} -d {_fish_quote(about)}")
        if node.positional_choices:
            lines.append(f"complete -c sentinel -n {at} -a {_fish_quote(' '.join(node.positional_choices))}")
        for option in node.options:
            spec = []
            for flag in option.flags:
                if flag.startswith("--"):
                    spec.append(f"-l {flag[2:]}")
                elif len(flag) == 2:
                    spec.append(f"-s {flag[1]}")
                else:
                    spec.append(f"-o {flag[1:]}")
            if not spec:
                continue
            if option.takes_value:
                spec.append("-x -a " + _fish_quote(" ".join(option.choices)) if option.choices else "-r -F")
            lines.append(f"complete -c sentinel -n {at} {' '.join(spec)} -d {_fish_quote(option.help)}")
    return "\n".join(lines) + "\n"


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    nodes = tree(parser)
    return {"bash": bash, "zsh": zsh, "fish": fish}[shell](nodes)


def register(commands: Any) -> None:
    root = commands.parser  # complete when the command runs: every registration has added its commands

    def run(args: argparse.Namespace) -> int:
        text = script(args.shell, root)
        emit(args.json, {"shell": args.shell, "script": text}, text)
        return 0

    completion = commands.command(
        "completion",
        help="print a shell completion script for the installed commands (bash, zsh or fish)",
        epilog="e.g. sentinel completion bash > ~/.local/share/bash-completion/completions/sentinel",
    )
    completion.add_argument("shell", choices=SHELLS)
    completion.add_argument("--json", action="store_true", help="print {shell, script} as one JSON document")
    completion.set_defaults(run=run)
