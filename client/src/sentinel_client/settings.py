"""Client settings: environment variables first, then the user-level file, never the working tree.

The client runs inside agent sandboxes, so everything here is standard library only, and every setting
that is present but cannot be understood is refused with a stable code rather than silently ignored:
the hook and the CI gate turn a refusal into a denial, never into a pass.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ENV_PREFIX = "SENTINEL_"
USER_CONFIG_RELATIVE_PATH = Path(".config") / "sentinel" / "client.json"

DEFAULT_TIMEOUT_SECONDS = 10.0
# Claude Code gives a command hook 60 seconds by default; the client must give up well before that so the
# hook can still answer with a denial that names the reason.
MAX_TIMEOUT_SECONDS = 50.0
# A token is about 54 characters; anything much larger is not a token file.
MAX_TOKEN_FILE_BYTES = 4096
MAX_CONFIG_FILE_BYTES = 256 * 1024

# Regular expressions (for re.search over one shell command) naming the commands that need a `ready`
# decision. `[^;&|\n]*` keeps a match inside one simple command; hidden commands (sh -c, eval, pipes into
# a shell) are the hook's business, not these patterns'. A plain push of a feature branch is not gated.
_SAME_COMMAND = r"[^;&|\n]*"
DEFAULT_RELEASE_PATTERNS: tuple[str, ...] = (
    # Merges.
    # `git [global options] merge`, not `git merge-base` nor a commit message that mentions a merge.
    r"\bgit(?:\s+(?:-[Cc]\s+\S+|--?[\w-]+(?:=\S+)?))*\s+merge(?=\s|$)",
    r"\bgh\s+pr\s+merge\b",
    r"\bglab\s+mr\s+merge\b",
    # Pushes to protected branches (main, master, release/*), including HEAD:main, +main and
    # refs/heads/main refspecs, and pushes of every branch at once.
    rf"\bgit\b{_SAME_COMMAND}\spush\b{_SAME_COMMAND}[\s:+](?:refs/heads/)?(?:main|master|release/[\w./-]+)(?=$|[\s;&|])",
    rf"\bgit\b{_SAME_COMMAND}\spush\b{_SAME_COMMAND}\s--(?:all|mirror)\b",
    # Deploys.
    rf"\b(?:cdk|aws-cdk)\b{_SAME_COMMAND}\sdeploy\b",
    rf"\b(?:terraform|tofu)\b{_SAME_COMMAND}\s(?:apply|destroy)\b",
    rf"\bkubectl\b{_SAME_COMMAND}\s(?:apply|replace)\b",
    rf"\b(?:serverless|sls)\b{_SAME_COMMAND}\sdeploy\b",
    rf"\bsam\b{_SAME_COMMAND}\sdeploy\b",
    rf"\bhelm\b{_SAME_COMMAND}\s(?:upgrade|install)\b",
    rf"\baws\b{_SAME_COMMAND}\scloudformation\s+(?:deploy|create-stack|update-stack)\b",
    rf"\bpulumi\b{_SAME_COMMAND}\sup\b",
    # Publishes.
    rf"\b(?:npm|pnpm|yarn)\b{_SAME_COMMAND}\spublish\b",
    rf"\btwine\b{_SAME_COMMAND}\supload\b",
    rf"\b(?:poetry|uv|flit|hatch)\b{_SAME_COMMAND}\spublish\b",
    rf"\bcargo\b{_SAME_COMMAND}\spublish\b",
    r"\bgh\s+release\s+create\b",
    rf"\b(?:docker|podman)\b{_SAME_COMMAND}\s(?:push|--push)\b",
)

_KEYS = (
    "url",
    "project",
    "subject",
    "environment",
    "token_file",
    "timeout_seconds",
    "release_patterns",
)
_STRING_KEYS = ("url", "project", "subject", "environment", "token_file")


class SentinelClientError(Exception):
    """Base of every error the client raises; `code` is stable, the message is for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ClientConfigError(SentinelClientError):
    """A setting is missing, unreadable, unparseable or unsafe."""


