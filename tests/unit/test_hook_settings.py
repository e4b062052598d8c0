"""The hook's settings: only from a managed file owned by root (or, in a test, the owner it names) and
writable by no one else; the environment and the user's files may only add release patterns and protected
refs. These tests run as root in CI: the "not owned by root" cases give the file another owner and check
that it really has one, so they cannot pass by accident."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sentinel_client.managed_settings import (
    DEFAULT_PROTECTED_REFS,
    ROOT_UID,
    check_trusted_path,
    load_hook_settings,
)
from sentinel_client.settings import DEFAULT_RELEASE_PATTERNS, ClientConfigError

# The owner a managed file must have: root when the tests run as root (CI and here), else the test's user,
# passed as the expected owner (the production default is root, uid 0).
OWNER = ROOT_UID if os.geteuid() == ROOT_UID else os.geteuid()
NOBODY = 65534
MANAGED = {
    "url": "https://sentinel.example.com",
    "project": "demo",
    "subject": "payments",
    "environment": "staging",
    "token_file": "/etc/sentinel/token",
    "timeout_seconds": 5,
}


@pytest.fixture
def managed(tmp_path: Path) -> Path:
    directory = tmp_path / "etc"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    path = directory / "client.json"
    path.write_text(json.dumps(MANAGED))
    path.chmod(0o644)
    return path


def load(path: Path, environ: dict[str, str] | None = None, home: Path | None = None):
    return load_hook_settings(str(path), environ or {}, home or Path("/nonexistent-home"), owner=OWNER)


def refused(path: Path) -> str:
    with pytest.raises(ClientConfigError) as error:
        load(path)
    return error.value.code


def test_a_protected_managed_file_is_read(managed: Path) -> None:
    settings = load(managed)
    assert (settings.url, settings.project, settings.token_file, settings.timeout_seconds) == (
        "https://sentinel.example.com",
        "demo",
        "/etc/sentinel/token",
        5.0,
    )
    assert settings.release_patterns == list(DEFAULT_RELEASE_PATTERNS)
    assert settings.protected_refs == list(DEFAULT_PROTECTED_REFS)
    assert os.path.isabs(settings.git) and settings.managed


def test_a_managed_file_not_owned_by_root_is_refused(managed: Path) -> None:
    # Given a managed file owned by someone else (as root: given away; otherwise: the test's own user,
    # checked against root's uid, the production default)
    if os.geteuid() == ROOT_UID:
        os.chown(managed, NOBODY, NOBODY)
    assert os.stat(managed).st_uid != ROOT_UID  # the precondition: this file is really not root's
    # When the hook loads it with the production default (root), Then it is refused: nothing of it is used
    with pytest.raises(ClientConfigError) as error:
        load_hook_settings(str(managed), {}, None)
    assert error.value.code == "CONFIG_UNTRUSTED"
    assert "owned by uid" in error.value.message


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666, 0o620])
def test_a_managed_file_writable_by_others_is_refused(managed: Path, mode: int) -> None:
    managed.chmod(mode)
    assert refused(managed) == "CONFIG_UNTRUSTED"


def test_a_directory_above_it_that_others_can_write_is_refused(managed: Path) -> None:
    managed.parent.chmod(0o777)
    assert refused(managed) == "CONFIG_UNTRUSTED"
    managed.parent.chmod(0o1777)  # sticky: others cannot replace the file
    assert load(managed).project == "demo"


def test_a_directory_above_it_owned_by_someone_else_is_refused(tmp_path: Path, managed: Path) -> None:
    if os.geteuid() != ROOT_UID:
        pytest.skip("giving a directory away needs root (CI runs as root)")
    os.chown(managed.parent, NOBODY, NOBODY)
    assert os.stat(managed.parent).st_uid == NOBODY
    assert check_trusted_path(str(managed), ROOT_UID) is not None
    assert refused(managed) == "CONFIG_UNTRUSTED"


def test_a_symlink_to_a_file_others_can_write_is_refused(tmp_path: Path, managed: Path) -> None:
    target = tmp_path / "writable" / "client.json"
    target.parent.mkdir(mode=0o777)
    target.parent.chmod(0o777)
    target.write_text(json.dumps(MANAGED))
    target.chmod(0o644)
    managed.unlink()
    managed.symlink_to(target)
    assert refused(managed) == "CONFIG_UNTRUSTED"


def test_a_missing_managed_file_leaves_the_hook_unconfigured(tmp_path: Path) -> None:
    settings = load(tmp_path / "absent.json")
    assert (settings.url, settings.managed) == (None, False)
    with pytest.raises(ClientConfigError) as error:
        settings.require("url", "project")
    assert error.value.code == "SETTING_MISSING" and "absent" in error.value.message


def test_the_environment_cannot_loosen_anything(managed: Path) -> None:
    # Given an environment that names another server, a token of its own and a pattern that matches nothing
    environ = {
        "SENTINEL_URL": "http://127.0.0.1:9/always-ready",
        "SENTINEL_TOKEN_FILE": "/tmp/mine",
        "SENTINEL_PROJECT": "other",
        "SENTINEL_TIMEOUT_SECONDS": "0.001",
        "SENTINEL_RELEASE_PATTERNS": "^$",
        "SENTINEL_PROTECTED_REFS": "refs/heads/prod",
    }
    settings = load(managed, environ)
    # Then everything that decides what is trusted is the managed file's
    assert (settings.url, settings.token_file, settings.project, settings.timeout_seconds) == (
        "https://sentinel.example.com",
        "/etc/sentinel/token",
        "demo",
        5.0,
    )
    # And the patterns and refs are only added to
    assert settings.release_patterns == [*DEFAULT_RELEASE_PATTERNS, "^$"]
    assert settings.protected_refs == [*DEFAULT_PROTECTED_REFS, "refs/heads/prod"]


def test_a_user_writable_settings_file_cannot_loosen_anything(managed: Path, tmp_path: Path) -> None:
    # Given the user's file (the agent can write it) naming its own server and an empty-matching pattern
    home = tmp_path / "home"
    (home / ".config" / "sentinel").mkdir(parents=True)
    (home / ".config" / "sentinel" / "client.json").write_text(
        json.dumps(
            {
                "url": "http://127.0.0.1:9",
                "token_file": "/tmp/mine",
                "release_patterns": ["^$"],
                "protected_refs": ["refs/heads/prod"],
            }
        )
    )
    settings = load(managed, {}, home)
    assert (settings.url, settings.token_file) == ("https://sentinel.example.com", "/etc/sentinel/token")
    assert settings.release_patterns == [*DEFAULT_RELEASE_PATTERNS, "^$"]
    assert "refs/heads/prod" in settings.protected_refs and "refs/heads/main" in settings.protected_refs


def test_an_added_pattern_that_could_stall_the_hook_is_refused(managed: Path) -> None:
    with pytest.raises(ClientConfigError) as error:
        load(managed, {"SENTINEL_RELEASE_PATTERNS": "(a+)+$"})
    assert error.value.code == "INVALID_RELEASE_PATTERNS"


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"url": "http://sentinel.example.com"}, "INSECURE_URL"),
        ({"token_file": "token"}, "INVALID_TOKEN_FILE"),
        ({"timeout_seconds": 500}, "INVALID_TIMEOUT"),
        ({"protected_refs": ["main"]}, "INVALID_PROTECTED_REFS"),
        ({"release_patterns": []}, "INVALID_RELEASE_PATTERNS"),
        ({"colour": "blue"}, "CONFIG_INVALID"),
        ({"git": "git"}, "CONFIG_INVALID"),
    ],
)
def test_a_managed_setting_that_cannot_be_understood_is_refused(
    managed: Path, changes: dict, code: str
) -> None:
    managed.write_text(json.dumps({**MANAGED, **changes}))
    assert refused(managed) == code


def test_plain_http_is_honoured_for_loopback_only(managed: Path) -> None:
    for url in ("http://127.0.0.1:8080", "http://[::1]:8080", "http://localhost:8080"):
        managed.write_text(json.dumps({**MANAGED, "url": url}))
        assert load(managed).url == url


def test_the_settings_path_must_be_absolute() -> None:
    with pytest.raises(ClientConfigError):
        load_hook_settings("client.json", {}, None)
