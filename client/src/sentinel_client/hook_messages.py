"""What the hook tells the agent: the outcome of one hook run (exit code, stdout, stderr), and the denial
texts with their findings and remediation, clipped to what Claude Code shows whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .releases import Analysis
from .verdicts import Verdict

EXIT_PASS = 0
EXIT_BLOCK = 2  # the only exit code Claude Code treats as blocking

# Claude Code spills hook output over 10,000 characters to a file; a reason must arrive whole.
MAX_REASON_CHARS = 9000
MAX_FINDINGS_SHOWN = 20

NEXT_STEP_HOLD = (
    "Resolve the findings, then retry. The required CI check (sentinel-hook gate) enforces the same decision."
)
NEXT_STEP_ERROR = (
    "Fix the cause, then retry: a release command needs a ready decision, and the required CI "
    "check (sentinel-hook gate) enforces the same decision."
)
NEXT_STEP_HIDDEN = (
    "Run each release command directly, as a plain command that names its branch or commit, so "
    "the gate can check it."
)


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    stdout: str = ""
    stderr: str = ""


PASS = Outcome(EXIT_PASS)


def _one_line(value: object) -> str:
    text = " ".join(str(value).split())
    return "".join(character for character in text if character.isprintable())


_ASK_REVIEW = (
    "ask a human reviewer of the project (role reviewer; never the agent) to approve the current plan digest "
    "for this revision: POST /v1/projects/{project}/candidates/{id}/reviews"
)
_SETUP = "The user (not the agent) must act: "
# What to do about each finding and problem code. The policy's own remediation_hint comes first when the
# service sends one; these say who can act and how, for every code the hook can show.
REMEDIATION: dict[str, str] = {
    "NO_CANDIDATE": "create a candidate for this exact commit (POST /v1/projects/{project}/candidates with "
    "subject, revision, environment and change) and have the trusted CI publisher attest its change",
    "NO_OBLIGATIONS": "the change derived no obligations; check the change's files and the project's rules",
    "CHANGE_CONTEXT_UNVERIFIED": "have the trusted CI publisher attest the change context (POST .../change)",
    "PLAN_MISSING": "ask for a proposal (POST .../proposals) or put a plan that covers every obligation",
    "REVIEW_MISSING": _ASK_REVIEW,
    "REVIEW_REJECTED": "a reviewer rejected the plan: address the comment, amend the plan, then "
    + _ASK_REVIEW,
    "REVIEW_EXPIRED": "the approval expired: " + _ASK_REVIEW,
    "REVIEW_STALE": "the plan changed after the approval: " + _ASK_REVIEW,
    "EVIDENCE_MISSING": "run the check in CI for this revision; the trusted publisher posts its report",
    "EVIDENCE_NEGATIVE": "the check failed: fix the failing tests, push a new commit, let CI report again",
    "EVIDENCE_UNKNOWN": "the report shows no outcome for the check: run it again and post a complete report",
    "EVIDENCE_STALE": "the evidence is older than the policy allows: run the check again in CI",
    "EVIDENCE_UNVERIFIED": "the evidence came from the agent; only the trusted CI publisher's counts",
    "EVIDENCE_UNTRUSTED": "the publisher is not trusted by the policy: have the listed CI publisher post it",
    "EVIDENCE_TOO_FEW_TESTS": "the report ran fewer tests than the policy's min_tests: run the whole suite",
    "EVIDENCE_QUERY_INCOMPLETE": "the service could not read all evidence: retry, then tell the user",
    "EVIDENCE_WRONG_SUBJECT": "the evidence names another subject: post evidence for this subject",
    "EVIDENCE_WRONG_REVISION": "the evidence is for another commit: run the check on this exact revision",
    "EVIDENCE_WRONG_ENVIRONMENT": "the evidence is for another environment: run the check for this one",
    "EVIDENCE_WRONG_SCOPE": "the evidence does not cover the obligation's scope: run the check over it",
    "EVIDENCE_WRONG_KIND": "the evidence is not the kind the policy takes (its check_type): post a JUnit "
    "report for a junit policy, the exit code and artifacts for an exit_code one",
    "CHANGE_CONTEXT_INCOMPLETE": "the forge's file list may be truncated: have the trusted CI publisher "
    "attest the complete change (POST .../change-context from CI)",
    "APPROVAL_REVOKED": "the approving reviewer was revoked as compromised: ask another reviewer to review "
    "the current plan digest (amend the plan first if it may have been shaped by them)",
    "ATTESTATION_REVOKED": "the attesting publisher was revoked as compromised: have a trusted CI publisher "
    "attest the change context again",
    "REQUESTER_REVOKED": "the candidate or its plan came from a principal revoked as compromised: tell the "
    "user; the change must come back as a new commit, or the plan be stored again by a live requester",
    "TASK_NOT_REPORTED": "report each task of the plan (POST .../tasks/{task}/reports) with its evidence",
    "TASK_FAILED": "a task was reported failed: fix it and report it again with passing evidence",
    "TASK_BLOCKED": "a task is blocked: resolve the blocker with the user, then report it",
    "TASK_NOT_SETTLED": "a task's report is not settled yet: wait for its evidence, then report again",
    "STATE_UNAVAILABLE": "the service could not read its state: retry later; tell the user if it persists",
    "STATE_TAMPERED": "the service's audit chain failed to verify: stop and tell the user; do not retry",
    "COMMAND_HIDDEN": "run each release as a plain command that names its branch or commit",
    "REVISION_UNRESOLVED": "name the branch and the commit plainly (git push origin SOURCE:BRANCH), or bind "
    "the forge merge to its head commit",
    "SETTING_MISSING": _SETUP + "write the managed settings file (url, project, subject, environment, "
    "token_file), owned by root and writable by no one else",
    "CONFIG_UNTRUSTED": _SETUP + "make the managed settings file and its directories owned by root and "
    "writable by no one else",
    "CONFIG_INVALID": _SETUP + "fix the settings file named above",
    "CONFIG_UNREADABLE": _SETUP + "make the settings file named above readable",
    "INVALID_URL": _SETUP + "fix url in the managed settings file",
    "INSECURE_URL": _SETUP + "use an https:// url (plain http is for loopback addresses only)",
    "INVALID_TIMEOUT": _SETUP + "fix timeout_seconds in the managed settings file",
    "INVALID_RELEASE_PATTERNS": _SETUP + "fix the release patterns named above",
    "INVALID_PROTECTED_REFS": _SETUP + "fix the protected refs named above",
    "INVALID_TOKEN_FILE": _SETUP + "fix token_file in the managed settings file",
    "TOKEN_UNAVAILABLE": _SETUP + "make the token file named by token_file readable and non-empty",
    "TOKEN_REFUSED": _SETUP + "the token is unknown, expired or revoked: mint a new one and write it to the "
    "token file named by token_file",
    "UNAUTHORIZED": _SETUP + "put a valid token in the token file named by token_file",
    "UNREACHABLE": _SETUP + "the gate is unreachable: check url in the managed settings file and that the "
    "service runs",
    "TIMEOUT": _SETUP + "the gate did not answer in time: check the service, or raise timeout_seconds",
    "BAD_RESPONSE": "the service's answer was not a valid decision: tell the user; do not retry around it",
    "UNKNOWN_DECISION": "the service's answer was not a valid decision: tell the user",
    "AMBIGUOUS_CANDIDATE": "several candidates answer for this commit: tell the user",
    "EVENT_INVALID": "the hook event could not be read: tell the user",
}
MAX_FAILING_TESTS = 10


def _finding_line(finding: dict[str, Any]) -> str:
    where = [
        f"{label} {finding[key]}"
        for key, label in (("obligation_id", "obligation"), ("check_id", "check"), ("task_id", "task"))
        if finding.get(key)
    ]
    code = _one_line(finding.get("code"))
    line = f"- {code}" + (f" ({', '.join(where)})" if where else "")
    if finding.get("detail"):
        line += f": {_one_line(finding['detail'])}"
    failing = finding.get("failing_tests")
    if code == "EVIDENCE_NEGATIVE":
        if isinstance(failing, list) and failing:
            names = [_one_line(name) for name in failing[:MAX_FAILING_TESTS]]
            more = f" and {len(failing) - MAX_FAILING_TESTS} more" if len(failing) > MAX_FAILING_TESTS else ""
            line += f" Failing tests: {', '.join(names)}{more}."
        else:
            line += " Failing tests: the service did not name them; read the check's JUnit report in CI."
    if finding.get("remediation_hint"):
        line += f" Remediation: {_one_line(finding['remediation_hint'])}"
    else:
        line += f" Remediation: {remediation_for(code)}."
    return line


def remediation_for(code: str) -> str:
    """The hook's own remediation for a code; a code it does not know is the service refusing."""
    return REMEDIATION.get(code, "the service refused the request: tell the user, who can read its detail")


