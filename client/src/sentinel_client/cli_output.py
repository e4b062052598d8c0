"""How every `sentinel` command speaks: one result on standard output (JSON with `--json`, words otherwise),
refusals as one line `error: CODE: message` plus a `next:` line on standard error, progress on standard error
for anything that may take longer than a second, confirmation before anything that approves or destroys.

Exit codes (docs/cli.md lists them; every command keeps to them):
  0  done (and, for commands that judge, `ready`)
  1  refused: the service or the command said no (bad input, a role missing, a conflict)
  2  usage: the command line itself is wrong (argparse's own code)
  3  unavailable: no answer (the gate unreachable, a timeout, the store down, no credentials)
  4  hold: a judging command (`decision`, `status --exit-code`) read a decision that is not `ready`
  130 interrupted (Ctrl-C)
"""

from __future__ import annotations

import json
import sys
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_HOLD, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130

# Codes that mean "no answer" rather than "the answer is no": the caller may try again unchanged.
UNAVAILABLE_CODES = frozenset(
    {
        "UNREACHABLE",
        "TIMEOUT",
        "BAD_RESPONSE",
        "STATE_UNAVAILABLE",
        "TOKEN_UNAVAILABLE",
        "SETTING_MISSING",
        "CONFIG_UNREADABLE",
        "CREDENTIALS_UNAVAILABLE",
    }
)

# A next step for the codes the command line itself raises; the service's own codes carry theirs in the
# problem document (`remediation`) or in DOMAIN.md's table.
NEXT_STEPS = {
    "UNREACHABLE": "is the gate running at that URL? `sentinel context show` says which URL is used",
    "TIMEOUT": "the gate did not answer in time: try again, or raise --timeout",
    "BAD_RESPONSE": "the URL does not answer like a Sentinel gate: check it with `sentinel context show`",
    "STATE_UNAVAILABLE": "the store could not be used: fix what the message names (the data directory, the "
    "endpoint, the key files), then run again",
    "CREDENTIALS_UNAVAILABLE": "sign in to the stage's AWS account (AWS_PROFILE, `aws sso login`), then "
    "run again",
    "PORT_IN_USE": "choose another --port (0 picks a free one), or stop what listens there",
    "HOST_NOT_LOOPBACK": "serve on 127.0.0.1 (the default); the local gate is for this machine only",
    "VALIDATION_FAILED": "fix the value the message names (`sentinel COMMAND --help` lists the options)",
    "TOKEN_UNAVAILABLE": "run `sentinel login` with your token, or set SENTINEL_TOKEN_FILE or SENTINEL_TOKEN",
    "SETTING_MISSING": "run `sentinel login --url URL --project P`, or pass the option on the command line",
    "CONFIG_INVALID": "fix the file it names (or remove it), then run again",
    "CONFIG_UNREADABLE": "fix the file's permissions, then run again",
    "CONTEXT_UNKNOWN": "`sentinel context list` shows the contexts there are",
    "INVALID_URL": "give the gate's base URL, e.g. https://gate.example.com",
    "INSECURE_URL": "use https://, or a loopback address for the local gate",
    "UNAUTHORIZED": "the gate refused your token (expired or revoked?): ask an operator for a new one",
    "FORBIDDEN": "the gate refused your token (expired or revoked?): ask an operator for a new one",
    "NOT_FOUND": "check the project and id (`sentinel whoami` lists your projects and roles)",
    "FORBIDDEN_ROLE": "`sentinel whoami` shows your roles; ask an operator for the one this needs",
    "BAD_OPTION": "the command's --help lists the options it takes and how they go together",
    "CONFIRMATION_REQUIRED": "run it on a terminal to confirm, or add --yes",
    "INTERNAL_ERROR": "run again with SENTINEL_DEBUG=1 to see where it failed, and report it",
}


# Format characters that reorder what a terminal shows (bidirectional overrides, isolates and marks).
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _raw_control(char: str) -> bool:
    return char not in "\n\t" and (unicodedata.category(char) == "Cc" or char in _BIDI)


