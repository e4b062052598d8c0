"""Red team: what `review show` prints is partly written by the agent (task titles, check commands, changed
file names, failing test names, the candidate's subject). A terminal obeys escape sequences and carriage
returns in it, so text the agent wrote could move the cursor up and erase the lines saying which actions the
plan declares, then print "actions: none declared" in their place: an approval of what the reviewer never
saw. People's output shows every control character as a visible escape instead."""

import pytest

from sentinel_client.cli_output import emit, fail
from sentinel_client.cli_review import _review_words

ERASE_UP = "\x1b[3A\x1b[J"  # cursor up three lines, erase to the end of the screen
TITLE = "Run the tests" + ERASE_UP + "  actions: none declared"


def view() -> dict:
    return {
        "candidate_id": "cand_1",
        "subject": "pay\rments",
        "environment": "staging",
        "revision": "a" * 40,
        "base_revision": "b" * 40,
        "created_by": {"id": "agent"},
        "change_context": "attested",
        "plan_version": 1,
        "plan_digest": "c" * 64,
        "plan": {
            "tasks": [{"task_id": "T1", "title": TITLE, "checks": []}],
            "actions": [{"action_id": "A1", "type": "promote", "params": {"environment": "production"}}],
        },
        "policies": {},
        "obligations": [],
        "changed_files": {"count": 1, "truncated": False, "files": ["docs/x\x1b[2K\u202eslm.md"]},
        "evidence": [],
        "reviews": [],
        "since_your_approval": {"status": "never_approved"},
    }


def test_attack_agent_text_in_review_show_cannot_drive_the_reviewers_terminal(capsys) -> None:
    # When review show prints a view whose agent-written strings carry escapes, a carriage return and a
    # right-to-left override
    emit(False, view(), _review_words)
    out = capsys.readouterr().out
    # Then none reaches the terminal raw: each is shown as a visible escape, and the real action line stands
    assert "\x1b" not in out and "\r" not in out and "\u202e" not in out
    assert "\\x1b[3A" in out and "pay\\rments" in out
    assert "action A1: promote" in out


@pytest.mark.parametrize("message", ["bad \x1b[2Kthing", "bad \u009bthing"])
def test_attack_a_refusal_message_cannot_carry_an_escape_either(capsys, message) -> None:
    fail("VALIDATION_FAILED", message, "next \x1b]0;title\x07")
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\u009b" not in err


def test_attack_json_output_carries_c1_and_bidirectional_controls_escaped(capsys) -> None:
    import json

    emit(True, {"title": "a\u009b2Jb\u202ec\x7f"})
    out = capsys.readouterr().out
    assert "\u009b" not in out and "\u202e" not in out and "\x7f" not in out
    assert json.loads(out) == {"title": "a\u009b2Jb\u202ec\x7f"}


def test_attack_a_value_cannot_add_lines_that_look_like_the_commands_own(capsys) -> None:
    # Given a task title that carries a line break and a fake line of review show's
    data = view()
    data["plan"]["tasks"][0]["title"] = "Run the tests\n  actions: none declared"
    emit(False, data, _review_words)
    lines = capsys.readouterr().out.splitlines()
    # Then no line of the page is the fake one: the break shows as \\n inside the task's own line
    assert "  actions: none declared" not in lines
    assert any(line.startswith("  task T1: Run the tests\\n  actions: none declared") for line in lines)
