"""The Claude Code hook events and their answers: PreToolUse (a release command needs a ready decision; a
command that hides what it runs is denied), and Stop, SubagentStop and TaskCompleted (a nudge when the agent
says it is done while its commit is not ready).
"""

from __future__ import annotations

import json
import re
from typing import Any

from .git_repository import GitRepository
from .hook_messages import (
    EXIT_PASS,
    NEXT_STEP_ERROR,
    PASS,
    Outcome,
    _block,
    _clip,
    _denial,
    _finding_line,
    _finding_lines,
    _hidden_denial,
    _one_line,
    _state_phrase,
)
from .managed_settings import HookSettings, load_hook_settings
from .mcp_and_powershell import analyse_mcp
from .powershell import analyse_powershell
from .release_analysis import analyse_command, git_internal
from .releases import Analysis, Hidden, Release
from .settings import ClientConfigError
from .verdicts import Problem, Service, Verdict

MAX_EVENT_BYTES = 64 * 1024 * 1024

# Stop fires at the end of every turn; only a turn that claims the work is finished is worth a nudge (a
# question to the user is not). A Stop without its final message is judged anyway.
CLAIMS_DONE = re.compile(
    r"(?i)\b(?:done|complete[ds]?|finished|implemented|fixed|resolved|ready|shipped|merged|deployed|released"
    r"|published|pushed|(?:tests?|checks?|suite)\s+(?:\w+\s+)?(?:pass|passes|passed|passing|green))\b"
)


# Tools that write files: a write into git's own files would make git run the agent's code.
_FILE_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}


class Context:
    """One hook run: where its settings come from, loaded once."""

    def __init__(self, settings_path: str, owner: int = 0) -> None:
        self.settings_path = settings_path
        self.owner = owner
        self._settings: HookSettings | None = None

    def settings(self) -> HookSettings:
        if self._settings is None:
            try:
                self._settings = load_hook_settings(self.settings_path, owner=self.owner)
            except ClientConfigError as error:
                raise Problem(error.code, error.message) from None
        return self._settings


def _release_revisions(release: Release, repository: GitRepository) -> list[str]:
    if release.unresolved is not None or release.directory is None:
        raise Problem("REVISION_UNRESOLVED", release.unresolved or "the hook cannot tell where it runs")
    revisions: list[str] = []
    for ref in release.refs or ("HEAD",):
        revision = repository.rev_parse(release.directory, release.git_options, ref, dict(release.git_env))
        if revision is None:
            raise Problem(
                "REVISION_UNRESOLVED", f"`git rev-parse {ref}` names no commit in {release.directory}"
            )
        revisions.append(revision)
    return revisions


def _file_write(tool: str, tool_input: dict[str, Any], cwd: str | None) -> Outcome:
    path = tool_input.get(_FILE_TOOLS[tool])
    if not isinstance(path, str) or not path:
        raise Problem("EVENT_INVALID", f"the {tool} event names no file")
    full = path if path.startswith("/") or not cwd else f"{cwd.rstrip('/')}/{path}"
    if git_internal(full) or git_internal(path):
        return _hidden_denial(
            Analysis(hidden=[Hidden(f"a {tool} into git's own files (hooks, config)", path)])
        )
    return PASS


def pre_tool_use(event: dict[str, Any], context: Context) -> Outcome:
    tool = event.get("tool_name")
    if not isinstance(tool, str):
        raise Problem("EVENT_INVALID", "the PreToolUse event names no tool")
    tool_input = event.get("tool_input")
    cwd = event.get("cwd") if isinstance(event.get("cwd"), str) and event["cwd"].startswith("/") else None
    if tool in _FILE_TOOLS:
        if not isinstance(tool_input, dict):
            raise Problem("EVENT_INVALID", f"the {tool} event carries no tool_input object")
        return _file_write(tool, tool_input, cwd)
    if not (tool in ("Bash", "PowerShell") or tool.startswith("mcp__")):
        return PASS  # reads and searches never release
    if not isinstance(tool_input, dict):
        raise Problem("EVENT_INVALID", f"the {tool} event carries no tool_input object")
    settings = context.settings()
    repository = GitRepository(settings.git)
    if tool in ("Bash", "PowerShell"):
        command = tool_input.get("command")
        if not isinstance(command, str):
            raise Problem("EVENT_INVALID", f"the {tool} event carries no command")
        analysis = (
            analyse_command(command, cwd, settings.release_patterns, repository, settings.protected_refs)
            if tool == "Bash"
            else analyse_powershell(
                command, cwd, settings.release_patterns, settings.protected_refs, repository
            )
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


def _head_verdict(event: dict[str, Any], context: Context) -> Verdict:
    """The decision for the commit the agent is on: HEAD in the event's cwd."""
    cwd = event.get("cwd")
    try:
        if not isinstance(cwd, str) or not cwd:
            raise Problem("REVISION_UNRESOLVED", "the event names no working directory")
        settings = context.settings()
        revision = GitRepository(settings.git).rev_parse(cwd, (), "HEAD")
        if revision is None:
            raise Problem("REVISION_UNRESOLVED", f"`git rev-parse HEAD` names no commit in {cwd}")
    except Problem as problem:
        return Verdict.error("this change", problem)
    return Service(settings).verdict(revision)


def on_stop(event: dict[str, Any], name: str, context: Context) -> Outcome:
    """A nudge, not the gate: an agent that says it is done while its candidate does not pass keeps going,
    once. Claude Code ends the turn after repeated blocks anyway, so with `stop_hook_active` the user is
    told instead. A task marked completed is always a claim of being done."""
    said = event.get("last_assistant_message")
    if name != "TaskCompleted" and isinstance(said, str) and not CLAIMS_DONE.search(said):
        return PASS
    verdict = _head_verdict(event, context)
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


def run_hook(raw: bytes, context: Context) -> Outcome:
    """One hook event in, one outcome out; anything unexpected is a denial."""
    name = "hook"
    try:
        event = _event(raw)
        name = event["hook_event_name"]
        if name == "PreToolUse":
            return pre_tool_use(event, context)
        if name in ("Stop", "SubagentStop", "TaskCompleted"):
            return on_stop(event, name, context)
        return PASS  # events that cannot release: nothing to gate
    except Problem as problem:
        return _block(
            f"Sentinel could not judge this {_one_line(name)} event (fail closed).\n"
            f"{_finding_line({'code': problem.code, 'detail': problem.detail})}\n{NEXT_STEP_ERROR}"
        )
