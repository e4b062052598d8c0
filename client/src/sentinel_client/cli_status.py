"""The auditor's and operator's reads: `status` (every candidate with its current decision and what it waits
for), `decision ID [--explain] [--record]` (each finding with its rule, the facts it read and the remediation)
and `audit show` (a chain's events with their payloads, and its verification).

A judging command exits 4 unless what it judged is `ready` (cli_output's exit codes): a script may gate on
it. `status --exit-code` with no candidate at all exits 4 too: nothing found is nothing ready."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from .api import iter_pages
from .cli_context import add_persona_options, body_of, load_persona
from .cli_output import EXIT_HOLD, EXIT_OK, CommandRefused, emit, progress, table
from .persona_reads import candidate_rows, short

# What a finding waits for, by its code's family (the status table's columns).
GROUPS = (
    ("change", ("CHANGE_CONTEXT_", "NO_OBLIGATIONS")),
    ("plan", ("PLAN_",)),
    ("review", ("REVIEW_",)),
    ("evidence", ("EVIDENCE_",)),
    ("tasks", ("TASK_",)),
    ("state", ("STATE_",)),
)

# The rule behind each decision finding (DOMAIN.md's numbered rules), said once for a person.
RULES: dict[str, str] = {
    "NO_OBLIGATIONS": "rule 6: zero obligations is not nothing to prove; a candidate must owe something",
    "CHANGE_CONTEXT_UNVERIFIED": "rule 5: until a trusted CI publisher attests the change context, it holds",
    "PLAN_MISSING": "rules 1 and 18: a candidate needs a current work plan that passed preflight",
    "REVIEW_MISSING": "rule 14: the current plan digest needs approvals_required unexpired human approvals",
    "REVIEW_REJECTED": "rule 14: a rejection of a digest is final for that digest; amend the plan to go on",
    "REVIEW_EXPIRED": "rule 14: an approval expires (exactly at expiry it is expired)",
    "REVIEW_STALE": "rule 13: an approval of an older digest never counts for the current plan",
    "EVIDENCE_MISSING": "rules 7, 10: each check needs verified evidence bound to each obligation it covers",
    "EVIDENCE_NEGATIVE": "rule 8: a failed or errored test case, or a wrong exit code, is `fail`",
    "EVIDENCE_UNKNOWN": "rule 8: zero executed test cases is `unknown`, never a pass",
    "EVIDENCE_STALE": "rule 7: evidence older than the policy's max_evidence_age_seconds no longer counts",
    "EVIDENCE_UNVERIFIED": "rule 9: only a trusted ci principal with the publisher role verifies",
    "EVIDENCE_UNTRUSTED": "rule 9: the publisher is not on the policy's trusted_publishers list",
    "EVIDENCE_TOO_FEW_TESTS": "rule 7: min_tests >= 1 needs a JUnit report with at least that many tests",
    "EVIDENCE_QUERY_INCOMPLETE": "rule 3: a read beyond the page budget is a finding, never a pass",
    "EVIDENCE_WRONG_SUBJECT": "rule 7: evidence must name the candidate's subject",
    "EVIDENCE_WRONG_REVISION": "rule 7: evidence must name the candidate's revision",
    "EVIDENCE_WRONG_ENVIRONMENT": "rule 7: evidence must name the candidate's environment",
    "EVIDENCE_WRONG_SCOPE": "rule 7: the obligation's scope must lie under one of the evidence's scopes",
    "TASK_NOT_REPORTED": "rules 20 and 21: each task needs a report that passes under the current digest",
    "TASK_FAILED": "rule 20: the task's latest report failed; report it again once its checks pass",
    "TASK_BLOCKED": "rule 20: a blocked task asks for a human amendment of the plan",
    "TASK_NOT_SETTLED": "rule 22: the project requires a reviewer to settle each passed task",
    "STATE_UNAVAILABLE": "rule 3: anything the gate cannot read is a finding, never a pass",
    "STATE_TAMPERED": "rule 25: a chain that fails verification, or was cut or rewritten, holds",
}


# ---- pure ------------------------------------------------------------------------------------------------


def group_of(code: str) -> str:
    for group, prefixes in GROUPS:
        if code.startswith(prefixes):
            return group
    return "other"


def waits_for(findings: list[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The findings' distinct codes by what they wait for (plan, review, evidence, tasks, ...)."""
    out: dict[str, list[str]] = {}
    for f in findings:
        codes = out.setdefault(group_of(str(f.get("code"))), [])
        if f.get("code") not in codes:
            codes.append(str(f.get("code")))
    return {group: out[group] for group, _ in (*GROUPS, ("other", ())) if group in out}


