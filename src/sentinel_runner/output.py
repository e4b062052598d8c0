"""How the operator's commands say no: one line `error: CODE: message` on standard error, a next step (the
one given, else the client's for the code), and the documented exit code (sentinel_client.cli_output: 3 when
the store or the gate is unavailable, 1 for any other refusal); never a traceback."""

from sentinel_client.cli_output import EXIT_REFUSED
from sentinel_client.cli_output import fail as _fail

__all__ = ["EXIT_REFUSED", "fail"]


def fail(code: str, message: str, next_step: str | None = None, *, exit_code: int | None = None) -> int:
    return _fail(code, message, next_step or None, exit_code=exit_code)
