"""`sentinel-hook`: the Claude Code command hook, and `sentinel-hook gate`, the same decision for CI.

The hook is early feedback for the agent; the gate, run as a required check on the protected branch, is the
enforcement point. Both fail closed: anything that is not a well-formed `ready` for the exact commit a
command acts on is a denial that names its reason.

Claude Code proceeds on any exit code but 2, on a hook that times out, and on JSON that fails its schema;
so every denial here is exit code 2 with the reason on stderr (the one signal documented to block whatever
the JSON and whatever the version), and the client gives up well before the hook's own timeout. A pass is
exit 0 with no output: an explicit `allow` would skip Claude Code's own permission prompt.

The command-line entry point is here; the hook events are answered in `hook_events`, their texts written in
`hook_messages`, the CI gate is `ci_gate`, and the service's decision is read in `verdicts`.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from .hook_events import MAX_EVENT_BYTES, Context, run_hook
from .hook_messages import EXIT_BLOCK, NEXT_STEP_ERROR, _block, _one_line
from .managed_settings import DEFAULT_SETTINGS_PATH

USAGE = """usage: sentinel-hook [--settings FILE]
                                     read a Claude Code hook event on stdin (PreToolUse, Stop,
                                     SubagentStop, TaskCompleted); exit 0 allows, exit 2 denies (reason on
                                     stderr). Settings come only from FILE (default
                                     /etc/sentinel/client.json),
                                     owned by root and writable by no one else.
       sentinel-hook gate --revision SHA [--subject S] [--environment E] [--json] [--wait D] [--receipt F]
                                     the same decision for CI, from SENTINEL_* variables: exit 0 ready,
                                     1 hold, 2 error (help and unknown options included). See docs/hook.md.
                                     --wait DURATION polls until ready, a hold only a person can resolve,
                                     or the deadline; --receipt FILE saves the ready decision's receipt.
       sentinel-hook evidence [--revision SHA] --policy P --scope S (--junit GLOB... |
                              --exit-code N [--artifact GLOB...]) [--source-url URL] [--check ID]
                                     publish a CI run as evidence for the plan's matching check: exit 0
                                     stored, 1 stored but not counting, 2 nothing stored. See docs/ci.md."""
# The whole run must end before Claude Code's hook timeout (60 s by default), which would let the command
# run: a stalled git, regular expression or server is cut here, and the answer is a denial.
DEADLINE_SECONDS = 55.0


def _write(stream: Any, text: str) -> None:
    if text:
        stream.buffer.write(text.encode("utf-8"))
        stream.flush()


def _deadline(seconds: float) -> None:
    if not hasattr(signal, "setitimer"):
        return

    def expire(_signum: int, _frame: object) -> None:
        sys.stderr.write(f"Sentinel hook ran out of time ({seconds:g} s) and denies (fail closed).\n")
        sys.stderr.flush()
        os._exit(EXIT_BLOCK)

    signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _hook_arguments(args: list[str]) -> str | None:
    """The settings path, or None when the arguments are not the hook's."""
    if not args:
        return DEFAULT_SETTINGS_PATH
    if len(args) == 2 and args[0] == "--settings":
        return args[1]
    if len(args) == 1 and args[0].startswith("--settings="):
        return args[0].partition("=")[2]
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["gate"], ["evidence"]):
        from .ci_evidence import evidence
        from .ci_gate import GATE_ERROR, gate

        command = gate if args[0] == "gate" else evidence
        try:
            code, out, err = command(args[1:])
        except SystemExit:  # argparse printed usage or help: never the code of "ready"
            return GATE_ERROR
        except Exception as error:  # noqa: BLE001 - fail closed, and say why
            code, out, err = GATE_ERROR, "", f"ERROR  INTERNAL_ERROR: {type(error).__name__}: {error}\n"
        _write(sys.stdout, out)
        _write(sys.stderr, err)
        return code
    settings_path = _hook_arguments(args)
    if settings_path is None:
        # Help included: for Claude Code any exit but 2 lets the command run.
        outcome = _block(
            f"Sentinel hook: arguments {' '.join(args)!r} are not the hook's (fail closed).\n{USAGE}"
        )
    else:
        _deadline(DEADLINE_SECONDS)
        try:
            outcome = run_hook(sys.stdin.buffer.read(MAX_EVENT_BYTES + 1), Context(settings_path))
        except Exception as error:  # noqa: BLE001 - fail closed, and say why
            outcome = _block(
                f"Sentinel hook failed (fail closed).\n- INTERNAL_ERROR: {type(error).__name__}: "
                f"{_one_line(error)}\n{NEXT_STEP_ERROR}"
            )
    _write(sys.stdout, outcome.stdout)
    _write(sys.stderr, outcome.stderr + "\n" if outcome.stderr else "")
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
