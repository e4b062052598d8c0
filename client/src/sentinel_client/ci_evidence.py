"""`sentinel-hook evidence`: CI publishes what it ran, with no hand-written JSON and no plan-local check id.

It finds the candidate for (subject, revision, environment) as the gate does, picks the check of its
current plan from the policy and scope the run covered (plan_checks), and posts one piece of evidence: the
JUnit report(s), or an exit code with the sha256 of each artifact computed here. Several JUnit files are
sent as one report (a `<testsuites>` holding each file's root element), never as one piece of evidence per
file: the newest evidence for a check decides (DOMAIN.md rule 10), so a passing file posted after a failing
one would hide the failure. It never reports tasks: that is the requester's step.

Exit codes: 0 the service stored the evidence and bound it without mismatches (whatever the outcome: a
failing run, published, is the gate's business); 1 stored but it will not count as it is (mismatches, or
not `verified`); 2 nothing stored (refused, unreachable, no matching check, no file, help and unknown
options).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .ci_gate import GATE_ERROR, _Parser
from .hook_messages import _one_line
from .plan_checks import PlanCheck, PlanCheckError, choose_check, tasks_with_all_evidence
from .releases import FULL_COMMIT
from .settings import ClientConfigError
from .verdicts import Problem, _call, _connect, _Deadline, _json_object, _settings, find_candidate

EXIT_PUBLISHED, EXIT_NOT_COUNTING = 0, 1
# The evidence route's body limit is 2 MiB (API.md); the rest of the body needs far less than this margin.
MAX_REPORT_BYTES = 2 * 1024 * 1024 - 64 * 1024
_XML_DECLARATION = re.compile(r"\A\s*<\?xml[^>]*\?>")


class Refused(Exception):
    """Nothing can be published; `code` is stable."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


def _files(patterns: Sequence[str], what: str) -> list[Path]:
    """Every file the globs match (`**` crosses folders), in order, once; a glob matching no file is
    refused: evidence of nothing must never be sent as if something ran."""
    found: list[Path] = []
    for pattern in patterns:
        matched = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        if not matched:
            raise Refused("NO_FILES", f"the {what} glob {pattern!r} matches no file (in {os.getcwd()})")
        found.extend(Path(p) for p in matched if Path(p) not in found)
    return found


def junit_report(paths: Sequence[Path]) -> str:
    """One report: a single file as it is (its sha256 is then the service's raw_sha256), several inside
    one `<testsuites>` root, each without its XML declaration."""
    texts = []
    for path in paths:
        raw = path.read_bytes()
        if len(raw) > MAX_REPORT_BYTES:
            raise Refused("PAYLOAD_TOO_LARGE", f"{path} is larger than {MAX_REPORT_BYTES} bytes")
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise Refused("MALFORMED_EVIDENCE", f"{path} is not UTF-8 text") from None
        if "<!DOCTYPE" in text.upper():
            # The service refuses any DTD; inside a combined report it would not even be well-formed.
            raise Refused("MALFORMED_EVIDENCE", f"{path} has a document type declaration, which is refused")
        texts.append(text)
    report = (
        texts[0]
        if len(texts) == 1
        else ("<testsuites>" + "".join(_XML_DECLARATION.sub("", text) for text in texts) + "</testsuites>")
    )
    if len(report.encode("utf-8")) > MAX_REPORT_BYTES:
        raise Refused(
            "PAYLOAD_TOO_LARGE",
            f"the JUnit report of {len(paths)} file(s) is larger than {MAX_REPORT_BYTES} bytes; "
            "publish fewer files per check",
        )
    return report


def artifacts(patterns: Sequence[str]) -> list[dict[str, str]]:
    """`{name, sha256}` for each file, named by its `/`-separated path as matched (relative to the
    working directory for a relative glob: the form the policy's expected_artifacts patterns match)."""
    listed = []
    for path in _files(patterns, "--artifact"):
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1024 * 1024), b""):
                digest.update(chunk)
        listed.append({"name": path.as_posix(), "sha256": digest.hexdigest()})
    return listed


