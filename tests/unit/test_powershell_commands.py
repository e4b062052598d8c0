"""PowerShell commands read with PowerShell's own quoting and escaping over a documented subset (there is no
PowerShell here: the subset is the contract), and judged like Bash; anything outside the subset is hidden."""

from __future__ import annotations

import pytest

from sentinel_client.powershell import analyse_powershell, tokenize_powershell
from sentinel_client.settings import DEFAULT_RELEASE_PATTERNS
from sentinel_client.shell_lexer import Word

PATTERNS = list(DEFAULT_RELEASE_PATTERNS)
PROTECTED = ["refs/heads/main"]


def words(command: str) -> list[str | tuple[str, bool]]:
    return [(t.text, t.dynamic) if isinstance(t, Word) else t for t in tokenize_powershell(command)]


@pytest.mark.parametrize(
    ("command", "tokens"),
    [
        ("git push origin 'main'", [("git", False), ("push", False), ("origin", False), ("main", False)]),
        ('git push origin "main"', [("git", False), ("push", False), ("origin", False), ("main", False)]),
        ("git push origin ma`in", [("git", False), ("push", False), ("origin", False), ("main", False)]),
        ("echo 'it''s'", [("echo", False), ("it's", False)]),
        ('echo "say ""hi"""', [("echo", False), ('say "hi"', False)]),
        ('echo "a`tb"', [("echo", False), ("a\tb", False)]),
        ('echo "$env:HOME"', [("echo", False), ("$env:HOME", True)]),
        ("echo $x", [("echo", False), ("$x", True)]),
        (
            "git push origin evil:`\nmain",
            [("git", False), ("push", False), ("origin", False), ("evil:", False), ("main", False)],
        ),
        (
            "a; b && c || d | e",
            [("a", False), ";", ("b", False), "&&", ("c", False), "||", ("d", False), "|", ("e", False)],
        ),
        (
            "git push origin a,b",
            [("git", False), ("push", False), ("origin", False), ("a", False), ("b", False)],
        ),
        ("git log # comment", [("git", False), ("log", False)]),
        ("cmd > out.txt 2>&1", [("cmd", False), "redirect:>", ("out.txt", False), "redirect:2>&1"]),
        ("& 'git' status", ["&call", ("git", False), ("status", False)]),
    ],
)
def test_the_subset_is_tokenised_with_powershell_quoting(command: str, tokens: list) -> None:
    assert words(command) == tokens


@pytest.mark.parametrize(
    "command",
    [
        "& { git push }",
        "git push origin $(Get-Branch)",
        "git push @('origin', 'main')",
        "@'\ngit push\n'@",
        "[string]::Join(' ', 'a')",
        "git push --% origin main",
        "<# block #> git push",
        "git push origin \u201cmain\u201d",
        "git push origin main\u2013force",
        "echo 'unterminated",
        'echo "unterminated',
        "git < input",
        "$x = git push origin main",
        "@args",
    ],
)
def test_anything_outside_the_subset_is_hidden(command: str) -> None:
    # Given a construct outside the subset, When it is analysed, Then it is hidden and nothing is judged
    result = analyse_powershell(command, "/repo", PATTERNS, PROTECTED)
    assert [h.construct.split(" (")[0] for h in result.hidden] == [
        "PowerShell outside the subset the hook reads"
    ]
    assert result.releases == []


@pytest.mark.parametrize(
    ("command", "refs"),
    [
        ("git push origin 'main'", ("main",)),
        ('git push origin "main"', ("main",)),
        ("git push origin ma`in", ("main",)),
        ("& git push origin feature:main", ("feature",)),
        ("git.exe push origin feature:main", ("feature",)),
        ("git push origin feature:main | Out-Null", ("feature",)),
    ],
)
def test_a_release_is_judged_at_the_ref_it_pushes(command: str, refs: tuple[str, ...]) -> None:
    result = analyse_powershell(command, "/repo", PATTERNS, PROTECTED)
    assert result.hidden == []
    assert [r.refs for r in result.releases] == [refs]


@pytest.mark.parametrize(
    "command",
    [
        "iex 'git push origin main'",
        "Invoke-Expression $code",
        "Start-Process git -ArgumentList 'push'",
        "powershell -c 'git push'",
        "cmd /c git push origin main",
        "git push origin $branch",
        "echo x > .git/hooks/pre-push",
        "Set-Alias g git",
    ],
)
def test_powershell_ways_to_run_hidden_code_are_hidden(command: str) -> None:
    assert analyse_powershell(command, "/repo", PATTERNS, PROTECTED).hidden != []


def test_an_env_assignment_reaches_git_like_an_export() -> None:
    class Seen:
        env: dict[str, str] = {}

        def facts(self, directory, options, env):
            Seen.env = dict(env)
            return None

    analyse_powershell("$env:GIT_CONFIG_COUNT = '1'; git push", "/repo", PATTERNS, PROTECTED, Seen())
    assert Seen.env == {"GIT_CONFIG_COUNT": "1"}


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "Get-ChildItem -Recurse",
        "git push origin feature",
        'Write-Output "git push origin main"',
        "git push --dry-run origin main",
        "Invoke-RestMethod https://api.github.com/repos/o/r",
    ],
)
def test_benign_powershell_passes(command: str) -> None:
    result = analyse_powershell(command, "/repo", PATTERNS, PROTECTED)
    assert (result.releases, result.hidden) == ([], [])
