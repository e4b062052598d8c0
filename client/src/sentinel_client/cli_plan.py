"""`sentinel plan propose|show|amend`: the requester's work plan, with the digests filled in.

A plan that replaces another must name the current digest (`If-Match`, DOMAIN.md rule 18): these commands
read it from the candidate, so nobody copies 64 hex digits by hand. Replacing a plan withdraws what was
approved of it, so `amend` says which digest it replaces and asks first (or takes `--yes`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .cli_candidate import candidate_id, read_candidate, short
from .cli_context import add_persona_options, body_of, load_persona
from .cli_output import EXIT_REFUSED, CommandRefused, confirm, emit, fail, progress, shown, table

MAX_PLAN_FILE_BYTES = 256 * 1024  # the plan route's body limit (API.md)


def plan_words(plan: dict[str, Any] | None) -> str:
    """A plan's tasks, their checks (policy, command, obligations covered) and actions."""
    if not isinstance(plan, dict):
        return "  (no plan)"
    rows = []
    for task in plan.get("tasks") or []:
        for check in task.get("checks") or [{}]:
            rows.append(
                [
                    str(task.get("task_id")),
                    str(check.get("check_id", "-")),
                    str(check.get("policy_ref", "-")),
                    str(check.get("command", "-")),
                    ", ".join(map(str, check.get("covers") or [])) or "-",
                ]
            )
    lines = [table(rows, ["TASK", "CHECK", "POLICY", "COMMAND", "COVERS"]) or "  (no tasks)"]
    for task in plan.get("tasks") or []:
        after = ", ".join(task.get("depends_on") or [])
        if after:
            lines.append(f"  {task.get('task_id')} after {after}")
    for action in plan.get("actions") or []:
        lines.append(
            f"action {action.get('action_id')}: {action.get('type')} "
            f"{json.dumps(action.get('params'), sort_keys=True)} (at most {action.get('max_executions', 1)})"
        )
    return "\n".join(lines)


# ---- plan propose ----------------------------------------------------------------------------------------


def cmd_propose(args: argparse.Namespace) -> int:
    persona = load_persona(args)
    client, project = persona.client(), persona.project()
    candidate = read_candidate(client, project, args.candidate_id)
    current = candidate.get("plan_digest")
    with progress("drafting a plan"):
        answer = client.propose(project, args.candidate_id, if_match=current or None)
    proposed = body_of(answer, 201)
    proposed["replaced_plan_digest"] = current

    def words(p: dict[str, Any]) -> str:
        lines = [
            f"plan version {p.get('plan_version')} of {args.candidate_id}, digest {p.get('plan_digest')}",
            f"  drafted by the {p.get('mode')}"
            + (f" ({p.get('fallback_reason')})" if p.get("fallback_reason") else ""),
        ]
        if current:
            lines.append(f"  replaces digest {current}")
        lines.append(plan_words(p.get("plan")))
        lines.append(
            f"next: a reviewer approves it; amend it with `sentinel plan amend {args.candidate_id} -f FILE`"
        )
        return "\n".join(lines)

    emit(args.json, proposed, words)
    return 0


# ---- plan show -------------------------------------------------------------------------------------------


def cmd_show(args: argparse.Namespace) -> int:
    persona = load_persona(args)
    client, project = persona.client(), persona.project()
    if args.version is not None:
        if args.version < 1:
            raise CommandRefused(
                "BAD_OPTION", "--version counts from 1", f"`sentinel plan show {args.candidate_id}`"
            )
        shown = body_of(client.get_plan(project, args.candidate_id, args.version), 200)
    else:
        candidate = read_candidate(client, project, args.candidate_id)
        if candidate.get("plan") is None:
            raise CommandRefused(
                "PLAN_MISSING",
                f"{args.candidate_id} has no plan yet",
                f"`sentinel plan propose {args.candidate_id}`",
            )
        versions = candidate.get("plan_versions") or []
        newest = versions[-1] if versions else {}
        shown = {
            "candidate_id": args.candidate_id,
            "plan_version": newest.get("plan_version"),
            "plan_digest": candidate.get("plan_digest"),
            "mode": newest.get("mode"),
            "plan": candidate.get("plan"),
            "plan_versions": versions,
        }

    def words(p: dict[str, Any]) -> str:
        return "\n".join(
            [f"plan version {p.get('plan_version')} of {args.candidate_id}, digest {p.get('plan_digest')}"]
            + [plan_words(p.get("plan"))]
        )

    emit(args.json, shown, words)
    return 0


# ---- plan amend ------------------------------------------------------------------------------------------


