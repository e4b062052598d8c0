"""How every `sentinel` command speaks (sentinel_client.cli_output): confirmation is never assumed without a
terminal, progress says nothing for quick work, and a refusal is one line and a next step with the documented
exit code."""

import io
import time

import pytest

from sentinel_client.cli_output import (
    EXIT_REFUSED,
    EXIT_UNAVAILABLE,
    NEXT_STEPS,
    UNAVAILABLE_CODES,
    CommandRefused,
    confirm,
    fail,
    progress,
)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_confirm_without_a_terminal_refuses_with_confirmation_required() -> None:
    # Given standard input that is not a terminal (a pipe, CI), and no --yes
    asked = io.StringIO()
    # When a command asks to confirm
    with pytest.raises(CommandRefused) as refused:
        confirm("approve candidate c-1", yes=False, stdin=io.StringIO("y\n"), stderr=asked)
    # Then it refuses, even though a "y" was waiting on the pipe, and asked nobody
    assert refused.value.code == "CONFIRMATION_REQUIRED" and "approve candidate c-1" in refused.value.message
    assert asked.getvalue() == ""
    assert "--yes" in NEXT_STEPS["CONFIRMATION_REQUIRED"]


def test_confirm_goes_on_with_yes_or_a_person_who_says_y() -> None:
    confirm("approve", yes=True, stdin=io.StringIO(""))
    asked = io.StringIO()
    confirm("approve", yes=False, stdin=Terminal("y\n"), stderr=asked)
    assert asked.getvalue() == "approve [y/N] "


@pytest.mark.parametrize("answer", ["\n", "n\n", "yes please\n", ""])
def test_anything_but_yes_on_a_terminal_does_nothing(answer: str) -> None:
    with pytest.raises(CommandRefused) as refused:
        confirm("approve", yes=False, stdin=Terminal(answer), stderr=io.StringIO())
    assert refused.value.code == "NOT_CONFIRMED"


def test_progress_prints_nothing_for_quick_work() -> None:
    said = io.StringIO()
    with progress("reading the plan", stream=said, after=0.5):
        pass
    assert said.getvalue() == ""


def test_progress_says_what_it_waits_for_and_how_long_it_took() -> None:
    said = io.StringIO()
    with progress("waiting for the decision", stream=said, after=0.05):
        time.sleep(0.3)
    lines = said.getvalue().splitlines()
    assert lines[0] == "waiting for the decision …"
    assert lines[1].startswith("waiting for the decision: ") and lines[1].endswith(" s")


def test_a_refusal_is_one_line_and_a_next_step(capsys: pytest.CaptureFixture[str]) -> None:
    # A code with a known next step, and a message spread over lines, say it in one line and the step
    assert fail("UNREACHABLE", "cannot reach\n  127.0.0.1:9") == EXIT_UNAVAILABLE
    assert (
        capsys.readouterr().err
        == f"error: UNREACHABLE: cannot reach 127.0.0.1:9\nnext: {NEXT_STEPS['UNREACHABLE']}\n"
    )
    # A refusal (not an outage) exits 1; an explicit empty next step prints none
    assert fail("VERSION_CONFLICT", "stale", "") == EXIT_REFUSED
    assert capsys.readouterr().err == "error: VERSION_CONFLICT: stale\n"


def test_every_unavailable_code_has_a_next_step() -> None:
    assert UNAVAILABLE_CODES <= set(NEXT_STEPS)
