"""`sentinel evidence post`: the publisher's (or a requester's) evidence for one check of a candidate's plan.

The check is found from the plan by the code `sentinel-hook evidence` uses (plan_checks.choose_check), and
the report and artifacts are read by its functions (ci_evidence), so a person and CI bind the same run to
the same check. The candidate's own subject and environment are sent; the revision is the commit the run
tested (`--revision`, else the CI's own variables, as `sentinel-hook evidence` reads them), and one that is
not the candidate's is refused: a candidate id handed to CI by its requester (the agent) must not turn a run
of another commit into evidence for the candidate's. Every file is read before the first request.
"""

from __future__ import annotations

import argparse
import glob
import os
from datetime import UTC, datetime
from typing import Any

from .ci_evidence import Refused, _files, artifacts, ci_revision, ci_source, junit_report
from .cli_candidate import candidate_id, read_candidate
from .cli_context import add_persona_options, body_of, load_persona
from .cli_output import CommandRefused, emit, progress
from .plan_checks import PlanCheck, PlanCheckError, choose_check, plan_checks
from .releases import FULL_COMMIT

NEXT_STEPS = {
    "NO_FILES": "check the glob (quote it so the shell does not expand it) and the working directory",
    "PAYLOAD_TOO_LARGE": "publish fewer files per check",
    "MALFORMED_EVIDENCE": "publish the test runner's JUnit XML as written",
    "INVALID_SOURCE_URL": "give one http(s) URL",
    "PLAN_MISSING": "the requester proposes a plan first: `sentinel plan propose ID`",
    "NO_MATCHING_CHECK": "`sentinel plan show ID` lists the checks, their policies and scopes",
    "AMBIGUOUS_CHECK": "name the check with --check",
    "CHECK_NOT_MATCHING": "`sentinel plan show ID` lists the checks, their policies and scopes",
    "CHECK_NOT_IN_PLAN": "`sentinel plan show ID` lists the checks of the current plan",
}


def refused(error: Refused | PlanCheckError, candidate: str = "ID") -> CommandRefused:
    message = error.detail if isinstance(error, Refused) else error.message
    return CommandRefused(error.code, message, NEXT_STEPS.get(error.code, "").replace(" ID", f" {candidate}"))


def _payload(args: argparse.Namespace) -> dict[str, Any]:
    """The report or the exit code with artifact digests, read from the files now."""
    try:
        if args.junit is not None:
            return {"junit_xml": junit_report(_files(args.junit, "--junit"))}
        listed = []
        for item in args.artifact:
            name, sep, path = item.partition("=")
            if sep and name:
                # NAME=FILE: the digest of that one file, under the name the policy expects.
                (found,) = artifacts([glob.escape(path)])
                listed.append({"name": name, "sha256": found["sha256"]})
            else:
                listed.extend(artifacts([item]))
        return {"result": {"exit_code": args.exit_code, "artifacts": listed}}
    except Refused as error:
        raise refused(error) from None
    except OSError as error:
        raise CommandRefused(
            "UNREADABLE", f"cannot read {error.filename}: {error.strerror or error}", "check the file"
        ) from None


def _check(candidate: dict[str, Any], args: argparse.Namespace) -> tuple[PlanCheck, list[str]]:
    """The plan's check and the scopes the evidence claims: --policy and --scope choose as the hook does;
    --check alone takes the check's own policy and the scopes of the obligations it covers."""
    try:
        if args.policy is not None:
            return choose_check(candidate, args.policy, args.scope, args.check), [args.scope]
        checks = plan_checks(candidate)
    except PlanCheckError as error:
        raise refused(error, args.candidate_id) from None
    named = [check for check in checks if check.check_id == args.check]
    if not named:
        listed = "; ".join(check.describe() for check in checks) or "no checks"
        raise CommandRefused(
            "CHECK_NOT_IN_PLAN",
            f"the current plan has no check {args.check}; it has: {listed}",
            NEXT_STEPS["CHECK_NOT_IN_PLAN"].replace(" ID", f" {args.candidate_id}"),
        )
    if not named[0].scopes:
        raise CommandRefused("CHECK_NOT_IN_PLAN", f"check {args.check} covers no obligation", "give --scope")
    return named[0], list(named[0].scopes)


def _source(args: argparse.Namespace) -> dict[str, str]:
    try:
        source = ci_source(os.environ, args.source_url)
    except Refused as error:
        raise refused(error) from None
    if args.run_id is not None:
        source["run_id"] = args.run_id
    if args.system is not None:
        source["system"] = args.system
    return source


