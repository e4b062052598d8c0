"""Scripts the agent can start, read one level deep: `bash x.sh`, `./x.sh`, `source x.sh`, `make TARGET`,
`npm run X` (and yarn, pnpm, bun). Their commands are analysed like the command itself; a script that cannot
be read (missing, too large, a descriptor, written earlier in the same command line) is hidden, and so is
anything deeper than the nesting the hook follows. A program that is not a shell script (an interpreter's
script, a compiled binary) is not read: see docs/hook.md for what the hook cannot see.
"""

from __future__ import annotations

import json
import os
import posixpath
import re

from .shell_lexer import Word

MAX_SCRIPT_BYTES = 256 * 1024
_SHELL_SHEBANG = re.compile(r"#!\s*(?:/usr)?(?:/local)?/bin/(?:env\s+(?:-S\s+)?)?(?:ba|z|da|k|mk|a|)sh\b")
_MAKE_ASSIGNMENT = re.compile(
    r"^(?:export\s+|override\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*(?:::=|:=|\?=|\+=|=)\s*(.*)$"
)
_MAKE_RULE = re.compile(r"^([^\t:=#][^:=#]*?)\s*::?(?!=)\s*([^;=#]*?)\s*(?:;\s*(.*))?$")
_MAKE_UNREADABLE = re.compile(
    r"\$[({](?:shell|eval|call|file|value|guile|foreach)\b|^\s*-?include\b|^\s*\.ONESHELL"
    r"|^\s*(?:export\s+|override\s+)?(?:SHELL|\.SHELLFLAGS|MAKEFLAGS|MAKEFILES)\s*[:?+]?=",
    re.MULTILINE,
)