def _finding_lines(findings: list[dict[str, Any]]) -> list[str]:
    lines = [_finding_line(finding) for finding in findings[:MAX_FINDINGS_SHOWN]]
    if len(findings) > MAX_FINDINGS_SHOWN:
        lines.append(f"- … and {len(findings) - MAX_FINDINGS_SHOWN} more findings")
    return lines


def _state_phrase(verdict: Verdict) -> str:
    candidate = f" (candidate {verdict.candidate_id})" if verdict.candidate_id else ""
    if verdict.state == "hold":
        return f"{verdict.target} is on hold{candidate}"
    return f"no decision could be established for {verdict.target}{candidate} (fail closed)"


def _clip(text: str) -> str:
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 12] + " (truncated)"


def _block(text: str) -> Outcome:
    return Outcome(EXIT_BLOCK, stderr=_clip(text))


def _denial(subject: str, verdicts: Sequence[Verdict]) -> Outcome:
    lines: list[str] = []
    for verdict in verdicts:
        lines.append(f"Sentinel denied {subject}: {_state_phrase(verdict)}.")
        lines += _finding_lines(verdict.findings)
    errors = any(verdict.state == "error" for verdict in verdicts)
    lines.append(NEXT_STEP_ERROR if errors else NEXT_STEP_HOLD)
    return _block("\n".join(lines))


def _hidden_denial(analysis: Analysis) -> Outcome:
    lines = ["Sentinel denied this command: it hides what it runs, so the release gate cannot check it."]
    lines += [
        f"- COMMAND_HIDDEN ({_one_line(hidden.construct)}): {_one_line(hidden.command)}"
        for hidden in analysis.hidden[:MAX_FINDINGS_SHOWN]
    ]
    lines.append(NEXT_STEP_HIDDEN)
    return _block("\n".join(lines))
