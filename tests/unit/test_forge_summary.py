"""The check's Markdown (sentinel_domain.forge_summary): caller text never becomes markup, the summary stays
within its limit with an explicit count of what was left out, the conclusion is success only for ready, and
failing test names come from the JUnit report itself."""

import re

from hypothesis import given
from hypothesis import strategies as st

from sentinel_domain.decision import Decision, Finding
from sentinel_domain.forge_summary import (
    ZWSP,
    Section,
    check_text,
    code,
    conclusion_for,
    escape,
    link,
    plan_changes,
    render,
)
from sentinel_domain.junit import FAILING_NAMES, parse_junit
from sentinel_domain.state import CandidateState

HOSTILE = [
    "[click](https://evil.example) <img src=x onerror=alert(1)> @octocat #1 www.evil.example",
    "name` <b>bold</b> `",
    "``` fenced\n# heading\n<details>",
    "a@b.example http://evil.example/x",
]
CODES = [
    "NO_OBLIGATIONS",
    "PLAN_MISSING",
    "REVIEW_MISSING",
    "EVIDENCE_NEGATIVE",
    "STATE_TAMPERED",
    "REVIEW_EXPIRED",
]


def decision(findings: list[Finding]) -> Decision:
    return Decision(
        decision="hold" if findings else "ready",
        findings=findings,
        plan_digest=None,
        revision="a" * 40,
        as_of="2026-11-29T12:00:00Z",
        facts_digest="f" * 64,
    )


def state_with(names: list[str], evidence_count: int = 1) -> CandidateState:
    candidate = {
        "type": "candidate.created",
        "candidate_id": "cand_1",
        "subject": "payments",
        "revision": "a" * 40,
        "environment": "staging",
        "attested": True,
        "obligations_added": [{"obligation_id": "O1", "policy_id": "unit-tests", "scope": "payments-api"}],
        "recorded_at": "2026-11-29T11:00:00Z",
        "_seq": 1,
        "_digest": "",
    }
    evidence = [
        {
            "type": "evidence.recorded",
            "evidence_id": f"ev_{i}",
            "check_id": "C1",
            "kind": "junit",
            "outcome": "fail",
            "trust": "verified",
            "counts": {"tests": 3, "failures": len(names), "errors": 0, "skipped": 0},
            "failing_tests": {"names": names, "count": len(names) + 5},
            "source": {"system": "ci", "run_id": "7", "url": "javascript:alert(1)"},
            "observed_at": "2026-11-29T11:30:00Z",
            "recorded_at": "2026-11-29T11:30:00Z",
            "binding": {"obligation_ids": ["O1"], "mismatches": []},
            "_seq": 2 + i,
            "_digest": "",
        }
        for i in range(evidence_count)
    ]
    return CandidateState.from_facts([candidate, *evidence])


def visible_markup(markdown: str) -> str:
    """The summary with code spans, escaped characters and zero-width-broken patterns taken out: what is
    left is what GitHub would parse as Markdown."""
    text = re.sub(r"(`+) .*? \1", "", markdown)
    return re.sub(r"\\.", "", text)


def test_hostile_test_names_and_urls_cannot_inject_links_html_or_mentions() -> None:
    # Given evidence whose failing test names and run URL came from a hostile report
    state = state_with(HOSTILE)
    text = check_text(
        decision([Finding(code="EVIDENCE_NEGATIVE", detail=HOSTILE[0])]), state, None, "staging"
    )
    left = visible_markup(text.summary)
    # Then outside code spans and escapes nothing can open a link, a tag or an image
    assert "](" not in left and "<img" not in left and "<details>" not in left and "<b>" not in left
    # And every name is one code span on one line, its backticks unable to close it early
    for name in HOSTILE:
        assert code(name) in text.summary
    assert "\n# heading" not in text.summary
    # And the detail's mention, reference and autolinks are broken by a zero-width space
    assert "@" + ZWSP + "octocat" in text.summary and "#" + ZWSP + "1" in text.summary
    assert "www" + ZWSP in text.summary
    # And a URL that is not plain https is never a link
    assert "](<" not in text.summary


def test_escape_and_link_by_example() -> None:
    assert escape("a_b *c* [d](e)") == r"a\_b \*c\* \[d\]\(e\)"
    assert (
        escape("mail a@b.example or see http://x")
        == "mail a\\@" + ZWSP + r"b\.example or see http\:" + ZWSP + r"\/\/x"
    )
    assert code("x`y") == "`` x`y ``"
    assert link("https://ci.example.com/runs/7?a=1", "run") == "[run](<https://ci.example.com/runs/7?a=1>)"
    assert link("https://ci.example.com/a>b", "run").startswith("run: ")
    assert link("http://ci.example.com", "run").startswith("run: ")


def test_a_summary_over_the_limit_is_cut_between_items_with_an_explicit_count() -> None:
    # Given more findings than fit in 2,000 characters
    findings = [
        Finding(code="EVIDENCE_MISSING", check_id=f"C{i}", detail="no evidence " * 5) for i in range(100)
    ]
    text = check_text(decision(findings), state_with(["t"], evidence_count=3), None, "staging", limit=2000)
    # Then the summary fits, says how many items were left out, and those shown plus those left out are all
    assert len(text.summary) <= 2000
    assert f"**{text.more} more not shown**" in text.summary
    assert (
        text.more > 0 and text.shown + text.more == 100 + 1 + 1 + 1
    )  # findings, obligation, approvals, plan
    assert text.summary.count("- **EVIDENCE_MISSING**") == text.shown


