"""Which shell commands are releases, and what a command hides.

The hook sees one Bash command as text and must answer two questions before it spends a network call:
does this command need a `ready` decision (it matches a release pattern), and does it hide what it runs
(`sh -c`, `eval`, `exec`, command substitution, a pipe into a shell, aliases, `--no-verify`)? A regular
expression over the raw text answers neither reliably: quoting (`git push origin "main"`), comments,
heredocs, substitutions and wrappers (`sudo`, `env`, `timeout`) all change what the shell runs without
changing what a pattern sees. So the command is tokenised the way a POSIX shell would (`shell_lexer`), and
the patterns are matched against each simple command in a canonical rendering (one word per argument,
quoted only where the shell would need it). git, gh and glab commands are read in `git_releases`,
commands that run other commands (`sudo`, `sh -c`, `xargs`...) in `command_runners`; MCP tool calls and
PowerShell in `mcp_and_powershell`.

What is hidden is never judged by the gate: a release found inside a construct the hook cannot follow, or
a construct whose content is computed at run time, is a denial on its own. Everything here is pure; the
few facts that need git (the branch an implicit push updates, git aliases) come through `Repository`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from .command_runners import _ASSIGNMENT, _INLINE_CODE, _WRAPPERS, RunnerAnalysis
from .git_releases import _GIT_ENVIRONMENT, GitAnalysis
from .releases import (
    Analysis,
    Hidden,
    NoRepository,
    Release,
    Repository,
    _change_directory,
    _located,
)
from .shell_lexer import Operator, Redirect, ShellSyntaxError, Word, render, tokenize

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
_STDIN_REDIRECTS = frozenset({"<", "<<", "<<-", "<<<", "<&", "<>"})


def _literal(text: str) -> Word:
    return Word(text)


class _Analyser(RunnerAnalysis, GitAnalysis):
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