def ci_source(environ: Mapping[str, str], source_url: str | None = None) -> dict[str, str]:
    """Where the run can be seen, from the CI's own variables; `--source-url` overrides the URL. The
    service stores it and never fetches it."""
    if environ.get("GITHUB_ACTIONS") == "true" and environ.get("GITHUB_RUN_ID"):
        run_id, attempt = environ["GITHUB_RUN_ID"], environ.get("GITHUB_RUN_ATTEMPT", "")
        server = environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
        url = f"{server}/{environ.get('GITHUB_REPOSITORY', '')}/actions/runs/{run_id}"
        if attempt:
            url, run_id = f"{url}/attempts/{attempt}", f"{run_id}/{attempt}"
        source = {"system": "github-actions", "run_id": run_id, "url": url}
    elif environ.get("GITLAB_CI") == "true" and environ.get("CI_JOB_ID"):
        source = {"system": "gitlab-ci", "run_id": environ["CI_JOB_ID"], "url": environ.get("CI_JOB_URL", "")}
    else:
        source = {"system": "ci", "run_id": "", "url": ""}
    if source_url is not None:
        if not re.fullmatch(r"https?://[^\s\x00-\x1f\x7f]{1,1990}", source_url):
            raise Refused("INVALID_SOURCE_URL", "--source-url must be one http(s) URL without whitespace")
        source["url"] = source_url
    return source


def ci_revision(environ: Mapping[str, str]) -> str:
    """The commit the CI run tested, when `--revision` is not given: on GitHub Actions the pull request's
    head for pull request events (GITHUB_SHA is then a merge commit GitHub made, which no candidate is
    for), else GITHUB_SHA (the merge queue's commit for merge_group, the pushed one for push); on GitLab CI,
    CI_COMMIT_SHA."""
    if environ.get("GITHUB_ACTIONS") == "true":
        if environ.get("GITHUB_EVENT_NAME", "").startswith("pull_request"):
            try:
                with open(environ.get("GITHUB_EVENT_PATH", ""), "rb") as handle:
                    head = json.load(handle)["pull_request"]["head"]["sha"]
            except (OSError, ValueError, KeyError, TypeError):
                raise Refused(
                    "INVALID_REVISION", "cannot read the pull request's head commit from GITHUB_EVENT_PATH"
                ) from None
            return str(head)
        return environ.get("GITHUB_SHA", "")
    if environ.get("GITLAB_CI") == "true":
        return environ.get("CI_COMMIT_SHA", "")
    raise Refused("INVALID_REVISION", "--revision is needed outside GitHub Actions and GitLab CI")


def _parse(argv: Sequence[str]) -> Any:
    parser = _Parser(
        prog="sentinel-hook evidence",
        description="Publish what CI ran as evidence for the check of the candidate's current plan that has "
        "this policy and scope: exit 0 stored and bound, 1 stored but it will not count as it is, 2 nothing "
        "stored (help and unknown options included). Never reports tasks. See docs/ci.md.",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--revision",
        help="the full commit id the run tested (default: from the CI's variables, see docs/ci.md)",
    )
    parser.add_argument("--policy", required=True, help="the project's policy id the run satisfies")
    parser.add_argument("--scope", required=True, help="the scope the run covered, e.g. payments-api")
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--junit", nargs="+", metavar="GLOB", help="JUnit XML report file(s), sent as one")
    given.add_argument("--exit-code", type=int, metavar="N", help="the exit code of the command run")
    parser.add_argument("--artifact", nargs="+", default=[], metavar="GLOB", help="with --exit-code")
    parser.add_argument("--source-url", help="where the run can be seen (default: from the CI's variables)")
    parser.add_argument("--check", help="the check id, when several checks match the policy and scope")
    parser.add_argument("--subject", help="overrides SENTINEL_SUBJECT")
    parser.add_argument("--environment", help="overrides SENTINEL_ENVIRONMENT")
    args = parser.parse_args(list(argv))
    if args.artifact and args.exit_code is None:
        parser.error("--artifact goes with --exit-code (a JUnit report is its own artifact)")
    if args.exit_code is not None and not 0 <= args.exit_code <= 255:
        parser.error("--exit-code must be between 0 and 255")
    return args


