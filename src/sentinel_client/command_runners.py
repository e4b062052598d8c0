"""Commands that run other commands: wrappers (`sudo`, `env`, `timeout`...), shells (`sh -c`), interpreters'
inline code (`python -c`), `watch`, `xargs` and `find -exec`. The command each one runs is analysed like any
other, with the construct around it as its taint.
"""

from __future__ import annotations

import re

from .releases import _change_directory
from .shell_lexer import Word

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


class RunnerAnalysis:
    """The commands-that-run-commands part of the release analyser (`release_analysis._Analyser` inherits it).

    It relies on the analyser for matching (`matches`), for what it reports (`hide`) and for the commands
    it finds inside (`simple`, `nested`, `generic`).
    """

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
