"""PowerShell commands, read with PowerShell's own quoting and escaping rules, over a documented subset.

The subset: pipelines of simple commands separated by `;`, `&&`, `||`, `|` and newlines; words that are
barewords (the backtick escapes the next character: ``ma`in`` is `main`, `` `n`` a newline), single-quoted
strings (`''` is a quote) and double-quoted strings (backtick escapes, `""`; `$name` or `$(...)` inside make
the word computed at run time); `,` between arguments (each element becomes an argument of a native
command); `#` comments; the call operator `&` before a literal command name; output redirections
(`>`, `>>`, `2>&1`, `*>`); and `$env:NAME = 'literal'` assignments. Anything outside it (script blocks,
subexpressions outside strings, here-strings, type literals, splatting, `--%`, block comments, non-ASCII
characters, which PowerShell reads as quotes and dashes) is hidden. Each simple command is then judged by
the same analysis as a Bash command, with PowerShell's own ways to run code (`Invoke-Expression`,
`Start-Process`, `Invoke-Command`, jobs, `pwsh -c`, `cmd /c`) hidden.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .releases import Analysis, Hidden, Repository
from .shell_lexer import Word

_ESCAPES = {
    "0": "\0",
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
}
_WORD_END = " \t\r\n;|&<>,(){}"
_RUNS_CODE = frozenset(
    "invoke-expression iex invoke-command icm start-process saps start start-job sajb start-threadjob "
    "invoke-item ii powershell pwsh powershell_ise cmd wsl bash.exe set-alias new-alias sal nal "
    "import-module ipmo add-type new-object invoke-cimmethod invoke-wmimethod register-scheduledtask "
    "register-scheduledjob new-pssession enter-pssession invoke-restmethod_alias".split()
)
_VARIABLE = re.compile(r"\$(?:env:)?[A-Za-z_][A-Za-z0-9_:]*|\$\{[^}]*\}|\$\(|\$[?$^_]")


class PowerShellSyntax(ValueError):
    """The command falls outside the PowerShell subset the hook reads."""


def _double_quoted(text: str, start: int) -> tuple[str, bool, int]:
    out: list[str] = []
    dynamic = False
    index = start
    while index < len(text):
        char = text[index]
        if char == "`" and index + 1 < len(text):
            out.append(_ESCAPES.get(text[index + 1], text[index + 1]))
            index += 2
            continue
        if char == '"':
            if text[index + 1 : index + 2] == '"':
                out.append('"')
                index += 2
                continue
            return "".join(out), dynamic, index + 1
        if char == "$" and _VARIABLE.match(text, index):
            dynamic = True
        out.append(char)
        index += 1
    raise PowerShellSyntax("unterminated double-quoted string")


def tokenize_powershell(text: str) -> list[object]:
    """Words (shell_lexer.Word) and separators (str) of a command in the subset."""
    if any(ord(char) > 126 or (ord(char) < 32 and char not in "\t\r\n") for char in text):
        raise PowerShellSyntax("characters outside ASCII (PowerShell reads some as quotes or dashes)")
    for construct in ("--%", "<#", "@'", '@"', "@(", "@{", "::"):
        if construct in text:
            raise PowerShellSyntax(f"{construct} is outside the subset")
    tokens: list[object] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char in " \t\r":
            index += 1
            continue
        if char == "#":
            end = text.find("\n", index)
            index = len(text) if end < 0 else end
            continue
        if char == "`" and text[index + 1 : index + 2] == "\n":
            index += 2
            continue
        for separator in ("&&", "||", ";", "|", "\n"):
            if text.startswith(separator, index):
                tokens.append(separator)
                index += len(separator)
                break
        else:
            if char in "(){}[":
                raise PowerShellSyntax(f"{char} (script blocks, subexpressions, types) is outside the subset")
            if char == ",":
                index += 1
                continue
            if char == "&":
                tokens.append("&call")
                index += 1
                continue
            redirect = re.match(r"(?:[*1-6]?>>?(?:&[12])?|<)", text[index:])
            if redirect:
                if redirect.group(0) == "<":
                    raise PowerShellSyntax("< is not a PowerShell redirection")
                tokens.append("redirect:" + redirect.group(0))
                index += len(redirect.group(0))
                continue
            word, index = _word(text, index)
            tokens.append(word)
    return tokens


def _single_quoted(text: str, index: int) -> tuple[str, int]:
    """The value of a single-quoted string starting at index (after the quote), and where it ends."""
    end = index
    while True:
        end = text.find("'", end)
        if end < 0:
            raise PowerShellSyntax("unterminated single-quoted string")
        if text[end + 1 : end + 2] != "'":
            return text[index:end].replace("''", "'"), end + 1
        end += 2


def _word(text: str, index: int) -> tuple[Word, int]:
    out: list[str] = []
    dynamic = quoted = False
    start = index
    while index < len(text) and text[index] not in _WORD_END:
        char = text[index]
        if char == "`":
            if index + 1 >= len(text):
                raise PowerShellSyntax("a backtick at the end")
            if text[index + 1] in "\r\n":
                break  # a line continuation ends the word
            out.append(_ESCAPES.get(text[index + 1], text[index + 1]))
            quoted = True
            index += 2
        elif char == "'":
            value, index = _single_quoted(text, index + 1)
            out.append(value)
            quoted = True
        elif char == '"':
            value, expands, index = _double_quoted(text, index + 1)
            out.append(value)
            dynamic = dynamic or expands
            quoted = True
        elif char == "$":
            if text[index + 1 : index + 2] in ("(", "{", "@"):
                raise PowerShellSyntax("a subexpression or splatting is outside the subset")
            dynamic = True
            out.append(char)
            index += 1
        elif char == "@" and index == start:
            raise PowerShellSyntax("@ (splatting, arrays, hashtables) is outside the subset")
        elif char in "[]" and index == start:
            raise PowerShellSyntax("a type literal is outside the subset")
        else:
            out.append(char)
            index += 1
    if index == start:
        raise PowerShellSyntax(f"unexpected {text[index]!r}")
    return Word("".join(out), dynamic=dynamic, quoted=quoted, lead="" if quoted else "".join(out)), index


def _native_name(word: Word) -> str:
    name = word.text.replace("\\", "/").rsplit("/", 1)[-1].lower()
    return name[:-4] if name.endswith((".exe", ".cmd", ".bat", ".com")) else name


def analyse_powershell(
    command: str,
    cwd: str | None,
    patterns: Sequence[str],
    protected: Sequence[str],
    repository: Repository | None = None,
) -> Analysis:
    """A PowerShell command, judged like Bash after PowerShell's tokenisation; outside the subset: hidden."""
    from .release_analysis import new_analyser

    analyser = new_analyser(patterns, protected, repository)
    try:
        statements = _statements(command)
    except PowerShellSyntax as error:
        analyser.result.hidden.append(
            Hidden(f"PowerShell outside the subset the hook reads ({error})", command[:200])
        )
        return analyser.result
    directory = cwd or None
    for words, piped_in, env, targets in statements:
        if env is not None:
            analyser.exports[env[0]] = env[1]
            continue
        for target in targets:
            analyser.write_target(target, directory, words)
        if not words:
            continue
        name = _native_name(words[0])
        if name in ("curl", "wget") and _web_parameters(words):
            name = "invoke-webrequest"
        if words[0].dynamic or name in _RUNS_CODE:
            analyser.hide(f"PowerShell {words[0].text} runs code or a command the hook cannot follow", words)
            continue
        if name in ("set-item", "si", "new-item", "ni") and any(
            w.text.lower().startswith("env:") for w in words
        ):
            analyser.hide("PowerShell setting an environment variable through a provider", words)
            continue
        directory = analyser.simple(
            [Word(name, quoted=True), *words[1:]], [], piped_in, piped_in, directory, ()
        )
    return analyser.result


