"""The reviewer's queue and the auditor's explanations as pure functions over the candidate views the gate
answers (sentinel_client.cli_review.queue_of, sentinel_client.cli_status.explain and waits_for)."""

from datetime import UTC, datetime
from typing import Any

from sentinel_client.cli_review import (
    SKIP_AUTHORED,
    SKIP_MINE,
    SKIP_NO_PLAN,
    SKIP_REVIEWED,
    _why_listed,
    queue_of,
)
from sentinel_client.cli_status import explain, render_explained, waits_for
from sentinel_client.persona_reads import changed_files, failing_tests

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
D1, D2 = "1" * 64, "2" * 64


def actor(principal_id: str, kind: str = "human", sponsor: str | None = None) -> dict[str, Any]:
    return {"id": principal_id, "kind": kind, "sponsor": sponsor}


def view(cid: str, *, digest: str | None = D2, created_by=None, authors=None, reviews=()) -> dict[str, Any]:
    authors = authors or [actor("agent-1", "agent", "hank")] * 2
    versions = [
        {"plan_version": n, "plan_digest": d, "author": a, "mode": "submitted", "recorded_at": "t"}
        for n, (d, a) in enumerate(zip([D1, D2], authors, strict=True), 1)
    ]
    return {
        "candidate_id": cid,
        "subject": "payments",
        "environment": "staging",
        "revision": "a" * 40,
        "created_by": created_by or actor("agent-1", "agent", "hank"),
        "plan_versions": versions if digest else [],
        "plan_digest": digest,
        "reviews": list(reviews),
    }


def review(who: str, decision: str, digest: str, expires: str = "2026-12-03T00:00:00Z") -> dict[str, Any]:
    return {"reviewer": actor(who), "decision": decision, "plan_digest": digest, "expires_at": expires}


def test_the_queue_keeps_what_i_may_approve_and_says_why_the_rest_is_skipped() -> None:
    # Given candidates in every situation a reviewer meets, as rita
    views = [
        view("c-new"),
        view("c-noplan", digest=None),
        view("c-mine", created_by=actor("rita")),
        view("c-sponsored", created_by=actor("bot", "agent", "rita")),
        view("c-authored", authors=[actor("agent-1", "agent", "hank"), actor("rita")]),
        view("c-approved", reviews=[review("rita", "approve", D2)]),
        view("c-rejected", reviews=[review("rita", "reject", D2, expires="2026-12-01T00:00:00Z")]),
        view("c-expired", reviews=[review("rita", "approve", D2, expires="2026-12-02T12:00:00Z")]),
        view("c-amended", reviews=[review("rita", "approve", D1)]),
        view("c-other-approved", reviews=[review("sam", "approve", D2)]),
    ]
    # When the queue is computed
    queue = queue_of(views, "rita", NOW)
    # Then only those awaiting rita's review are kept; the amended one says which version she approved
    awaiting = {row["candidate_id"]: row for row in queue["awaiting"]}
    assert sorted(awaiting) == ["c-amended", "c-expired", "c-new", "c-other-approved"]
    assert awaiting["c-amended"]["you_approved_version"] == 1 and awaiting["c-amended"]["plan_version"] == 2
    assert awaiting["c-new"]["you_approved_version"] is None
    assert awaiting["c-expired"]["you_approved_version"] == 2
    assert [_why_listed(awaiting[c]) for c in ("c-new", "c-expired", "c-amended")] == [
        "new",
        "your approval expired",
        "re-review (you approved v1)",
    ]
    # And every other candidate is counted under its reason
    assert queue["skipped"] == {SKIP_NO_PLAN: 1, SKIP_MINE: 2, SKIP_AUTHORED: 1, SKIP_REVIEWED: 2}


def test_an_approval_exactly_at_expiry_no_longer_stands() -> None:
    at_expiry = view("c", reviews=[review("rita", "approve", D2, expires="2026-12-02T12:00:00.000000Z")])
    assert [r["candidate_id"] for r in queue_of([at_expiry], "rita", NOW)["awaiting"]] == ["c"]


