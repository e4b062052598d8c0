"""Commands that run other commands: wrappers (`sudo`, `env`, `setsid`, `flock`, `su -c`, `script -c`...),
shells (`sh -c`, a script file, standard input), interpreters' inline code (`python3.11 -c`), `watch`,
`xargs`, `find -exec`, `parallel`, and any program the hook does not know, which is judged as the release
it is followed by (`mytool git push origin main` is that push). The command each one runs is analysed like
any other, with the construct around it as its taint.
"""

from __future__ import annotations

import posixpath
import re

from .inline_code import AWKS, CODE_OPTIONS, INTERPRETER, code_can_spawn, sed_can_spawn
from .releases import _change_directory
from .shell_lexer import Word, render

# Wrappers that run the command after their options unchanged (value-taking options listed), and, for
# some, how many operands come before the command (`timeout 5 cmd`, `flock FILE cmd`, `chrt 10 cmd`).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "sudo": (
        frozenset(
            "-u -g -h -p -C -D -r -t -U -T --user --group --host --prompt --chdir --role --type "
            "--other-user --command-timeout --close-from".split()
        ),
        0,
    ),
    "doas": (frozenset({"-u", "-C"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), 0),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "ionice": (frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}), 0),
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "chronic": (frozenset(), 0),
    "unbuffer": (frozenset(), 0),
    "caffeinate": (frozenset({"-t", "-w"}), 0),
    "env": (frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}), 0),
    "busybox": (frozenset(), 0),
    "setsid": (frozenset(), 0),
    "flock": (frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}), 1),
    "taskset": (frozenset(), 1),
    "chrt": (frozenset(), 1),
    "numactl": (
        frozenset("-C -N -m -p -i --cpunodebind --membind --physcpubind --preferred --interleave".split()),
        0,
    ),
    "nsenter": (frozenset("-t -S -G --target --setuid --setgid -w -r --wd --root".split()), 0),
    "unshare": (frozenset(), 0),
    "chroot": (frozenset({"--userspec", "--groups"}), 1),
    "fakeroot": (frozenset(), 0),
    "strace": (frozenset({"-o", "-e", "-p", "-s", "-u", "-E"}), 0),
    "ltrace": (frozenset({"-o", "-e", "-p", "-s", "-u"}), 0),
    "valgrind": (frozenset(), 0),
    "xvfb-run": (frozenset({"-a", "-n", "-s", "-f", "-e"}), 0),
    "dbus-launch": (frozenset(), 0),
    "sg": (frozenset(), 1),
    "systemd-run": (
        frozenset("-p -u --unit --property -E --setenv --uid --gid --slice -M --machine".split()),
        0,
    ),
    "firejail": (frozenset(), 0),
    "proot": (frozenset({"-r", "-b", "-w"}), 0),
    "catchsegv": (frozenset(), 0),
    "torsocks": (frozenset(), 0),
    "proxychains": (frozenset({"-f"}), 0),
    "cpulimit": (frozenset({"-l", "-p", "-e"}), 0),
    "npx": (frozenset({"-p", "--package", "-c", "--call"}), 0),
    "pnpx": (frozenset(), 0),
    "bunx": (frozenset(), 0),
    "uvx": (frozenset({"--from", "--with", "-p", "--python"}), 0),
    "pipx": (frozenset({"--spec"}), 1),  # pipx run PKG
}
# Programs that take a command as one shell string after an option: `su -c CMD`, `script -c CMD`.
_STRING_RUNNERS: dict[str, tuple[str, ...]] = {
    "su": ("-c", "--command", "--session-command"),
    "runuser": ("-c", "--command", "--session-command"),
    "script": ("-c", "--command"),
    "flock": ("-c", "--command"),
    "npx": ("-c", "--call"),
    "tmux": (
        "new-session",
        "new",
        "new-window",
        "neww",
        "send-keys",
        "send",
        "split-window",
        "splitw",
        "run-shell",
        "run",
    ),
    "screen": ("-X",),
    "ssh": (),
    "docker": (),
    "kubectl": (),
}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
SHELLS = frozenset(
    {
        "sh",
        "bash",
        "zsh",
        "dash",
        "ksh",
        "mksh",
        "ash",
        "fish",
        "yash",
        "posh",
        "csh",
        "tcsh",
        "rbash",
        "busybox-sh",
        "ksh93",
        "oksh",
        "elvish",
        "nu",
        "xonsh",
        "rc",
        "es",
    }
)
# Programs known not to run their arguments as commands (they may still write files, which is checked).
NON_RUNNERS = frozenset(
    """echo printf cat grep egrep fgrep rg ag ack ls dir pwd head tail less more wc sort uniq cut tr diff cmp
    file stat touch mkdir rmdir rm cp mv ln chmod chown chgrp basename dirname realpath readlink date sleep
    true false test [ which type whoami id uname hostname printenv tee jq yq tar gzip gunzip zip unzip du df
    ps kill pkill pgrep top free uptime seq yes column nl fold fmt paste join comm split csplit od hexdump
    xxd base64 md5sum sha1sum sha256sum sha512sum shasum cksum tree fd locate wget2 ping dig nslookup host
    openssl pip pip3 uv poetry pytest ruff mypy black isort flake8 pylint tox nox cargo rustc go gofmt
    javac java mvn gradle dotnet tsc eslint prettier jest vitest mocha cmake ninja gcc g++ cc clang clang++
    ld ar strip nm objdump readelf ldd patch iconv envsubst gettext mktemp install truncate shred sync
    history hash read wait jobs fg bg disown umask ulimit shopt set unset shift getopts exit return break
    continue let local declare typeset readonly export printf: tput clear reset stty
    write-output write-host write echo get-childitem gci get-content gc select-string sls out-null out-host
    out-string format-table ft format-list fl measure-object measure get-location gl test-path resolve-path
    join-path split-path get-item gi get-date get-command gcm where-object select-object sort-object
    convertto-json convertfrom-json get-process gps""".split()
)


