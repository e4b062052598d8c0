"""Which shell commands are releases, and what a command hides.

The hook sees one command as text and must answer, before it spends a network call: which refs can this
command move, at which commits (a push to a protected ref, a merge at a forge, a deploy), and does it hide
what it runs? A regular expression over the raw text answers neither: quoting, comments, heredocs,
substitutions, wrappers and git's own configuration all change what runs without changing what a pattern
sees. So the command is tokenised the way a POSIX shell would (`shell_lexer`) and each simple command is
read by what it does: git in `git_releases` (with every config source it sees), forges and HTTP clients in
`forge_releases`, programs that run programs in `command_runners` (an unknown program followed by a release
is that release), inline interpreter code in `inline_code`, scripts one level deep in `script_files`.
The release patterns (deploys, publishes, and anything an administrator adds) are matched against each
simple command in a canonical rendering.

What is hidden is never judged by the gate: a release inside a construct the hook cannot follow, code that
can start a process, a program read from standard input, a write into git's own files. The few facts that
need git come through `Repository`; scripts are read from disk.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from .command_runners import (
    _ASSIGNMENT,
    _STRING_RUNNERS,
    _WRAPPERS,
    NON_RUNNERS,
    SHELLS,
    RunnerAnalysis,
    interpreter_family,
)
from .forge_releases import ForgeCall, curl, gh_or_glab, httpie, powershell_web, wget
from .git_releases import GIT_ENVIRONMENT, GitAnalysis
from .managed_settings import find_git
from .programs import changed_path, impostor
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
from .script_files import ScriptAnalysis
from .shell_lexer import Operator, Redirect, ShellSyntaxError, Word, render, tokenize

# Protected-branch probes for arguments the shell computes at run time: `cdk deploy "$STACK"` is a release if
# the variable can hold one of these.
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
MAX_NESTING = 8

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
        "time",
    }
)
_WORD_LISTS = frozenset({"for", "select", "case"})
_STDIN_REDIRECTS = frozenset({"<", "<<", "<<-", "<<<", "<&", "<>"})
_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_READ_ONLY = frozenset(
    """cat less more head tail grep egrep fgrep rg ag ls stat file wc diff cmp md5sum sha1sum sha256sum
    sha512sum tree du realpath readlink basename dirname test [ echo printf jq od xxd hexdump strings
    git""".split()
)
# Commands that change neither files nor git's state (git judges its own subcommands).
_KEEPS_STATE = frozenset(
    {
        "git",
        "true",
        "false",
        ":",
        "cd",
        "pushd",
        "popd",
        "pwd",
        "sleep",
        "wait",
        "which",
        "type",
        "set-location",
        "sl",
        "chdir",
        "get-childitem",
        "write-output",
        "write-host",
    }
)
_HTTP_CLIENTS = {"curl": curl, "curl.exe": curl, "wget": wget, "wget2": wget}
_HTTPIE = frozenset({"http", "https", "httpie", "xh", "xhs"})
_POWERSHELL_WEB = frozenset({"invoke-restmethod", "invoke-webrequest", "irm", "iwr"})
_RUNNER_NAMES = frozenset(
    {
        "git",
        "gh",
        "glab",
        "hub",
        "curl",
        "wget",
        "http",
        "https",
        "xh",
        "xhs",
        "eval",
        "source",
        ".",
        "make",
        "gmake",
        "npm",
        "yarn",
        "pnpm",
        "bun",
        "xargs",
        "find",
        "parallel",
        "watch",
        "su",
        "runuser",
        "script",
        "tmux",
        "screen",
        "sed",
        *SHELLS,
        *_WRAPPERS,
    }
)
_MENTIONS = re.compile(
    r"(?:^|[\s;&|(`'\"])(?:git|gh|glab|hub|curl|wget|http|xh|eval|source|make|npm|sudo|"
    r"[a-z]*sh|python[0-9.]*|node|perl|ruby|php)(?=$|[\s;&|)`'\"])"
)
_EDITORS = frozenset({"vim", "vi", "nvim", "ex", "view", "emacs", "nano", "gdb", "lldb"})


def _into_git(path: str, directory: str | None) -> bool:
    """A path-like argument that names git's own files, as written or from the command's directory."""
    if not (path.startswith("/") or "/" in path or path.startswith(".")):
        return False
    return git_internal(path) or (directory is not None and git_internal(posixpath.join(directory, path)))


def git_internal(path: str) -> bool:
    """A path into git's own files: a `.git` directory, a git config file, or inside a git directory."""
    parts = [part for part in path.replace("\\", "/").split("/") if part]
    if ".git" in parts or (parts and parts[-1] in (".gitconfig", ".gitmodules")):
        return True
    if "/".join(parts[-2:]) == "git/config" or "/".join(parts[-3:]).startswith("git/hooks"):
        return True
    for index in range(len(parts), 0, -1):
        base = "/" + "/".join(parts[:index])
        if path.startswith("/") and all(
            posixpath.exists(posixpath.join(base, n)) for n in ("HEAD", "objects", "refs")
        ):
            return True
    return False


class _Analyser(RunnerAnalysis, GitAnalysis, ScriptAnalysis):
    def __init__(self, patterns: Sequence[str], protected: Sequence[str], repository: Repository) -> None:
        self.patterns = [re.compile(pattern) for pattern in patterns]
        self.protected = list(protected)
        self.repository = repository
        self.trusted_git = getattr(repository, "git", None) or find_git(None)
        self.verb_probes = _vocabulary(patterns)
        self.result = Analysis()
        self.context: tuple[str, ...] = ()
        self.exports: dict[str, str | None] = {}  # variables set earlier in this command line
        self.stale = False  # an earlier command changed branches, HEAD or config
        self.written: set[str] = set()  # files written earlier in this command line
        self.depth = 0

    # -- matching and reporting --------------------------------------------------------------------------

    def matches(self, text: str) -> bool:
        return any(pattern.search(text) for pattern in self.patterns)

    def could_match(self, words: Sequence[Word], verb_positions: int = 2) -> bool:
        for index, word in enumerate(words):
            if index == 0 or not word.dynamic:
                continue
            probes = self.verb_probes if index <= verb_positions else BRANCH_PROBES
            for probe in probes:
                if self.matches(render([*words[:index], Word(probe), *words[index + 1 :]])):
                    return True
        return False

    def hide(self, construct: str, words: Sequence[Word] | str) -> None:
        text = words if isinstance(words, str) else render(words)
        taint = self.context
        self.result.hidden.append(Hidden(f"{taint[-1]}: {construct}" if taint else construct, text[:300]))

    def release(self, release: Release, taint: tuple[str, ...], words: Sequence[Word]) -> None:
        if taint:
            self.result.hidden.append(Hidden(taint[-1], release.command[:300]))
        else:
            self.result.releases.append(release)

    def unresolved(self, context: Release, why: str, taint: tuple[str, ...], words: Sequence[Word]) -> None:
        """A release whose commit the hook cannot establish: held for `why`, never judged."""
        self.release(_replace(context, unresolved=why), taint, words)

    def runs_commands(self, name: str) -> bool:
        return name in _RUNNER_NAMES or interpreter_family(name) is not None

    def mentions_runner(self, text: str) -> bool:
        return bool(_MENTIONS.search(text)) or self.matches(text)

    # -- scripts -----------------------------------------------------------------------------------------

    def script(self, tokens: list[object], directory: str | None, taint: tuple[str, ...]) -> None:
        if len(taint) > MAX_NESTING or self.depth > MAX_NESTING:
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

    def nested(
        self, text: str, directory: str | None, taint: tuple[str, ...], construct: str, tainted: bool = True
    ) -> None:
        try:
            tokens = tokenize(text)
        except ShellSyntaxError as error:
            self.hide(f"{construct} with unreadable shell text ({error})", text)
            return
        self.depth += 1
        try:
            self.script(tokens, directory, (*taint, construct) if tainted else taint)
        finally:
            self.depth -= 1

    def command(
        self,
        words: list[Word],
        redirects: list[Redirect],
        piped_in: bool,
        detached: bool,
        directory: str | None,
        taint: tuple[str, ...],
    ) -> str | None:
        for word in words:
            for kind, inner in word.substitutions:
                self.script(inner, directory, (*taint, kind))
        for redirect in redirects:
            for kind, inner in redirect.target.substitutions + redirect.body_substitutions:
                self.script(inner, directory, (*taint, kind))
            if redirect.op in _WRITE_REDIRECTS and not (
                redirect.op == ">&" and redirect.target.text.isdigit()
            ):
                self.write_target(redirect.target, directory, words)
        index = 0
        while index < len(words) and _ASSIGNMENT.match(words[index].lead):
            index += 1
        assignments, rest = words[:index], words[index:]
        if not rest:
            self.record_exports(assignments)
            return directory
        stdin_fed = piped_in or any(r.op in _STDIN_REDIRECTS and r.target.text != "0" for r in redirects)
        after = self.simple(rest, assignments, stdin_fed, detached, directory, taint)
        head = next((w for w in rest if w.quoted or w.dynamic or w.text not in _KEYWORDS), None)
        name = posixpath.basename(head.text).lower() if head is not None else ""
        writes = any(
            r.op in _WRITE_REDIRECTS and not r.target.text.isdigit() and r.target.text != "/dev/null"
            for r in redirects
        )
        if writes or head is None or head.dynamic or (name not in _READ_ONLY and name not in _KEEPS_STATE):
            # Its effects (a config file, a moved ref) are what the commands after it see.
            self.stale = True
        return after

    def write_target(self, target: Word, directory: str | None, words: list[Word]) -> None:
        path = (
            target.text if directory is None else posixpath.normpath(posixpath.join(directory, target.text))
        )
        if git_internal(path) or git_internal(target.text):
            self.hide("a write into git's own files (hooks, config)", [*words, Word(">"), target])
        self.written.add(path)

    def record_exports(self, words: Sequence[Word]) -> None:
        for word in words:
            if _ASSIGNMENT.match(word.lead):
                name, _, value = word.text.partition("=")
                self.exports[name.rstrip("+")] = None if word.dynamic else value

    def simple(
        self,
        words: list[Word],
        assignments: list[Word],
        stdin_fed: bool,
        detached: bool,
        directory: str | None,
        taint: tuple[str, ...],
    ) -> str | None:
        if len(taint) > MAX_NESTING or self.depth > MAX_NESTING:
            self.hide("nesting deeper than the hook follows", words)
            return directory
        outer, self.context = self.context, taint
        self.depth += 1
        try:
            return self._simple(words, assignments, stdin_fed, detached, directory, taint)
        finally:
            self.context = outer
            self.depth -= 1

    def _simple(  # noqa: C901 - one dispatch over the kinds of program; each branch is one call
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
        lowered = name.lower()
        args = words[1:]
        if self.runs_commands(name) or name in _HTTP_CLIENTS or name in _HTTPIE:
            path_changed, path = changed_path(self.command_env(assignments))
            why = impostor(head.text, name, path, path_changed, self.trusted_git, directory)
            if why is not None:
                # Not the program its name says: read it as a program of the agent's (a script is read, a
                # binary is judged by the release it is followed by).
                if "/" in head.text and not path_changed:
                    self.script_file(head, "program", words, directory, taint)
                else:
                    self.hide(why, words)
                return directory
        if name not in _READ_ONLY and name != "git":
            for word in args:
                # `of=PATH`, `--output=PATH`: the path after an option's `=` is a target too (dd, tools).
                paths = [word.text, *([word.text.split("=", 1)[1]] if "=" in word.text else [])]
                if any(_into_git(path, directory) for path in paths):
                    self.hide("a command that can write into git's own files (hooks, config)", words)
                    return directory
        if name in _WRAPPERS and not (name in _STRING_RUNNERS and name != "flock" and name != "npx"):
            return self.wrapper(name, words, assignments, stdin_fed, detached, directory, taint)
        if name in ("cd", "pushd", "popd", "chdir", "set-location", "sl", "push-location"):
            return (
                directory
                if detached
                else _change_directory("cd" if name != "popd" else name, args, directory)
            )
        if name in ("export", "declare", "typeset", "local", "readonly"):
            self.record_exports([w for w in args if not w.text.startswith("-")])
            return directory
        if name == "unset":
            for word in args:
                self.exports.pop(word.text, None)
            return directory
        if name == "eval":
            self.hide("eval runs text as a command", words)
            return directory
        family = interpreter_family(name)
        if name in SHELLS:
            self.shell(name, words, stdin_fed, directory, taint)
        elif name in ("source", "."):
            if not args:
                return directory
            self.script_file(args[0], "shell", words, directory, taint)
        elif name in _STRING_RUNNERS:
            self.string_runner(name, words, directory, taint)
        elif family is not None:
            self.interpreter(family, words, stdin_fed, directory, taint)
        elif name == "alias":
            for word in args:
                if "=" in word.text and not word.text.startswith("-"):
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
        elif name in _EDITORS and any(
            w.text.startswith(("-c", "+", "--cmd", "--eval", "-ex", "-x", "-batch", "-S")) for w in args
        ):
            self.hide(f"{name} running editor commands", words)
        elif name == "sed":
            self.sed(words, directory, taint)
        elif name == "watch":
            self.watch(words, directory, taint)
        elif name == "xargs":
            self.xargs(words, directory, taint)
        elif name == "find":
            self.find(words, directory, taint)
        elif name == "parallel":
            self.parallel(words, directory, taint)
        elif name == "git":
            self.git(words, assignments, directory, taint)
        elif name in ("gh", "glab", "hub"):
            self.forge_call(gh_or_glab("glab" if name == "glab" else "gh", words), words, directory, taint)
        elif name in _HTTP_CLIENTS:
            self.forge_call(_HTTP_CLIENTS[name](words), words, directory, taint)
        elif name in _HTTPIE:
            self.forge_call(httpie(name, words), words, directory, taint)
        elif lowered in _POWERSHELL_WEB:
            self.forge_call(powershell_web(words), words, directory, taint)
        elif name in ("make", "gmake"):
            self.make(words, directory, taint)
        elif name in ("npm", "yarn", "pnpm", "bun"):
            self.package_script(words, name, directory, taint)
        elif "/" in head.text:
            self.script_file(head, "program", words, directory, taint)
        elif name in NON_RUNNERS:
            self.generic(words, directory, taint)
        else:
            self.unknown_program(words, directory, taint)
        return directory

    # -- releases ----------------------------------------------------------------------------------------

    def forge_call(
        self, call: ForgeCall, words: list[Word], directory: str | None, taint: tuple[str, ...]
    ) -> None:
        if call.hidden is not None:
            self.hide(call.hidden, words)
        elif call.release:
            release = Release(render(words), directory=directory)
            release = (
                _replace(release, refs=(call.commit,))
                if call.commit
                else _replace(release, unresolved=call.why)
            )
            self.release(_located(release, directory) if call.commit else release, taint, words)
        else:
            self.generic(words, directory, taint)

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


def new_analyser(
    patterns: Sequence[str], protected: Sequence[str], repository: Repository | None = None
) -> _Analyser:
    return _Analyser(patterns, protected, repository or NoRepository())


def analyse_command(
    command: str,
    cwd: str | None,
    patterns: Sequence[str],
    repository: Repository | None = None,
    protected: Sequence[str] = ("refs/heads/main", "refs/heads/master", "refs/heads/release/*"),
) -> Analysis:
    """Every release in a shell command, and everything it hides. `cwd` is where it starts running."""
    analyser = new_analyser(patterns, protected, repository)
    try:
        tokens = tokenize(command)
    except ShellSyntaxError as error:
        analyser.hide(f"shell text the hook cannot read ({error})", command[:200])
        return analyser.result
    analyser.script(tokens, cwd or None, ())
    return analyser.result


__all__ = ["GIT_ENVIRONMENT", "analyse_command", "git_internal", "new_analyser"]