def _posted(body: dict[str, Any], check: PlanCheck, target: str, source: dict[str, str]) -> list[str]:
    counts = body.get("counts") or {}
    binding = body.get("binding") or {}
    mismatches = binding.get("mismatches") or []
    obligations = binding.get("obligation_ids") or []
    return [
        f"POSTED  evidence {body.get('evidence_id')} for check {check.check_id} (task {check.task_id}) "
        f"on {target}",
        f"  outcome: {body.get('outcome')}  trust: {body.get('trust')}",
        "  counts: "
        + ", ".join(f"{name} {counts.get(name)}" for name in ("tests", "failures", "errors", "skipped")),
        f"  bound to: {', '.join(map(str, obligations)) or 'nothing'} "
        f"(policy {binding.get('policy_id')} v{binding.get('policy_version')})",
        f"  mismatches: {', '.join(map(str, mismatches)) or 'none'}",
        f"  raw sha256: {body.get('raw_sha256')}",
        f"  source: {source['system']} {source['url'] or '(no URL)'}",
    ]


def evidence(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    args = _parse(argv)
    environ = os.environ if environ is None else environ
    try:
        revision = (args.revision or ci_revision(environ)).lower()
        if not FULL_COMMIT.fullmatch(revision):
            raise Refused("INVALID_REVISION", "--revision must be a full commit id (40 or 64 hex digits)")
        settings = _settings()
        settings.subject = args.subject or settings.subject
        settings.environment = args.environment or settings.environment
        source = ci_source(environ, args.source_url)
        # Read every file before asking the service anything: a missing report is the run's fault.
        if args.junit is not None:
            payload: dict[str, Any] = {"junit_xml": junit_report(_files(args.junit, "--junit"))}
        else:
            payload = {"result": {"exit_code": args.exit_code, "artifacts": artifacts(args.artifact)}}
        client = _connect(settings)
        budget = settings.timeout_seconds
        project = settings.project or ""
        target = f"{settings.subject} at {revision} in {settings.environment}"
        candidate_id = find_candidate(client, settings, revision, _Deadline(budget))
        if candidate_id is None:
            raise Refused("NO_CANDIDATE", f"no candidate exists for {target}: create and attest it first")
        read = _call(client, _Deadline(budget), lambda: client.get_candidate(project, candidate_id))
        check = choose_check(_json_object(read, settings, "candidate"), args.policy, args.scope, args.check)
        body = {
            "check_id": check.check_id,
            "subject": settings.subject,
            "revision": revision,
            "environment": settings.environment,
            "scope": [args.scope],
            "observed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "source": source,
            **payload,
        }
        answer = _call(client, _Deadline(budget), lambda: client.post_evidence(project, candidate_id, body))
        stored = _json_object(answer, settings, "evidence route", (201,))
        after = _call(client, _Deadline(budget), lambda: client.get_candidate(project, candidate_id))
        complete = tasks_with_all_evidence(_json_object(after, settings, "candidate"))
    except (Refused, Problem, PlanCheckError, ClientConfigError) as error:
        code = error.code
        detail = getattr(error, "detail", None) or getattr(error, "message", str(error))
        return GATE_ERROR, "", f"ERROR  nothing published: {code}\n  {_one_line(detail)}\n"
    except OSError as error:  # a report or artifact that matched but cannot be read
        detail = f"cannot read {error.filename}: {error.strerror or error}"
        return GATE_ERROR, "", f"ERROR  nothing published: UNREADABLE\n  {_one_line(detail)}\n"
    lines = _posted(stored, check, target, source)
    for task_id, checks in complete:
        shown = "; ".join(f"{check_id}: {state}" for check_id, state in checks)
        lines.append(
            f"TASK {task_id}: every check has evidence ({shown}); reporting the task is the requester's "
            f"step (POST …/tasks/{task_id}/reports), which this command does not take"
        )
    binding = stored.get("binding") or {}
    counts = stored.get("trust") == "verified" and not binding.get("mismatches")
    if not counts:
        lines.append(
            "NOT COUNTING  this evidence will not decide as it is: only verified evidence without "
            "mismatches does (check the publisher's token and the policy's trusted_publishers)"
        )
    return (EXIT_PUBLISHED if counts else EXIT_NOT_COUNTING), "\n".join(lines) + "\n", ""