def _web_parameters(words: Sequence[Word]) -> bool:
    return any(
        w.text.lower().rstrip(":") in ("-uri", "-method", "-body", "-infile", "-outfile") for w in words[1:]
    )


Statement = tuple[list[Word], bool, "tuple[str, str | None] | None", list[Word]]


def _statements(command: str) -> list[Statement]:
    """Simple commands: (words, fed by a pipe, an `$env:` assignment, files it redirects into)."""
    out: list[Statement] = []
    words: list[Word] = []
    targets: list[Word] = []
    piped = redirecting = False
    for token in [*tokenize_powershell(command), "\n"]:
        if isinstance(token, Word):
            (targets if redirecting else words).append(token)
            redirecting = False
            continue
        if token == "&call":
            if words:
                raise PowerShellSyntax("& inside a command")
            continue
        if isinstance(token, str) and token.startswith("redirect:"):
            redirecting = not token.endswith(("&1", "&2"))
            continue
        if words and words[0].text.startswith("$"):
            out.append(([], False, _assignment(words), []))
        else:
            out.append((words, piped, None, targets))
        words, targets, piped = [], [], token == "|"
    return out


def _assignment(words: list[Word]) -> tuple[str, str | None]:
    """`$env:NAME = 'value'`: the variable and its literal value (None when computed at run time)."""
    joined = "".join(word.text for word in words)
    match = re.fullmatch(r"\$env:([A-Za-z_][A-Za-z0-9_]*)=(.*)", joined, re.DOTALL)
    if match is None or len(words) > 3:
        raise PowerShellSyntax("variable assignments other than $env:NAME = 'literal' are outside the subset")
    value = match.group(2)
    return match.group(1), None if "$" in value else value
