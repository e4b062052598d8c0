"""The public boundary: no credential, token, private key, account id or private endpoint in any tracked file
(what `git ls-files` lists: what a clone or a published package would carry).

A match is a failure unless the allow-list below names that exact text in that file, with the reason it is
obviously fake. Keep the list short; docs/failing-closed.md says how to add to it. The patterns are tested on
samples built at run time, so this file holds none of them itself."""

import re
import subprocess
from pathlib import Path

import pytest

from support.paths import REPO

ROOT = REPO
SKIPPED_DIRS = {
    ".git",
    ".venv",
    "node_modules",
    "cdk.out",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".import_linter_cache",
    ".hypothesis",
}

PATTERNS: dict[str, re.Pattern[str]] = {
    "sentinel token": re.compile(r"snt_[0-9A-Za-z]{49}"),
    "AWS access key id": re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b"),
    "AWS secret access key": re.compile(
        r"(?i)aws_?secret_?access_?key['\"]?\s*[:=]\s*['\"]?[A-Za-z0-9/+=]{40}"
    ),
    "private key": re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    "account id in an ARN": re.compile(r"arn:aws[a-z-]*:[a-z0-9-]*:[a-z0-9-]*:(\d{12}):"),
    "account id": re.compile(r"(?i)(?:account[_ -]?id|aws_account)['\"]?\s*[:=]\s*['\"]?(\d{12})\b"),
    "account id in an ECR host": re.compile(r"\b(\d{12})\.dkr\.ecr\."),
    "private address in a URL": re.compile(
        r"[a-z]+://(?:10\.\d{1,3}|172\.(?:1[6-9]|2\d|3[01])|192\.168)"
        r"\.\d{1,3}\.\d{1,3}"
    ),
    "internal host name": re.compile(r"[a-z]+://[A-Za-z0-9.-]+\.(?:internal|corp|intranet|lan)\b"),
    "deployed API endpoint": re.compile(r"\b[a-z0-9]{10}\.execute-api\.[a-z0-9-]+\.amazonaws\.com"),
    "Lambda function URL": re.compile(r"\b[a-z0-9]{32}\.lambda-url\.[a-z0-9-]+\.on\.aws"),
    "GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
    "Slack token": re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
}

# (path, exact text matched, why it is obviously fake). A path of "*" allows the text in any file. Texts are
# assembled here, so this file does not itself carry what it allows elsewhere.
ALLOWED: list[tuple[str, str, str]] = [
    (
        "*",
        "000000000000",
        "the emulated API Gateway's placeholder account (local/gateway.py, local/events.py)",
    ),
    ("*", "123456789012", "the example account id of the AWS documentation"),
    (
        "tests/integration/test_client_api.py",
        "snt_" + "0123456789abcdefghijklmnopqrstuvwxyzABCDEFG" + "abcdef",
        "a token-shaped fixture: the alphabet in order, never issued by any key",
    ),
    (
        "tests/unit/test_client_settings.py",
        "http://" + "10.0.0.1",
        "a URL the client must refuse (plain http to a non-loopback host)",
    ),
]


def tracked_files() -> list[Path]:
    """`git ls-files` (read only); without git (a source archive), every file outside caches and venvs."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=30
        )
        names = [n for n in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if n]
        return [ROOT / n for n in names]
    except (OSError, subprocess.SubprocessError):
        return [
            p for p in ROOT.rglob("*") if p.is_file() and not SKIPPED_DIRS & set(p.relative_to(ROOT).parts)
        ]


def findings(path: str, text: str) -> list[str]:
    out = []
    for kind, pattern in PATTERNS.items():
        for match in pattern.finditer(text):
            found = match.group(0)
            value = match.group(1) if match.groups() else found
            if any(
                where in ("*", path) and (allowed in (found, value) or found.startswith(allowed))
                for where, allowed, _why in ALLOWED
            ):
                continue
            line = text.count("\n", 0, match.start()) + 1
            out.append(f"{path}:{line}: {kind}: {found[:60]}")
    return out


def test_no_tracked_file_carries_a_secret_an_account_id_or_a_private_endpoint() -> None:
    # Given every tracked file (binary files skipped: nothing here is meant to be one)
    files = tracked_files()
    assert len(files) > 50, "the file list looks wrong; the scan would prove nothing"
    problems = []
    for file in files:
        try:
            data = file.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            continue  # listed by git but removed from the working tree
        if b"\0" in data[:8192]:
            continue
        # When each is scanned
        problems += findings(file.relative_to(ROOT).as_posix(), data.decode("utf-8", "replace"))
    # Then nothing is found outside the allow-list
    assert problems == [], "\n".join(problems)


def test_every_allow_list_entry_is_still_needed() -> None:
    # An entry whose file no longer holds its text is stale: remove it, so the list stays short and meaningful
    for where, allowed, why in ALLOWED:
        if where == "*":
            continue
        assert allowed in (ROOT / where).read_text(encoding="utf-8"), (where, allowed, why)


@pytest.mark.parametrize(
    ("kind", "sample"),
    [
        ("sentinel token", "snt_" + "x7Q" * 16 + "k"),
        ("AWS access key id", "AKIA" + "Z3QX" * 4),
        ("AWS secret access key", "aws_secret_access_key = " + "wJalr/" * 6 + "abcd"),
        ("private key", "-----BEGIN " + "RSA PRIVATE KEY-----"),
        ("account id in an ARN", "arn:aws:iam::" + "4" * 12 + ":role/x"),
        ("account id", '"accountId": "' + "5" * 12 + '"'),
        ("account id in an ECR host", "6" * 12 + ".dkr.ecr.eu-west-1.amazonaws.com"),
        ("private address in a URL", "https://" + "192.168.1.20" + "/api"),
        ("internal host name", "https://billing.prod" + ".internal/v1"),
        ("deployed API endpoint", "https://" + "a1b2c3d4e5" + ".execute-api.eu-west-1.amazonaws.com/v1"),
        ("Lambda function URL", "https://" + "a" * 32 + ".lambda-url.eu-west-1.on.aws/"),
        ("GitHub token", "ghp_" + "A1" * 18),
        ("Slack token", "xoxb-" + "1234567890-abcdef"),
    ],
)
def test_each_pattern_finds_what_it_is_for(kind: str, sample: str) -> None:
    # Given a sample of the kind, built at run time, When it is scanned, Then it is found and named
    assert any(f.split(": ")[1] == kind for f in findings("sample.txt", f"x = {sample}\n")), kind


def test_the_allow_list_does_not_hide_a_real_value_elsewhere() -> None:
    # Given the allowed fake token text in another file than the one it is allowed in
    text = "TOKEN = " + ALLOWED[2][1]
    # Then it is found there
    assert findings("client/api.py", text)