def _one_line_values(data: Any) -> Any:
    if isinstance(data, str):
        return data.replace("\r", "\\r").replace("\n", "\\n")
    if isinstance(data, dict):
        return {key: _one_line_values(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_one_line_values(value) for value in data]
    if isinstance(data, tuple):
        return tuple(_one_line_values(value) for value in data)
    return data


def shown(text: str) -> str:
    """Text for a person's terminal: every control character (but line feeds and tabs) and every
    bidirectional control as a visible escape. Much of what the commands print was written by the agent (task
    titles, file and test names, a candidate's subject); raw, an escape sequence or a carriage return in it
    would make the terminal move the cursor and erase or rewrite lines the reviewer is meant to read."""

    def one(char: str) -> str:
        if not _raw_control(char):
            return char
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return "".join(one(c) for c in text)


def exit_code_for(code: str) -> int:
    return EXIT_UNAVAILABLE if code in UNAVAILABLE_CODES else EXIT_REFUSED


def fail(code: str, message: str, next_step: str | None = None, *, exit_code: int | None = None) -> int:
    """Say no in one line (plus the next step) on standard error; return the exit code."""
    step = NEXT_STEPS.get(code, "") if next_step is None else next_step
    message = " ".join(str(message).split()) or code
    print(shown(f"error: {code}: {message}" + (f"\nnext: {step}" if step else "")), file=sys.stderr)
    return exit_code_for(code) if exit_code is None else exit_code


class CommandRefused(Exception):
    """A command's refusal: `main` prints it as `error: CODE: message` and exits with its exit code."""

    def __init__(self, code: str, message: str, next_step: str | None = None, exit_code: int | None = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.next_step = next_step
        self.exit_code = exit_code


def emit(as_json: bool, data: Any, human: Callable[[Any], str] | str | None = None) -> None:
    """The result: canonical-ish JSON (sorted keys, one document) for machines, words for people."""
    if as_json or human is None:
        text = json.dumps(data, indent=None if as_json else 2, sort_keys=True, ensure_ascii=False)
        # json escapes C0 controls; C1 controls, DEL and bidirectional controls it leaves raw, and a JSON
        # string may carry them escaped just as well (the document is unchanged for any parser).
        print("".join(f"\\u{ord(c):04x}" if _raw_control(c) else c for c in text))
        return
    # The words are built from the data with every line break inside a value shown as `\n`: the line breaks
    # on the page are the command's own, so a value (a task title, a file name) cannot add lines that look
    # like the command's (a fake "actions: none declared").
    text = human if isinstance(human, str) else human(_one_line_values(data))
    if text:
        print(shown(text.rstrip("\n")))


def table(rows: list[list[str]], header: list[str]) -> str:
    """Left-aligned columns, for people."""
    if not rows:
        return ""
    cells = [header, *rows]
    widths = [max(len(str(row[i])) for row in cells) for i in range(len(header))]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)) for row in cells
    ]
    return "\n".join(line.rstrip() for line in lines)


@contextmanager
def progress(message: str, *, stream: TextIO | None = None, after: float = 1.0) -> Iterator[None]:
    """Say `message …` on standard error if the work takes longer than `after` seconds, then how long it took.
    Nothing is printed for quick work, so scripted output stays clean."""
    out = stream or sys.stderr
    started = time.monotonic()
    shown = threading.Event()
    done = threading.Event()

    def announce() -> None:
        if not done.wait(after):
            shown.set()
            print(f"{message} …", file=out, flush=True)

    timer = threading.Thread(target=announce, daemon=True)
    timer.start()
    try:
        yield
    finally:
        done.set()
        timer.join()
        if shown.is_set():
            print(f"{message}: {time.monotonic() - started:.1f} s", file=out, flush=True)


def confirm(question: str, *, yes: bool, stdin: TextIO | None = None, stderr: TextIO | None = None) -> None:
    """Go on only when `--yes` was given or a person at a terminal answers y; refuse otherwise."""
    if yes:
        return
    source = stdin or sys.stdin
    err = stderr or sys.stderr
    if not (hasattr(source, "isatty") and source.isatty()):
        raise CommandRefused(
            "CONFIRMATION_REQUIRED", f"{question} needs confirmation and no terminal is attached"
        )
    print(shown(f"{question} [y/N] "), end="", file=err, flush=True)
    answer = source.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise CommandRefused("NOT_CONFIRMED", "nothing was done", next_step="")
