"""`sentinel-hook gate`: the hook's decision for CI, run as a required check on the protected branch."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import IO, NoReturn

from .hook_messages import _one_line
from .releases import FULL_COMMIT
from .verdicts import Problem, Service, Verdict, _settings

GATE_READY, GATE_HOLD, GATE_ERROR = 0, 1, 2


def _gate_report(verdict: Verdict) -> tuple[int, str, str]:
    candidate = f" (candidate {verdict.candidate_id})" if verdict.candidate_id else ""
    if verdict.state == "ready":
        return GATE_READY, f"READY  {verdict.target}{candidate}\n", ""
    lines = []
    for finding in verdict.findings:
        where = [
            f"{label} {finding[key]}"
            for key, label in (("obligation_id", "obligation"), ("check_id", "check"), ("task_id", "task"))
            if finding.get(key)
        ]
        lines.append(f"  {_one_line(finding.get('code'))}" + (f" ({', '.join(where)})" if where else ""))
        if finding.get("detail"):
            lines.append(f"      {_one_line(finding['detail'])}")
        if finding.get("remediation_hint"):
            lines.append(f"      remediation: {_one_line(finding['remediation_hint'])}")
    if verdict.state == "hold":
        return GATE_HOLD, "\n".join([f"HOLD  {verdict.target}{candidate}", *lines]) + "\n", ""
    text = "\n".join(
        [
            f"ERROR  {verdict.target}{candidate}: no decision could be established",
            *lines,
            "The gate fails closed: this check passes only on a ready decision.",
        ]
    )
    return GATE_ERROR, "", text + "\n"


def _json_report(verdict: Verdict) -> tuple[int, str, str]:
    code = {"ready": GATE_READY, "hold": GATE_HOLD}.get(verdict.state, GATE_ERROR)
    body = {
        "decision": verdict.state,
        "target": verdict.target,
        "candidate_id": verdict.candidate_id,
        "findings": verdict.findings,
        "exit_code": code,
    }
    return code, json.dumps(body, sort_keys=True) + "\n", ""


class _Parser(argparse.ArgumentParser):
    """Help and usage errors end with exit 2, never 0, the code CI reads as ready."""

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            self._print_message(message, sys.stderr)
        raise SystemExit(GATE_ERROR)

    def print_help(self, file: IO[str] | None = None) -> None:
        super().print_help(sys.stderr)


def gate(argv: Sequence[str]) -> tuple[int, str, str]:
    parser = _Parser(
        prog="sentinel-hook gate",
        description="Ask Sentinel whether a commit may advance: exit 0 ready, 1 hold, 2 error (help and "
        "unknown options included). Run it as a required check on the protected branch.",
        allow_abbrev=False,
    )
    parser.add_argument("--revision", required=True, help="the full commit id (40 or 64 hex digits)")
    parser.add_argument("--subject", help="overrides SENTINEL_SUBJECT")
    parser.add_argument("--environment", help="overrides SENTINEL_ENVIRONMENT")
    parser.add_argument("--json", action="store_true", help="print the decision as one JSON object on stdout")
    args = parser.parse_args(list(argv))
    report = _json_report if args.json else _gate_report
    target = f"the commit {args.revision}"
    try:
        if not FULL_COMMIT.fullmatch(args.revision):
            raise Problem(
                "INVALID_REVISION",
                "--revision must be a full commit id (40 or 64 hex digits), e.g. $(git rev-parse HEAD)",
            )
        settings = _settings()
    except Problem as problem:
        return report(Verdict.error(target, problem))
    settings.subject = args.subject or settings.subject
    settings.environment = args.environment or settings.environment
    # An enforcement point acts on a recorded decision: the service's release path (witness compared).
    return report(Service(settings, record=True).verdict(args.revision.lower()))
