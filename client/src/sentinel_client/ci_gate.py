"""`sentinel-hook gate`: the hook's decision for CI, run as a required check on the protected branch.

`--wait DURATION` reads the decision until it is worth recording (ci_wait); `--receipt FILE` keeps the
signed receipt a recorded `ready` carries, and without one a `ready` is not a pass (docs/ci.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

from .ci_wait import parse_duration, wait
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


def save_receipt(path: str, receipt: dict[str, Any]) -> None:
    """Write the receipt to `path`, readable by its owner only, all at once: a reader never sees half a file,
    and a file that was there is replaced only by a complete one."""
    target = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=".receipt-", dir=target.parent or Path("."))
    try:
        with os.fdopen(handle, "wb") as out:  # mkstemp creates the file 0600
            out.write(json.dumps(receipt, sort_keys=True, indent=2).encode("utf-8") + b"\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _is_envelope(receipt: object) -> bool:
    """The shape of a DSSE envelope; whether it verifies is `sentinel receipt verify`'s business."""
    return (
        isinstance(receipt, dict)
        and isinstance(receipt.get("payloadType"), str)
        and isinstance(receipt.get("payload"), str)
        and isinstance(receipt.get("signatures"), list)
        and bool(receipt["signatures"])
    )


def _keep_receipt(verdict: Verdict, path: str) -> Verdict:
    """A ready decision must come with a receipt, saved to `path`; without one a deploy cannot proceed, so
    the gate does not pass. A hold writes nothing."""
    if verdict.state != "ready":
        return verdict
    if verdict.receipt is None:
        problem = Problem(
            "RECEIPT_MISSING",
            "the decision is ready but the service answered without a receipt, and a deploy needs one: "
            "check that the service signs receipts (docs/ci.md)",
        )
    elif not _is_envelope(verdict.receipt):
        problem = Problem("BAD_RESPONSE", "the decision's receipt is not a DSSE envelope")
    else:
        try:
            save_receipt(path, verdict.receipt)
            return verdict
        except OSError as error:
            problem = Problem("RECEIPT_UNWRITABLE", f"cannot write {path}: {error.strerror or error}")
    return Verdict.error(verdict.target, problem, verdict.candidate_id)


def gate(argv: Sequence[str], say: Callable[[str], None] | None = None) -> tuple[int, str, str]:
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
    parser.add_argument(
        "--wait",
        metavar="DURATION",
        help="poll until ready, a hold only a person can resolve, or DURATION (90s, 30m, 1h30m) has passed; "
        "then record the decision",
    )
    parser.add_argument(
        "--receipt", metavar="FILE", help="save the ready decision's signed receipt to FILE (mode 0600)"
    )
    args = parser.parse_args(list(argv))
    wait_seconds = None
    if args.wait is not None:
        try:
            wait_seconds = parse_duration(args.wait)
        except ValueError as error:
            parser.error(f"--wait: {error}")
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
    revision = args.revision.lower()
    if wait_seconds is not None:
        reader = Service(settings)
        # Each read gets the whole per-request budget: the wait, not one budget, bounds the polling.
        wait(lambda: reader.verdict(revision, fresh_budget=True), wait_seconds, say or _say)
    # An enforcement point acts on a recorded decision: the service's release path (witness compared).
    verdict = Service(settings, record=True).verdict(revision)
    if args.receipt is not None:
        verdict = _keep_receipt(verdict, args.receipt)
    return report(verdict)


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
