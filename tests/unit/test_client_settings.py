"""Client settings: environment first, then the user-level file, never the working tree; fail closed."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from sentinel_client.settings import (
    DEFAULT_RELEASE_PATTERNS,
    DEFAULT_TIMEOUT_SECONDS,
    ClientConfigError,
    ClientSettings,
    SentinelClientError,
    check_url,
    load_settings,
    read_token,
)


def write_user_file(home: Path, values: object) -> Path:
    path = home / ".config" / "sentinel" / "client.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(values), encoding="utf-8")
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def test_nothing_configured_gives_defaults(home: Path) -> None:
    # Given no environment variables and no user file
    # When the settings are loaded
    settings = load_settings(environ={}, home=home)
    # Then every optional value is unset and the defaults hold
    assert settings == ClientSettings()
    assert settings.timeout_seconds == DEFAULT_TIMEOUT_SECONDS
    assert settings.release_patterns == list(DEFAULT_RELEASE_PATTERNS)


def test_environment_wins_over_the_user_file(home: Path) -> None:
    # Given a user file and environment variables naming different values for some settings
    write_user_file(
        home,
        {
            "url": "https://file.example.com",
            "project": "file-project",
            "subject": "file-subject",
            "environment": "staging",
            "timeout_seconds": 3,
        },
    )
    environ = {"SENTINEL_URL": "https://env.example.com/", "SENTINEL_PROJECT": "env-project"}
    # When the settings are loaded
    settings = load_settings(environ=environ, home=home)
    # Then each setting comes from the environment when set there, else from the file
    assert settings.url == "https://env.example.com"
    assert settings.project == "env-project"
    assert settings.subject == "file-subject"
    assert settings.environment == "staging"
    assert settings.timeout_seconds == 3.0


def test_an_empty_environment_variable_counts_as_unset(home: Path) -> None:
    # Given an empty SENTINEL_PROJECT and a project in the user file
    write_user_file(home, {"project": "file-project"})
    # When the settings are loaded
    settings = load_settings(environ={"SENTINEL_PROJECT": ""}, home=home)
    # Then the file's value holds
    assert settings.project == "file-project"


def test_the_working_tree_is_never_read(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a working tree holding config files in every plausible place, and a home without one
    tree = tmp_path / "repo"
    tree.mkdir()
    planted = {"url": "https://attacker.example.com", "project": "planted"}
    write_user_file(tree, planted)
    (tree / "client.json").write_text(json.dumps(planted), encoding="utf-8")
    (tree / ".sentinel.json").write_text(json.dumps(planted), encoding="utf-8")
    monkeypatch.chdir(tree)
    # When the settings are loaded from the real home
    settings = load_settings(environ={}, home=home)
    # Then nothing planted is used
    assert settings.url is None
    assert settings.project is None


def test_a_relative_home_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a working tree with a planted user file and a home that is relative (it would mean the cwd)
    write_user_file(tmp_path, {"project": "planted"})
    monkeypatch.chdir(tmp_path)
    # When the settings are loaded with that home
    settings = load_settings(environ={}, home=".")
    # Then the planted file is not read
    assert settings.project is None


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080",
        "http://127.3.4.5",
        "http://localhost:3000/",
        "http://[::1]:9000",
        "https://example.com",
    ],
)
def test_https_or_loopback_urls_are_accepted(url: str, home: Path) -> None:
    # Given a URL that is https or names a loopback host
    # When the settings are loaded
    settings = load_settings(environ={"SENTINEL_URL": url}, home=home)
    # Then it is kept, without a trailing slash
    assert settings.url == url.rstrip("/")


@pytest.mark.parametrize(
    "url", ["http://example.com", "http://10.0.0.1:8080", "http://localhost.example.com", "http://[::2]"]
)
def test_plain_http_to_anything_but_loopback_is_refused(url: str, home: Path) -> None:
    # Given a plain-http URL to a non-loopback host
    # When the settings are loaded
    with pytest.raises(ClientConfigError) as caught:
        load_settings(environ={"SENTINEL_URL": url}, home=home)
    # Then it is refused with a stable code
    assert caught.value.code == "INSECURE_URL"
    assert isinstance(caught.value, SentinelClientError)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com",
        "example.com",
        "https://",
        "https://user:pw@example.com",
        "https://example.com?x=1",
    ],
)
def test_malformed_urls_are_refused(url: str) -> None:
    # Given a URL that is not a plain absolute http(s) base
    # When it is checked
    with pytest.raises(ClientConfigError) as caught:
        check_url(url)
    # Then it is refused as INVALID_URL
    assert caught.value.code == "INVALID_URL"


def test_an_insecure_url_in_the_user_file_is_refused_too(home: Path) -> None:
    # Given a plain-http non-loopback URL in the user file
    write_user_file(home, {"url": "http://sentinel.example.com"})
    # When the settings are loaded
    with pytest.raises(ClientConfigError) as caught:
        load_settings(environ={}, home=home)
    # Then it is refused
    assert caught.value.code == "INSECURE_URL"


@pytest.mark.parametrize(("raw", "expected"), [("2.5", 2.5), ("1", 1.0), (" 30 ", 30.0)])
def test_timeout_is_parsed_from_the_environment(raw: str, expected: float, home: Path) -> None:
    # Given SENTINEL_TIMEOUT_SECONDS
    # When the settings are loaded
    settings = load_settings(environ={"SENTINEL_TIMEOUT_SECONDS": raw}, home=home)
    # Then it is a float
    assert settings.timeout_seconds == expected


@pytest.mark.parametrize("raw", ["abc", "0", "-1", "nan", "inf", "1e9", "10s"])
def test_invalid_timeouts_are_refused(raw: str, home: Path) -> None:
    # Given an unusable timeout
    # When the settings are loaded
    with pytest.raises(ClientConfigError) as caught:
        load_settings(environ={"SENTINEL_TIMEOUT_SECONDS": raw}, home=home)
    # Then it is refused with a stable code
    assert caught.value.code == "INVALID_TIMEOUT"


@pytest.mark.parametrize("value", [True, "x", [1], 0, 500])
def test_invalid_timeouts_in_the_user_file_are_refused(value: object, home: Path) -> None:
    # Given an unusable timeout in the user file
    write_user_file(home, {"timeout_seconds": value})
    # When the settings are loaded
    with pytest.raises(ClientConfigError) as caught:
        load_settings(environ={}, home=home)
    # Then it is refused
    assert caught.value.code == "INVALID_TIMEOUT"


def test_release_patterns_are_one_per_line_in_the_environment(home: Path) -> None:
    # Given two patterns separated by newlines, with a blank line
    environ = {"SENTINEL_RELEASE_PATTERNS": r"\bmake\s+release\b" + "\n\n" + r"\bship\b" + "\n"}
    # When the settings are loaded
    settings = load_settings(environ=environ, home=home)
    # Then exactly those patterns are used
    assert settings.release_patterns == [r"\bmake\s+release\b", r"\bship\b"]
    assert [p.pattern for p in settings.compiled_release_patterns()] == settings.release_patterns


def test_release_patterns_may_be_a_list_in_the_user_file(home: Path) -> None:
    # Given a list of patterns in the user file
    write_user_file(home, {"release_patterns": [r"\bship\b"]})
    # When the settings are loaded
    settings = load_settings(environ={}, home=home)
    # Then it is used
    assert settings.release_patterns == [r"\bship\b"]


def test_release_patterns_that_do_not_compile_are_refused(home: Path) -> None:
    # Given a release pattern that is not a regular expression
    # When the settings are loaded
    with pytest.raises(ClientConfigError) as caught:
        load_settings(environ={"SENTINEL_RELEASE_PATTERNS": "git push\n(unclosed"}, home=home)
    # Then it is refused
    assert caught.value.code == "INVALID_RELEASE_PATTERNS"


@pytest.mark.parametrize("value", [[], ["", "  "], "\n", [1], {"a": "b"}])
def test_empty_or_mistyped_release_patterns_in_the_user_file_are_refused(value: object, home: Path) -> None:
    # Given release patterns in the user file that are empty (they would gate nothing) or not strings
    write_user_file(home, {"release_patterns": value})
    # When the settings are loaded
    with pytest.raises(ClientConfigError) as caught:
        load_settings(environ={}, home=home)
    # Then they are refused
    assert caught.value.code == "INVALID_RELEASE_PATTERNS"


def test_blank_release_patterns_in_the_environment_keep_the_defaults(home: Path) -> None:
    # Given SENTINEL_RELEASE_PATTERNS holding only whitespace (as unset as an empty variable)
    # When the settings are loaded
    settings = load_settings(environ={"SENTINEL_RELEASE_PATTERNS": " \n \n"}, home=home)
    # Then the defaults gate, never nothing
    assert settings.release_patterns == list(DEFAULT_RELEASE_PATTERNS)


@pytest.mark.parametrize(
    "command",
    [
        "git merge feature/x",
        "gh pr merge 12 --squash",
        "git push origin main",
        "git push -u origin HEAD:main",
        "git push origin +master",
        "git push origin release/1.4",
        "git push --all origin",
        "npx cdk deploy --all",
        "terraform -chdir=infra apply -auto-approve",
        "kubectl apply -f k8s/",
        "serverless deploy --stage prod",
        "sam deploy --guided",
        "helm upgrade --install api ./chart",
        "npm publish --access public",
        "python -m twine upload dist/*",
        "cargo publish",
        "gh release create v1.2.0",
        "docker push registry.example.com/api:1.2",
    ],
)
def test_default_release_patterns_gate_merges_protected_pushes_deploys_and_publishes(command: str) -> None:
    # Given the default release patterns
    patterns = [re.compile(pattern) for pattern in DEFAULT_RELEASE_PATTERNS]
    # When a release command is matched
    # Then at least one pattern matches
    assert any(pattern.search(command) for pattern in patterns), command


@pytest.mark.parametrize(
    "command",
    [
        "git push origin feature/main-menu",
        "git push -u origin fix/maintenance",
        "git status",
        "pytest -q",
        "npm install",
        "terraform plan",
        "docker build -t api .",
        "git log --oneline main",
    ],
)
def test_default_release_patterns_leave_ordinary_commands_alone(command: str) -> None:
    # Given the default release patterns
    patterns = [re.compile(pattern) for pattern in DEFAULT_RELEASE_PATTERNS]
    # When an ordinary command (including a feature-branch push) is matched
    # Then no pattern matches
    assert not any(pattern.search(command) for pattern in patterns), command


@pytest.mark.parametrize(
    ("content", "code"),
    [("not json", "CONFIG_INVALID"), ("[1]", "CONFIG_INVALID"), ('{"urll": "https://x"}', "CONFIG_INVALID")],
)
def test_an_unparseable_user_file_is_refused(content: str, code: str, home: Path) -> None:
    # Given a user file that is not JSON, not an object, or has a misspelt key
    path = home / ".config" / "sentinel" / "client.json"
    path.parent.mkdir(parents=True)
    path.write_text(content, encoding="utf-8")
    # When the settings are loaded
    with pytest.raises(ClientConfigError) as caught:
        load_settings(environ={}, home=home)
    # Then it is refused rather than ignored
    assert caught.value.code == code


def test_token_is_read_from_the_token_file_and_stripped(tmp_path: Path, home: Path) -> None:
    # Given a token file with a trailing newline
    token_file = tmp_path / "token"
    token_file.write_text("snt_abc123\n", encoding="ascii")
    settings = load_settings(environ={"SENTINEL_TOKEN_FILE": str(token_file)}, home=home)
    # When the token is read
    # Then it comes back stripped
    assert read_token(settings) == "snt_abc123"


def test_token_file_may_start_with_a_tilde(home: Path) -> None:
    # Given a token file under the home, named with ~/
    (home / "sentinel.token").write_text("snt_xyz", encoding="ascii")
    write_user_file(home, {"token_file": "~/sentinel.token"})
    # When the settings are loaded and the token read
    settings = load_settings(environ={}, home=home)
    # Then the path is expanded against that home
    assert settings.token_file == str(home / "sentinel.token")
    assert read_token(settings) == "snt_xyz"


def test_a_relative_token_file_is_refused(home: Path) -> None:
    # Given a relative token file path (it would be read from the working tree)
    # When the settings are loaded
    with pytest.raises(ClientConfigError) as caught:
        load_settings(environ={"SENTINEL_TOKEN_FILE": "token.txt"}, home=home)
    # Then it is refused
    assert caught.value.code == "INVALID_TOKEN_FILE"


@pytest.mark.parametrize("content", [None, "", "  \n", "snt_a snt_b", "snt_a\nsnt_b", "x" * 5000])
def test_missing_empty_or_garbled_token_files_are_unavailable(content: str | None, tmp_path: Path) -> None:
    # Given a token file that is missing, empty, holds more than one token, or is far too large
    token_file = tmp_path / "token"
    if content is not None:
        token_file.write_text(content, encoding="ascii")
    settings = ClientSettings(token_file=str(token_file))
    # When the token is read
    with pytest.raises(ClientConfigError) as caught:
        read_token(settings)
    # Then it is TOKEN_UNAVAILABLE
    assert caught.value.code == "TOKEN_UNAVAILABLE"


def test_no_token_file_configured_is_unavailable() -> None:
    # Given no token file
    # When the token is read
    with pytest.raises(ClientConfigError) as caught:
        read_token(ClientSettings())
    # Then it is TOKEN_UNAVAILABLE
    assert caught.value.code == "TOKEN_UNAVAILABLE"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_token_file_is_unavailable(tmp_path: Path) -> None:
    # Given a token file without read permission
    token_file = tmp_path / "token"
    token_file.write_text("snt_abc", encoding="ascii")
    token_file.chmod(0)
    # When the token is read
    with pytest.raises(ClientConfigError) as caught:
        read_token(ClientSettings(token_file=str(token_file)))
    # Then it is TOKEN_UNAVAILABLE
    assert caught.value.code == "TOKEN_UNAVAILABLE"


def test_a_directory_as_token_file_is_unavailable(tmp_path: Path) -> None:
    # Given a token file path that names a directory
    # When the token is read
    with pytest.raises(ClientConfigError) as caught:
        read_token(ClientSettings(token_file=str(tmp_path)))
    # Then it is TOKEN_UNAVAILABLE
    assert caught.value.code == "TOKEN_UNAVAILABLE"


def test_require_names_the_missing_variables() -> None:
    # Given settings without a URL or project
    settings = ClientSettings(subject="api")
    # When the URL and project are required
    with pytest.raises(ClientConfigError) as caught:
        settings.require("url", "project", "subject")
    # Then SETTING_MISSING names both environment variables
    assert caught.value.code == "SETTING_MISSING"
    assert "SENTINEL_URL" in str(caught.value) and "SENTINEL_PROJECT" in str(caught.value)
