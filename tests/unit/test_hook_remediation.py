"""Every finding code the hook can show comes with a remediation an agent (or, for setup faults, the user)
can act on; EVIDENCE_NEGATIVE names up to ten failing tests."""

from __future__ import annotations

import pytest

from sentinel_client.hook_messages import REMEDIATION, _finding_line
from support.finding_codes import decision_finding_codes

# DOMAIN.md's decision findings, and the hook's own codes for what it cannot establish.
DECISION_FINDINGS = """
NO_OBLIGATIONS CHANGE_CONTEXT_UNVERIFIED PLAN_MISSING REVIEW_MISSING REVIEW_REJECTED REVIEW_EXPIRED
REVIEW_STALE EVIDENCE_MISSING EVIDENCE_NEGATIVE EVIDENCE_UNKNOWN EVIDENCE_STALE EVIDENCE_UNVERIFIED
EVIDENCE_UNTRUSTED EVIDENCE_TOO_FEW_TESTS EVIDENCE_QUERY_INCOMPLETE EVIDENCE_WRONG_SUBJECT
EVIDENCE_WRONG_REVISION EVIDENCE_WRONG_ENVIRONMENT EVIDENCE_WRONG_SCOPE EVIDENCE_WRONG_KIND TASK_NOT_REPORTED
TASK_FAILED TASK_BLOCKED TASK_NOT_SETTLED STATE_UNAVAILABLE STATE_TAMPERED CHANGE_CONTEXT_INCOMPLETE
APPROVAL_REVOKED ATTESTATION_REVOKED REQUESTER_REVOKED""".split()
HOOK_CODES = """
NO_CANDIDATE COMMAND_HIDDEN REVISION_UNRESOLVED SETTING_MISSING CONFIG_UNTRUSTED CONFIG_INVALID
CONFIG_UNREADABLE INVALID_URL INSECURE_URL INVALID_TIMEOUT INVALID_RELEASE_PATTERNS
INVALID_PROTECTED_REFS INVALID_TOKEN_FILE TOKEN_UNAVAILABLE TOKEN_REFUSED UNAUTHORIZED UNREACHABLE
TIMEOUT BAD_RESPONSE UNKNOWN_DECISION AMBIGUOUS_CANDIDATE EVENT_INVALID""".split()
SETUP_FAULTS = [
    "SETTING_MISSING",
    "TOKEN_REFUSED",
    "UNREACHABLE",
    "CONFIG_UNTRUSTED",
    "TIMEOUT",
    "UNAUTHORIZED",
]


@pytest.mark.parametrize("code", DECISION_FINDINGS + HOOK_CODES)
def test_every_code_has_a_remediation(code: str) -> None:
    # Given a finding without the policy's own hint, When the hook writes its line
    line = _finding_line({"code": code, "detail": "d"})
    # Then it carries the hook's remediation for that code
    assert code in REMEDIATION
    assert line.startswith(f"- {code}: d") and line.endswith(f" Remediation: {REMEDIATION[code]}.")


def test_the_list_above_is_every_code_a_decision_can_carry() -> None:
    # Given every finding code the domain's decision can emit, read from its source (support.finding_codes)
    emitted = decision_finding_codes()
    # Then the list the remediation test walks holds each of them: a new code cannot go without one
    assert emitted - set(DECISION_FINDINGS) == set()
    assert {"EVIDENCE_WRONG_KIND", "CHANGE_CONTEXT_INCOMPLETE", "REVIEW_MISSING"} <= emitted


@pytest.mark.parametrize("code", SETUP_FAULTS)
def test_a_setup_fault_says_the_user_must_act(code: str) -> None:
    assert REMEDIATION[code].startswith("The user (not the agent) must act")


def test_the_policys_hint_comes_first() -> None:
    line = _finding_line({"code": "EVIDENCE_MISSING", "detail": "d", "remediation_hint": "Run pytest -q"})
    assert line == "- EVIDENCE_MISSING: d Remediation: Run pytest -q"


def test_evidence_negative_names_up_to_ten_failing_tests() -> None:
    names = [f"tests/test_x.py::test_{n}" for n in range(12)]
    line = _finding_line(
        {"code": "EVIDENCE_NEGATIVE", "check_id": "C1", "detail": "2 failed", "failing_tests": names}
    )
    assert "Failing tests: " + ", ".join(names[:10]) + " and 2 more." in line
    assert "test_10" not in line and line.startswith("- EVIDENCE_NEGATIVE (check C1): 2 failed")
    # And without names from the service, the agent is told where to read them
    assert "read the check's JUnit report" in _finding_line({"code": "EVIDENCE_NEGATIVE"})


def test_an_unknown_code_is_the_service_refusing() -> None:
    assert "the service refused the request" in _finding_line({"code": "HTTP_418"})
