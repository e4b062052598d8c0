"""`sentinel-hook`: the Claude Code command hook, and `sentinel-hook gate`, the same decision for CI.

The hook is early feedback for the agent; the gate, run as a required check on the protected branch, is the
enforcement point. Both fail closed: anything that is not a well-formed `ready` for the exact commit a
command acts on is a denial that names its reason.

Claude Code proceeds on any exit code but 2, on a hook that times out, and on JSON that fails its schema;
so every denial here is exit code 2 with the reason on stderr (the one signal documented to block whatever
the JSON and whatever the version), and the client gives up well before the hook's own timeout. A pass is
exit 0 with no output: an explicit `allow` would skip Claude Code's own permission prompt.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sentinel_client.api import Response, SentinelClient, TransportError
from sentinel_client.settings import ClientConfigError, ClientSettings, SentinelClientError, load_settings

from .release_analysis import FULL_COMMIT, analyse_command, analyse_mcp, analyse_powershell
from .releases import Analysis, Release

EXIT_PASS = 0
EXIT_BLOCK = 2  # the only exit code Claude Code treats as blocking
GATE_READY, GATE_HOLD, GATE_ERROR = 0, 1, 2

# All git calls of one hook run share this budget, so the whole run stays within
# SENTINEL_TIMEOUT_SECONDS (the service) plus this, below the hook timeout the docs recommend (60 s).
GIT_BUDGET_SECONDS = 5.0
# A socket timeout normally ends a slow call; the watchdog ends one that trickles bytes forever.
WATCHDOG_GRACE_SECONDS = 0.25
MAX_EVENT_BYTES = 64 * 1024 * 1024
# Claude Code spills hook output over 10,000 characters to a file; a reason must arrive whole.
MAX_REASON_CHARS = 9000
MAX_FINDINGS_SHOWN = 20

# Stop fires at the end of every turn; only a turn that claims the work is finished is worth a nudge (a
# question to the user is not). A Stop without its final message is judged anyway.
CLAIMS_DONE = re.compile(
    r"(?i)\b(?:done|complete[ds]?|finished|implemented|fixed|resolved|ready|shipped|merged|deployed|released"
    r"|published|pushed|(?:tests?|checks?|suite)\s+(?:\w+\s+)?(?:pass|passes|passed|passing|green))\b"
)

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

USAGE = """usage: sentinel-hook                 read a Claude Code hook event on stdin (PreToolUse, Stop,
                                     SubagentStop, TaskCompleted); exit 2 with the reason on stderr denies
       sentinel-hook gate --revision SHA [--subject S] [--environment E]
                                     the same decision for CI: exit 0 ready, 1 hold, 2 error
Settings: SENTINEL_URL, SENTINEL_PROJECT, SENTINEL_SUBJECT, SENTINEL_ENVIRONMENT, SENTINEL_TOKEN_FILE,
SENTINEL_TIMEOUT_SECONDS, SENTINEL_RELEASE_PATTERNS (or ~/.config/sentinel/client.json). See docs/hook.md."""


class Problem(Exception):
    """Why no decision could be established; `code` is stable."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


@dataclass
class Verdict:
    """The answer for one thing judged. `findings` carry the service's findings, or the problem."""

    target: str
    state: str  # "ready", "hold" or "error"
    candidate_id: str | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def error(cls, target: str, problem: Problem, candidate_id: str | None = None) -> Verdict:
        return cls(target, "error", candidate_id, [{"code": problem.code, "detail": problem.detail}])


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    stdout: str = ""
    stderr: str = ""


PASS = Outcome(EXIT_PASS)


# ---- git ---------------------------------------------------------------------------------------------


