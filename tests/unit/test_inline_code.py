"""Inline interpreter code is judged by what it can do: the allow-list of Python modules leads to no module
that starts processes, and the usual ways out of such an allow-list are refused."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sentinel_client.inline_code import (
    MODULE_ATTRIBUTES,
    SAFE_PYTHON_MODULES,
    code_can_spawn,
    python_can_spawn,
    sed_can_spawn,
)


def test_every_module_an_allowed_module_holds_is_refused_by_name() -> None:
    # Given the allowed modules as a fresh Python (what `python -c` starts) has them
    probe = (
        "import importlib, json, sys, types\n"
        "held = set()\n"
        "for name in sys.argv[1:]:\n"
        "    module = importlib.import_module(name)\n"
        "    held.update(a for a in dir(module) if isinstance(getattr(module, a, None), types.ModuleType))\n"
        "print(json.dumps(sorted(held)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", probe, *sorted(SAFE_PYTHON_MODULES)],
        capture_output=True,
        text=True,
        check=True,
    )
    held = set(json.loads(done.stdout))
    # Then every public name under which they hold another module is refused
    assert {name for name in held if not name.startswith("_")} <= MODULE_ATTRIBUTES


@pytest.mark.parametrize(
    "code",
    [
        "import os",
        "import subprocess",
        "__import__('os')",
        "import shlex; shlex.os.system('x')",
        "from shlex import os",
        "import sys; sys.modules['os']",
        "from sys import modules",
        "import sys as s; s.modules",
        "().__class__.__bases__[0].__subclasses__()",
        "exec('x')",
        "eval('x')",
        "open('.git/config', 'a').write('x')",
        "open('x', mode='w')",
        "getattr(__builtins__, 'exec')",
        "help()",
        "import importlib",
        "from . import x",
        "import platform",
        "import collections; collections.abc",
        "print(",
    ],
)
def test_python_that_can_start_a_process_or_write_is_refused(code: str) -> None:
    assert python_can_spawn(code) is not None


@pytest.mark.parametrize(
    "code",
    [
        "print(1 + 1)",
        "import json, sys; print(json.dumps({'a': sys.argv}))",
        "import re; print(re.sub('a', 'b', 'abc'))",
        "print(open('package.json').read())",
        "import sys; sys.stdout.write(sys.stdin.read().upper())",
        "import hashlib; print(hashlib.sha256(b'x').hexdigest())",
    ],
)
def test_harmless_python_passes(code: str) -> None:
    assert python_can_spawn(code) is None


@pytest.mark.parametrize(
    ("family", "code"),
    [
        ("node", "require('child_process')"),
        ("node", "const c = 'child_' + 'process'; require(c)"),
        ("node", "process.binding('spawn_sync')"),
        ("node", "[]['filter']['constructor']('return process')()"),
        ("node", "import('child_process')"),
        ("perl", "system 'x'"),
        ("perl", "`x`"),
        ("perl", "open(F, '|x')"),
        ("ruby", "IO.popen('x')"),
        ("ruby", "%x(x)"),
        ("php", "shell_exec('x');"),
        ("lua", "os.execute('x')"),
        ("awk", 'BEGIN { print "x" | "sh" }'),
        ("awk", 'BEGIN { system("x") }'),
        ("awk", '{ print > ".git/config" }'),
    ],
)
def test_other_languages_that_name_a_way_out_are_refused(family: str, code: str) -> None:
    assert code_can_spawn(family, code) is not None


@pytest.mark.parametrize(
    ("family", "code"),
    [("node", "console.log(1 + 1)"), ("perl", "print 1"), ("awk", "{print $1}"), ("ruby", "puts 1")],
)
def test_other_languages_that_only_compute_pass(family: str, code: str) -> None:
    assert code_can_spawn(family, code) is None


@pytest.mark.parametrize(
    ("script", "runs"),
    [
        ("1e git push", True),
        ("s/a/b/e", True),
        ("w out", True),
        ("s/a/b/g", False),
        ("1p", False),
        ("/x/d", False),
    ],
)
def test_sed_commands_that_run_or_write(script: str, runs: bool) -> None:
    assert (sed_can_spawn(script) is not None) == runs
