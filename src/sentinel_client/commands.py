"""Which shell commands are releases, and what a command hides.

The hook sees one Bash command as text and must answer two questions before it spends a network call:
does this command need a `ready` decision (it matches a release pattern), and does it hide what it runs
(`sh -c`, `eval`, `exec`, command substitution, a pipe into a shell, aliases, `--no-verify`)? A regular
expression over the raw text answers neither reliably: quoting (`git push origin "main"`), comments,
heredocs, substitutions and wrappers (`sudo`, `env`, `timeout`) all change what the shell runs without
changing what a pattern sees. So the command is tokenised the way a POSIX shell would, and the patterns are
matched against each simple command in a canonical rendering (one word per argument, quoted only where the
shell would need it).

What is hidden is never judged by the gate: a release found inside a construct the hook cannot follow, or
a construct whose content is computed at run time, is a denial on its own. Everything here is pure; the
few facts that need git (the branch an implicit push updates, git aliases) come through `Repository`.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

# A revision named in full needs no lookup (and may not exist locally, e.g. a pull request's head).
FULL_COMMIT = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")

# Protected-branch probes for arguments the shell computes at run time: `git push origin "$BRANCH"`
# is a release if the variable can hold one of these.
BRANCH_PROBES: tuple[str, ...] = (
    "main", "master", "release/x", "HEAD:main", "+main", "refs/heads/main", "--all", "--mirror",
)

# MCP tools that release. Matched against the tool name, in addition to SENTINEL_RELEASE_PATTERNS, so a
# merge or deploy through an MCP server is gated even when the patterns only describe shell commands.
MCP_RELEASE_PATTERNS: tuple[str, ...] = (
    # Merges of pull or merge requests and branches (not a knowledge graph's `merge_entities`).
    r"^mcp__.+?__\w*(?:merge_(?:pull_request|pr|mr|merge_request|branch)|(?:pull_request|pr|mr)_merge)\w*$",
    r"^mcp__.+?__(?:\w+_)?(?:deploy|deployment|publish|release|promote|rollout)(?:_\w+)?$",
)
# An MCP tool whose verb only reads is never a release, whatever its name mentions (`get_release`).
_MCP_READ_VERBS = frozenset({"get", "list", "search", "read", "fetch", "describe", "view", "show", "find",
                             "query", "download"})
# MCP writes that create a commit on the server side (there is no local commit to judge).
_MCP_BRANCH_WRITE = re.compile(r"push|create_or_update_file|delete_file|update_ref|create_commit|commit_files")
_PROTECTED_BRANCH = re.compile(r"(?:refs/heads/)?(?:main|master|release/.+)")
_MCP_COMMIT_FIELDS = ("sha", "commit_sha", "head_sha", "expected_head_sha", "commitSha", "headSha", "commit")
_MCP_BRANCH_FIELDS = ("branch", "ref")

_MAX_NESTING = 8
_MAX_COMMAND_CHARS = 100_000


class ShellSyntaxError(ValueError):
    """The command cannot be read the way a POSIX shell would (an unterminated quote or substitution)."""


# ---- what the analysis finds ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Release:
    """A release command the gate must judge."""

    command: str                     # the simple command, rendered canonically
    refs: tuple[str, ...] = ()       # what to resolve with `git rev-parse`; none: HEAD
    directory: str | None = None     # where it runs; None: the hook cannot tell
    git_options: tuple[str, ...] = ()  # --git-dir / --work-tree, passed on to git
    unresolved: str | None = None    # why the revision it acts on cannot be known


@dataclass(frozen=True)
class Hidden:
    """A construct the gate cannot see through (a denial on its own, never judged by the service)."""

    construct: str
    command: str


@dataclass
class Analysis:
    releases: list[Release] = field(default_factory=list)
    hidden: list[Hidden] = field(default_factory=list)


class Repository(Protocol):
    """The git facts the analysis needs. Directory is absolute; options are global git options."""

    def current_branch(self, directory: str, options: Sequence[str]) -> str | None: ...

    def push_destinations(self, directory: str, options: Sequence[str]) -> list[str] | None: ...

    def git_alias(self, directory: str, options: Sequence[str], name: str) -> str | None: ...


class NoRepository:
    """Answers nothing: every implicit push destination is unknown and no git alias exists."""

    def current_branch(self, directory: str, options: Sequence[str]) -> str | None:
        return None

    def push_destinations(self, directory: str, options: Sequence[str]) -> list[str] | None:
        return None

    def git_alias(self, directory: str, options: Sequence[str], name: str) -> str | None:
        return None


# ---- tokens --------------------------------------------------------------------------------------------


@dataclass
class Word:
    text: str                  # the value after quote removal; expansions keep their source text
    dynamic: bool = False      # the shell rewrites it at run time (expansion, substitution, glob, brace, ~)
    quoted: bool = False       # any quoting: a quoted `if` is not a keyword, a quoted heredoc is literal
    lead: str = ""             # the unquoted literal start: `NAME=` there makes an assignment
    substitutions: list[tuple[str, list[object]]] = field(default_factory=list)


@dataclass
class Operator:
    op: str


@dataclass
class Redirect:
    op: str
    target: Word
    body_substitutions: list[tuple[str, list[object]]] = field(default_factory=list)


_OPERATORS = ("&&", "||", ";;&", ";;", ";&", "|&", "&>>", "&>", ">>", ">&", "<&", "<<<", "<<-", "<<", "<>",
              ">|", "|", "&", ";", "(", ")", "<", ">")
_REDIRECTS = frozenset({"&>>", "&>", ">>", ">&", "<&", "<<<", "<<-", "<<", "<>", ">|", "<", ">"})
_STDIN_REDIRECTS = frozenset({"<", "<<", "<<-", "<<<", "<&", "<>"})
_WORD_END = " \t\n;&|()<>"
# What a substitution renders as in its word: its commands are analysed on their own, and their text must
# not make the word around them look like a release (`git diff $(git merge-base main HEAD)`).
_SUBSTITUTED = "$(…)"
_BRACE_EXPANSION = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
_GLOB = re.compile(r"[*?]|\[.*\]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
# Variables that make git read another repository or other configuration (aliases, hooks, push refspecs).
_GIT_ENVIRONMENT = re.compile(r"GIT_(?:DIR|WORK_TREE|COMMON_DIR|NAMESPACE|CONFIG\w*|OBJECT_DIRECTORY"
                              r"|ALTERNATE_OBJECT_DIRECTORIES|INDEX_FILE)\+?=")
# git configuration that changes what a later git command runs or where it pushes.
_GIT_BEHAVIOUR_KEYS = re.compile(r"(?i)alias\..+|core\.hookspath|remote\..+\.push|push\.default|include(?:if)?\..*")
_GIT_CONFIG_READS = frozenset({"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "get",
                               "list", "--show-origin", "--name-only"})
# Interpreters whose inline code can run any command: `python -c "os.system('git push origin main')"`.
_INLINE_CODE = {"python": ("-c",), "python3": ("-c",), "node": ("-e", "--eval", "-p", "--print"),
                "perl": ("-e", "-E"), "ruby": ("-e",), "php": ("-r",), "deno": ("eval",), "bun": ("-e", "--eval")}


@dataclass
class _Heredoc:
    delimiter: str
    strip_tabs: bool
    quoted: bool
    redirect: Redirect


class _Lexer:
    def __init__(self, source: str) -> None:
        self.s = source
        self.i = 0
        self.pending: list[_Heredoc] = []

    # A script: words, operators and redirections, up to the end or (inside `$(`) the closing parenthesis.
    def tokens(self, closing: bool = False) -> list[object]:
        out: list[object] = []
        depth = 0
        s = self.s
        while True:
            self._skip_blanks()
            if self.i >= len(s):
                if closing:
                    raise ShellSyntaxError("unterminated $( command substitution")
                self._read_heredoc_bodies()
                return out
            c = s[self.i]
            if c == "\n":
                self.i += 1
                out.append(Operator("\n"))
                self._read_heredoc_bodies()
                continue
            if c == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
                continue
            if c == ")" and closing and depth == 0:
                self.i += 1
                return out
            op = self._operator()
            if op is not None:
                if op == "(":
                    depth += 1
                elif op == ")":
                    depth -= 1
                out.append(self._redirect(op) if op in _REDIRECTS else Operator(op))
                continue
            word = self._word()
            if (word.text.isdigit() and not word.quoted and self.i < len(s) and s[self.i] in "<>"
                    and s[self.i + 1:self.i + 2] != "("):
                op = self._operator()
                if op is None or op not in _REDIRECTS:
                    raise ShellSyntaxError("a file descriptor without a redirection")
                out.append(self._redirect(op))
                continue
            out.append(word)

    def _skip_blanks(self) -> None:
        s = self.s
        while self.i < len(s):
            if s[self.i] in " \t":
                self.i += 1
            elif s.startswith("\\\n", self.i):
                self.i += 2
            else:
                return

    def _operator(self) -> str | None:
        s = self.s
        if s[self.i] in "<>" and s[self.i + 1:self.i + 2] == "(":
            return None  # process substitution: a word
        for op in _OPERATORS:
            if s.startswith(op, self.i):
                self.i += len(op)
                return op
        return None

    def _redirect(self, op: str) -> Redirect:
        self._skip_blanks()
        if self.i >= len(self.s) or self.s[self.i] in "\n;&|()<>":
            raise ShellSyntaxError(f"the redirection {op} has no target")
        target = self._word()
        redirect = Redirect(op, target)
        if op in ("<<", "<<-"):
            self.pending.append(_Heredoc(target.text, op == "<<-", target.quoted, redirect))
        return redirect

    def _read_heredoc_bodies(self) -> None:
        s = self.s
        for heredoc in self.pending:
            lines: list[str] = []
            while self.i < len(s):
                end = s.find("\n", self.i)
                line = s[self.i:] if end < 0 else s[self.i:end]
                self.i = len(s) if end < 0 else end + 1
                if (line.lstrip("\t") if heredoc.strip_tabs else line) == heredoc.delimiter:
                    break
                lines.append(line)
            if not heredoc.quoted:
                # An unquoted heredoc expands `$(...)` and backticks: those commands run.
                body = _Lexer("\n".join(lines))
                body._double_quoted_content(terminator=None, subs=heredoc.redirect.body_substitutions)
        self.pending = []

    def _word(self) -> Word:
        s = self.s
        start = self.i
        text: list[str] = []
        unquoted: list[str] = []
        lead: list[str] = []
        word = Word("")
        if s[self.i] in "<>" and s[self.i + 1:self.i + 2] == "(":
            kind = "process substitution"
            self.i += 2
            inner = self.tokens(closing=True)
            word.substitutions.append((kind, inner))
            word.dynamic = True
            text.append(_SUBSTITUTED)
        while self.i < len(s):
            c = s[self.i]
            if c in _WORD_END:
                break
            if c == "\\":
                if s.startswith("\\\n", self.i):
                    self.i += 2
                    continue
                if self.i + 1 < len(s):
                    text.append(s[self.i + 1])
                word.quoted = True
                self.i += 2
                continue
            if c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise ShellSyntaxError("unterminated single quote")
                text.append(s[self.i + 1:end])
                word.quoted = True
                self.i = end + 1
                continue
            if c == '"':
                self.i += 1
                before, commands = self.i, len(word.substitutions)
                expands = self._double_quoted_content('"', word.substitutions)
                word.dynamic = word.dynamic or expands
                inside = s[before:self.i - 1]
                text.append(_SUBSTITUTED if len(word.substitutions) > commands
                            else inside if expands else _unescape_double(inside))
                word.quoted = True
                continue
            if c == "$" or c == "`":
                before, commands = self.i, len(word.substitutions)
                if self._expansion(word.substitutions):
                    word.dynamic = True
                text.append(_SUBSTITUTED if len(word.substitutions) > commands else s[before:self.i])
                continue
            if c == "~" and self.i == start:
                word.dynamic = True  # tilde expansion: the value depends on the environment
            if len(lead) == len(text):
                lead.append(c)
            text.append(c)
            unquoted.append(c)
            self.i += 1
        bare = "".join(unquoted)
        if _BRACE_EXPANSION.search(bare) or _GLOB.search(bare):
            word.dynamic = True
        word.text = "".join(text)
        word.lead = "".join(lead)
        return word

    def _expansion(self, subs: list[tuple[str, list[object]]]) -> bool:
        """Consume one `$...` or backtick expansion at self.i; True when it is computed at run time."""
        s = self.s
        if s[self.i] == "`":
            end = self.i + 1
            inner: list[str] = []
            while True:
                if end >= len(s):
                    raise ShellSyntaxError("unterminated backtick command substitution")
                if s[end] == "\\" and end + 1 < len(s) and s[end + 1] in "$`\\":
                    inner.append(s[end + 1])
                    end += 2
                    continue
                if s[end] == "`":
                    break
                inner.append(s[end])
                end += 1
            subs.append(("command substitution", _Lexer("".join(inner)).tokens()))
            self.i = end + 1
            return True
        nxt = s[self.i + 1:self.i + 2]
        if s.startswith("$((", self.i):
            self.i += 3
            self._balanced("(", ")", 2, subs)
            return True
        if nxt == "(":
            self.i += 2
            subs.append(("command substitution", self.tokens(closing=True)))
            return True
        if nxt == "{":
            self.i += 2
            self._balanced("{", "}", 1, subs)
            return True
        if nxt == "'":
            end = self.i + 2
            while end < len(s) and s[end] != "'":
                end += 2 if s[end] == "\\" else 1
            if end >= len(s):
                raise ShellSyntaxError("unterminated $'...' string")
            self.i = end + 1
            return True
        if nxt == '"':
            self.i += 2
            self._double_quoted_content('"', subs)
            return True
        match = _NAME.match(s, self.i + 1)
        if match:
            self.i = match.end()
            return True
        if nxt and nxt in "0123456789@*#?$!-":
            self.i += 2
            return True
        self.i += 1
        return False  # a lone `$` is literal

    def _balanced(self, opening: str, closing: str, depth: int, subs: list[tuple[str, list[object]]]) -> None:
        s = self.s
        while depth:
            if self.i >= len(s):
                raise ShellSyntaxError(f"unterminated {opening}...{closing} expansion")
            c = s[self.i]
            if c == "\\":
                self.i += 2
            elif c == "'" and opening == "{":
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise ShellSyntaxError("unterminated single quote")
                self.i = end + 1
            elif c == '"':
                self.i += 1
                self._double_quoted_content('"', subs)
            elif c in "$`":
                self._expansion(subs)
            else:
                if c == opening:
                    depth += 1
                elif c == closing:
                    depth -= 1
                self.i += 1

    def _double_quoted_content(self, terminator: str | None, subs: list[tuple[str, list[object]]]) -> bool:
        """Consume up to and including the terminator (None: the end); True when anything expands."""
        s = self.s
        dynamic = False
        while self.i < len(s):
            c = s[self.i]
            if terminator is not None and c == terminator:
                self.i += 1
                return dynamic
            if c == "\\":
                self.i += 2
            elif c in "$`":
                dynamic = self._expansion(subs) or dynamic
            else:
                self.i += 1
        if terminator is not None:
            raise ShellSyntaxError("unterminated double quote")
        return dynamic


def _unescape_double(text: str) -> str:
    return re.sub(r"\\([$`\"\\\n])", lambda m: "" if m.group(1) == "\n" else m.group(1), text)


def tokenize(command: str) -> list[object]:
    """Words, operators and redirections of a shell command; ShellSyntaxError when it cannot be read."""
    if len(command) > _MAX_COMMAND_CHARS:
        raise ShellSyntaxError(f"the command is longer than {_MAX_COMMAND_CHARS} characters")
    return _Lexer(command).tokens()


def render(words: Sequence[Word]) -> str:
    """The canonical text of a simple command: what the release patterns are matched against."""
    return " ".join(word.text if word.dynamic else shlex.quote(word.text) for word in words)


def _literal(text: str) -> Word:
    return Word(text)


# ---- the analysis --------------------------------------------------------------------------------------

# Reserved words that only introduce the command after them.
_KEYWORDS = frozenset({"!", "{", "}", "if", "then", "elif", "else", "fi", "while", "until", "do", "done",
                       "esac", "coproc", "[[", "]]"})
# Reserved words followed by a word list, not a command.
_WORD_LISTS = frozenset({"for", "select", "case"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "yash", "posh"})
# Wrappers that run the command after them unchanged (value-taking options listed).
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group", "--host",
                       "--prompt", "--chdir", "--role", "--type", "--other-user", "--command-timeout",
                       "--close-from"}),
    "doas": frozenset({"-u", "-C"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "chronic": frozenset(),
    "unbuffer": frozenset(),
    "caffeinate": frozenset({"-t", "-w"}),
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "busybox": frozenset(),
}
_GIT_VALUE_GLOBALS = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                                "--super-prefix", "--attr-source", "--exec-path"})
# git's own commands: a subcommand outside this list may be an alias, which is looked up.
_GIT_COMMANDS = frozenset("""
add am annotate apply archive bisect blame branch bundle cat-file check-attr check-ignore check-mailmap
check-ref-format checkout checkout-index cherry cherry-pick citool clean clone column commit commit-graph
commit-tree config count-objects credential describe diff diff-files diff-index diff-tree difftool
fast-export fast-import fetch fetch-pack filter-branch fmt-merge-msg for-each-ref for-each-repo format-patch
fsck gc get-tar-commit-id grep gui hash-object help hook index-pack init instaweb interpret-trailers log
ls-files ls-remote ls-tree mailinfo mailsplit maintenance merge merge-base merge-file merge-index merge-tree
mergetool mktag mktree multi-pack-index mv name-rev notes pack-objects pack-redundant pack-refs
patch-id prune prune-packed pull push range-diff read-tree rebase reflog remote repack replace
request-pull rerere reset restore rev-list rev-parse revert rm send-email send-pack shortlog show
show-branch show-index show-ref sparse-checkout stage stash status stripspace submodule switch
symbolic-ref tag unpack-file unpack-objects update-index update-ref update-server-info var verify-commit
verify-pack verify-tag version whatchanged worktree write-tree lfs
""".split())


class _Analyser:
    def __init__(self, patterns: Sequence[str], repository: Repository) -> None:
        self.patterns = [re.compile(pattern) for pattern in patterns]
        self.repository = repository
        self.verb_probes = _vocabulary(patterns)
        self.result = Analysis()
        self.context: tuple[str, ...] = ()  # the constructs around the command being analysed
        self.git_environment = False  # an earlier command exported GIT_DIR, GIT_CONFIG_* or the like

    # -- matching ----------------------------------------------------------------------------------------

    def matches(self, text: str) -> bool:
        return any(pattern.search(text) for pattern in self.patterns)

    def could_match(self, words: Sequence[Word], verb_positions: int = 2) -> bool:
        """Whether a run-time value of one of the dynamic words would make the command a release."""
        for index, word in enumerate(words):
            if index == 0 or not word.dynamic:
                continue
            probes = self.verb_probes if index <= verb_positions else BRANCH_PROBES
            for probe in probes:
                trial = [*words[:index], _literal(probe), *words[index + 1:]]
                if self.matches(render(trial)):
                    return True
        return False

    def hide(self, construct: str, words: Sequence[Word] | str) -> None:
        text = words if isinstance(words, str) else render(words)
        taint = self.context
        self.result.hidden.append(Hidden(f"{taint[-1]}: {construct}" if taint else construct, text))

    def release(self, release: Release, taint: tuple[str, ...], words: Sequence[Word]) -> None:
        if taint:
            self.result.hidden.append(Hidden(taint[-1], release.command))
        elif any(not word.dynamic and word.text == "--no-verify" for word in words):
            self.hide("--no-verify", release.command)
        else:
            self.result.releases.append(release)

    # -- scripts -----------------------------------------------------------------------------------------

    def script(self, tokens: list[object], directory: str | None, taint: tuple[str, ...]) -> None:
        if len(taint) > _MAX_NESTING:
            self.hide("nesting deeper than the hook follows", "")
            return
        scopes: list[str | None] = []
        words: list[Word] = []
        redirects: list[Redirect] = []
        piped_in = False
        for token in [*tokens, Operator("\n")]:
            if isinstance(token, Word):
                words.append(token)
                continue
            if isinstance(token, Redirect):
                redirects.append(token)
                continue
            assert isinstance(token, Operator)
            if words or redirects:
                detached = piped_in or token.op in ("|", "|&", "&")
                directory = self.command(words, redirects, piped_in, detached, directory, taint)
            words, redirects = [], []
            piped_in = token.op in ("|", "|&")
            if token.op == "(":
                scopes.append(directory)
            elif token.op == ")" and scopes:
                directory = scopes.pop()

    def nested(self, text: str, directory: str | None, taint: tuple[str, ...], construct: str) -> None:
        try:
            tokens = tokenize(text)
        except ShellSyntaxError as error:
            self.hide(f"{construct} with unreadable shell text ({error})", text)
            return
        self.script(tokens, directory, (*taint, construct))

    def command(self, words: list[Word], redirects: list[Redirect], piped_in: bool, detached: bool,
                directory: str | None, taint: tuple[str, ...]) -> str | None:
        """Analyse one simple command; returns the working directory for the commands after it."""
        for word in words:
            for kind, inner in word.substitutions:
                self.script(inner, directory, (*taint, kind))
        for redirect in redirects:
            for kind, inner in redirect.target.substitutions + redirect.body_substitutions:
                self.script(inner, directory, (*taint, kind))
        index = 0
        while index < len(words) and _ASSIGNMENT.match(words[index].lead):
            index += 1
        assignments, rest = words[:index], words[index:]
        if any(_GIT_ENVIRONMENT.match(word.lead) for word in assignments) and not rest:
            self.git_environment = True  # a later git command in this script reads another repository
        if not rest:
            return directory
        stdin_fed = piped_in or any(r.op in _STDIN_REDIRECTS and r.target.text != "0" for r in redirects)
        return self.simple(rest, assignments, stdin_fed, detached, directory, taint)

    def simple(self, words: list[Word], assignments: list[Word], stdin_fed: bool, detached: bool,
               directory: str | None, taint: tuple[str, ...]) -> str | None:
        if len(taint) > _MAX_NESTING:  # an alias that expands to itself, an eval of an eval...
            self.hide("nesting deeper than the hook follows", words)
            return directory
        outer, self.context = self.context, taint
        try:
            return self._simple(words, assignments, stdin_fed, detached, directory, taint)
        finally:
            self.context = outer

    def _simple(self, words: list[Word], assignments: list[Word], stdin_fed: bool, detached: bool,
                directory: str | None, taint: tuple[str, ...]) -> str | None:
        while words and not words[0].quoted and not words[0].dynamic and words[0].text in _KEYWORDS:
            words = words[1:]
        if not words:
            return directory
        head = words[0]
        if not head.quoted and head.text in _WORD_LISTS:
            return directory
        if not head.quoted and head.text == "function":
            return self.simple(words[2:], assignments, stdin_fed, detached, directory, taint)
        if head.dynamic:
            self.hide("a command name computed at run time", words)
            return directory
        name = posixpath.basename(head.text)
        args = words[1:]
        if name in _WRAPPERS:
            return self.wrapper(name, words, assignments, stdin_fed, detached, directory, taint)
        if name in ("cd", "pushd", "popd"):
            return directory if detached else _change_directory(name, args, directory)
        if name in ("export", "declare", "typeset", "local", "readonly"):
            if any(_GIT_ENVIRONMENT.match(word.lead) for word in args):
                self.git_environment = True
            return directory
        if name in _INLINE_CODE:
            self.inline_code(name, words, directory, taint)
            return directory
        if name == "eval":
            if any(word.dynamic for word in args):
                self.hide("eval of text computed at run time", words)
            else:
                self.nested(" ".join(word.text for word in args), directory, taint, "eval")
            return directory
        if name in _SHELLS:
            self.shell(name, words, stdin_fed, directory, taint)
        elif name in ("source", "."):
            if args and args[0].dynamic:
                self.hide("a script sourced from text computed at run time", words)
            else:
                self.generic(words, directory, taint)
        elif name == "alias":
            for word in args:
                if "=" not in word.text or word.text.startswith("-"):
                    continue
                if word.dynamic:
                    self.hide("an alias computed at run time", words)
                else:
                    self.nested(word.text.split("=", 1)[1], directory, taint, "alias")
        elif name == "trap":
            code = [word for word in args if not word.text.startswith("-")]
            if len(code) >= 2:
                if code[0].dynamic:
                    self.hide("a trap computed at run time", words)
                else:
                    self.nested(code[0].text, directory, taint, "trap")
        elif name == "watch":
            self.watch(words, directory, taint)
        elif name == "xargs":
            self.xargs(words, directory, taint)
        elif name == "find":
            self.find(words, directory, taint)
        elif name == "git":
            self.git(words, assignments, directory, taint)
        elif name in ("gh", "glab"):
            self.forge(name, words, directory, taint)
        else:
            self.generic(words, directory, taint)
        return directory

    # -- commands that run other commands ----------------------------------------------------------------

    def wrapper(self, name: str, words: list[Word], assignments: list[Word], stdin_fed: bool, detached: bool,
                directory: str | None, taint: tuple[str, ...]) -> str | None:
        if words[0].text == "command" and any(w.text in ("-v", "-V") for w in words[1:2]):
            return directory  # `command -v git` looks a name up; it runs nothing
        value_options = _WRAPPERS[name]
        index = 1
        inner_directory = directory
        while index < len(words):
            word = words[index]
            text = word.text
            if name == "env" and _ASSIGNMENT.match(word.lead):
                assignments = [*assignments, word]
                index += 1
                continue
            if text == "--":
                index += 1
                break
            if not text.startswith("-") or text == "-":
                break
            option, _, inline = text.partition("=")
            value: Word | None = None
            if option in value_options and not inline:
                value = words[index + 1] if index + 1 < len(words) else None
                index += 2
            else:
                value = Word(inline, word.dynamic) if inline else None
                index += 1
            if name == "env" and option in ("-S", "--split-string"):
                if value is None or value.dynamic:
                    self.hide("env -S with text computed at run time", words)
                else:
                    self.nested(" ".join([value.text, *(w.text for w in words[index:])]), inner_directory,
                                taint, "env -S")
                return directory
            if (name, option) in (("env", "-C"), ("env", "--chdir"), ("sudo", "-D"), ("sudo", "--chdir")):
                inner_directory = _change_directory("cd", [value] if value else [], inner_directory)
        if name == "timeout" and index < len(words):
            index += 1  # the duration
        inner = words[index:]
        if not inner:
            return directory
        inner_taint = (*taint, "exec") if name == "exec" else taint
        after = self.simple(inner, assignments, stdin_fed, detached, inner_directory, inner_taint)
        # `command cd x` and `builtin cd x` change this shell's directory; the others start a new process.
        return after if name in ("command", "builtin") else directory

    def shell(self, name: str, words: list[Word], stdin_fed: bool, directory: str | None,
              taint: tuple[str, ...]) -> None:
        args = words[1:]
        index = 0
        command_mode = stdin_mode = False
        while index < len(args):
            text = args[index].text
            if args[index].dynamic and text.startswith("-"):
                self.hide(f"{name} with options computed at run time", words)
                return
            if text == "--":
                index += 1
                break
            if text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
                index += 2
                continue
            if text.startswith("--") or not text.startswith(("-", "+")) or text in ("-", "+"):
                if text.startswith("--"):
                    index += 1
                    continue
                break
            command_mode = command_mode or "c" in text[1:]
            stdin_mode = stdin_mode or "s" in text[1:]
            index += 1
        positionals = args[index:]
        if command_mode:
            if not positionals:
                return
            if positionals[0].dynamic:
                self.hide(f"{name} -c with a script computed at run time", words)
            else:
                self.nested(positionals[0].text, directory, taint, f"{name} -c")
        elif positionals and not stdin_mode:
            self.generic(words, directory, taint)  # a script file: its name may still match a pattern
        elif stdin_fed:
            self.hide(f"a script piped into {name}", words)

    def inline_code(self, name: str, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        """Code given on the command line: a release named in it is hidden from the gate."""
        for index, word in enumerate(words[1:-1], start=1):
            if word.text in _INLINE_CODE[name]:
                code = words[index + 1]
                plain = re.sub(r"[\"'`(),\[\]{}]", " ", code.text)
                if any(self.matches(line) for line in plain.split(";")):
                    self.hide(f"{name} {word.text}", code.text if not code.dynamic else words)
                return
        self.generic(words, directory, taint)

    def watch(self, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        index, exec_mode = 1, False
        while index < len(words) and words[index].text.startswith("-"):
            text = words[index].text
            exec_mode = exec_mode or text in ("-x", "--exec")
            index += 2 if text in ("-n", "--interval", "-q", "--equexit") else 1
        inner = words[index:]
        if not inner:
            return
        if exec_mode:
            self.simple(inner, [], False, False, directory, (*taint, "watch"))
        elif any(word.dynamic for word in inner):
            self.hide("watch with a command computed at run time", words)
        else:
            self.nested(" ".join(word.text for word in inner), directory, taint, "watch")

    def xargs(self, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        value_options = {"-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a", "--arg-file", "--delimiter",
                         "--max-args", "--max-lines", "--max-procs", "--max-chars", "--process-slot-var"}
        index = 1
        while index < len(words) and words[index].text.startswith("-"):
            index += 2 if words[index].text in value_options else 1
        inner = words[index:]
        if inner:
            # The input becomes arguments the hook never sees.
            self.simple([*inner, Word("{input}", dynamic=True)], [], False, False, directory, (*taint, "xargs"))

    def find(self, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        index = 1
        while index < len(words):
            if words[index].text in ("-exec", "-execdir", "-ok", "-okdir"):
                end = index + 1
                while end < len(words) and words[end].text not in (";", "+"):
                    end += 1
                inner = [Word(w.text, True) if w.text == "{}" else w for w in words[index + 1:end]]
                if inner:
                    self.simple(inner, [], False, False, directory, (*taint, "find -exec"))
                index = end
            index += 1

    # -- releases ----------------------------------------------------------------------------------------

    def generic(self, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        text = render(words)
        if self.matches(text):
            self.release(_located(Release(text), directory), taint, words)
        elif self.could_match(words):
            self.hide("an argument computed at run time", words)

    def git(self, words: list[Word], assignments: list[Word], directory: str | None,
            taint: tuple[str, ...]) -> None:
        index = 1
        configured = self.git_environment or any(_GIT_ENVIRONMENT.match(w.lead) for w in assignments)
        dynamic_location = False
        git_options: list[str] = []
        config_options: list[str] = []
        while index < len(words) and words[index].text.startswith("-"):
            word = words[index]
            option, has_inline, inline = word.text.partition("=")
            takes_value = option in _GIT_VALUE_GLOBALS and not has_inline and option != "--exec-path"
            value = words[index + 1] if takes_value and index + 1 < len(words) else None
            value_text = value.text if value else inline
            value_dynamic = (value.dynamic if value else word.dynamic)
            if option == "-C":
                if value_dynamic:
                    dynamic_location = True
                elif value_text:
                    directory = _change_directory("cd", [Word(value_text)], directory)
            elif option in ("--git-dir", "--work-tree"):
                dynamic_location = dynamic_location or value_dynamic
                git_options.append(f"{option}={value_text}")
            elif option in ("-c", "--config-env"):
                configured = True
                config_options += [option, value_text]
            index += 2 if takes_value else 1
        if index >= len(words):
            return
        sub = words[index]
        args = words[index + 1:]
        if sub.dynamic:
            self.hide("a git subcommand computed at run time", words)
            return
        if any(value.lower().startswith("alias.") for value in config_options[1::2]):
            self.hide("git -c alias", words)
            return
        if sub.text not in _GIT_COMMANDS:
            if directory is None or dynamic_location:
                self.hide("a git alias in a directory the hook cannot follow", words)
                return
            expansion = self.repository.git_alias(directory, tuple(git_options + config_options), sub.text)
            if expansion is not None:
                self.git_alias(expansion, words[:index], args, directory, taint)
                return
        if sub.text == "config" and not any(w.text in _GIT_CONFIG_READS for w in args) and any(
                _GIT_BEHAVIOUR_KEYS.fullmatch(w.text) for w in args if not w.text.startswith("-")):
            self.hide("git config that changes what git runs", words)
            return
        text = render(words)
        location = Release(text, directory=directory, git_options=tuple(git_options))
        if sub.text == "push":
            release = self.git_push(words, args, location)
        elif sub.text == "merge":
            release = self.git_merge(words, args, location)
        elif self.matches(text):
            release = _located(location, directory)
        else:
            if self.could_match(words, verb_positions=0):
                self.hide("an argument computed at run time", words)
            return
        if release is None:
            return
        if release.unresolved is None and (dynamic_location or directory is None):
            release = _replace(release, unresolved="the command runs in a directory the hook cannot follow")
        if configured:
            construct = "git -c" if config_options else "GIT_* environment"
            self.release(Release(text), (*taint, construct), words)
            return
        self.release(release, taint, words)

    def git_alias(self, expansion: str, prefix: list[Word], args: list[Word], directory: str,
                  taint: tuple[str, ...]) -> None:
        if expansion.startswith("!"):
            script = " ".join([expansion[1:], *(w.text if w.dynamic else shlex.quote(w.text) for w in args)])
            self.nested(script, directory, taint, "git alias")
            return
        try:
            expanded = [Word(part) for part in shlex.split(expansion)]
        except ValueError:
            self.hide("an unreadable git alias", expansion)
            return
        self.simple([*prefix, *expanded, *args], [], False, False, directory, (*taint, "git alias"))

    def git_push(self, words: list[Word], args: list[Word], location: Release) -> Release | None:
        value_options = {"--repo", "-o", "--push-option", "--receive-pack", "--exec"}
        positionals: list[Word] = []
        every_branch = delete = False
        index = 0
        while index < len(args):
            word = args[index]
            text = word.text
            if text == "--":
                positionals += args[index + 1:]
                break
            if text.startswith("-") and not word.dynamic:
                if text in value_options:
                    index += 1
                elif text in ("--all", "--branches", "--mirror"):
                    every_branch = True
                elif text == "--delete" or (not text.startswith("--") and "d" in text[1:]):
                    delete = True
            else:
                positionals.append(word)
            index += 1
        remote = positionals[0].text if positionals else "origin"
        refspecs = positionals[1:]
        text = render(words)
        if any(word.dynamic for word in refspecs):
            if self.matches(text) or self.could_match(words, verb_positions=0):
                self.hide("a push target computed at run time", words)
            return None
        if every_branch:
            return _replace(location, unresolved="it pushes every branch at once; push the protected "
                            "branch by name") if self.matches(text) else None
        pushes: list[tuple[str | None, str]] = []  # (source ref or None for a deletion, destination)
        unknown: str | None = None
        directory = location.directory
        if not refspecs:
            destinations = (self.repository.push_destinations(directory, location.git_options)
                            if directory is not None else None)
            if destinations is None:
                unknown = "the hook cannot tell which branch it updates (not a git repository, not on a " \
                          "branch, or push refspecs are configured); name the branch"
            pushes = [("HEAD", destination) for destination in destinations or []]
        for spec in refspecs:
            value = spec.text[1:] if spec.text.startswith("+") else spec.text
            source, colon, destination = value.partition(":")
            if delete:
                source, destination = "", value
            elif not colon:
                destination = source
            if "*" in value:
                unknown = "a wildcard refspec can update a protected branch; name the branch"
                continue
            if destination in ("HEAD", "@") or (not colon and source in ("HEAD", "@")):
                current = (self.repository.current_branch(directory, location.git_options)
                           if directory is not None else None)
                if current is None:
                    unknown = (f"the hook cannot tell which branch {spec.text} updates (not a git repository, "
                               "or not on a branch)")
                    continue
                destination = current
            pushes.append((source or None, destination or source))
        gated = [push for push in pushes if self.matches(_explicit_push(remote, *push))]
        if not gated and self.matches(text):
            gated = pushes
        if unknown is not None and (gated or not pushes or self.matches(text)):
            return _replace(location, unresolved=unknown)
        if not gated:
            return None
        if any(source is None for source, _ in gated):
            return _replace(location, unresolved="it deletes a protected branch: there is no commit to judge")
        return _replace(location, refs=tuple(dict.fromkeys(source for source, _ in gated if source)))

    def git_merge(self, words: list[Word], args: list[Word], location: Release) -> Release | None:
        value_options = {"-m", "-F", "--file", "-s", "--strategy", "-X", "--strategy-option", "--into-name"}
        if not self.matches(render(words)):
            return None
        refs: list[str] = []
        index = 0
        while index < len(args):
            word = args[index]
            if word.text in ("--abort", "--quit"):
                return None  # nothing advances
            if word.text == "--continue":
                refs.append("MERGE_HEAD")
            elif word.text.startswith("-") and not word.dynamic:
                index += 1 if word.text in value_options else 0
            elif word.dynamic:
                self.hide("a merged commit computed at run time", words)
                return None
            else:
                refs.append(word.text)
            index += 1
        return _replace(location, refs=tuple(refs))

    def forge(self, name: str, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        """`gh pr merge` and `glab mr merge`: the merged commit is the pull request's head."""
        args = [word.text for word in words[1:3]]
        noun = "pr" if name == "gh" else "mr"
        if name == "gh" and args[:2] == ["alias", "set"]:
            self.gh_alias(words, directory, taint)
            return
        text = render(words)
        if args != [noun, "merge"] or not self.matches(text):
            self.generic(words, directory, taint)
            return
        if name == "gh":
            value_options = {"-b", "--body", "-F", "--body-file", "-t", "--subject", "-A", "--author-email",
                             "--match-head-commit", "-R", "--repo"}
            head_option = "--match-head-commit"
        else:
            value_options = {"-m", "--message", "--squash-message", "--sha", "-R", "--repo"}
            head_option = "--sha"
        head: Word | None = None
        target: Word | None = None
        elsewhere = False
        rest = words[3:]
        index = 0
        while index < len(rest):
            word = rest[index]
            option, has_inline, inline = word.text.partition("=")
            elsewhere = elsewhere or option in ("-R", "--repo")
            if option == head_option:
                head = Word(inline, word.dynamic) if has_inline else (rest[index + 1] if index + 1 < len(rest)
                                                                      else None)
            if option in value_options and not has_inline:
                index += 2
                continue
            if not word.text.startswith("-") and target is None:
                target = word
            index += 1
        if (head is not None and head.dynamic) or (head is None and target is not None and target.dynamic):
            self.hide("a merged pull request computed at run time", words)
            return
        release = Release(text, directory=directory)
        if head is not None:
            release = _replace(release, refs=(head.text,))
        elif elsewhere:
            release = _replace(release, unresolved=f"it merges in another repository; add {head_option} "
                               "<full commit id> so the merge is bound to the commit the gate judged")
        elif target is not None:
            value = target.text
            if value.isdigit() or value.startswith("#") or "://" in value:
                release = _replace(release, unresolved=f"{value} names a {noun.upper()}, not a commit; add "
                                   f"{head_option} <full commit id> so the merge is bound to the commit the "
                                   "gate judged")
            else:
                release = _replace(release, refs=(value,))
        self.release(_located(release, directory), taint, words)

    def gh_alias(self, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        positionals = [w for w in words[3:] if not w.text.startswith("-")]
        shell = any(w.text in ("-s", "--shell") for w in words[3:])
        if len(positionals) < 2:
            return
        expansion = positionals[1]
        if expansion.dynamic:
            self.hide("a gh alias computed at run time", words)
        elif shell or expansion.text.startswith("!"):
            self.nested(expansion.text.lstrip("!"), directory, taint, "gh alias")
        else:
            try:
                expanded = [Word(part) for part in shlex.split(expansion.text)]
            except ValueError:
                self.hide("an unreadable gh alias", words)
                return
            self.simple([Word("gh"), *expanded], [], False, False, directory, (*taint, "gh alias"))


def _explicit_push(remote: str, source: str | None, destination: str) -> str:
    """`git push` with its refspec spelled out, so an implicit destination meets the patterns too."""
    refspec = f"{source or ''}:{destination}"
    return f"git push {shlex.quote(remote)} {shlex.quote(refspec)}"


def _replace(release: Release, **changes: object) -> Release:
    values = {**release.__dict__, **changes}
    return Release(**values)  # type: ignore[arg-type]


def _located(release: Release, directory: str | None) -> Release:
    if directory is None and release.unresolved is None:
        return _replace(release, unresolved="the command runs in a directory the hook cannot follow")
    return _replace(release, directory=directory)


def _change_directory(name: str, args: Sequence[Word], directory: str | None) -> str | None:
    """The working directory after cd/pushd/popd; None when it cannot be known from the text."""
    operands = [w for w in args if not (w.text.startswith("-") and w.text != "-" and not w.dynamic)]
    if name == "popd" or not operands or directory is None:
        return None
    target = operands[0]
    if target.dynamic or target.text == "-" or not target.text:
        return None
    return posixpath.normpath(posixpath.join(directory, target.text))


def _vocabulary(patterns: Sequence[str]) -> tuple[str, ...]:
    """The literal words of the release patterns: what a run-time value would have to be to match."""
    words: set[str] = set(BRANCH_PROBES)
    for pattern in patterns:
        plain = re.sub(r"\\.", " ", pattern)
        plain = re.sub(r"\[[^\]]*\]", " ", plain)
        words.update(match.group() for match in re.finditer(r"-{0,2}[A-Za-z][A-Za-z0-9_-]*", plain))
    return tuple(sorted(words))


def analyse_command(command: str, cwd: str | None, patterns: Sequence[str],
                    repository: Repository | None = None) -> Analysis:
    """Every release in a shell command, and everything it hides. `cwd` is where it starts running."""
    analyser = _Analyser(patterns, repository or NoRepository())
    try:
        tokens = tokenize(command)
    except ShellSyntaxError as error:
        analyser.hide(f"shell text the hook cannot read ({error})", command[:200])
        return analyser.result
    analyser.script(tokens, cwd or None, ())
    return analyser.result


def analyse_mcp(tool_name: str, tool_input: object, cwd: str | None, patterns: Sequence[str]) -> Analysis:
    """An MCP tool call: a release when its name matches a pattern or it writes to a protected branch."""
    result = Analysis()
    tool = tool_name.split("__", 2)[-1]
    verb = tool.split("_", 1)[0].lower()
    arguments = tool_input if isinstance(tool_input, dict) else {}
    branch_write = bool(_MCP_BRANCH_WRITE.search(tool)) and any(
        isinstance(arguments.get(key), str) and _PROTECTED_BRANCH.fullmatch(arguments[key])
        for key in _MCP_BRANCH_FIELDS)
    named = any(re.search(pattern, tool_name) for pattern in patterns) or (
        verb not in _MCP_READ_VERBS and any(re.search(pattern, tool_name) for pattern in MCP_RELEASE_PATTERNS))
    if not (named or branch_write):
        return result
    commit = next((arguments[key] for key in _MCP_COMMIT_FIELDS
                   if isinstance(arguments.get(key), str) and FULL_COMMIT.fullmatch(arguments[key])), None)
    release = Release(tool_name, directory=cwd or None)
    if commit is not None:
        release = _replace(release, refs=(commit,))
    elif branch_write:
        release = _replace(release, unresolved="it writes a commit to a protected branch on the server; that "
                           "commit has no candidate")
    elif "merge" in tool:
        release = _replace(release, unresolved="it merges a pull request without naming its head commit")
    result.releases.append(_located(release, cwd or None))
    return result


_POWERSHELL_INDIRECTION = re.compile(
    r"(?i)\b(?:iex|invoke-expression|invoke-command|icm|start-process|saps|start-job|invoke-item)\b"
    r"|(?:^|[\s;|(])[&.]\s*[$('\"{]|-enc(?:odedcommand)?\b|\b(?:pwsh|powershell)(?:\.exe)?\b.*\s-c")


def analyse_powershell(command: str, patterns: Sequence[str]) -> Analysis:
    """PowerShell is not parsed: a release or an indirection anywhere in it is treated as hidden."""
    result = Analysis()
    if any(re.search(pattern, command) for pattern in patterns):
        result.hidden.append(Hidden("a PowerShell release command (only Bash commands are parsed)",
                                    command[:200]))
    elif _POWERSHELL_INDIRECTION.search(command):
        result.hidden.append(Hidden("PowerShell that runs text computed at run time", command[:200]))
    return result
