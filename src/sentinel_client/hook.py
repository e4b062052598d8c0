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

import sys
from collections.abc import Sequence
from typing import Any

from .ci_gate import GATE_ERROR, gate
from .hook_events import MAX_EVENT_BYTES, run_hook
from .hook_messages import EXIT_PASS, NEXT_STEP_ERROR, _block, _one_line

USAGE = """usage: sentinel-hook                 read a Claude Code hook event on stdin (PreToolUse, Stop,
                                     SubagentStop, TaskCompleted); exit 2 with the reason on stderr denies
       sentinel-hook gate --revision SHA [--subject S] [--environment E]
                                     the same decision for CI: exit 0 ready, 1 hold, 2 error
Settings: SENTINEL_URL, SENTINEL_PROJECT, SENTINEL_SUBJECT, SENTINEL_ENVIRONMENT, SENTINEL_TOKEN_FILE,
SENTINEL_TIMEOUT_SECONDS, SENTINEL_RELEASE_PATTERNS (or ~/.config/sentinel/client.json). See docs/hook.md."""


def _write(stream: Any, text: str) -> None:
    if text:
        stream.buffer.write(text.encode("utf-8"))
        stream.flush()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["gate"]:
        try:
            code, out, err = gate(args[1:])
        except SystemExit as exit_:  # argparse has printed usage (exit 2) or help (exit 0)
            return exit_.code if isinstance(exit_.code, int) else GATE_ERROR
        except Exception as error:  # noqa: BLE001 - fail closed, and say why
            code, out, err = GATE_ERROR, "", f"ERROR  INTERNAL_ERROR: {type(error).__name__}: {error}\n"
        _write(sys.stdout, out)
        _write(sys.stderr, err)
        return code
    if args[:1] in (["-h"], ["--help"]):
        _write(sys.stdout, USAGE + "\n")
        return EXIT_PASS
    if args:
        outcome = _block(f"Sentinel hook: unknown arguments {' '.join(args)!r} (fail closed).\n{USAGE}")
    else:
        try:
            outcome = run_hook(sys.stdin.buffer.read(MAX_EVENT_BYTES + 1))
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
