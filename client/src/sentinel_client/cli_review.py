"""The reviewer's commands: `review queue`, `review show`, `review approve|reject`, and `plan diff`.

A reviewer approves one exact plan digest at one exact revision (DOMAIN.md rules 11 to 14). These commands
fill both from the candidate itself, so nobody copies 64 hex characters by hand, and show what is being
approved before asking for confirmation; `approve` needs the first 16 (or more) hex digits of the digest
`review show` printed (`--expect-digest`), so a plan amended after the reviewer read it is never approved.
What a reviewer must see to approve an amended plan is the change
since the version they approved, so `review show` diffs against it (sentinel_client.plan_diff)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from .api import SentinelClient
from .cli_context import add_persona_options, body_of, load_persona
from .cli_output import CommandRefused, confirm, emit, progress, shown, table
from .persona_reads import (
    candidate_rows,
    changed_files,
    current_plan_version,
    failing_tests,
    parse_time,
    plan_version_of,
    read_plan_version,
    short,
    source_of,
)
from .plan_diff import diff_plans, render_diff

# The shortest `--expect-digest` accepted: 64 bits, as `review show` prints it (the agent writes the plan, so
# it can vary it until a shorter prefix matches).
MIN_EXPECTED_HEX = 16
REVIEW_AGAIN = "the plan changed since you read it: run `sentinel review show {cid}` again, then approve that"

# Why a candidate is not in my queue (queue_of's reasons).
SKIP_NO_PLAN = "no plan yet"
SKIP_MINE = "created by you or someone you sponsor (you may not approve it)"
SKIP_AUTHORED = "a plan version by you or someone you sponsor (you may not approve it)"
SKIP_REVIEWED = "you already approved or rejected its current plan"


# ---- pure: who may review what ---------------------------------------------------------------------------


def _mine(actor: Mapping[str, Any] | None, me: str) -> bool:
    """The principal is me, or acts for me (I sponsor it): rule 12 excludes both from approving."""
    return bool(actor) and (actor.get("id") == me or actor.get("sponsor") == me)  # type: ignore[union-attr]


def my_reviews(view: Mapping[str, Any], me: str) -> list[dict[str, Any]]:
    return [r for r in view.get("reviews") or [] if (r.get("reviewer") or {}).get("id") == me]


def standing_review(view: Mapping[str, Any], me: str, now: datetime) -> dict[str, Any] | None:
    """My rejection of the current digest (final), or my unexpired approval of it."""
    for review in reversed(my_reviews(view, me)):
        if review.get("plan_digest") != view.get("plan_digest"):
            continue
        if review.get("decision") == "reject":
            return review
        expires = parse_time(review.get("expires_at"))
        if expires is None or expires > now:
            return review
    return None


def last_approval(view: Mapping[str, Any], me: str) -> dict[str, Any] | None:
    approvals = [r for r in my_reviews(view, me) if r.get("decision") == "approve"]
    return approvals[-1] if approvals else None


def skip_reason(view: Mapping[str, Any], me: str, now: datetime) -> str | None:
    """Why this candidate does not await my review, or None when it does."""
    if not view.get("plan_digest"):
        return SKIP_NO_PLAN
    if _mine(view.get("created_by"), me):
        return SKIP_MINE
    current = current_plan_version(view) or 0
    if any(
        _mine(p.get("author"), me) for p in view.get("plan_versions") or [] if p["plan_version"] <= current
    ):
        return SKIP_AUTHORED
    if standing_review(view, me, now) is not None:
        return SKIP_REVIEWED
    return None


def queue_of(views: Iterable[Mapping[str, Any]], me: str, now: datetime) -> dict[str, Any]:
    """{awaiting: [rows], skipped: {reason: count}}: the candidates with a current plan that I may approve
    and have neither approved (unexpired) nor rejected at its current digest."""
    awaiting: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    for view in views:
        reason = skip_reason(view, me, now)
        if reason is not None:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        approved = last_approval(view, me)
        awaiting.append(
            {
                "candidate_id": view["candidate_id"],
                "subject": view.get("subject"),
                "environment": view.get("environment"),
                "revision": view.get("revision"),
                "created_by": (view.get("created_by") or {}).get("id"),
                "plan_version": current_plan_version(view),
                "plan_digest": view.get("plan_digest"),
                "you_approved_version": plan_version_of(view, approved["plan_digest"]) if approved else None,
            }
        )
    return {"awaiting": awaiting, "skipped": skipped}


# ---- commands ---------------------------------------------------------------------------------------------


def _me(client: SentinelClient) -> str:
    who = body_of(client.whoami(), 200)
    return str(who.get("principal_id"))


def _why_listed(row: Mapping[str, Any]) -> str:
    approved = row["you_approved_version"]
    if approved is None:
        return "new"
    if approved == row["plan_version"]:
        return "your approval expired"
    return f"re-review (you approved v{approved})"


def cmd_queue(args: argparse.Namespace) -> int:
    persona = load_persona(args)
    client, project = persona.client(), persona.project()
    me = _me(client)
    with progress("reading the project's candidates"):
        views = [
            body_of(client.get_candidate(project, row["candidate_id"]), 200)
            for row in candidate_rows(client, project)
        ]
    result = {"project": project, "reviewer": me, **queue_of(views, me, datetime.now(UTC))}
    result["candidates_read"] = len(views)

    def words(data: dict[str, Any]) -> str:
        rows = [
            [
                r["candidate_id"],
                f"{r['subject']}@{r['environment']}",
                short(r["revision"]),
                f"v{r['plan_version']} {short(r['plan_digest'])}",
                r["created_by"] or "-",
                _why_listed(r),
            ]
            for r in data["awaiting"]
        ]
        lines = [table(rows, ["CANDIDATE", "SUBJECT@ENV", "REVISION", "PLAN", "BY", ""])] if rows else []
        lines.append(f"{len(rows)} awaiting your review in {project} ({data['candidates_read']} read)")
        lines += [f"  skipped {count}: {reason}" for reason, count in sorted(data["skipped"].items())]
        return "\n".join(lines)

    emit(args.json, result, words)
    return 0


def _policies(client: SentinelClient, project: str, plan: Mapping[str, Any] | None) -> dict[str, Any]:
    """The policies the plan's checks instantiate, as the gate holds them now (None where it won't say)."""
    found: dict[str, Any] = {}
    for task in (plan or {}).get("tasks") or []:
        for check in task.get("checks") or []:
            ref = check.get("policy_ref")
            if isinstance(ref, str) and ref not in found:
                answer = client.get_policy(project, ref)
                body = answer.body if answer.status == 200 and isinstance(answer.body, dict) else {}
                policy = body.get("policy")
                found[ref] = {**policy, "version": body.get("version")} if isinstance(policy, dict) else None
    return found


def plan_change_since_approval(
    client: SentinelClient, project: str, view: Mapping[str, Any], me: str
) -> dict[str, Any]:
    """{approved_version, approved_digest, current_version, status, diff}; status is `never_approved`,
    `current` (I approved this very digest), `changed` (with the diff) or `unavailable` (the gate cannot
    give the approved version back)."""
    approval = last_approval(view, me)
    out: dict[str, Any] = {
        "approved_version": None,
        "approved_digest": None,
        "current_version": current_plan_version(view),
        "status": "never_approved",
        "diff": None,
    }
    if approval is None:
        return out
    version = plan_version_of(view, approval.get("plan_digest"))
    out.update(approved_version=version, approved_digest=approval.get("plan_digest"))
    if approval.get("plan_digest") == view.get("plan_digest"):
        out["status"] = "current"
        return out
    body = read_plan_version(client, project, view["candidate_id"], version) if version else None
    if body is None or body.get("plan_digest") != approval.get("plan_digest"):
        out["status"] = "unavailable"
        out["reason"] = (
            "no stored version has the approved digest"
            if version is None
            else f"the gate did not return plan v{version}"
            if body is None
            else "the version read back is not the one approved"
        )
        return out
    out["status"] = "changed"
    out["diff"] = diff_plans(body.get("plan"), view.get("plan"))
    return out


def review_view(client: SentinelClient, project: str, cid: str) -> dict[str, Any]:
    view = body_of(client.get_candidate(project, cid), 200)
    me = _me(client)
    reviews = [
        {
            "reviewer": (r.get("reviewer") or {}).get("id"),
            "decision": r.get("decision"),
            "plan_version": plan_version_of(view, r.get("plan_digest")),
            "current": r.get("plan_digest") == view.get("plan_digest"),
            "expires_at": r.get("expires_at"),
            "comment": r.get("comment"),
        }
        for r in view.get("reviews") or []
    ]
    evidence = [
        {
            "evidence_id": e.get("evidence_id"),
            "check_id": e.get("check_id"),
            "outcome": e.get("outcome"),
            "trust": e.get("trust"),
            "counts": e.get("counts"),
            "publisher": e.get("publisher"),
            "observed_at": e.get("observed_at"),
            "source": source_of(e),
            "failing_tests": failing_tests(e),
            "mismatches": (e.get("binding") or {}).get("mismatches") or [],
        }
        for e in view.get("evidence") or []
    ]
    return {
        "candidate_id": view["candidate_id"],
        "project": project,
        "subject": view.get("subject"),
        "environment": view.get("environment"),
        "revision": view.get("revision"),
        "base_revision": view.get("base_revision"),
        "created_by": view.get("created_by"),
        "change_context": view.get("change_context"),
        "plan_version": current_plan_version(view),
        "plan_digest": view.get("plan_digest"),
        "plan": view.get("plan"),
        "policies": _policies(client, project, view.get("plan")),
        "obligations": view.get("obligations") or [],
        "changed_files": changed_files(view),
        "evidence": evidence,
        "reviews": reviews,
        "tasks": view.get("tasks") or [],
        "since_your_approval": plan_change_since_approval(client, project, view, me),
        "reviewer": me,
    }


def _plan_words(data: Mapping[str, Any]) -> list[str]:
    plan = data.get("plan")
    if not plan:
        return ["plan: none yet"]
    lines = [f"plan v{data['plan_version']} digest {data['plan_digest']}"]
    for task in plan.get("tasks") or []:
        after = f" after {', '.join(task['depends_on'])}" if task.get("depends_on") else ""
        lines.append(f"  task {task['task_id']}: {task.get('title', '')}{after}")
        if task.get("files"):
            lines.append(f"    files: {', '.join(task['files'])}")
        for check in task.get("checks") or []:
            policy = (data.get("policies") or {}).get(check.get("policy_ref")) or {}
            kind = (
                f" [v{policy.get('version')} {policy.get('check_type')}, "
                f"min_tests {policy.get('min_tests')}, "
                f"trusted {', '.join(policy.get('trusted_publishers') or []) or 'nobody'}]"
                if policy
                else ""
            )
            lines.append(
                f"    check {check['check_id']}: {check.get('policy_ref')}{kind} `{check.get('command')}` "
                f"exit {check.get('expected_exit_code')}, "
                f"covers {len(check.get('covers') or [])} obligation(s)"
            )
    for action in plan.get("actions") or []:
        lines.append(
            f"  action {action['action_id']}: {action.get('type')} {action.get('params')} "
            f"(at most {action.get('max_executions', 1)})"
        )
    if not plan.get("actions"):
        lines.append("  actions: none declared")
    return lines


def _evidence_words(data: Mapping[str, Any]) -> list[str]:
    lines = [f"evidence ({len(data['evidence'])}):"]
    for e in data["evidence"]:
        counts = e.get("counts") or {}
        source = e.get("source") or {}
        run = source.get("url") or source.get("run_id") or "-"
        lines.append(
            f"  {e['check_id']}: {e['outcome']}, {e['trust']}, {counts.get('tests', 0)} tests "
            f"({counts.get('failures', 0)} failed, {counts.get('errors', 0)} errors) "
            f"by {e.get('publisher')}; "
            f"run {run}" + (f"; mismatches {', '.join(e['mismatches'])}" if e["mismatches"] else "")
        )
        failing = e.get("failing_tests")
        if failing is None:
            lines.append("    failing tests: not recorded")
        elif failing["count"]:
            more = failing["count"] - len(failing["names"])
            lines.append(
                f"    failing tests: {', '.join(failing['names'])}"
                + (f" (and {more} more)" if more > 0 else "")
            )
    return lines


def _review_words(data: Mapping[str, Any]) -> str:
    lines = [
        f"candidate {data['candidate_id']}: {data['subject']} @ {data['environment']}",
        f"  revision {data['revision']} (base {data['base_revision']})",
        f"  created by {(data.get('created_by') or {}).get('id')}; "
        f"change context {data.get('change_context')}",
        *_plan_words(data),
        f"obligations ({len(data['obligations'])}):",
        *[
            f"  {o['obligation_id']}: {o['policy_id']} on {o['scope']} ({o.get('reason')})"
            for o in data["obligations"]
        ],
    ]
    files = data.get("changed_files")
    if files is None:
        lines.append("changed files: not recorded")
    else:
        lines.append(
            f"changed files ({files['count']}" + (", list truncated" if files["truncated"] else "") + "):"
        )
        lines += [f"  {f}" for f in files["files"]]
    lines += _evidence_words(data)
    lines.append(f"reviews ({len(data['reviews'])}):")
    for r in data["reviews"]:
        state = "current plan" if r["current"] else f"plan v{r['plan_version']} (stale)"
        lines.append(f"  {r['reviewer']}: {r['decision']} of {state}, expires {r['expires_at']}")
    since = data["since_your_approval"]
    if since["status"] == "never_approved":
        lines.append("since your approval: you have not approved a version of this plan")
    elif since["status"] == "current":
        lines.append(
            f"since your approval: unchanged (you approved v{since['approved_version']}, the current plan)"
        )
    elif since["status"] == "unavailable":
        lines.append(
            f"since your approval (v{since['approved_version']}): cannot diff: {since.get('reason')}"
        )
    else:
        title = f"since your approval (v{since['approved_version']} -> v{since['current_version']})"
        lines.append(render_diff(since["diff"], title))
    if data.get("plan_digest"):
        lines.append(
            f"to approve: sentinel review approve {data['candidate_id']} "
            f"--expect-digest {short(data['plan_digest'], 16)}"
        )
    return "\n".join(lines)


def cmd_show(args: argparse.Namespace) -> int:
    persona = load_persona(args)
    data = review_view(persona.client(), persona.project(), args.id)
    emit(args.json, data, _review_words)
    return 0


def _what_is_reviewed(decision: str, summary: Mapping[str, Any], comment: str | None) -> str:
    lines = [
        f"{decision}: candidate {summary['candidate_id']} ({summary['subject']} @ {summary['environment']})",
        f"  revision     {summary['revision']}",
        f"  plan         v{summary['plan_version']} {summary['plan_digest']}",
        f"  contents     {summary['tasks']} task(s), {summary['checks']} check(s), "
        f"{summary['actions']} declared action(s)",
    ]
    if comment:
        lines.append(f"  comment      {comment}")
    return "\n".join(lines)


def cmd_decide(args: argparse.Namespace) -> int:
    """approve or reject the current plan digest at the candidate's revision, after showing what it is."""
    persona = load_persona(args)
    expected = (args.expect_digest or "").lower()
    if args.decision == "approve" and not expected:
        # The command fills in the digest it reads now; what the reviewer read was `review show`'s, maybe an
        # amendment ago. Only the digest they read, named, ties the approval to what they saw.
        raise CommandRefused(
            "DIGEST_REQUIRED",
            "approve needs --expect-digest: the digest of the plan you read",
            f"run `sentinel review show {args.id}` and the approve line it ends with",
        )
    if expected and not re.fullmatch(rf"[0-9a-f]{{{MIN_EXPECTED_HEX},64}}", expected):
        # Fewer digits could be matched by a plan the agent grinds (8 hex digits: 2^32 hashes).
        raise CommandRefused(
            "VALIDATION_FAILED",
            f"--expect-digest is {MIN_EXPECTED_HEX} to 64 hex characters of the digest",
            f"copy it from `sentinel review show {args.id}`",
        )
    client, project = persona.client(), persona.project()
    view = body_of(client.get_candidate(project, args.id), 200)
    digest = view.get("plan_digest")
    if not digest:
        raise CommandRefused("DIGEST_MISMATCH", "this candidate has no plan to review yet", "wait for a plan")
    if expected and not digest.startswith(expected):
        raise CommandRefused(
            "DIGEST_MISMATCH",
            f"the current plan digest is {short(digest, 16)}, not {expected}",
            REVIEW_AGAIN.format(cid=args.id),
        )
    plan = view.get("plan") or {}
    tasks = plan.get("tasks") or []
    summary = {
        "candidate_id": view["candidate_id"],
        "subject": view.get("subject"),
        "environment": view.get("environment"),
        "revision": view.get("revision"),
        "plan_version": current_plan_version(view),
        "plan_digest": digest,
        "tasks": len(tasks),
        "checks": sum(len(t.get("checks") or []) for t in tasks),
        "actions": len(plan.get("actions") or []),
    }
    if not args.yes and sys.stdin.isatty():
        # What is approved, before the question: on standard error, so `--json` output stays one document.
        # Off a terminal there is no question, and the refusal stays one line.
        print(shown(_what_is_reviewed(args.decision, summary, args.comment)), file=sys.stderr)
    confirm(f"{args.decision} plan v{summary['plan_version']} of {summary['candidate_id']}", yes=args.yes)
    body = {
        "decision": args.decision,
        "plan_digest": digest,
        "revision": view["revision"],
        "comment": args.comment or "",
    }
    answer = client.review(project, args.id, body)
    if answer.code in ("DIGEST_MISMATCH", "REVISION_MISMATCH"):
        raise CommandRefused(
            answer.code, str((answer.body or {}).get("detail")), REVIEW_AGAIN.format(cid=args.id)
        )
    recorded = body_of(answer, 201)
    result = {**summary, "decision": args.decision, "review": recorded}

    def words(data: dict[str, Any]) -> str:
        done = f"{data['decision']}d plan v{data['plan_version']} of {data['candidate_id']}" + (
            f"; expires {recorded.get('expires_at')}" if args.decision == "approve" else ""
        )
        return (_what_is_reviewed(args.decision, summary, args.comment) + "\n" if args.yes else "") + done

    emit(args.json, result, words)
    return 0