def test_render_never_exceeds_the_limit_whatever_the_items() -> None:
    sections = [Section("S", ["x" * 50] * 40)]
    summary, shown, more = render(sections, "head", limit=600)
    assert len(summary) <= 600 and shown + more == 40 and more > 0


@given(st.lists(st.sampled_from(CODES), max_size=4), st.booleans())
def test_success_only_for_ready(codes: list[str], expires_soon: bool) -> None:
    # Given any decision (ready is exactly the one with no finding)
    verdict = decision([Finding(code=c, detail="d") for c in codes])
    conclusion = conclusion_for(verdict, expires_soon)
    # Then the check is success exactly when it is ready and stays so until the next re-check
    assert (conclusion == "success") == (verdict.decision == "ready" and not expires_soon)
    assert conclusion in {"success", "failure", "action_required"}


def test_failing_test_names_come_from_the_report_first_n_with_a_count() -> None:
    cases = "".join(
        f'<testcase classname="pkg.Suite" name="test_{i}"><failure/></testcase>'
        for i in range(FAILING_NAMES + 5)
    )
    errored = '<testcase name="lonely"><error/></testcase><testcase classname="ok" name="passes"/>'
    summary = parse_junit(f'<testsuite name="s">{errored}{cases}</testsuite>')
    assert summary.failing[:2] == ("lonely", "pkg.Suite.test_0")
    assert len(summary.failing) == FAILING_NAMES and summary.failing_count == FAILING_NAMES + 6
    flaky = parse_junit('<testsuite><testcase classname="a" name="b"><flakyFailure/></testcase></testsuite>')
    assert flaky.failing == () and flaky.failing_count == 0
    long = parse_junit(f'<testsuite><testcase name="{"n" * 500}"><failure/></testcase></testsuite>')
    assert len(long.failing[0]) == 200 and long.failing[0].endswith("\u2026")


def plan(version: int, digest: str, tasks: dict[str, list[str]], actions: list[str], seq: int) -> dict:
    return {
        "type": "plan.stored",
        "plan_version": version,
        "plan_digest": digest,
        "plan": {
            "tasks": [{"task_id": t, "checks": [{"check_id": c} for c in cs]} for t, cs in tasks.items()],
            "actions": [{"action_id": a} for a in actions],
        },
        "author": {"id": "agent-1"},
        "recorded_at": "2026-11-29T11:10:00Z",
        "_seq": seq,
        "_digest": "",
    }


def test_what_changed_since_the_last_approved_plan_is_listed() -> None:
    # Given plan version 1 approved, then an amendment that adds a task, a check and an action and drops one
    base = state_with([])
    approved = plan(1, "d1", {"T1": ["C1"], "T9": ["C9"]}, [], 10)
    review = {
        "type": "review.recorded",
        "review_id": "rev_1",
        "reviewer": {"id": "rita-reviewer"},
        "decision": "approve",
        "plan_digest": "d1",
        "expires_at": "2026-11-30T12:00:00Z",
        "recorded_at": "2026-11-29T11:20:00Z",
        "_seq": 11,
        "_digest": "",
    }
    amended = plan(2, "d2", {"T1": ["C1"], "T2": ["C2"]}, ["A1"], 12)
    state = CandidateState.from_facts([base.candidate, approved, review, amended])
    lines = plan_changes(state)
    # Then the summary names each addition and removal against version 1
    assert lines[1].startswith("- changed since approved version 1")
    assert "  - tasks added: ` T2 `" in lines and "  - tasks removed: ` T9 `" in lines
    assert "  - checks added: ` C2 `" in lines and "  - checks removed: ` C9 `" in lines
    assert "  - actions added: ` A1 `" in lines
    # And the approval of version 1 is shown as one of an earlier plan
    stale = decision([Finding(code="REVIEW_STALE", detail="d")])
    approvals = check_text(stale, state, None, "staging").summary
    assert "rita\\-reviewer approved an earlier plan (valid until 2026-11-30T12:00:00Z)" in approvals


def test_a_plan_submitted_again_unchanged_is_not_shown_as_changed_since_its_approval() -> None:
    # Given a proposal (version 1), the same plan submitted as version 2, and the approval of that digest
    base = state_with([])
    proposed = plan(1, "d1", {"T1": ["C1"]}, [], 10)
    resubmitted = plan(2, "d1", {"T1": ["C1"]}, [], 11)
    review = {
        "type": "review.recorded",
        "review_id": "rev_1",
        "reviewer": {"id": "rita-reviewer"},
        "decision": "approve",
        "plan_digest": "d1",
        "expires_at": "2026-11-30T12:00:00Z",
        "recorded_at": "2026-11-29T11:20:00Z",
        "_seq": 12,
        "_digest": "",
    }
    state = CandidateState.from_facts([base.candidate, proposed, resubmitted, review])
    # When the summary says what changed since the last approved plan
    lines = plan_changes(state)
    # Then it says the current plan is the one approved, not that it changed since version 1
    assert lines == ["- plan version 2, digest ` d1 `", "- this plan version is the first one approved"]
