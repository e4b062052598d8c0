"""MCP tool calls: which are releases. An MCP tool is judged by its name and arguments (PowerShell, once
here, is read by `powershell`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .releases import FULL_COMMIT, Analysis, Release, _located, _replace

# MCP tools that release. Matched against the tool name, in addition to SENTINEL_RELEASE_PATTERNS, so a
# merge or deploy through an MCP server is gated even when the patterns only describe shell commands.
MCP_RELEASE_PATTERNS: tuple[str, ...] = (
    # Merges of pull or merge requests and branches (not a knowledge graph's `merge_entities`).
    r"^mcp__.+?__\w*(?:merge_(?:pull_request|pr|mr|merge_request|branch)|(?:pull_request|pr|mr)_merge)\w*$",
    r"^mcp__.+?__(?:\w+_)?(?:deploy|deployment|publish|release|promote|rollout)(?:_\w+)?$",
)
# An MCP tool whose verb only reads is never a release, whatever its name mentions (`get_release`).
_MCP_READ_VERBS = frozenset(
    {"get", "list", "search", "read", "fetch", "describe", "view", "show", "find", "query", "download"}
)
# MCP writes that create a commit on the server side (there is no local commit to judge).
_MCP_BRANCH_WRITE = re.compile(
    r"push|create_or_update_file|delete_file|update_ref|create_commit|commit_files"
)
_PROTECTED_BRANCH = re.compile(r"(?:refs/heads/)?(?:main|master|release/.+)")
_MCP_COMMIT_FIELDS = ("sha", "commit_sha", "head_sha", "expected_head_sha", "commitSha", "headSha", "commit")
_MCP_BRANCH_FIELDS = ("branch", "ref")


def analyse_mcp(tool_name: str, tool_input: object, cwd: str | None, patterns: Sequence[str]) -> Analysis:
    """An MCP tool call: a release when its name matches a pattern or it writes to a protected branch."""
    result = Analysis()
    tool = tool_name.split("__", 2)[-1]
    verb = tool.split("_", 1)[0].lower()
    arguments = tool_input if isinstance(tool_input, dict) else {}
    branch_write = bool(_MCP_BRANCH_WRITE.search(tool)) and any(
        isinstance(arguments.get(key), str) and _PROTECTED_BRANCH.fullmatch(arguments[key])
        for key in _MCP_BRANCH_FIELDS
    )
    named = any(re.search(pattern, tool_name) for pattern in patterns) or (
        verb not in _MCP_READ_VERBS and any(re.search(pattern, tool_name) for pattern in MCP_RELEASE_PATTERNS)
    )
    if not (named or branch_write):
        return result
    commit = next(
        (
            arguments[key]
            for key in _MCP_COMMIT_FIELDS
            if isinstance(arguments.get(key), str) and FULL_COMMIT.fullmatch(arguments[key])
        ),
        None,
    )
    release = Release(tool_name, directory=cwd or None)
    if commit is not None:
        release = _replace(release, refs=(commit,))
    elif branch_write:
        release = _replace(
            release,
            unresolved="it writes a commit to a protected branch on the server; that commit has no candidate",
        )
    elif "merge" in tool:
        release = _replace(release, unresolved="it merges a pull request without naming its head commit")
    result.releases.append(_located(release, cwd or None))
    return result
