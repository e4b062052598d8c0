"""Merges, ref updates and deployments at a forge: `gh` and `glab` (global flags in any order, `gh api`,
`glab api`) and HTTP clients (`curl`, `wget`, HTTPie, `xh`, PowerShell's `Invoke-RestMethod`) calling a
merge, ref-update or deployment endpoint of GitHub or GitLab.

The forge merges the pull request's head, which the hook cannot see; so a merge is judged only when it is
bound to a commit (`gh pr merge --match-head-commit SHA`, `glab mr merge --sha SHA`, a `sha` field of the
REST merge call) and is otherwise a release whose revision is unresolved: a denial that says how to bind it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from .releases import FULL_COMMIT
from .shell_lexer import Word

# REST paths (after any host and /api/v3 or /api/v4 prefix) that merge, move or delete a ref, change what
# protects one, or deploy. Matched with re.search on the path, so a prefix never hides one.
FORGE_MUTATIONS = re.compile(
    r"(?:^|/)repos/[^/]+/[^/]+/(?:pulls/[^/]+/(?:merge|update-branch)|merges|merge-upstream|git/refs?\b"
    r"|deployments|actions/workflows/[^/]+/dispatches|dispatches|contents/|branches/[^/]+/(?:protection|rename)"
    r"|rulesets|releases|environments|actions/runs/[^/]+/(?:rerun|approve|pending_deployments))"
    r"|(?:^|/)projects/[^/]+/(?:merge_requests/[^/]+/(?:merge|rebase|approve)|repository/(?:branches|commits"
    r"|files|tags)|deployments|protected_branches|pipeline|trigger/pipeline|environments|releases)"
    r"|(?:^|/)graphql\b",
    re.IGNORECASE,
)
# GraphQL mutations that merge, move a ref or deploy.
_GRAPHQL_MUTATIONS = re.compile(
    r"(?i)mergePullRequest|enablePullRequestAutoMerge|mergeBranch|updateRefs?|createRef|deleteRef"
    r"|createCommitOnBranch|createDeployment|BranchProtectionRule|mergeRequestAccept|mergeRequestSetAutoMerge"
    r"|commitCreate|pipelineCreate|environmentCreate"
)
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_GH_VALUE_FLAGS = frozenset(
    {
        "-R",
        "--repo",
        "--hostname",
        "-X",
        "--method",
        "-H",
        "--header",
        "-f",
        "--raw-field",
        "-F",
        "--field",
        "--input",
        "-q",
        "--jq",
        "-t",
        "--template",
        "-p",
        "--preview",
        "--cache",
        "-b",
        "--body",
        "--body-file",
        "--subject",
        "-A",
        "--author-email",
        "--match-head-commit",
        "-m",
        "--message",
        "--squash-message",
        "--sha",
        "--ref",
        "-r",
    }
)
_GH_COMMANDS = frozenset(
    "auth browse codespace gist issue org pr project release repo cache run workflow alias api attestation "
    "completion config extension gpg-key label ruleset search secret ssh-key status variable help version "
    "copilot agent-task preview".split()
)
_GLAB_COMMANDS = frozenset(
    "alias api auth changelog check-update ci cluster completion config deploy-key duo gpg-key help incident "
    "issue iteration job label mr release repo schedule securefile snippet ssh-key stack token user variable "
    "version".split()
)


@dataclass(frozen=True)
class ForgeCall:
    """What a forge or HTTP command does: a release (with the commit it is bound to, if any), a construct
    the hook cannot see through, or nothing."""

    release: bool = False
    commit: str | None = None
    why: str | None = None  # why no commit can be judged
    hidden: str | None = None


NOTHING = ForgeCall()


def _positionals(
    words: Sequence[Word], value_flags: frozenset[str]
) -> tuple[list[Word], dict[str, list[Word]]]:
    """Positional words and flag values, with flags in any position (`gh -R o/r pr merge 1 --admin`)."""
    positionals: list[Word] = []
    flags: dict[str, list[Word]] = {}
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        text = word.text
        if word.dynamic or not text.startswith("-") or text == "-":
            positionals.append(word)
            continue
        if text == "--":
            positionals += words[index:]
            break
        option, has_value, value = text.partition("=")
        if not option.startswith("--") and len(option) > 2 and option[:2] in value_flags:
            option, has_value, value = option[:2], True, option[2:]  # -XPUT, -Rowner/repo
        if option in value_flags and not has_value:
            flags.setdefault(option, []).append(words[index] if index < len(words) else Word(""))
            index += 1
        else:
            flags.setdefault(option, []).append(Word(value, word.dynamic))
    return positionals, flags


def _bound(flag: list[Word] | None, how: str) -> ForgeCall:
    if flag and not flag[-1].dynamic and FULL_COMMIT.fullmatch(flag[-1].text):
        return ForgeCall(release=True, commit=flag[-1].text.lower())
    if flag and flag[-1].dynamic:
        return ForgeCall(hidden="a merged commit computed at run time")
    return ForgeCall(
        release=True, why=f"the forge merges the head it sees, not a commit the gate judged; {how}"
    )


def gh_or_glab(name: str, words: Sequence[Word]) -> ForgeCall:
    """`gh` or `glab` (words[0] is the program)."""
    positionals, flags = _positionals(words[1:], _GH_VALUE_FLAGS)
    if not positionals:
        return NOTHING
    if positionals[0].dynamic:
        return ForgeCall(hidden=f"a {name} command computed at run time")
    verb = [word.text for word in positionals[:2]]
    known = _GH_COMMANDS if name == "gh" else _GLAB_COMMANDS
    if verb[0] not in known:
        return ForgeCall(hidden=f"a {name} alias or extension the hook cannot follow")
    if verb[0] == "api":
        return api_call(positionals[1:], flags, "gh")
    noun = "pr" if name == "gh" else "mr"
    if verb == [noun, "merge"]:
        if "--disable-auto" in flags:
            return NOTHING
        option = "--match-head-commit" if name == "gh" else "--sha"
        return _bound(
            flags.get(option), f"add {option} <full commit id of the head> so the merge is bound to it"
        )
    releasing = {
        ("release", "create"),
        ("release", "upload"),
        ("release", "edit"),
        ("workflow", "run"),
        ("run", "rerun"),
        ("repo", "sync"),
        ("ruleset", "delete"),
        ("ci", "run"),
        ("ci", "trigger"),
        ("ci", "retry"),
    }
    if tuple(verb) in releasing:
        return ForgeCall(release=True, why=f"`{name} {' '.join(verb)}` acts at the forge, on no local commit")
    return NOTHING


def _method(flags: dict[str, list[Word]], names: Sequence[str], default: str) -> str | None:
    for name in names:
        if name in flags:
            word = flags[name][-1]
            return None if word.dynamic else word.text.upper()
    return default


def api_call(positionals: Sequence[Word], flags: dict[str, list[Word]], tool: str) -> ForgeCall:
    """`gh api ENDPOINT` / `glab api ENDPOINT`: GET unless -X says otherwise or fields are sent."""
    if not positionals:
        return NOTHING
    fields = [word for name in ("-f", "-F", "--field", "--raw-field") for word in flags.get(name, [])]
    sends = bool(fields) or "--input" in flags
    method = _method(flags, ("-X", "--method"), "POST" if sends else "GET")
    endpoint = positionals[0]
    if endpoint.text.strip("/").lower() == "graphql":
        texts = [word.text for word in fields]
        if any(word.dynamic or "=@" in word.text for word in fields) or "--input" in flags:
            return ForgeCall(hidden=f"a {tool} api graphql query the hook cannot read")
        if any(_GRAPHQL_MUTATIONS.search(text) for text in texts):
            return ForgeCall(release=True, why="a GraphQL mutation merges or moves a ref at the forge")
        return NOTHING
    return _http(method, [endpoint], tool, fields)


def _normal_path(url: str, decode: bool = True) -> str | None:
    """The URL's path as the server reads it: percent-decoded (until it settles, at most three rounds),
    empty and dot segments removed, so `/pulls/42/%6Derge` or `/repos/o/r//pulls/./42/merge` is matched as
    the merge it is (`decode=False`: as sent). None when decoding does not settle (the hook cannot say what
    the server will read)."""
    path = re.sub(r"^[a-z][a-z0-9+.-]*://[^/]*", "", url, flags=re.IGNORECASE)
    path, _, query = path.partition("?")
    if decode:
        for _ in range(3):
            decoded = unquote(path)
            if decoded == path:
                break
            path = decoded
        else:
            return None
    segments: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if segments:
                segments.pop()
            continue
        segments.append(segment)
    return "/" + "/".join(segments) + (f"?{query}" if query else "")


def _http(method: str | None, urls: Sequence[Word], tool: str, fields: Sequence[Word] = ()) -> ForgeCall:
    mutating = method is None or method not in _READ_METHODS
    if not mutating:
        return NOTHING
    for url in urls:
        decoded = _normal_path(url.text)
        if decoded is None:
            return ForgeCall(hidden=f"{tool} to a path whose percent-encoding does not settle")
        # As sent (GitLab names a project `group%2Fname`), and as a server may decode it.
        raw = _normal_path(url.text, decode=False) or decoded
        path = next((p for p in (raw, decoded) if FORGE_MUTATIONS.search(p.split("?")[0])), raw)
        if FORGE_MUTATIONS.search(path.split("?")[0]):
            if method is None:
                return ForgeCall(hidden=f"{tool} with a method computed at run time")
            if re.search(r"/pulls/[^/]+/merge$", path.split("?")[0]):
                sha = [w for w in fields if w.text.startswith("sha=")]
                return _bound(
                    [Word(sha[-1].text[4:], sha[-1].dynamic)] if sha else None,
                    "send the head's full commit id as the `sha` field so the merge is bound to it",
                )
            return ForgeCall(
                release=True, why=f"{tool} {method} {path} merges, moves a ref or deploys at the forge"
            )
        if url.dynamic and not re.search(r"[a-z0-9]\.[a-z]{2,}/", url.text, re.IGNORECASE):
            return ForgeCall(hidden=f"{tool} {method or '?'} to an address computed at run time")
    return NOTHING


_CURL_VALUE = frozenset(
    {
        "-X",
        "--request",
        "-d",
        "--data",
        "--data-raw",
        "--data-binary",
        "--data-urlencode",
        "--data-ascii",
        "--json",
        "-F",
        "--form",
        "--form-string",
        "-T",
        "--upload-file",
        "-H",
        "--header",
        "-o",
        "--output",
        "-u",
        "--user",
        "-A",
        "--user-agent",
        "-e",
        "--referer",
        "-b",
        "--cookie",
        "-c",
        "--cookie-jar",
        "--url",
        "-m",
        "--max-time",
        "--connect-timeout",
        "-w",
        "--write-out",
        "-x",
        "--proxy",
        "-K",
        "--config",
        "--retry",
        "-r",
        "--range",
        "--cacert",
        "--cert",
        "--key",
        "-E",
        "-U",
        "--proxy-user",
        "-y",
        "-Y",
        "--resolve",
        "--connect-to",
        "--oauth2-bearer",
        "-z",
        "--time-cond",
    }
)
_CURL_DATA = (
    "-d",
    "--data",
    "--data-raw",
    "--data-binary",
    "--data-urlencode",
    "--data-ascii",
    "--json",
    "-F",
    "--form",
    "--form-string",
)


def curl(words: Sequence[Word]) -> ForgeCall:
    positionals, flags = _positionals(words[1:], _CURL_VALUE)
    if "-K" in flags or "--config" in flags:
        return ForgeCall(hidden="curl reading its options from a file")
    default = "GET"
    if any(name in flags for name in _CURL_DATA):
        default = "POST"
    if "-T" in flags or "--upload-file" in flags:
        default = "PUT"
    if "-G" in flags or "--get" in flags:
        default = "GET"
    method = _method(flags, ("-X", "--request"), default)
    return _http(method, [*positionals, *flags.get("--url", [])], "curl")


_WGET_VALUE = frozenset(
    {
        "--method",
        "--post-data",
        "--post-file",
        "--body-data",
        "--body-file",
        "--header",
        "-O",
        "--output-document",
        "-o",
        "--output-file",
        "-U",
        "--user-agent",
        "--user",
        "--password",
        "-e",
        "--execute",
        "-i",
        "--input-file",
        "-T",
        "--timeout",
        "-t",
        "--tries",
        "-P",
        "--directory-prefix",
    }
)


def wget(words: Sequence[Word]) -> ForgeCall:
    positionals, flags = _positionals(words[1:], _WGET_VALUE)
    if any(name in flags for name in ("-i", "--input-file", "-e", "--execute")):
        return ForgeCall(hidden="wget reading its addresses or commands from elsewhere")
    sends = any(name in flags for name in ("--post-data", "--post-file", "--body-data", "--body-file"))
    method = _method(flags, ("--method",), "POST" if sends else "GET")
    return _http(method, positionals, "wget")


_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})


def httpie(name: str, words: Sequence[Word]) -> ForgeCall:
    """HTTPie and xh: `http [METHOD] URL [items]`; data items (`a=b`, `a:=b`, `a@file`) make it a POST."""
    positionals, _flags = _positionals(
        words[1:],
        frozenset({"-a", "--auth", "-A", "--auth-type", "-o", "--output", "--session", "--verify", "--cert"}),
    )
    if not positionals:
        return NOTHING
    method: str | None = None
    if positionals[0].text.upper() in _METHODS or positionals[0].dynamic:
        method = None if positionals[0].dynamic else positionals[0].text.upper()
        positionals = positionals[1:]
        if method is None:
            return _http(None, positionals[:1], name)
    items = positionals[1:]
    sends = any(re.match(r"[^:=@]+(?:=|:=|@|=@|:=@)", word.text) for word in items)
    return _http(method or ("POST" if sends else "GET"), positionals[:1], name)


def powershell_web(words: Sequence[Word]) -> ForgeCall:
    """`Invoke-RestMethod`/`Invoke-WebRequest` (and `irm`, `iwr`): -Method, -Uri, -Body."""
    flags: dict[str, Word] = {}
    positionals: list[Word] = []
    index = 1
    while index < len(words):
        word = words[index]
        if word.text.startswith("-") and not word.dynamic and index + 1 < len(words):
            flags[word.text.lower().rstrip(":")] = words[index + 1]
            index += 2
            continue
        positionals.append(word)
        index += 1
    method_word = flags.get("-method")
    method = (
        None
        if method_word is not None and method_word.dynamic
        else (
            method_word.text.upper() if method_word is not None else ("POST" if "-body" in flags else "GET")
        )
    )
    urls = [flags[key] for key in ("-uri", "-url") if key in flags] + positionals[:1]
    return _http(method, urls, words[0].text)