class GitRepository:
    """The git facts the hook needs, read with the git on PATH; every failure is None, never a guess."""

    def __init__(self, budget: float = GIT_BUDGET_SECONDS) -> None:
        self._end = time.monotonic() + budget
        self._environ = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}

    def _git(self, directory: str, options: Sequence[str], *args: str) -> str | None:
        remaining = self._end - time.monotonic()
        if remaining <= 0:
            return None
        try:
            done = subprocess.run(
                ["git", "-C", directory, *options, *args],
                capture_output=True,
                text=True,
                timeout=remaining,
                env=self._environ,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.SubprocessError, ValueError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    def current_branch(self, directory: str, options: Sequence[str]) -> str | None:
        return self._git(directory, options, "symbolic-ref", "--quiet", "--short", "HEAD") or None

    def push_destinations(self, directory: str, options: Sequence[str]) -> list[str] | None:
        branch = self.current_branch(directory, options)
        if branch is None:
            return None
        if self._git(directory, options, "config", "--get-regexp", r"^remote\..*\.push$"):
            return None  # configured push refspecs: the destination is theirs to decide, not visible here
        mapped = self._git(
            directory,
            options,
            "for-each-ref",
            "--format=%(upstream:remoteref)%0a%(push:remoteref)",
            f"refs/heads/{branch}",
        )
        names = {branch}
        for line in (mapped or "").splitlines():
            if line.startswith("refs/heads/"):
                names.add(line.removeprefix("refs/heads/"))
        return sorted(names)

    def git_alias(self, directory: str, options: Sequence[str], name: str) -> str | None:
        return self._git(directory, options, "config", "--get", f"alias.{name}")

    def rev_parse(self, directory: str, options: Sequence[str], ref: str) -> str | None:
        if FULL_COMMIT.fullmatch(ref):
            return ref.lower()
        found = self._git(
            directory, options, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"
        )
        return found.lower() if found and FULL_COMMIT.fullmatch(found) else None


# ---- the service -------------------------------------------------------------------------------------


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self._end - time.monotonic()


def _timeout(client: SentinelClient, deadline: _Deadline) -> Problem:
    return Problem("TIMEOUT", f"no answer from {client.base_url} within {deadline.seconds:g} s")


def _call(client: SentinelClient, deadline: _Deadline, request: Callable[[], Response]) -> Response:
    """One request within what is left of the budget; a watchdog bounds a server that trickles bytes."""
    remaining = deadline.remaining()
    if remaining <= 0:
        raise _timeout(client, deadline)
    client.timeout = remaining
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["response"] = request()
        except BaseException as error:  # noqa: BLE001 - handed back to the caller's thread
            box["error"] = error

    worker = threading.Thread(target=run, name="sentinel-request", daemon=True)
    worker.start()
    worker.join(remaining + WATCHDOG_GRACE_SECONDS)
    if worker.is_alive():
        raise _timeout(client, deadline)
    error = box.get("error")
    if isinstance(error, TransportError):
        if error.code == "TIMEOUT":
            raise _timeout(client, deadline)
        raise Problem(error.code, error.message)
    if isinstance(error, SentinelClientError):
        raise Problem(error.code, error.message)
    if isinstance(error, ValueError):
        raise Problem("INVALID_REQUEST", str(error))
    if error is not None:
        raise error
    return box["response"]


def _refusal(response: Response, settings: ClientSettings) -> Problem:
    body = response.body if isinstance(response.body, dict) else {}
    if response.status == 401:
        return Problem("UNAUTHORIZED", "the service asked for a token (HTTP 401); check SENTINEL_TOKEN_FILE")
    if response.status == 403 and body == {"message": "Forbidden"}:
        return Problem(
            "TOKEN_REFUSED",
            "the service refused the token (HTTP 403): unknown, malformed, expired or revoked",
        )
    detail = body.get("detail") or body.get("title")
    text = f"HTTP {response.status}" + (f": {detail}" if isinstance(detail, str) and detail else "")
    if response.status == 404:
        text += f" (project {settings.project} does not exist, or the token has no role in it)"
    if response.retry_after is not None:
        text += f"; retry after {response.retry_after:g} s"
    return Problem(response.code or f"HTTP_{response.status}", text)


def _json_object(response: Response, settings: ClientSettings, what: str) -> dict[str, Any]:
    if not response.ok:
        raise _refusal(response, settings)
    if response.status != 200 or not isinstance(response.body, dict):
        raise Problem("BAD_RESPONSE", f"the {what} answered HTTP {response.status} without a JSON object")
    return response.body


def _describe(settings: ClientSettings, revision: str) -> str:
    return f"{settings.subject} at {revision} in {settings.environment}"


def judge(client: SentinelClient, settings: ClientSettings, revision: str, deadline: _Deadline) -> Verdict:
    """Find the candidate for (subject, revision, environment) and read its decision; never raises."""
    target = _describe(settings, revision)
    project, subject, environment = settings.project or "", settings.subject, settings.environment
    candidate_id: str | None = None
    try:
        found = _json_object(
            _call(
                client,
                deadline,
                lambda: client.find_candidates(
                    project, subject=subject, revision=revision, environment=environment
                ),
            ),
            settings,
            "candidate lookup",
        )
        items = found.get("candidates")
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise Problem("BAD_RESPONSE", "the candidate lookup answered without a list of candidates")
        if any(
            (item.get("subject"), str(item.get("revision", "")).lower(), item.get("environment"))
            != (subject, revision, environment)
            for item in items
        ):
            raise Problem(
                "BAD_RESPONSE", "the candidate lookup answered with another subject, revision or environment"
            )
        if not items:
            return Verdict(
                target,
                "hold",
                findings=[
                    {
                        "code": "NO_CANDIDATE",
                        "detail": "no candidate exists for this subject, revision and environment",
                        "remediation_hint": "create the candidate for this exact commit (POST "
                        f"/v1/projects/{project}/candidates) and have CI attest it",
                    }
                ],
            )
        if len(items) > 1:
            raise Problem(
                "AMBIGUOUS_CANDIDATE",
                f"{len(items)} candidates answer for one subject, revision and environment",
            )
        found_id = items[0].get("candidate_id")
        if not isinstance(found_id, str) or not found_id:
            raise Problem("BAD_RESPONSE", "the candidate lookup answered without a candidate id")
        candidate_id = found_id
        body = _json_object(
            _call(client, deadline, lambda: client.decision(project, found_id)), settings, "decision"
        )
        return _verdict(body, target, found_id, revision)
    except Problem as problem:
        return Verdict.error(target, problem, candidate_id)


def _verdict(body: dict[str, Any], target: str, candidate_id: str, revision: str) -> Verdict:
    findings = body.get("findings")
    if not isinstance(findings, list) or not all(
        isinstance(item, dict) and isinstance(item.get("code"), str) for item in findings
    ):
        raise Problem("BAD_RESPONSE", "the decision has no list of findings")
    if str(body.get("revision", "")).lower() != revision:
        raise Problem(
            "BAD_RESPONSE", f"the decision is for revision {body.get('revision')!r}, not {revision}"
        )
    decision = body.get("decision")
    if decision == "ready":
        if findings:
            raise Problem("BAD_RESPONSE", "the decision is ready but carries findings")
        return Verdict(target, "ready", candidate_id)
    if decision == "hold":
        return Verdict(target, "hold", candidate_id, findings)
    shown = json.dumps(decision)[:40]
    raise Problem(
        "UNKNOWN_DECISION", f"the service answered the decision {shown}, which is neither ready nor hold"
    )


def _connect(settings: ClientSettings) -> SentinelClient:
    settings.require("url", "project", "subject", "environment", "token_file")
    try:
        return SentinelClient.from_settings(settings)
    except ValueError as error:
        raise Problem("TOKEN_UNAVAILABLE", str(error)) from None


class Service:
    """The service as one hook run sees it: connected once, one time budget for every request."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._client: SentinelClient | None = None
        self._problem: Problem | None = None
        self._deadline: _Deadline | None = None

    def verdict(self, revision: str) -> Verdict:
        if self._client is None and self._problem is None:
            try:
                self._client = _connect(self.settings)
                self._deadline = _Deadline(self.settings.timeout_seconds)
            except ClientConfigError as error:
                self._problem = Problem(error.code, error.message)
            except Problem as problem:
                self._problem = problem
        if self._problem is not None:
            return Verdict.error(f"the commit {revision}", self._problem)
        assert self._client is not None and self._deadline is not None
        return judge(self._client, self.settings, revision, self._deadline)


# ---- text for people and agents ----------------------------------------------------------------------


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


# ---- events ------------------------------------------------------------------------------------------


def _settings() -> ClientSettings:
    try:
        return load_settings()
    except ClientConfigError as error:
        raise Problem(error.code, error.message) from None


def _release_revisions(release: Release, repository: GitRepository) -> list[str]:
    if release.unresolved is not None or release.directory is None:
        raise Problem("REVISION_UNRESOLVED", release.unresolved or "the hook cannot tell where it runs")
    revisions: list[str] = []
    for ref in release.refs or ("HEAD",):
        revision = repository.rev_parse(release.directory, release.git_options, ref)
        if revision is None:
            raise Problem(
                "REVISION_UNRESOLVED", f"`git rev-parse {ref}` names no commit in {release.directory}"
            )
        revisions.append(revision)
    return revisions


def pre_tool_use(event: dict[str, Any]) -> Outcome:
    tool = event.get("tool_name")
    if not isinstance(tool, str) or not (tool in ("Bash", "PowerShell") or tool.startswith("mcp__")):
        return PASS  # file edits, reads and searches never release
    tool_input = event.get("tool_input")
    if not isinstance(tool_input, dict):
        raise Problem("EVENT_INVALID", f"the {tool} event carries no tool_input object")
    cwd = event.get("cwd") if isinstance(event.get("cwd"), str) else None
    settings = _settings()
    repository = GitRepository()
    if tool in ("Bash", "PowerShell"):
        command = tool_input.get("command")
        if not isinstance(command, str):
            raise Problem("EVENT_INVALID", f"the {tool} event carries no command")
        analysis = (
            analyse_command(command, cwd, settings.release_patterns, repository)
            if tool == "Bash"
            else analyse_powershell(command, settings.release_patterns)
        )
    else:
        analysis = analyse_mcp(tool, tool_input, cwd, settings.release_patterns)
    if analysis.hidden:
        return _hidden_denial(analysis)
    if not analysis.releases:
        return PASS
    service = Service(settings)
    for release in analysis.releases:
        subject = f"`{_one_line(release.command)}`"
        try:
            revisions = _release_revisions(release, repository)
        except Problem as problem:
            return _denial(subject, [Verdict.error("it", problem)])
        verdicts = [service.verdict(revision) for revision in dict.fromkeys(revisions)]
        if any(verdict.state != "ready" for verdict in verdicts):
            return _denial(subject, [verdict for verdict in verdicts if verdict.state != "ready"])
    return PASS


def _head_verdict(event: dict[str, Any]) -> Verdict:
    """The decision for the commit the agent is on: HEAD in the event's cwd."""
    cwd = event.get("cwd")
    try:
        if not isinstance(cwd, str) or not cwd:
            raise Problem("REVISION_UNRESOLVED", "the event names no working directory")
        revision = GitRepository().rev_parse(cwd, (), "HEAD")
        if revision is None:
            raise Problem("REVISION_UNRESOLVED", f"`git rev-parse HEAD` names no commit in {cwd}")
        settings = _settings()
    except Problem as problem:
        return Verdict.error("this change", problem)
    return Service(settings).verdict(revision)


def on_stop(event: dict[str, Any], name: str) -> Outcome:
    """A nudge, not the gate: an agent that says it is done while its candidate does not pass keeps going,
    once. Claude Code ends the turn after repeated blocks anyway, so with `stop_hook_active` the user is
    told instead. A task marked completed is always a claim of being done."""
    said = event.get("last_assistant_message")
    if name != "TaskCompleted" and isinstance(said, str) and not CLAIMS_DONE.search(said):
        return PASS
    verdict = _head_verdict(event)
    if verdict.state == "ready":
        return PASS
    codes = ", ".join(dict.fromkeys(_one_line(finding.get("code")) for finding in verdict.findings))
    if name != "TaskCompleted" and event.get("stop_hook_active") is True:
        what = (
            f"{verdict.target} is on hold"
            if verdict.state == "hold"
            else "the readiness of this change could not be established"
        )
        message = (
            f"Sentinel: the agent stopped while {what} ({codes}). A release will be denied until it is ready."
        )
        return Outcome(EXIT_PASS, stdout=json.dumps({"systemMessage": _clip(message)}) + "\n")
    finish = "marking the task completed" if name == "TaskCompleted" else "finishing"
    lines = [f"Sentinel: this change is not ready to release: {_state_phrase(verdict)}."]
    lines += _finding_lines(verdict.findings)
    if verdict.state == "hold":
        lines.append(
            f"Before {finish}, resolve the findings, or tell the user plainly that the change is not "
            "ready to release."
        )
    else:
        lines.append(
            f"Before {finish}, fix the cause, or tell the user plainly that its readiness is unconfirmed."
        )
    return _block("\n".join(lines))


def _event(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_EVENT_BYTES:
        raise Problem("EVENT_INVALID", f"the event is larger than {MAX_EVENT_BYTES} bytes")
    try:
        event = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise Problem("EVENT_INVALID", f"stdin is not a JSON event: {error}") from None
    if not isinstance(event, dict) or not isinstance(event.get("hook_event_name"), str):
        raise Problem("EVENT_INVALID", "stdin is not a JSON object with a hook_event_name")
    return event


def run_hook(raw: bytes) -> Outcome:
    """One hook event in, one outcome out; anything unexpected is a denial."""
    name = "hook"
    try:
        event = _event(raw)
        name = event["hook_event_name"]
        if name == "PreToolUse":
            return pre_tool_use(event)
        if name in ("Stop", "SubagentStop", "TaskCompleted"):
            return on_stop(event, name)
        return PASS  # events that cannot release: nothing to gate
    except Problem as problem:
        return _block(
            f"Sentinel could not judge this {_one_line(name)} event (fail closed).\n"
            f"{_finding_line({'code': problem.code, 'detail': problem.detail})}\n{NEXT_STEP_ERROR}"
        )


# ---- the CI gate -------------------------------------------------------------------------------------


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


def gate(argv: Sequence[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(
        prog="sentinel-hook gate",
        description="Ask Sentinel whether a commit may advance: exit 0 ready, 1 hold, 2 error. Run it as a "
        "required check on the protected branch.",
    )
    parser.add_argument("--revision", required=True, help="the full commit id (40 or 64 hex digits)")
    parser.add_argument("--subject", help="overrides SENTINEL_SUBJECT")
    parser.add_argument("--environment", help="overrides SENTINEL_ENVIRONMENT")
    args = parser.parse_args(list(argv))
    target = f"the commit {args.revision}"
    try:
        if not FULL_COMMIT.fullmatch(args.revision):
            raise Problem(
                "INVALID_REVISION",
                "--revision must be a full commit id (40 or 64 hex digits), e.g. $(git rev-parse HEAD)",
            )
        settings = _settings()
    except Problem as problem:
        return _gate_report(Verdict.error(target, problem))
    settings.subject = args.subject or settings.subject
    settings.environment = args.environment or settings.environment
    return _gate_report(Service(settings).verdict(args.revision.lower()))


# ---- entry point -------------------------------------------------------------------------------------


def _write(stream: Any, text: str) -> None:
    if text:
        stream.buffer.write(text.encode("utf-8"))
        stream.flush()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["gate"]:
        try:
            code, out, err = gate(args[1:])
        except SystemExit as exit_:  # argparse has printed usage (exit 2) or help (exit 0)
            return exit_.code if isinstance(exit_.code, int) else GATE_ERROR
        except Exception as error:  # noqa: BLE001 - fail closed, and say why
            code, out, err = GATE_ERROR, "", f"ERROR  INTERNAL_ERROR: {type(error).__name__}: {error}\n"
        _write(sys.stdout, out)
        _write(sys.stderr, err)
        return code
    if args[:1] in (["-h"], ["--help"]):
        _write(sys.stdout, USAGE + "\n")
        return EXIT_PASS
    if args:
        outcome = _block(f"Sentinel hook: unknown arguments {' '.join(args)!r} (fail closed).\n{USAGE}")
    else:
        try:
            outcome = run_hook(sys.stdin.buffer.read(MAX_EVENT_BYTES + 1))
        except Exception as error:  # noqa: BLE001 - fail closed, and say why
            outcome = _block(
                f"Sentinel hook failed (fail closed).\n- INTERNAL_ERROR: {type(error).__name__}: "
                f"{_one_line(error)}\n{NEXT_STEP_ERROR}"
            )
    _write(sys.stdout, outcome.stdout)
    _write(sys.stderr, outcome.stderr + "\n" if outcome.stderr else "")
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