def _plan_checks(view: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    found = {}
    for task in (view.get("plan") or {}).get("tasks") or []:
        for check in task.get("checks") or []:
            found[check.get("check_id")] = {**check, "task_id": task.get("task_id")}
    return found


def facts_read(finding: Mapping[str, Any], view: Mapping[str, Any] | None) -> list[str]:
    """The facts a finding was about, as the candidate view holds them: its obligation, check, task, the
    evidence of that check, and the reviews of the plan. Empty when the view could not be read."""
    if not view:
        return []
    lines: list[str] = []
    obligations = {o.get("obligation_id"): o for o in view.get("obligations") or []}
    obligation = obligations.get(finding.get("obligation_id"))
    if obligation:
        lines.append(
            f"obligation {obligation['obligation_id']}: {obligation.get('policy_id')} on "
            f"{obligation.get('scope')} ({obligation.get('reason')})"
        )
    check = _plan_checks(view).get(finding.get("check_id"))
    if check:
        lines.append(
            f"check {check['check_id']} in task {check['task_id']}: {check.get('policy_ref')} "
            f"`{check.get('command')}`, expects exit {check.get('expected_exit_code')}"
        )
    if finding.get("check_id"):
        evidence = [e for e in view.get("evidence") or [] if e.get("check_id") == finding.get("check_id")]
        if not evidence:
            lines.append(f"evidence for {finding['check_id']}: none recorded")
        for e in evidence[-3:]:
            mismatches = (e.get("binding") or {}).get("mismatches") or []
            lines.append(
                f"evidence {e.get('evidence_id')}: {e.get('outcome')}, {e.get('trust')}, "
                f"by {e.get('publisher')}, "
                f"observed {e.get('observed_at')}"
                + (f", mismatches {', '.join(mismatches)}" if mismatches else "")
            )
    tasks = {t.get("task_id"): t for t in view.get("tasks") or []}
    task = tasks.get(finding.get("task_id"))
    if task is not None:
        attempts = task.get("attempts") or []
        last = attempts[-1] if attempts else {}
        lines.append(
            f"task {task['task_id']}: {len(attempts)} attempt(s)"
            + (f", last {last.get('recorded_status') or last.get('status')}" if last else "")
            + f"; passes {task.get('passes')}, settled {task.get('settled')}"
        )
    if str(finding.get("code", "")).startswith("REVIEW_"):
        digest = view.get("plan_digest")
        for r in view.get("reviews") or []:
            which = (
                "the current plan"
                if r.get("plan_digest") == digest
                else f"digest {short(r.get('plan_digest'))}"
            )
            lines.append(
                f"review by {(r.get('reviewer') or {}).get('id')}: {r.get('decision')} of {which}, "
                f"expires {r.get('expires_at')}"
            )
        if not view.get("reviews"):
            lines.append("reviews: none recorded")
    return lines


def explain(decision: Mapping[str, Any], view: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Each finding with its rule, the facts it read and the remediation."""
    return [
        {
            **dict(f),
            "rule": RULES.get(str(f.get("code")), "see DOMAIN.md's finding codes"),
            "facts": facts_read(f, view),
            "remediation": f.get("remediation_hint") or "",
        }
        for f in decision.get("findings") or []
    ]


def render_explained(decision: Mapping[str, Any], explained: list[Mapping[str, Any]]) -> str:
    lines = [_decision_line(decision)]
    for number, item in enumerate(explained, 1):
        where = ", ".join(
            f"{name} {item[name]}" for name in ("obligation_id", "check_id", "task_id") if item.get(name)
        )
        lines.append(
            f"{number}. {item['code']}" + (f" ({where})" if where else "") + f": {item.get('detail')}"
        )
        lines.append(f"   rule: {item['rule']}")
        lines += [f"   read: {fact}" for fact in item["facts"]]
        if item["remediation"]:
            lines.append(f"   next: {item['remediation']}")
    return "\n".join(lines)


def _decision_line(decision: Mapping[str, Any]) -> str:
    clock = decision.get("as_of_source", "service")
    line = f"{decision.get('decision')} as of {decision.get('as_of')} ({clock} clock)"
    if decision.get("seq"):
        line += f", recorded at seq {decision['seq']}"
    return line + f"; plan {short(decision.get('plan_digest'))}, facts {short(decision.get('facts_digest'))}"


# ---- commands ---------------------------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    persona = load_persona(args)
    client, project = persona.client(), persona.project()
    rows: list[dict[str, Any]] = []
    with progress("reading decisions"):
        for row in candidate_rows(client, project, subject=args.subject, environment=args.environment):
            decision = body_of(client.decision(project, row["candidate_id"]), 200)
            findings = decision.get("findings") or []
            rows.append(
                {
                    "candidate_id": row["candidate_id"],
                    "subject": row.get("subject"),
                    "environment": row.get("environment"),
                    "revision": row.get("revision"),
                    "decision": decision.get("decision"),
                    "waits_for": waits_for(findings),
                    "findings": len(findings),
                }
            )
    ready = sum(1 for r in rows if r["decision"] == "ready")
    result = {"project": project, "candidates": rows, "ready": ready, "not_ready": len(rows) - ready}

    def words(data: dict[str, Any]) -> str:
        table_rows = [
            [
                r["candidate_id"],
                f"{r['subject']}@{r['environment']}",
                short(r["revision"]),
                r["decision"],
                "; ".join(f"{g}: {', '.join(c)}" for g, c in r["waits_for"].items()) or "-",
            ]
            for r in data["candidates"]
        ]
        head = table(table_rows, ["CANDIDATE", "SUBJECT@ENV", "REVISION", "DECISION", "WAITS FOR"])
        return (head + "\n" if head else "") + f"{ready} ready, {len(rows) - ready} not ready in {project}"

    emit(args.json, result, words)
    if args.exit_code and (not rows or ready < len(rows)):
        return EXIT_HOLD
    return EXIT_OK


def cmd_decision(args: argparse.Namespace) -> int:
    persona = load_persona(args)
    client, project = persona.client(), persona.project()
    if args.record and args.as_of:
        raise CommandRefused(
            "VALIDATION_FAILED",
            "a recorded decision uses the service clock",
            "drop --as-of, or drop --record",
        )
    if args.record:
        decision = body_of(client.record_decision(project, args.id), 201)
    else:
        decision = body_of(client.decision(project, args.id, as_of=args.as_of), 200)
    result: dict[str, Any] = {"candidate_id": args.id, **decision}
    if args.explain:
        view = body_of(client.get_candidate(project, args.id), 200)
        result["explained"] = explain(decision, view)

    def words(data: dict[str, Any]) -> str:
        if args.explain:
            return render_explained(data, data["explained"])
        lines = [_decision_line(data)]
        lines += [
            f"  {f['code']}: {f.get('detail')}"
            + (f"\n    next: {f['remediation_hint']}" if f.get("remediation_hint") else "")
            for f in data.get("findings") or []
        ]
        return "\n".join(lines)

    emit(args.json, result, words)
    return EXIT_OK if decision.get("decision") == "ready" else EXIT_HOLD


def _payload_text(event: Mapping[str, Any]) -> str:
    if "payload" not in event:
        return f"payload: not returned by this gate (digest {short(event.get('payload_digest'), 16)})"
    return "payload: " + json.dumps(event["payload"], sort_keys=True, ensure_ascii=False)


def cmd_audit_show(args: argparse.Namespace) -> int:
    persona = load_persona(args)
    client, project = persona.client(), persona.project()
    if args.limit is not None and args.limit < 1:
        raise CommandRefused("VALIDATION_FAILED", "--limit is at least 1", "")
    page_size = min(args.limit or 500, 500)

    def fetch(cursor: str | None) -> Any:
        if args.candidate:
            return client.candidate_audit(project, args.candidate, limit=page_size, cursor=cursor)
        return client.project_audit(project, limit=page_size, cursor=cursor)

    events: list[dict[str, Any]] = []
    verification: dict[str, Any] = {}
    more = False
    with progress("reading the audit chain"):
        for page in iter_pages(fetch):
            body = body_of(page, 200)
            verification = body.get("verification") or {}
            events += body.get("events") or []
            if args.limit is not None and len(events) >= args.limit:
                more = bool(body.get("next_cursor")) or len(events) > args.limit
                events = events[: args.limit]
                break
    result = {
        "project": project,
        "candidate_id": args.candidate,
        "events": events,
        "more": more,
        "verification": verification,
    }

    def words(data: dict[str, Any]) -> str:
        lines = []
        for e in data["events"]:
            lines.append(f"#{e.get('seq')} {e.get('at')} {e.get('type')} by {e.get('actor')}")
            lines.append(f"    {_payload_text(e)}")
        if data["more"]:
            lines.append(f"(first {len(data['events'])} events shown; more follow: raise --limit)")
        lines.append(verification_line(data["verification"]))
        return "\n".join(lines)

    emit(args.json, result, words)
    return EXIT_OK


def verification_line(v: Mapping[str, Any]) -> str:
    if v.get("valid"):
        return f"chain verified: {v.get('length')} events, head {short(v.get('head_hash'), 16)}"
    return (
        f"chain does NOT verify: first bad seq {v.get('first_bad_seq')} ({v.get('reason')}); "
        f"{v.get('length')} events"
    )


def register(commands: Any) -> None:
    status = commands.command("status", help="candidates with their current decisions and what they wait for")
    status.add_argument("--environment", help="only candidates for this environment")
    status.add_argument("--subject", help="only candidates about this subject")
    status.add_argument(
        "--exit-code", action="store_true", help="exit 4 unless every candidate listed is ready"
    )
    add_persona_options(status)
    status.set_defaults(run=cmd_status)

    decision = commands.command("decision", help="a candidate's decision (exit 0 ready, 4 hold)")
    decision.add_argument("id", metavar="ID", help="the candidate id")
    decision.add_argument(
        "--explain", action="store_true", help="each finding's rule, facts read and remediation"
    )
    decision.add_argument(
        "--record", action="store_true", help="record it on the candidate's chain (service clock)"
    )
    decision.add_argument(
        "--as-of", metavar="TIME", help="a what-if read at this RFC 3339 instant (not recorded)"
    )
    add_persona_options(decision)
    decision.set_defaults(run=cmd_decision)

    audit = commands.group("audit", help="audit what the gate recorded")
    show = audit.add_parser("show", help="a chain's events with their payloads, and its verification")
    show.add_argument("--candidate", metavar="ID", help="this candidate's chain (default: the project's)")
    show.add_argument("--limit", type=int, metavar="N", help="show at most N events")
    add_persona_options(show)
    show.set_defaults(run=cmd_audit_show)
