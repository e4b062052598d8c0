"""`sentinel report ID TASK --status …`: the requester reports a task of the current plan.

The plan digest comes from the candidate. Without `--check`, a `completed` or `failed` report claims, for
each check of the task, the newest evidence written for it (the candidate lists evidence in arrival
order), and says which it chose; the report writer then judges the claim (DOMAIN.md rule 20).
"""

from __future__ import annotations

import argparse
from typing import Any

from .cli_candidate import candidate_id, read_candidate, short
from .cli_context import add_persona_options, body_of, load_persona
from .cli_output import CommandRefused, emit


def _claims(
    args: argparse.Namespace, task: dict[str, Any], candidate: dict[str, Any]
) -> list[dict[str, str]]:
    checks = [str(c.get("check_id")) for c in task.get("checks") or [] if isinstance(c, dict)]
    claims: list[dict[str, str]] = []
    for item in args.check or []:
        check_id, sep, evidence_id = item.partition("=")
        if not sep or not check_id or not evidence_id:
            raise CommandRefused("BAD_OPTION", f"--check {item!r} is not C=EVIDENCE_ID")
        if check_id not in checks:
            raise CommandRefused(
                "CHECK_NOT_IN_TASK",
                f"task {args.task_id} has no check {check_id}; it has {', '.join(checks) or 'none'}",
                f"`sentinel plan show {args.candidate_id}` lists the tasks and their checks",
            )
        claims.append({"check_id": check_id, "evidence_id": evidence_id})
    if args.check or args.status == "blocked":
        return claims
    newest: dict[str, str] = {}
    for evidence in candidate.get("evidence") or []:
        if isinstance(evidence, dict) and evidence.get("check_id") in checks:
            newest[str(evidence["check_id"])] = str(evidence.get("evidence_id"))
    return [{"check_id": c, "evidence_id": newest[c]} for c in checks if c in newest]


def cmd_report(args: argparse.Namespace) -> int:
    if args.status == "blocked" and not (args.blocked_reason or "").strip():
        raise CommandRefused(
            "BAD_OPTION",
            "a blocked report needs --blocked-reason",
            "say what a human must change in the plan",
        )
    if args.status != "blocked" and args.blocked_reason:
        raise CommandRefused("BAD_OPTION", "--blocked-reason goes with --status blocked")
    persona = load_persona(args)
    client, project = persona.client(), persona.project()
    candidate = read_candidate(client, project, args.candidate_id)
    plan, digest = candidate.get("plan"), candidate.get("plan_digest")
    if not isinstance(plan, dict) or not digest:
        raise CommandRefused(
            "PLAN_MISSING", f"{args.candidate_id} has no plan", f"`sentinel plan propose {args.candidate_id}`"
        )
    tasks = {str(t.get("task_id")): t for t in plan.get("tasks") or [] if isinstance(t, dict)}
    if args.task_id not in tasks:
        raise CommandRefused(
            "TASK_UNKNOWN",
            f"the current plan has no task {args.task_id}; it has {', '.join(tasks) or 'none'}",
            f"`sentinel plan show {args.candidate_id}` lists the tasks",
        )
    claims = _claims(args, tasks[args.task_id], candidate)
    body: dict[str, Any] = {"plan_digest": digest, "status": args.status, "checks": claims}
    if args.summary:
        body["summary"] = args.summary
    if args.blocked_reason:
        body["blocked_reason"] = args.blocked_reason
    recorded = body_of(client.report(project, args.candidate_id, args.task_id, body), 201)
    shown = {**recorded, "task_id": args.task_id, "plan_digest": digest, "checks": claims}

    def words(r: dict[str, Any]) -> str:
        lines = [
            f"task {args.task_id}, attempt {r.get('attempt')} under plan {short(digest)}: reported "
            f"{args.status}, recorded {r.get('recorded_status')}; passes: "
            + ("yes" if r.get("passes") else "no"),
        ]
        lines += [f"  claimed {c['check_id']} with evidence {c['evidence_id']}" for c in claims]
        for finding in r.get("findings") or []:
            lines.append(f"  {finding.get('code')}: {finding.get('detail')}")
            if finding.get("remediation_hint"):
                lines.append(f"    next: {finding['remediation_hint']}")
        return "\n".join(lines)

    emit(args.json, shown, words)
    return 0


def register(commands: Any) -> None:
    report = commands.command("report", help="report a task of the candidate's current plan")
    report.add_argument("candidate_id", metavar="ID", type=candidate_id)
    report.add_argument("task_id", metavar="TASK")
    report.add_argument("--status", required=True, choices=("completed", "failed", "blocked"))
    report.add_argument(
        "--check",
        action="append",
        metavar="C=EVIDENCE_ID",
        help="the evidence claimed for a check (default: the newest evidence of each of the task's checks)",
    )
    report.add_argument("--summary", metavar="TEXT", help="what was done")
    report.add_argument("--blocked-reason", metavar="TEXT", help="with --status blocked: what stops the task")
    add_persona_options(report)
    report.set_defaults(run=cmd_report)
