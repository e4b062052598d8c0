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


def _finding_line(finding: dict[str, Any]) -> str:
    where = [
        f"{label} {finding[key]}"
        for key, label in (("obligation_id", "obligation"), ("check_id", "check"), ("task_id", "task"))
        if finding.get(key)
    ]
    line = f"- {_one_line(finding.get('code'))}" + (f" ({', '.join(where)})" if where else "")
    if finding.get("detail"):
        line += f": {_one_line(finding['detail'])}"
    if finding.get("remediation_hint"):
        line += f" Remediation: {_one_line(finding['remediation_hint'])}"
    return line


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