def read_plan_file(name: str) -> dict[str, Any]:
    """The plan in FILE (`-`: standard input) as a JSON object; anything else is refused before sending."""
    try:
        raw = sys.stdin.buffer.read(MAX_PLAN_FILE_BYTES + 1) if name == "-" else Path(name).read_bytes()
    except OSError as error:
        raise CommandRefused(
            "PLAN_FILE_UNREADABLE", f"cannot read {name}: {error.strerror or error}", "check the path"
        ) from None
    if len(raw) > MAX_PLAN_FILE_BYTES:
        raise CommandRefused("PAYLOAD_TOO_LARGE", f"{name} is larger than {MAX_PLAN_FILE_BYTES} bytes")
    try:
        plan = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as error:
        raise CommandRefused(
            "PLAN_FILE_INVALID",
            f"{name} is not JSON: {error}",
            "`sentinel plan show ID --json` prints a plan in the form to edit",
        ) from None
    if isinstance(plan, dict) and isinstance(plan.get("plan"), dict) and "tasks" not in plan:
        plan = plan["plan"]  # `plan show --json` output, edited in place
    if not isinstance(plan, dict):
        raise CommandRefused(
            "PLAN_FILE_INVALID", f"{name} does not hold a JSON object (a plan: {{tasks, actions}})"
        )
    return plan


def _finding_line(finding: dict[str, Any]) -> str:
    where = ", ".join(f"{k} {v}" for k, v in sorted(finding.items()) if k not in ("code", "detail"))
    return f"  {finding.get('code')}: {finding.get('detail')}" + (f" ({where})" if where else "")


def cmd_amend(args: argparse.Namespace) -> int:
    plan = read_plan_file(args.file)
    persona = load_persona(args)
    client, project = persona.client(), persona.project()
    candidate = read_candidate(client, project, args.candidate_id)
    current = candidate.get("plan_digest")
    versions = candidate.get("plan_versions") or []
    if current:
        confirm(
            f"replace plan version {len(versions)} (digest {current}) of {args.candidate_id} with "
            f"{args.file} ({len(plan.get('tasks') or [])} tasks)? Approvals of the current digest stop "
            "counting",
            yes=args.yes,
        )
    answer = client.put_plan(project, args.candidate_id, plan, if_match=current or None)
    if answer.status == 422 and answer.code == "PLAN_PREFLIGHT_FAILED" and isinstance(answer.body, dict):
        findings = [f for f in answer.body.get("findings") or [] if isinstance(f, dict)]
        if args.json:
            emit(True, {"code": answer.code, "findings": findings, "stored": False})
        code = fail(
            "PLAN_PREFLIGHT_FAILED",
            f"{len(findings)} finding(s); nothing was stored",
            "fix the plan file (one finding a line below) and run again",
        )
        for finding in findings:
            print(shown(_finding_line(finding)), file=sys.stderr)
        return code if code else EXIT_REFUSED
    stored = body_of(answer, 201)
    stored["replaced_plan_digest"] = current

    def words(p: dict[str, Any]) -> str:
        replaced = f"replaces digest {current}" if current else "the candidate's first plan"
        if current and current == p.get("plan_digest"):
            replaced = "the same plan as before: the digest is unchanged, and so are its approvals"
        return "\n".join(
            [
                f"plan version {p.get('plan_version')} of {args.candidate_id}, digest {p.get('plan_digest')}",
                f"  {replaced} (revision {short(candidate.get('revision'))})",
                plan_words(p.get("plan")),
                "next: a reviewer approves this digest (`sentinel review approve`)",
            ]
        )

    emit(args.json, stored, words)
    return 0


def register(commands: Any) -> None:
    group = commands.group("plan", help="propose, show and amend a candidate's work plan")
    propose = group.add_parser("propose", help="ask the service to draft the candidate's next plan version")
    propose.add_argument("candidate_id", metavar="ID", type=candidate_id)
    add_persona_options(propose)
    propose.set_defaults(run=cmd_propose)

    show = group.add_parser("show", help="the current plan (or one version) with its digest")
    show.add_argument("candidate_id", metavar="ID", type=candidate_id)
    show.add_argument("--version", type=int, metavar="N", help="an older version (GET …/plans/{N})")
    add_persona_options(show)
    show.set_defaults(run=cmd_show)

    amend = group.add_parser("amend", help="submit or amend the plan from a JSON file (If-Match filled in)")
    amend.add_argument("candidate_id", metavar="ID", type=candidate_id)
    amend.add_argument(
        "-f", "--file", required=True, metavar="PLAN.json", help="the plan (`-`: standard input)"
    )
    amend.add_argument("--yes", action="store_true", help="replace the current plan without asking")
    add_persona_options(amend)
    amend.set_defaults(run=cmd_amend)