def read_text(path: str) -> str | None:
    """The file's text, or None when it cannot be read whole."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SCRIPT_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_SCRIPT_BYTES or b"\0" in raw[:4096]:
        return None
    return raw.decode("utf-8", "replace")


def is_binary(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError:
        return False
    return head in (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe", b"MZ\x90\x00")


class ScriptAnalysis:
    """The script-reading part of the release analyser (`release_analysis._Analyser` inherits it)."""

    written: set[str]

    def _path(self, word: Word, directory: str | None) -> str | None:
        if word.dynamic or directory is None and not word.text.startswith("/"):
            return None
        return posixpath.normpath(posixpath.join(directory or "/", word.text))

    def script_file(
        self, word: Word, kind: str, words: list[Word], directory: str | None, taint: tuple[str, ...]
    ) -> None:
        """A shell script named on the command line (kind "shell") or run by its path (kind "program")."""
        from .command_runners import _reads_descriptor

        if _reads_descriptor(word) or word.dynamic:
            self.hide(f"{words[0].text} running a program from a descriptor or computed at run time", words)
            return
        path = self._path(word, directory)
        if path is None:
            self.hide(f"a script in a directory the hook cannot follow: {word.text}", words)
            return
        if path in self.written:
            self.hide(f"a script written earlier in the same command: {word.text}", words)
            return
        if kind == "program":
            if is_binary(path):
                self.unknown_program(words, directory, taint)
                return
            text = read_text(path)
            if text is None:
                self.hide(f"a program the hook cannot read: {word.text}", words)
                return
            first = text.split("\n", 1)[0]
            if first.startswith("#!") and not _SHELL_SHEBANG.match(first):
                self.unknown_program(words, directory, taint)  # an interpreter's script: not read
                return
        else:
            text = read_text(path)
            if text is None:
                self.hide(f"a script the hook cannot read: {word.text}", words)
                return
        self.generic(words, directory, taint)
        self.nested(text, directory, taint, f"the script {word.text}", tainted=False)

    def make(self, words: list[Word], directory: str | None, taint: tuple[str, ...]) -> None:
        """`make [-C DIR] [-f FILE] [TARGET...]`: the recipes of the targets and of what they depend on."""
        self.generic(words, directory, taint)  # `make release` may itself match a release pattern
        parsed = _make_arguments(words)
        if isinstance(parsed, str):
            self.hide(parsed, words)
            return
        makefiles, targets, variables, change = parsed
        if change is not None:
            directory = self._path(change, directory)
        if not makefiles:
            found = next(
                (
                    n
                    for n in ("GNUmakefile", "makefile", "Makefile")
                    if directory and os.path.isfile(posixpath.join(directory, n))
                ),
                None,
            )
            if found is None:
                return  # no makefile: make runs nothing
            makefiles = [Word(found)]
        recipes: dict[str, list[str]] = {}
        prerequisites: dict[str, list[str]] = {}
        first_target: str | None = None
        for makefile in makefiles:
            from .command_runners import _reads_descriptor

            path = None if _reads_descriptor(makefile) else self._path(makefile, directory)
            text = read_text(path) if path and path not in self.written else None
            if text is None or _MAKE_UNREADABLE.search(text):
                self.hide(f"a makefile the hook cannot read whole: {makefile.text}", words)
                return
            first_target = _parse_makefile(text, variables, recipes, prerequisites) or first_target
        wanted = targets or ([first_target] if first_target else [])
        seen: set[str] = set()
        while wanted:
            target = wanted.pop()
            if target in seen:
                continue
            seen.add(target)
            wanted += prerequisites.get(target, [])
            for line in recipes.get(target, []):
                line = _expand_make(line, variables, target)
                self.nested(line, directory, taint, f"make {target}", tainted=False)

    def package_script(
        self, words: list[Word], name: str, directory: str | None, taint: tuple[str, ...]
    ) -> None:
        """`npm run X`, `npm test`, `yarn X`, `pnpm X`, `bun run X`: the scripts of package.json."""
        self.generic(words, directory, taint)  # `npm publish` is a release pattern of its own
        positionals = [w for w in words[1:] if not w.text.startswith("-")]
        if any(w.dynamic for w in positionals[:2]):
            self.hide(f"{name} with a script computed at run time", words)
            return
        verbs = [w.text for w in positionals]
        lifecycle = {
            "test": "test",
            "t": "test",
            "tst": "test",
            "start": "start",
            "stop": "stop",
            "restart": "restart",
        }
        script: str | None = None
        if verbs[:1] in (["run"], ["run-script"], ["rum"], ["urn"]) and len(verbs) > 1:
            script = verbs[1]
        elif verbs and verbs[0] in lifecycle:
            script = lifecycle[verbs[0]]
        elif verbs and verbs[0] in ("exec", "dlx", "x") and name in ("pnpm", "yarn", "bun"):
            rest = [w for w in words if w.text not in ("exec", "dlx", "x")][1:]
            self.simple(rest, [], False, False, directory, taint) if rest else None
            return
        elif (
            verbs
            and name in ("yarn", "pnpm", "bun")
            and verbs[0]
            not in (
                "install",
                "add",
                "remove",
                "i",
                "ci",
                "audit",
                "outdated",
                "list",
                "ls",
                "why",
                "info",
                "init",
                "create",
                "link",
                "unlink",
                "upgrade",
                "update",
                "up",
                "cache",
                "config",
                "build",
                "pm",
                "publish",
            )
        ):
            script = verbs[0]
        if script is None:
            return
        path = self._path(Word("package.json"), directory)
        if path is not None and not os.path.lexists(path):
            return  # no package.json: the package manager runs nothing
        text = read_text(path) if path else None
        try:
            scripts = json.loads(text or "")["scripts"] if text else None
        except (ValueError, KeyError, TypeError):
            scripts = None
        if not isinstance(scripts, dict):
            self.hide(f"{name} {script}: package.json cannot be read", words)
            return
        for step in (f"pre{script}", script, f"post{script}"):
            body = scripts.get(step)
            if isinstance(body, str):
                self.nested(body, directory, taint, f"{name} run {step}", tainted=False)
            elif body is not None:
                self.hide(f"{name} {step}: not a string in package.json", words)


_MAKE_VALUES = frozenset(
    "-f --file --makefile -C --directory -I --include-dir -o -W -j --jobs -l --eval --old-file".split()
)


def _make_arguments(words: list[Word]) -> str | tuple[list[Word], list[str], dict[str, str], Word | None]:
    """(makefiles, targets, variables, -C directory) of a make command line, or why it cannot be read."""
    makefiles: list[Word] = []
    targets: list[str] = []
    variables: dict[str, str] = {}
    change: Word | None = None
    index = 1
    while index < len(words):
        word = words[index]
        option, has_value, inline = word.text.partition("=")
        if word.dynamic:
            return "make with arguments computed at run time"
        if option in ("-f", "-C") or not option.startswith("--") and option[:2] in ("-f", "-C"):
            value = (
                Word(option[2:])
                if len(option) > 2
                else (words[index + 1] if index + 1 < len(words) else None)
            )
            index += 1 if len(option) > 2 else 2
        elif option in _MAKE_VALUES:
            value = Word(inline) if has_value else (words[index + 1] if index + 1 < len(words) else None)
            index += 1 if has_value else 2
        else:
            if has_value and not option.startswith("-"):
                variables[option.strip()] = inline
            elif not option.startswith("-"):
                targets.append(word.text)
            index += 1
            continue
        if value is None or value.dynamic or option == "--eval":
            return f"make {option} the hook cannot follow"
        if option.startswith(("-f", "--file", "--makefile")):
            makefiles.append(value)
        elif option.startswith(("-C", "--directory")):
            change = value
    return makefiles, targets, variables, change


def _parse_makefile(
    text: str, variables: dict[str, str], recipes: dict[str, list[str]], prerequisites: dict[str, list[str]]
) -> str | None:
    first: str | None = None
    current: list[str] = []
    lines = text.replace("\\\n", " ").split("\n")
    for line in lines:
        if line.startswith("\t"):
            for target in current:
                recipes.setdefault(target, []).append(line[1:].lstrip("@-+ \t"))
            continue
        stripped = line.split("#", 1)[0].rstrip()
        if not stripped:
            continue
        assignment = _MAKE_ASSIGNMENT.match(stripped)
        rule = _MAKE_RULE.match(stripped)
        if assignment and not (rule and "=" not in stripped.split(":", 1)[0] and ":=" not in stripped):
            variables.setdefault(assignment.group(1), assignment.group(2))
            current = []
            continue
        if rule:
            current = rule.group(1).split()
            for target in current:
                prerequisites.setdefault(target, []).extend(rule.group(2).split())
                if rule.group(3):
                    recipes.setdefault(target, []).append(rule.group(3))
            if first is None and current and not current[0].startswith("."):
                first = current[0]
    return first


def _expand_make(line: str, variables: dict[str, str], target: str, depth: int = 0) -> str:
    """Make's variables in a recipe line; what make cannot tell from the text stays an expansion."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(3)
        if name == "@":
            return target
        if name == "MAKE":
            return "make"
        if name in variables and depth < 8:
            return _expand_make(variables[name], variables, target, depth + 1)
        return "${" + re.sub(r"[^A-Za-z0-9_]", "_", name) + "}"

    expanded = re.sub(r"\$\(([^()$]+)\)|\$\{([^{}$]+)\}|\$([@<^*?%A-Za-z])", value, line.replace("$$", "\0"))
    return expanded.replace("\0", "$")