def cmd_plan_diff(args: argparse.Namespace) -> int:
    persona = load_persona(args)
    client, project = persona.client(), persona.project()
    view = body_of(client.get_candidate(project, args.id), 200)
    current = current_plan_version(view)
    if current is None:
        raise CommandRefused("NOT_FOUND", "this candidate has no plan yet", "propose or submit a plan first")
    to = args.to or current
    start = args.from_ if args.from_ is not None else to - 1
    if start < 1 or to < 1 or start > current or to > current:
        raise CommandRefused("VALIDATION_FAILED", f"plan versions run from 1 to {current}", "")

    digests = {v["plan_version"]: v["plan_digest"] for v in view.get("plan_versions") or []}

    def plan_at(version: int) -> dict[str, Any]:
        if version == current:
            return view.get("plan") or {}
        body = read_plan_version(client, project, args.id, version)
        if body is None or body.get("plan_digest") != digests.get(version):
            raise CommandRefused(
                "PLAN_VERSIONS_UNAVAILABLE",
                f"the gate did not return plan v{version} as the candidate lists it",
                "upgrade the gate, or diff against the current version only",
            )
        return body.get("plan") or {}

    result = {
        "candidate_id": args.id,
        "from": start,
        "to": to,
        "diff": diff_plans(plan_at(start), plan_at(to)),
    }
    emit(args.json, result, lambda d: render_diff(d["diff"], f"plan v{start} -> v{to}"))
    return 0


