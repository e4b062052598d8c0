"""Interpreters and their inline code: `python3.11 -c`, `node -e`, `perl -e`, `awk 'BEGIN{system(...)}'`...

Inline code is judged by what it can do, not by whether a release appears in its text (code builds the
command from pieces as easily as it names it). Python is parsed (`ast`) and may use only an allow-list of
harmless modules and names: no `subprocess`, `os`, `__import__`, `exec`, `eval`, `open` for writing, no
attribute starting with `_` (the way out of any sandbox). The other languages are not parsed: their code is
harmless only when it names none of the ways they start a process, load a module, evaluate text or write a
file. Anything else can start a process and is COMMAND_HIDDEN.
"""

from __future__ import annotations

import ast
import re

# Interpreter names, versioned or not: python3.11, pypy3, node20, perl5.36, ruby3.2, php8.2, lua5.4...
INTERPRETER = re.compile(
    r"(?P<name>python|pypy|node|nodejs|deno|bun|perl|ruby|php|lua|luajit|tclsh|wish|Rscript|R|julia|osascript"
    r"|jshell|groovy|scala|kotlin|elixir|erl|escript|guile|racket|sbcl|clisp|gawk|mawk|nawk|awk|busybox-awk"
    r"|expect|ts-node|tsx|swift|pwsh|powershell|irb|jruby|gjs|qjs|rhino|jjs|nix-instantiate)"
    r"(?:[0-9][0-9.]*|-[0-9][0-9.]*)?(?:\.exe)?"
)
# The options that take inline code, per interpreter family.
CODE_OPTIONS: dict[str, tuple[str, ...]] = {
    "python": ("-c",),
    "pypy": ("-c",),
    "node": ("-e", "--eval", "-p", "--print"),
    "nodejs": ("-e", "--eval", "-p", "--print"),
    "deno": ("eval",),
    "bun": ("-e", "--eval", "-p", "--print"),
    "ts-node": ("-e", "--eval", "-p", "--print"),
    "tsx": ("-e", "--eval", "-p", "--print"),
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "jruby": ("-e",),
    "php": ("-r",),
    "lua": ("-e",),
    "luajit": ("-e",),
    "Rscript": ("-e",),
    "R": ("-e",),
    "julia": ("-e", "--eval", "-E", "--print"),
    "osascript": ("-e",),
    "groovy": ("-e",),
    "elixir": ("-e", "--eval"),
    "erl": ("-eval",),
    "guile": ("-c",),
    "racket": ("-e", "--eval"),
    "sbcl": ("--eval",),
    "clisp": ("-x",),
    "expect": ("-c",),
    "swift": ("-e",),
    "qjs": ("-e", "--eval"),
}
AWKS = frozenset({"awk", "gawk", "mawk", "nawk", "busybox-awk"})

# ---- Python ------------------------------------------------------------------------------------------

SAFE_PYTHON_MODULES = frozenset(
    """json math cmath re string textwrap datetime time random itertools functools collections decimal
    fractions statistics base64 hashlib hmac binascii struct pprint unicodedata zlib csv enum
    dataclasses typing operator copy heapq bisect calendar html ipaddress secrets tomllib difflib keyword
    sys urllib.parse shlex fnmatch""".split()
)
_UNSAFE_PYTHON_NAMES = frozenset(
    {
        "__import__",
        "exec",
        "eval",
        "compile",
        "getattr",
        "setattr",
        "delattr",
        "vars",
        "globals",
        "locals",
        "breakpoint",
        "help",
        "__builtins__",
        "memoryview",
        "input",
        "license",
        "credits",
        "copyright",
    }
)
# sys is allowed for its harmless attributes only: sys.modules reaches `os`, which is always imported.
_SAFE_SYS = frozenset(
    {
        "argv",
        "version",
        "version_info",
        "platform",
        "stdin",
        "stdout",
        "stderr",
        "exit",
        "maxsize",
        "executable",
        "byteorder",
        "implementation",
        "float_info",
        "path",
    }
)
_READ_MODES = frozenset({"r", "rb", "rt", "br", "tr"})


# Names under which an allowed module holds another module (`shlex.os`, `from shlex import os`): the way
# from a harmless module to one that starts processes. Private names are refused anyway; the test
# tests/unit/test_inline_code.py checks this list against the modules of the running Python.
MODULE_ATTRIBUTES = frozenset(
    """abc base64 binascii bltns builtins codecs collections contextlib copy copyreg datetime decoder encoder
    entities enum functools importlib inspect ipaddress itertools keyword math modules numbers operator os
    posix nt posixpath ntpath random re scanner stdlib_re struct subprocess sys types warnings
    ctypes parser tool request response error robotparser""".split()
)


def _module_attributes() -> frozenset[str]:
    return MODULE_ATTRIBUTES


