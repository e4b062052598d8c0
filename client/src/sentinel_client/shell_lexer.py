"""The shell lexer: a Bash command line read the way a POSIX shell would.

A regular expression over the raw text cannot tell what a command runs: quoting (`git push origin "main"`),
comments, heredocs, substitutions and wrappers all change what the shell runs without changing what a
pattern sees. So the command is tokenised the way a POSIX shell would: words (after quote removal, with what
the shell computes at run time marked dynamic), operators and redirections, with the commands inside
substitutions and unquoted heredocs kept as tokens of their own. `render` gives the canonical text of a
simple command that the release patterns are matched against (one word per argument, quoted only where the
shell would need it). Pure.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

_MAX_COMMAND_CHARS = 100_000


class ShellSyntaxError(ValueError):
    """The command cannot be read the way a POSIX shell would (an unterminated quote or substitution)."""


# ---- tokens --------------------------------------------------------------------------------------------


@dataclass
class Word:
    text: str  # the value after quote removal; expansions keep their source text
    dynamic: bool = False  # the shell rewrites it at run time (expansion, substitution, glob, brace, ~)
    quoted: bool = False  # any quoting: a quoted `if` is not a keyword, a quoted heredoc is literal
    lead: str = ""  # the unquoted literal start: `NAME=` there makes an assignment
    substitutions: list[tuple[str, list[object]]] = field(default_factory=list)


@dataclass
class Operator:
    op: str


@dataclass
class Redirect:
    op: str
    target: Word
    body_substitutions: list[tuple[str, list[object]]] = field(default_factory=list)


_OPERATORS = (
    "&&",
    "||",
    ";;&",
    ";;",
    ";&",
    "|&",
    "&>>",
    "&>",
    ">>",
    ">&",
    "<&",
    "<<<",
    "<<-",
    "<<",
    "<>",
    ">|",
    "|",
    "&",
    ";",
    "(",
    ")",
    "<",
    ">",
)
_REDIRECTS = frozenset({"&>>", "&>", ">>", ">&", "<&", "<<<", "<<-", "<<", "<>", ">|", "<", ">"})
_WORD_END = " \t\n;&|()<>"
# What a substitution renders as in its word: its commands are analysed on their own, and their text must
# not make the word around them look like a release (`git diff $(git merge-base main HEAD)`).
_SUBSTITUTED = "$(…)"
_BRACE_EXPANSION = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
_GLOB = re.compile(r"[*?]|\[.*\]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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
            if (
                word.text.isdigit()
                and not word.quoted
                and self.i < len(s)
                and s[self.i] in "<>"
                and s[self.i + 1 : self.i + 2] != "("
            ):
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
        if s[self.i] in "<>" and s[self.i + 1 : self.i + 2] == "(":
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
                line = s[self.i :] if end < 0 else s[self.i : end]
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
        if s[self.i] in "<>" and s[self.i + 1 : self.i + 2] == "(":
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
                text.append(s[self.i + 1 : end])
                word.quoted = True
                self.i = end + 1
                continue
            if c == '"':
                self.i += 1
                before, commands = self.i, len(word.substitutions)
                expands = self._double_quoted_content('"', word.substitutions)
                word.dynamic = word.dynamic or expands
                inside = s[before : self.i - 1]
                text.append(
                    _SUBSTITUTED
                    if len(word.substitutions) > commands
                    else inside
                    if expands
                    else _unescape_double(inside)
                )
                word.quoted = True
                continue
            if c == "$" or c == "`":
                before, commands = self.i, len(word.substitutions)
                if self._expansion(word.substitutions):
                    word.dynamic = True
                text.append(_SUBSTITUTED if len(word.substitutions) > commands else s[before : self.i])
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
        nxt = s[self.i + 1 : self.i + 2]
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