def _tested_revision(args: argparse.Namespace, candidate: dict[str, Any]) -> str:
    """The commit the run tested, which must be the candidate's."""
    given = args.revision
    if given is None:
        try:
            given = ci_revision(os.environ)
        except Refused:
            raise CommandRefused(
                "REVISION_REQUIRED",
                "say which commit the run tested: outside GitHub Actions and GitLab CI it is not known",
                "give --revision SHA, the full commit id the tests ran on (e.g. `git rev-parse HEAD`)",
            ) from None
    revision = str(given).strip().lower()
    if not FULL_COMMIT.fullmatch(revision):
        raise CommandRefused("VALIDATION_FAILED", "--revision must be a full commit id (40 or 64 hex digits)")
    if revision != str(candidate.get("revision") or "").lower():
        raise CommandRefused(
            "REVISION_MISMATCH",
            f"the run tested {revision[:12]}; candidate {args.candidate_id} is for "
            f"{str(candidate.get('revision'))[:12]}",
            "post it to the candidate of the commit the run tested (`sentinel candidate create` in that "
            "checkout names it)",
        )
    return revision


def cmd_post(args: argparse.Namespace) -> int:
    if args.check is None and args.policy is None:
        raise CommandRefused("BAD_OPTION", "say which check: --check C, or --policy P --scope S")
    if (args.policy is None) != (args.scope is None):
        raise CommandRefused(
            "BAD_OPTION", "--policy and --scope go together", "give both, or --check C alone"
        )
    if args.artifact and args.exit_code is None:
        raise CommandRefused(
            "BAD_OPTION", "--artifact goes with --exit-code (a JUnit report is its own artifact)"
        )
    if args.exit_code is not None and not 0 <= args.exit_code <= 255:
        raise CommandRefused("BAD_OPTION", "--exit-code must be between 0 and 255")
    payload = _payload(args)
    source = _source(args)
    persona = load_persona(args)
    client, project = persona.client(), persona.project()
    candidate = read_candidate(client, project, args.candidate_id)
    revision = _tested_revision(args, candidate)
    check, scopes = _check(candidate, args)
    body = {
        "check_id": check.check_id,
        "subject": candidate.get("subject"),
        "revision": revision,
        "environment": candidate.get("environment"),
        "scope": scopes,
        "observed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": source,
        **payload,
    }
    size = len(payload.get("junit_xml") or "")
    with progress(f"uploading evidence for check {check.check_id} ({size // 1024} KiB)"):
        answer = client.post_evidence(project, args.candidate_id, body)
    stored = body_of(answer, 201)
    binding = stored.get("binding") or {}
    counts = stored.get("trust") == "verified" and not binding.get("mismatches")
    shown = {**stored, "check_id": check.check_id, "task_id": check.task_id, "counts_toward_decision": counts}
    emit(args.json, shown, _words)
    return 0


def _words(data: dict[str, Any]) -> str:
    counts = data.get("counts") or {}
    binding = data.get("binding") or {}
    lines = [
        f"evidence {data.get('evidence_id')} for check {data.get('check_id')} (task {data.get('task_id')})",
        f"  outcome: {data.get('outcome')}  trust: {data.get('trust')}",
        "  counts: " + ", ".join(f"{n} {counts.get(n)}" for n in ("tests", "failures", "errors", "skipped")),
        f"  bound to: {', '.join(map(str, binding.get('obligation_ids') or [])) or 'nothing'} "
        f"(policy {binding.get('policy_id')} v{binding.get('policy_version')})",
        f"  mismatches: {', '.join(map(str, binding.get('mismatches') or [])) or 'none'}",
    ]
    if not data.get("counts_toward_decision"):
        lines.append(
            "note: this evidence will not decide as it is: only verified evidence without mismatches does "
            "(a ci publisher the policy lists in trusted_publishers)"
        )
    return "\n".join(lines)


def register(commands: Any) -> None:
    group = commands.group("evidence", help="publish evidence for a check of a candidate's plan")
    post = group.add_parser(
        "post", help="post a JUnit report or an exit code for the plan's check (found from policy and scope)"
    )
    post.add_argument("candidate_id", metavar="ID", type=candidate_id)
    post.add_argument("--check", metavar="C", help="the plan's check id (alone, or to choose among matches)")
    post.add_argument("--policy", metavar="P", help="the project's policy the run satisfies")
    post.add_argument("--scope", metavar="S", help="the scope the run covered, e.g. payments-api")
    given = post.add_mutually_exclusive_group(required=True)
    given.add_argument("--junit", nargs="+", metavar="GLOB", help="JUnit XML report file(s), sent as one")
    given.add_argument("--exit-code", type=int, metavar="N", help="the exit code of the command run")
    post.add_argument(
        "--artifact", nargs="+", default=[], metavar="NAME=FILE", help="with --exit-code: artifacts by digest"
    )
    post.add_argument(
        "--revision",
        metavar="SHA",
        help="the commit the run tested (default: from GitHub Actions or GitLab CI variables); it must be "
        "the candidate's",
    )
    post.add_argument("--source-url", metavar="URL", help="where the run can be seen (stored, never fetched)")
    post.add_argument("--run-id", metavar="R", help="the run's id in its system")
    post.add_argument(
        "--system", metavar="S", help="the system that ran it (default: from CI variables, or ci)"
    )
    add_persona_options(post)
    post.set_defaults(run=cmd_post)
