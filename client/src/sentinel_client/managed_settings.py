"""The hook's settings: from a root-owned file only; the environment and the user's files may only add.

Claude Code merges its `env` settings from files the agent can edit (`.claude/settings.local.json` in the
working tree among them), and the agent can write the user's home. So the hook takes every setting that
decides what it trusts (`url`, `project`, `subject`, `environment`, `token_file`, `timeout_seconds`,
`release_patterns`, `protected_refs`, `git`) from one JSON file whose path the managed hook command passes
(`sentinel-hook --settings FILE`, default `/etc/sentinel/client.json`). That file, and every directory
above it, must be owned by root and writable by no one else (a sticky directory such as /tmp may sit above
it: others cannot replace root's entries there). The environment (`SENTINEL_RELEASE_PATTERNS`,
`SENTINEL_PROTECTED_REFS`) and the user file may only add patterns and refs: more releases, never fewer.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .settings import (
    DEFAULT_RELEASE_PATTERNS,
    ENV_PREFIX,
    MAX_CONFIG_FILE_BYTES,
    ClientConfigError,
    ClientSettings,
    check_url,
    parse_json_object,
    parse_release_patterns,
    parse_timeout,
    user_config_path,
)

DEFAULT_SETTINGS_PATH = "/etc/sentinel/client.json"
ROOT_UID = 0
# Full ref names, shell-style wildcards, compared case-insensitively (a remote on a case-insensitive file
# system stores refs/heads/MAIN in the same file as refs/heads/main).
DEFAULT_PROTECTED_REFS: tuple[str, ...] = ("refs/heads/main", "refs/heads/master", "refs/heads/release/*")
# git is called by an absolute path: PATH is the agent's to change.
GIT_CANDIDATES = ("/usr/bin/git", "/usr/local/bin/git", "/opt/homebrew/bin/git", "/bin/git")
_MANAGED_KEYS = frozenset(
    {
        "url",
        "project",
        "subject",
        "environment",
        "token_file",
        "timeout_seconds",
        "release_patterns",
        "protected_refs",
        "git",
    }
)
_STRING_KEYS = ("url", "project", "subject", "environment", "token_file", "git")
# A quantified group holding a quantifier backtracks exponentially; an added pattern must not stall the hook.
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[*+}](?:[^()\\]|\\.)*\)\s*[*+{]")
_REF_PATTERN = re.compile(r"refs/[A-Za-z0-9._/*\[\]!-]+")


@dataclass
class HookSettings(ClientSettings):
    protected_refs: list[str] = field(default_factory=lambda: list(DEFAULT_PROTECTED_REFS))
    git: str = ""
    source: str = DEFAULT_SETTINGS_PATH  # the managed file, named in setup-fault messages
    managed: bool = False  # the managed file exists and was read

    def require(self, *names: str) -> None:
        missing = [name for name in names if getattr(self, name) in (None, "")]
        if missing:
            where = "absent" if not self.managed else "without " + ", ".join(missing)
            raise ClientConfigError(
                "SETTING_MISSING",
                f"required setting(s) {', '.join(missing)} not set: the managed settings file {self.source} "
                f"is {where}. The user (an administrator) must write it; the agent cannot.",
            )


def _untrusted(path: str, info: os.stat_result, owners: set[int], directory: bool) -> str | None:
    if info.st_uid not in owners:
        return f"{path} is owned by uid {info.st_uid}, not {' or '.join(map(str, sorted(owners)))}"
    writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and not (directory and info.st_mode & stat.S_ISVTX):
        return f"{path} is writable by its group or by others (mode {stat.filemode(info.st_mode)})"
    return None


def check_trusted_path(path: str, owner: int = ROOT_UID) -> str | None:
    """Why a directory above `path` could let someone other than `owner` (or root) replace it; None if not."""
    for full in sorted({os.path.abspath(path), os.path.realpath(path)}):
        for directory in [str(parent) for parent in reversed(Path(full).parents)]:
            try:
                info = os.stat(directory)
            except OSError as error:
                return f"{directory} cannot be read: {error.strerror}"
            problem = _untrusted(directory, info, {ROOT_UID, owner}, True)
            if problem is not None:
                return problem
    return None


def _read_managed(path: str, owner: int) -> dict[str, object] | None:
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ClientConfigError("CONFIG_UNREADABLE", f"cannot read {path}: {error.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ClientConfigError("CONFIG_UNTRUSTED", f"{path} is not a regular file")
        problem = _untrusted(path, info, {owner}, False) or check_trusted_path(path, owner)
        if problem is not None:
            raise ClientConfigError(
                "CONFIG_UNTRUSTED",
                f"the managed settings file is not protected: {problem}. The user must make it owned by "
                f"root and writable by no one else (chown root:root, chmod 644).",
            )
        raw = handle.read(MAX_CONFIG_FILE_BYTES + 1)
    data = parse_json_object(raw, path)
    unknown = sorted(set(data) - _MANAGED_KEYS)
    if unknown:
        raise ClientConfigError("CONFIG_INVALID", f"{path} has unknown setting(s): {', '.join(unknown)}")
    for key in _STRING_KEYS:
        if key in data and data[key] is not None and not isinstance(data[key], str):
            raise ClientConfigError("CONFIG_INVALID", f"{path}: {key} must be a string")
    return {key: value for key, value in data.items() if value is not None}


def parse_protected_refs(value: object, where: str) -> list[str]:
    lines = value.splitlines() if isinstance(value, str) else value
    if not isinstance(lines, list) or not all(isinstance(item, str) for item in lines):
        raise ClientConfigError(
            "INVALID_PROTECTED_REFS", f"{where}: protected_refs must be a list of strings"
        )
    refs = [line.strip() for line in lines if line.strip()]
    for ref in refs:
        if not _REF_PATTERN.fullmatch(ref):
            raise ClientConfigError(
                "INVALID_PROTECTED_REFS", f"{where}: {ref!r} is not a full ref name (refs/heads/...)"
            )
    return refs


def _added_patterns(value: object, where: str) -> list[str]:
    patterns = parse_release_patterns(value)
    for pattern in patterns:
        if _NESTED_QUANTIFIER.search(pattern) or len(pattern) > 500:
            raise ClientConfigError(
                "INVALID_RELEASE_PATTERNS",
                f"{where}: {pattern!r} nests quantifiers (it could stall the hook)",
            )
    return patterns


def _user_additions(home: str | os.PathLike[str] | None) -> dict[str, object]:
    """Only the additive keys of the user file; the others are the persona commands' business."""
    path = user_config_path(home)
    if path is None:
        return {}
    try:
        raw = path.read_bytes()[: MAX_CONFIG_FILE_BYTES + 1]
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise ClientConfigError("CONFIG_UNREADABLE", f"cannot read {path}: {error.strerror}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ClientConfigError("CONFIG_INVALID", f"{path} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ClientConfigError("CONFIG_INVALID", f"{path} must hold a JSON object")
    return {key: data[key] for key in ("release_patterns", "protected_refs") if data.get(key) is not None}


def find_git(configured: str | None) -> str:
    if configured:
        if not os.path.isabs(configured):
            raise ClientConfigError("CONFIG_INVALID", "git must be an absolute path")
        return configured
    return next((path for path in GIT_CANDIDATES if os.access(path, os.X_OK)), GIT_CANDIDATES[0])


def load_hook_settings(
    path: str = DEFAULT_SETTINGS_PATH,
    environ: Mapping[str, str] | None = None,
    home: str | os.PathLike[str] | None = None,
    owner: int = ROOT_UID,
) -> HookSettings:
    """The managed file's settings, plus what the environment and the user file add."""
    environ = os.environ if environ is None else environ
    if not os.path.isabs(path):
        raise ClientConfigError("CONFIG_INVALID", f"--settings must be an absolute path, not {path!r}")
    managed = _read_managed(path, owner)
    settings = HookSettings(source=path, managed=managed is not None)
    values = managed or {}
    for key in ("project", "subject", "environment"):
        if key in values:
            setattr(settings, key, str(values[key]).strip() or None)
    if "url" in values:
        settings.url = check_url(str(values["url"]))
    if "token_file" in values:
        token_file = str(values["token_file"]).strip()
        if not os.path.isabs(token_file):
            raise ClientConfigError(
                "INVALID_TOKEN_FILE", "token_file must be an absolute path (in the managed settings file)"
            )
        settings.token_file = token_file
    if "timeout_seconds" in values:
        settings.timeout_seconds = parse_timeout(values["timeout_seconds"])
    settings.release_patterns = (
        parse_release_patterns(values["release_patterns"])
        if "release_patterns" in values
        else list(DEFAULT_RELEASE_PATTERNS)
    )
    if "protected_refs" in values:
        settings.protected_refs = parse_protected_refs(values["protected_refs"], path)
    settings.git = find_git(str(values["git"]) if "git" in values else None)
    additions = _user_additions(home)
    for where, patterns, refs in (
        (str(user_config_path(home)), additions.get("release_patterns"), additions.get("protected_refs")),
        (
            "the environment",
            environ.get(ENV_PREFIX + "RELEASE_PATTERNS") or None,
            environ.get(ENV_PREFIX + "PROTECTED_REFS") or None,
        ),
    ):
        if patterns is not None:
            settings.release_patterns += [
                p for p in _added_patterns(patterns, where) if p not in settings.release_patterns
            ]
        if refs is not None:
            settings.protected_refs += [
                r for r in parse_protected_refs(refs, where) if r not in settings.protected_refs
            ]
    return settings
