"""How the operator's commands say no: one line `error: CODE: message` on standard error, a next step when
there is one, and a non-zero exit code; never a traceback."""

import sys

EXIT_REFUSED = 1


def fail(code: str, message: str, next_step: str = "") -> int:
    print(f"error: {code}: {message}" + (f"\nnext: {next_step}" if next_step else ""), file=sys.stderr)
    return EXIT_REFUSED