def interpreter_family(name: str) -> str | None:
    match = INTERPRETER.fullmatch(name)
    return match.group("name") if match else None


class RunnerAnalysis:
    """The commands-that-run-commands part of the release analyser (`release_analysis._Analyser` inherits it).

    It relies on the analyser for what it reports (`hide`) and for the commands it finds inside (`simple`,
    `nested`, `generic`, `script_file`).
    """

    # -- wrappers ------------------------------------------------------------------------------------------

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
        if name == "command" and any(w.text in ("-v", "-V") for w in words[1:2]):
            return directory  # `command -v git` looks a name up; it runs nothing
        value_options, operands = _WRAPPERS[name]
        strings = _STRING_RUNNERS.get(name, ())
        index = 1
        inner_directory = directory
        while index < len(words):
            word = words[index]
            text = word.text
            if name == "env" and _ASSIGNMENT.match(word.lead):
                assignments = [*assignments, word]
                index += 1
                continue
            if word.dynamic and text.startswith("-"):
                self.hide(f"{name} with options computed at run time", words)
                return directory
            if text == "--":
                index += 1
                break
            if not text.startswith("-") or text == "-":
                break
            option, _, inline = text.partition("=")
            value: Word | None
            if option in value_options and not inline:
                value = words[index + 1] if index + 1 < len(words) else None
                index += 2
            else:
                value = Word(inline, word.dynamic) if inline else None
                index += 1
            if option in strings or (name == "env" and option in ("-S", "--split-string")):
                self.string_command(name, option, value, words[index:], inner_directory, taint)
                return directory
            if (name, option) in (("env", "-C"), ("env", "--chdir"), ("sudo", "-D"), ("sudo", "--chdir")):
                inner_directory = _change_directory("cd", [value] if value else [], inner_directory)
            if name == "env" and option in ("-i", "--ignore-environment", "-"):
                assignments = [*assignments, Word("__SENTINEL_ENV_CLEARED=1")]
        index += operands
        if name == "flock" and index < len(words) and words[index].text in ("-c", "--command"):
            self.string_command(
                name, "-c", words[index + 1] if index + 1 < len(words) else None, [], directory, taint
            )
            return directory
        inner = words[index:]
        if not inner:
            return directory
        after = self.simple(inner, assignments, stdin_fed, detached, inner_directory, taint)
        # `command cd x` and `builtin cd x` change this shell's directory; the others start a new process.
        return after if name in ("command", "builtin") else directory

    def string_command(
        self,
        name: str,
        option: str,
        value: Word | None,
        rest: list[Word],
        directory: str | None,
        taint: tuple[str, ...],
    ) -> None:
        if value is None:
            return
        if value.dynamic:
            self.hide(f"{name} {option} with a command computed at run time", [Word(name), value])
            return
        text = (
            " ".join([value.text, *(w.text for w in rest)])
            if option in ("-S", "--split-string")
            else value.text
        )
        self.nested(text, directory, taint, f"{name} {option}", tainted=False)

    def string_runner(
        self, name: str, words: list[Word], directory: str | None, taint: tuple[str, ...]
    ) -> None:
        """su/runuser/script/tmux: the command string after one of their options."""
        options = _STRING_RUNNERS[name]
        for index, word in enumerate(words[1:], start=1):
            clustered = name != "tmux" and re.fullmatch(r"-[a-zA-Z]+c", word.text) is not None
            if word.text.partition("=")[0] in options or ("-c" in options and clustered):
                inline = word.text.partition("=")[2]
                value = (
                    Word(inline, word.dynamic)
                    if inline
                    else (words[index + 1] if index + 1 < len(words) else None)
                )
                if name == "tmux":
                    rest = [w for w in words[index + 1 :] if not w.text.startswith("-")]
                    value = rest[-1] if rest else None
                self.string_command(name, "-c" if clustered else word.text, value, [], directory, taint)
                return
        self.unknown_program(words, directory, taint)

    # -- shells and interpreters -------------------------------------------------------------------------

    def shell(
        self, name: str, words: list[Word], stdin_fed: bool, directory: str | None, taint: tuple[str, ...]
    ) -> None:
        args = words[1:]
        index = 0
        command_mode = stdin_mode = False
        while index < len(args):
            text = args[index].text
            if args[index].dynamic and text.startswith(("-", "+")):
                self.hide(f"{name} with options computed at run time", words)
                return
            if text == "--":
                index += 1
                break
            if text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
                index += 2
                continue
            if text.startswith("--"):
                index += 1
                continue
            if not text.startswith(("-", "+")) or text in ("-", "+"):
                break
            command_mode = command_mode or "c" in text[1:]
            stdin_mode = stdin_mode or "s" in text[1:]
            index += 1
        positionals = args[index:]
        if command_mode:
            if not positionals:
                self.hide(f"{name} -c without a command", words)
            elif positionals[0].dynamic:
                self.hide(f"{name} -c with a script computed at run time", words)
            else:
                self.nested(positionals[0].text, directory, taint, f"{name} -c", tainted=False)
        elif positionals and not stdin_mode:
            self.script_file(positionals[0], "shell", words, directory, taint)
        elif stdin_fed or stdin_mode or not positionals:
            self.hide(f"{name} reading its program from standard input", words)

    def interpreter(
        self, family: str, words: list[Word], stdin_fed: bool, directory: str | None, taint: tuple[str, ...]
    ) -> None:
        """Inline code is judged by what it can do; a program read from standard input is hidden."""
        options = CODE_OPTIONS.get(family, ())
        code: Word | None = None
        script: Word | None = None
        module = False
        index = 1
        if family in AWKS:
            return self.awk(words, directory, taint)
        while index < len(words):
            word = words[index]
            text = word.text
            if text in options or (family in ("perl", "ruby") and re.fullmatch(r"-[a-zA-Z]*[eE]", text)):
                code = words[index + 1] if index + 1 < len(words) else None
                break
            if family in ("python", "pypy") and text.startswith("-c") and len(text) > 2:
                code = Word(text[2:], word.dynamic)
                break
            if text in ("-m", "-r") and family in ("python", "pypy"):
                module = True
                break
            if text == "--":
                index += 1
                script = words[index] if index < len(words) else None
                break
            if not text.startswith("-") or text == "-":
                script = word
                break
            index += 1
        if code is not None:
            if code.dynamic:
                self.hide(f"{words[0].text} with code computed at run time", words)
                return None
            why = code_can_spawn(family, code.text)
            if why is not None:
                self.hide(f"{words[0].text} inline code that can start a process ({why})", words)
            return None
        if module:
            return self.unknown_program(words, directory, taint)
        if script is None or script.text == "-" or _reads_descriptor(script):
            if script is not None or stdin_fed:
                self.hide(f"{words[0].text} reading its program from standard input or a descriptor", words)
            return None
        if script.dynamic:
            self.hide(f"{words[0].text} running a program computed at run time", words)
            return None
        return self.unknown_program(words, directory, taint)

    def awk(self, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        index = 1
        while index < len(words):
            text = words[index].text
            if text in ("-f", "--file", "-E", "--exec"):
                self.hide(f"{words[0].text} reading its program from a file", words)
                return
            if text in ("-F", "-v", "--assign", "--field-separator"):
                index += 2
                continue
            if text.startswith("-") and text != "-":
                index += 1
                continue
            break
        if index >= len(words):
            return
        program = words[index]
        why = (
            "its program is computed at run time" if program.dynamic else code_can_spawn("awk", program.text)
        )
        if why is not None:
            self.hide(f"{words[0].text} code that can start a process ({why})", words)

    def sed(self, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        scripts: list[Word] = []
        index, explicit = 1, False
        while index < len(words):
            text = words[index].text
            if text in ("-e", "--expression") and index + 1 < len(words):
                scripts.append(words[index + 1])
                explicit = True
                index += 2
                continue
            if text in ("-f", "--file"):
                self.hide("sed reading its script from a file", words)
                return
            if not text.startswith("-") and not explicit:
                scripts.append(words[index])
                break
            index += 1
        for script in scripts:
            why = "its script is computed at run time" if script.dynamic else sed_can_spawn(script.text)
            if why is not None:
                self.hide(f"sed that can run a command or write a file ({why})", words)
                return

    # -- watch, xargs, find, parallel: the command comes with arguments only known at run time -----------

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
            self.simple(inner, [], False, False, directory, taint)
        elif any(word.dynamic for word in inner):
            self.hide("watch with a command computed at run time", words)
        else:
            self.nested(" ".join(word.text for word in inner), directory, taint, "watch", tainted=False)

    def xargs(self, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        value_options = set(
            "-I -L -n -P -s -d -E -a --arg-file --delimiter --max-args --max-lines --max-procs "
            "--max-chars --process-slot-var".split()
        )
        replace: str | None = None
        index = 1
        while index < len(words) and words[index].text.startswith("-"):
            text = words[index].text
            if text == "-I" and index + 1 < len(words):
                replace = words[index + 1].text
            elif text.startswith("-I") and len(text) > 2:
                replace = text[2:]
            elif text.startswith(("-i", "--replace")):
                replace = text.partition("=")[2] or "{}"
            index += 2 if text in value_options else 1
        self.with_input(words[index:], replace, directory, taint, "xargs")

    def with_input(
        self, inner: list[Word], replace: str | None, directory: str | None, taint: tuple[str, ...], what: str
    ) -> None:
        """A command whose arguments (or their parts) are filled in at run time."""
        if not inner:
            return
        marked = [
            Word(word.text.replace(replace, "$SENTINEL_INPUT"), True, word.quoted)
            if replace and replace in word.text
            else word
            for word in inner
        ]
        if replace is None:
            marked.append(Word("{input}", dynamic=True))
        self.simple(marked, [], False, False, directory, (*taint, what))

    def find(self, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        index = 1
        while index < len(words):
            if words[index].text in ("-exec", "-execdir", "-ok", "-okdir"):
                end = index + 1
                while end < len(words) and words[end].text not in (";", "+"):
                    end += 1
                self.with_input(words[index + 1 : end], "{}", directory, taint, "find -exec")
                index = end
            index += 1

    def parallel(self, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        try:
            separator = next(i for i, w in enumerate(words) if w.text in (":::", "::::", ":::+", "::::+"))
        except StopIteration:
            separator = len(words)
        inner = [w for w in words[1:separator] if not w.text.startswith("-")]
        if not inner:
            for word in words[separator + 1 :]:
                if word.dynamic:
                    self.hide("parallel with commands computed at run time", words)
                else:
                    self.nested(word.text, directory, taint, "parallel", tainted=False)
            return
        self.with_input(inner, "{}", directory, taint, "parallel")

    # -- programs the hook does not know -----------------------------------------------------------------

    def unknown_program(self, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        """A program followed by a release is judged as that release; an argument holding shell text with
        a release is hidden."""
        pushes = len(words) > 1 and words[1].text in ("push", "send-pack") and not words[1].dynamic
        if pushes and not self.matches(render(words)):
            # A program of the agent's called with a push's arguments may be git under another name.
            self.git([Word("git"), *words[1:]], [], directory, taint)
        for index, word in enumerate(words[1:], start=1):
            if word.dynamic or word.text.startswith("-"):
                continue
            if self.runs_commands(posixpath.basename(word.text)):
                # Judged as the command it runs, at the commit that command acts on (never at HEAD).
                self.simple(words[index:], [], False, False, directory, taint)
                return
        self.generic(words, directory, taint)
        for word in words[1:]:
            if (
                not word.dynamic
                and (" " in word.text or ";" in word.text)
                and self.mentions_runner(word.text)
            ):
                self.nested(word.text, directory, taint, f"an argument of {words[0].text}")


def _reads_descriptor(word: Word) -> bool:
    text = word.text
    return (
        text in ("/dev/stdin", "/dev/tty", "-")
        or text.startswith(("/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"))
        or bool(re.fullmatch(r"/proc/[0-9]+/fd/.*", text))
        or any(kind == "process substitution" for kind, _ in word.substitutions)
    )