@dataclass
class ClientSettings:
    url: str | None = None
    project: str | None = None
    subject: str | None = None
    environment: str | None = None
    token_file: str | None = None
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    release_patterns: list[str] = field(default_factory=lambda: list(DEFAULT_RELEASE_PATTERNS))

    def require(self, *names: str) -> None:
        """Refuse with SETTING_MISSING unless every named setting has a value."""
        missing = [name for name in names if getattr(self, name) in (None, "")]
        if missing:
            variables = ", ".join(ENV_PREFIX + name.upper() for name in missing)
            raise ClientConfigError("SETTING_MISSING", f"required setting(s) not set: {variables}")

    def compiled_release_patterns(self) -> list[re.Pattern[str]]:
        return [re.compile(pattern) for pattern in self.release_patterns]


def check_url(url: str) -> str:
    """Return the API base without a trailing slash, or refuse it.

    https is required except for a loopback host (127.0.0.0/8, ::1, localhost), where the local runner
    listens; a bearer token must never cross a network in clear text.
    """
    if not isinstance(url, str) or not url.strip():
        raise ClientConfigError("INVALID_URL", "the Sentinel URL is empty")
    url = url.strip()
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError as error:
        raise ClientConfigError("INVALID_URL", f"the Sentinel URL cannot be parsed: {error}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http") or not host:
        raise ClientConfigError("INVALID_URL", "the Sentinel URL must be an absolute http(s) URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ClientConfigError("INVALID_URL", "the Sentinel URL must not carry credentials")
    if parts.query or parts.fragment:
        raise ClientConfigError("INVALID_URL", "the Sentinel URL must not carry a query or fragment")
    if any(ord(character) < 0x21 or ord(character) == 0x7F for character in url):
        raise ClientConfigError("INVALID_URL", "the Sentinel URL contains whitespace or control characters")
    if scheme == "http" and not is_loopback_host(host):
        raise ClientConfigError(
            "INSECURE_URL", "the Sentinel URL must use https:// unless the host is a loopback address"
        )
    return url.rstrip("/")


def is_loopback_host(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_timeout(value: object) -> float:
    if isinstance(value, bool):
        raise ClientConfigError("INVALID_TIMEOUT", "timeout_seconds must be a number")
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise ClientConfigError(
                "INVALID_TIMEOUT", f"timeout_seconds is not a number: {value!r}"
            ) from None
    elif isinstance(value, int | float):
        number = float(value)
    else:
        raise ClientConfigError("INVALID_TIMEOUT", "timeout_seconds must be a number")
    if not math.isfinite(number) or number <= 0 or number > MAX_TIMEOUT_SECONDS:
        raise ClientConfigError(
            "INVALID_TIMEOUT", f"timeout_seconds must be above 0 and at most {MAX_TIMEOUT_SECONDS:g}"
        )
    return number


def parse_release_patterns(value: object) -> list[str]:
    """One regular expression per line (a string), or a JSON list of strings (the file)."""
    if isinstance(value, str):
        lines = value.splitlines()
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        lines = value
    else:
        raise ClientConfigError(
            "INVALID_RELEASE_PATTERNS", "release_patterns must be a string or a list of strings"
        )
    patterns = [line.strip() for line in lines if line.strip()]
    if not patterns:
        # An empty list would gate nothing; that is never what a present-but-empty setting means.
        raise ClientConfigError("INVALID_RELEASE_PATTERNS", "release_patterns is present but empty")
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ClientConfigError(
                "INVALID_RELEASE_PATTERNS",
                f"release pattern {pattern!r} is not a regular expression: {error}",
            ) from None
    return patterns


def user_config_path(home: str | os.PathLike[str] | None = None) -> Path | None:
    """The user-level file, or None when there is no absolute home to find it in.

    A relative home (HOME unset or empty) would resolve against the working directory, which the agent
    can edit, so it is never used.
    """
    try:
        base = Path(home) if home is not None else Path.home()
    except RuntimeError:
        return None
    if not base.is_absolute():
        return None
    return base / USER_CONFIG_RELATIVE_PATH


def parse_json_object(raw: bytes, path: Path) -> dict[str, Any]:
    """A settings file's bytes (read with at most one byte past the cap) as a JSON object, or refused."""
    if len(raw) > MAX_CONFIG_FILE_BYTES:
        raise ClientConfigError("CONFIG_INVALID", f"{path} is larger than {MAX_CONFIG_FILE_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ClientConfigError("CONFIG_INVALID", f"{path} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ClientConfigError("CONFIG_INVALID", f"{path} must hold a JSON object")
    return data


def read_json_object(path: Path) -> dict[str, Any] | None:
    """A user's settings file as a JSON object; None when there is none."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ClientConfigError("CONFIG_UNREADABLE", f"cannot read {path}: {error.strerror}") from None
    return parse_json_object(raw, path)


def _read_user_file(path: Path | None) -> dict[str, object]:
    data = read_json_object(path) if path is not None else None
    if data is None:
        return {}
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        # A misspelt key would otherwise leave a default in force without anyone noticing.
        raise ClientConfigError("CONFIG_INVALID", f"{path} has unknown setting(s): {', '.join(unknown)}")
    for key in _STRING_KEYS:
        if key in data and data[key] is not None and not isinstance(data[key], str):
            raise ClientConfigError("CONFIG_INVALID", f"{path}: {key} must be a string")
    return {key: value for key, value in data.items() if value is not None}


def _expand_token_file(value: str, home: Path | None) -> str:
    value = value.strip()
    if value == "~" or value.startswith("~/"):
        if home is None:
            raise ClientConfigError("INVALID_TOKEN_FILE", "token_file starts with ~ but there is no home")
        value = str(home / value[2:]) if value != "~" else str(home)
    if not Path(value).is_absolute():
        # A relative path would be read from the working tree, which the agent can edit.
        raise ClientConfigError(
            "INVALID_TOKEN_FILE", "token_file must be an absolute path (or start with ~/)"
        )
    return value


def load_settings(
    environ: Mapping[str, str] | None = None, home: str | os.PathLike[str] | None = None
) -> ClientSettings:
    """Environment variables first, then `~/.config/sentinel/client.json`; never the working tree.

    An environment variable that is set but empty counts as unset.
    """
    environ = os.environ if environ is None else environ
    config_path = user_config_path(home)
    home_path = config_path.parents[2] if config_path is not None else None
    file_values = _read_user_file(config_path)

    values: dict[str, object] = {}
    for key in _KEYS:
        from_env = environ.get(ENV_PREFIX + key.upper())
        if from_env is not None and from_env.strip() != "":
            values[key] = from_env
        elif key in file_values:
            values[key] = file_values[key]

    settings = ClientSettings()
    for key in ("project", "subject", "environment"):
        if key in values:
            setattr(settings, key, str(values[key]).strip() or None)
    if "url" in values:
        settings.url = check_url(str(values["url"]))
    if "token_file" in values:
        settings.token_file = _expand_token_file(str(values["token_file"]), home_path)
    if "timeout_seconds" in values:
        settings.timeout_seconds = parse_timeout(values["timeout_seconds"])
    if "release_patterns" in values:
        settings.release_patterns = parse_release_patterns(values["release_patterns"])
    return settings


def read_token(settings: ClientSettings) -> str:
    """The bearer token from the token file, stripped. Tokens never come from the command line."""
    if not settings.token_file:
        raise ClientConfigError("TOKEN_UNAVAILABLE", "no token file is configured (SENTINEL_TOKEN_FILE)")
    path = Path(settings.token_file)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_TOKEN_FILE_BYTES + 1)
    except OSError as error:
        raise ClientConfigError(
            "TOKEN_UNAVAILABLE", f"cannot read the token file {path}: {error.strerror or error}"
        ) from None
    if len(raw) > MAX_TOKEN_FILE_BYTES:
        raise ClientConfigError("TOKEN_UNAVAILABLE", f"the token file {path} is too large to hold a token")
    try:
        token = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ClientConfigError("TOKEN_UNAVAILABLE", f"the token file {path} is not ASCII text") from None
    if not token:
        raise ClientConfigError("TOKEN_UNAVAILABLE", f"the token file {path} is empty")
    if any(ord(character) < 0x21 or ord(character) == 0x7F for character in token):
        # Whitespace or control characters inside would corrupt (or inject into) the Authorization header.
        raise ClientConfigError("TOKEN_UNAVAILABLE", f"the token file {path} does not hold a single token")
    return token
