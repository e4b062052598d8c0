"""Which shell commands are releases, and what a command hides.

The hook sees one Bash command as text and must answer two questions before it spends a network call:
does this command need a `ready` decision (it matches a release pattern), and does it hide what it runs
(`sh -c`, `eval`, `exec`, command substitution, a pipe into a shell, aliases, `--no-verify`)? A regular
expression over the raw text answers neither reliably: quoting (`git push origin "main"`), comments,
heredocs, substitutions and wrappers (`sudo`, `env`, `timeout`) all change what the shell runs without
changing what a pattern sees. So the command is tokenised the way a POSIX shell would (`shell_lexer`), and
the patterns are matched against each simple command in a canonical rendering (one word per argument,
quoted only where the shell would need it). git, gh and glab commands are read in `git_releases`.

What is hidden is never judged by the gate: a release found inside a construct the hook cannot follow, or
a construct whose content is computed at run time, is a denial on its own. Everything here is pure; the
few facts that need git (the branch an implicit push updates, git aliases) come through `Repository`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from .git_releases import _GIT_ENVIRONMENT, GitAnalysis
from .releases import (
    Analysis,
    Hidden,
    NoRepository,
    Release,
    Repository,
    _change_directory,
    _located,
    _replace,
)
from .shell_lexer import Operator, Redirect, ShellSyntaxError, Word, render, tokenize

# A revision named in full needs no lookup (and may not exist locally, e.g. a pull request's head).
FULL_COMMIT = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")

# Protected-branch probes for arguments the shell computes at run time: `git push origin "$BRANCH"`
# is a release if the variable can hold one of these.
BRANCH_PROBES: tuple[str, ...] = (
    "main",
    "master",
    "release/x",
    "HEAD:main",
    "+main",
    "refs/heads/main",
    "--all",
    "--mirror",
)

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

_MAX_NESTING = 8


# ---- the analysis --------------------------------------------------------------------------------------

# Reserved words that only introduce the command after them.
_KEYWORDS = frozenset(
    {
        "!",
        "{",
        "}",
        "if",
        "then",
        "elif",
        "else",
        "fi",
        "while",
        "until",
        "do",
        "done",
        "esac",
        "coproc",
        "[[",
        "]]",
    }
)
# Reserved words followed by a word list, not a command.
_WORD_LISTS = frozenset({"for", "select", "case"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "yash", "posh"})
# Wrappers that run the command after them unchanged (value-taking options listed).
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset(
        {
            "-u",
            "-g",
            "-h",
            "-p",
            "-C",
            "-D",
            "-r",
            "-t",
            "-U",
            "-T",
            "--user",
            "--group",
            "--host",
            "--prompt",
            "--chdir",
            "--role",
            "--type",
            "--other-user",
            "--command-timeout",
            "--close-from",
        }
    ),
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
_STDIN_REDIRECTS = frozenset({"<", "<<", "<<-", "<<<", "<&", "<>"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
# Interpreters whose inline code can run any command: `python -c "os.system('git push origin main')"`.
_INLINE_CODE = {
    "python": ("-c",),
    "python3": ("-c",),
    "node": ("-e", "--eval", "-p", "--print"),
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "php": ("-r",),
    "deno": ("eval",),
    "bun": ("-e", "--eval"),
}


def _literal(text: str) -> Word:
    return Word(text)


class _Analyser(GitAnalysis):
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
                trial = [*words[:index], _literal(probe), *words[index + 1 :]]
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

    def command(
        self,
        words: list[Word],
        redirects: list[Redirect],
        piped_in: bool,
        detached: bool,
        directory: str | None,
        taint: tuple[str, ...],
    ) -> str | None:
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

    def simple(
        self,
        words: list[Word],
        assignments: list[Word],
        stdin_fed: bool,
        detached: bool,
        directory: str | None,
        taint: tuple[str, ...],
    ) -> str | None:
        if len(taint) > _MAX_NESTING:  # an alias that expands to itself, an eval of an eval...
            self.hide("nesting deeper than the hook follows", words)
            return directory
        outer, self.context = self.context, taint
        try:
            return self._simple(words, assignments, stdin_fed, detached, directory, taint)
        finally:
            self.context = outer

    # Over the complexity gate: the hook issue rewrites this analysis; the restructuring moved it unchanged.
    def _simple(  # noqa: C901
        self,
        words: list[Word],
        assignments: list[Word],
        stdin_fed: bool,
        detached: bool,
        directory: str | None,
        taint: tuple[str, ...],
    ) -> str | None:
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

    def wrapper(
        self,
        name: str,
        words: list[Word],
        assignments: list[Word],
        stdin_fed: bool,
        detached: bool,
        directory: str | None,
        taint: tuple[str, ...],
    ) -> str | None:
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
                    self.nested(
                        " ".join([value.text, *(w.text for w in words[index:])]),
                        inner_directory,
                        taint,
                        "env -S",
                    )
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

    def shell(
        self, name: str, words: list[Word], stdin_fed: bool, directory: str | None, taint: tuple[str, ...]
    ) -> None:
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

    def inline_code(
        self, name: str, words: list[Word], directory: str | None, taint: tuple[str, ...]
    ) -> None:
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
        value_options = {
            "-I",
            "-L",
            "-n",
            "-P",
            "-s",
            "-d",
            "-E",
            "-a",
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-lines",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        }
        index = 1
        while index < len(words) and words[index].text.startswith("-"):
            index += 2 if words[index].text in value_options else 1
        inner = words[index:]
        if inner:
            # The input becomes arguments the hook never sees.
            self.simple(
                [*inner, Word("{input}", dynamic=True)], [], False, False, directory, (*taint, "xargs")
            )

    def find(self, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        index = 1
        while index < len(words):
            if words[index].text in ("-exec", "-execdir", "-ok", "-okdir"):
                end = index + 1
                while end < len(words) and words[end].text not in (";", "+"):
                    end += 1
                inner = [Word(w.text, True) if w.text == "{}" else w for w in words[index + 1 : end]]
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


def _vocabulary(patterns: Sequence[str]) -> tuple[str, ...]:
    """The literal words of the release patterns: what a run-time value would have to be to match."""
    words: set[str] = set(BRANCH_PROBES)
    for pattern in patterns:
        plain = re.sub(r"\\.", " ", pattern)
        plain = re.sub(r"\[[^\]]*\]", " ", plain)
        words.update(match.group() for match in re.finditer(r"-{0,2}[A-Za-z][A-Za-z0-9_-]*", plain))
    return tuple(sorted(words))


def analyse_command(
    command: str, cwd: str | None, patterns: Sequence[str], repository: Repository | None = None
) -> Analysis:
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


_POWERSHELL_INDIRECTION = re.compile(
    r"(?i)\b(?:iex|invoke-expression|invoke-command|icm|start-process|saps|start-job|invoke-item)\b"
    r"|(?:^|[\s;|(])[&.]\s*[$('\"{]|-enc(?:odedcommand)?\b|\b(?:pwsh|powershell)(?:\.exe)?\b.*\s-c"
)


def analyse_powershell(command: str, patterns: Sequence[str]) -> Analysis:
    """PowerShell is not parsed: a release or an indirection anywhere in it is treated as hidden."""
    result = Analysis()
    if any(re.search(pattern, command) for pattern in patterns):
        result.hidden.append(
            Hidden("a PowerShell release command (only Bash commands are parsed)", command[:200])
        )
    elif _POWERSHELL_INDIRECTION.search(command):
        result.hidden.append(Hidden("PowerShell that runs text computed at run time", command[:200]))
    return result