def register(commands: Any) -> None:
    review = commands.group("review", help="review plans: your queue, a candidate's facts, approve or reject")
    queue = review.add_parser("queue", help="candidates awaiting your review in the project")
    add_persona_options(queue)
    queue.set_defaults(run=cmd_queue)
    show = review.add_parser(
        "show",
        help="the plan, obligations, changed files, evidence, reviews, and what changed since you approved",
    )
    show.add_argument("id", metavar="ID", help="the candidate id")
    add_persona_options(show)
    show.set_defaults(run=cmd_show)
    for decision in ("approve", "reject"):
        sub = review.add_parser(
            decision, help=f"{decision} the candidate's current plan (digest and revision filled in)"
        )
        sub.add_argument("id", metavar="ID", help="the candidate id")
        sub.add_argument("--comment", required=decision == "reject", help="why (required to reject)")
        sub.add_argument(
            "--expect-digest",
            metavar="HEX",
            help="refuse unless the current plan digest starts with this, as `review show` printed it "
            f"({MIN_EXPECTED_HEX} to 64 hex characters; required to approve)",
        )
        sub.add_argument("--yes", action="store_true", help="do not ask (needed when not on a terminal)")
        add_persona_options(sub)
        sub.set_defaults(run=cmd_decide, decision=decision)

    plan = commands.group("plan", help="work plans")
    diff = plan.add_parser(
        "diff", help="the tasks, checks and actions that changed between two plan versions"
    )
    diff.add_argument("id", metavar="ID", help="the candidate id")
    diff.add_argument(
        "--from", dest="from_", type=int, metavar="N", help="the older version (default: to - 1)"
    )
    diff.add_argument("--to", type=int, metavar="M", help="the newer version (default: the current one)")
    add_persona_options(diff)
    diff.set_defaults(run=cmd_plan_diff)