CANDIDATE = {
    "obligations": [
        {
            "obligation_id": "obl_1",
            "policy_id": "unit-tests",
            "scope": "payments-api",
            "reason": "changed file x",
        }
    ],
    "plan_digest": D2,
    "plan": {
        "tasks": [
            {
                "task_id": "T1",
                "title": "Unit tests",
                "checks": [
                    {
                        "check_id": "C1",
                        "policy_ref": "unit-tests",
                        "command": "pytest -q payments-api",
                        "expected_exit_code": 0,
                        "covers": ["obl_1"],
                    }
                ],
            }
        ]
    },
    "evidence": [
        {
            "evidence_id": "ev_1",
            "check_id": "C1",
            "outcome": "fail",
            "trust": "verified",
            "publisher": "ci-bot",
            "observed_at": "2026-12-02T11:00:00Z",
            "binding": {"mismatches": []},
        }
    ],
    "tasks": [
        {"task_id": "T1", "attempts": [{"recorded_status": "failed"}], "passes": False, "settled": False}
    ],
    "reviews": [review("rita", "approve", D1)],
}
DECISION = {
    "decision": "hold",
    "as_of": "2026-12-02T12:00:00Z",
    "as_of_source": "service",
    "plan_digest": D2,
    "facts_digest": "f" * 64,
    "findings": [
        {
            "code": "EVIDENCE_NEGATIVE",
            "obligation_id": "obl_1",
            "check_id": "C1",
            "task_id": "T1",
            "detail": "the newest evidence failed",
            "remediation_hint": "Run pytest -q locally",
        },
        {
            "code": "REVIEW_STALE",
            "detail": "the approval names an older plan digest",
            "remediation_hint": None,
        },
    ],
}


def test_explain_names_each_findings_rule_facts_and_remediation() -> None:
    # Given a hold on a failed check and a stale approval, and the candidate it was decided on
    # When it is explained
    explained = explain(DECISION, CANDIDATE)
    # Then each finding carries its rule, the facts it was about, and the remediation
    negative, stale = explained
    assert negative["rule"].startswith("rule 8:") and negative["remediation"] == "Run pytest -q locally"
    assert negative["facts"] == [
        "obligation obl_1: unit-tests on payments-api (changed file x)",
        "check C1 in task T1: unit-tests `pytest -q payments-api`, expects exit 0",
        "evidence ev_1: fail, verified, by ci-bot, observed 2026-12-02T11:00:00Z",
        "task T1: 1 attempt(s), last failed; passes False, settled False",
    ]
    assert stale["rule"].startswith("rule 13:") and stale["remediation"] == ""
    assert stale["facts"] == ["review by rita: approve of digest 111111111111, expires 2026-12-03T00:00:00Z"]


def test_the_explanation_in_words_numbers_findings_and_gives_each_its_next_step() -> None:
    text = render_explained(DECISION, explain(DECISION, CANDIDATE))
    lines = text.splitlines()
    assert lines[0].startswith("hold as of 2026-12-02T12:00:00Z (service clock)")
    assert lines[1] == (
        "1. EVIDENCE_NEGATIVE (obligation_id obl_1, check_id C1, task_id T1): the newest evidence failed"
    )
    assert lines[2].startswith("   rule: rule 8:")
    assert "   next: Run pytest -q locally" in lines
    assert "2. REVIEW_STALE: the approval names an older plan digest" in lines
    assert sum(1 for line in lines if line.startswith("   next:")) == 1


def test_an_unknown_code_still_has_a_rule_line_and_no_view_reads_no_facts() -> None:
    explained = explain({"findings": [{"code": "SOMETHING_NEW", "detail": "d"}]}, None)
    assert explained[0]["rule"] == "see DOMAIN.md's finding codes" and explained[0]["facts"] == []


def test_status_groups_what_each_candidate_waits_for() -> None:
    findings = [
        {"code": c}
        for c in (
            "TASK_NOT_REPORTED",
            "EVIDENCE_MISSING",
            "TASK_NOT_REPORTED",
            "REVIEW_MISSING",
            "PLAN_MISSING",
            "CHANGE_CONTEXT_UNVERIFIED",
        )
    ]
    assert waits_for(findings) == {
        "change": ["CHANGE_CONTEXT_UNVERIFIED"],
        "plan": ["PLAN_MISSING"],
        "review": ["REVIEW_MISSING"],
        "evidence": ["EVIDENCE_MISSING"],
        "tasks": ["TASK_NOT_REPORTED"],
    }
    assert waits_for([]) == {}


def test_facts_a_gate_does_not_keep_read_as_not_recorded_and_both_failing_test_shapes_read_alike() -> None:
    assert changed_files({}) is None
    assert changed_files({"changed_files": {"files": ["a.py"], "count": 3, "truncated": True}}) == {
        "files": ["a.py"],
        "count": 3,
        "truncated": True,
    }
    assert failing_tests({}) is None
    listed = failing_tests({"failing_tests": ["t1", "t2"], "failing_tests_count": 5})
    nested = failing_tests({"failing_tests": {"names": ["t1", "t2"], "count": 5}})
    assert listed == nested == {"names": ["t1", "t2"], "count": 5}