def python_can_spawn(code: str) -> str | None:  # noqa: C901 - one check per kind of node
    """Why Python code can start a process or write a file; None when it only uses harmless parts."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError) as error:
        return f"Python code the hook cannot parse ({type(error).__name__})"
    sys_names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            )
            if isinstance(node, ast.ImportFrom) and node.level:
                return "a relative import"
            for name in names:
                if name not in SAFE_PYTHON_MODULES:
                    return f"it imports {name}"
            if isinstance(node, ast.Import):
                sys_names.update(alias.asname or alias.name for alias in node.names if alias.name == "sys")
            elif node.module == "sys" and any(alias.name not in _SAFE_SYS for alias in node.names):
                return "it imports from sys what reaches other modules"
            elif isinstance(node, ast.ImportFrom) and any(
                alias.name in _module_attributes() or alias.name == "*" for alias in node.names
            ):
                return f"it imports a module from {node.module}"
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                return f"it reaches the private attribute {node.attr}"
            if node.attr in _module_attributes() and not (
                isinstance(node.value, ast.Name) and node.value.id in sys_names and node.attr in _SAFE_SYS
            ):
                return f"it reaches the module {node.attr} through another"
            if isinstance(node.value, ast.Name) and node.value.id in sys_names and node.attr not in _SAFE_SYS:
                return f"it uses sys.{node.attr}"
        elif isinstance(node, ast.Name) and node.id in _UNSAFE_PYTHON_NAMES:
            return f"it uses {node.id}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            mode = (
                node.args[1]
                if len(node.args) > 1
                else next((keyword.value for keyword in node.keywords if keyword.arg == "mode"), None)
            )
            if mode is not None and not (isinstance(mode, ast.Constant) and mode.value in _READ_MODES):
                return "it opens a file for writing"
    return None


# ---- the others: no parser, so a deny-list of every way out, and an allow-list of modules -------------

_SAFE_NODE_MODULES = frozenset(
    {
        "path",
        "util",
        "assert",
        "url",
        "querystring",
        "crypto",
        "zlib",
        "events",
        "buffer",
        "string_decoder",
        "os",
        "node:path",
        "node:util",
        "node:os",
    }
)
_NODE_PROCESS_SAFE = re.compile(
    r"\bprocess\s*\.\s*(?:stdout|stderr|argv|env|exit|version|versions|platform|cwd)\b"
)
_NODE_UNSAFE = re.compile(
    r"\b(?:process|global|globalThis|eval|Function|constructor|import|module|Deno|Bun|child_process|spawn"
    r"|exec|execSync|fork|Reflect|Proxy|WebAssembly|fetch|XMLHttpRequest|prototype|__proto__|this|self"
    r"|window|setTimeout|setInterval|fs)\b|[\w\])]\s*\[|\\x|\\u"
)
_NODE_REQUIRE = re.compile(r"\brequire\s*\(\s*(['\"])([\w:/.-]+)\1\s*\)")
_SCRIPTING_UNSAFE = re.compile(
    r"`|\b(?:system|exec|spawn|popen|fork|open|sysopen|qx|eval|require|use|do|load|import|syscall|send"
    r"|public_send|__send__|instance_eval|class_eval|const_get|Kernel|IO|Process|Open3|PTY|File|Dir"
    r"|FileUtils|shell_exec|passthru|proc_open|pcntl_exec|assert|create_function|include|include_once"
    r"|require_once|call_user_func|call_user_func_array|os\.execute|io\.popen|io\.open|loadstring|dofile"
    r"|run|shell|do\s+shell\s+script|Runtime|ProcessBuilder|getRuntime|unlink|rename|mkdir|chmod)\b"
    r"|%x|\$\(|&\s*\(|\\x|\\u|\\[0-7]{3}|chr\s*\(|pack\s*\(|->|::",
    re.IGNORECASE,
)
_AWK_UNSAFE = re.compile(
    r"\b(?:system|close|fflush|getline)\b|\||@load|@include|>\s*[\"(a-zA-Z_$]|printf?\b[^;}]*>"
)


def node_can_spawn(code: str) -> str | None:
    for match in _NODE_REQUIRE.finditer(code):
        if match.group(2) not in _SAFE_NODE_MODULES:
            return f"it requires {match.group(2)}"
    rest = _NODE_PROCESS_SAFE.sub("", _NODE_REQUIRE.sub("", code))
    if re.search(r"\brequire\b", rest):
        return "it requires a module the hook cannot name"
    found = _NODE_UNSAFE.search(rest)
    return f"it uses {found.group(0)}" if found else None


def code_can_spawn(family: str, code: str) -> str | None:
    """Why inline code of this interpreter family can start a process or write a file; None if it cannot."""
    if family in ("python", "pypy"):
        return python_can_spawn(code)
    if family in ("node", "nodejs", "bun", "deno", "ts-node", "tsx", "qjs"):
        return node_can_spawn(code)
    if family in AWKS:
        found = _AWK_UNSAFE.search(code)
        return f"it uses {found.group(0).strip()}" if found else None
    found = _SCRIPTING_UNSAFE.search(code)
    return f"it uses {found.group(0).strip()}" if found else None


_SED_WRITE = re.compile(r"(?:^|[;\n}])\s*(?:\d+|\$|/[^/]*/)?(?:,\s*(?:\d+|\$|/[^/]*/))?\s*!?\s*[ewWrR]\b")


def sed_can_spawn(script: str) -> str | None:
    """GNU sed runs commands (`e`, the `e` flag of `s`) and writes files (`w`, `W`)."""
    if _SED_WRITE.search(script):
        return "a sed e, w or r command"
    for match in re.finditer(r"(?:^|[;\n{}])\s*(?:[^;\n{}]*?)s(.)", script):
        delimiter = match.group(1)
        if delimiter in "\\\n" or delimiter.isalnum():
            continue
        parts = re.split(r"(?<!\\)" + re.escape(delimiter), script[match.end() :], maxsplit=2)
        if len(parts) == 3:
            flags = re.match(r"[^;\n}]*", parts[2])
            if flags and re.search(r"[ew]", flags.group(0)):
                return "a sed s command with the e or w flag"
    return None
