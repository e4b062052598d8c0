"""Where a person's `sentinel` commands go and as whom (sentinel_client.cli_context): flags, then SENTINEL_*
variables, then the named (or current) context, then ~/.config/sentinel/client.json; a context that does not
exist is refused; the contexts file is private and never holds a token."""

import argparse
import io
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from sentinel_client import cli_context
from sentinel_client.api import Response, SentinelClient
from sentinel_client.cli_context import load_persona, read_contexts, write_contexts
from sentinel_client.settings import ClientConfigError

TOKEN = "snt_" + "A" * 49
OTHER_TOKEN = "snt_" + "B" * 49


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HOME and config, and no SENTINEL_* variables."""
    for name in list(os.environ):
        if name.startswith("SENTINEL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    return tmp_path


def args(**given: Any) -> argparse.Namespace:
    values = {"context": None, "url": None, "project": None, "token_file": None, "timeout": None}
    return argparse.Namespace(**{**values, **given})


def token_file(home: Path, name: str, token: str) -> str:
    path = home / name
    path.write_text(token + "\n")
    return str(path)


def given_every_layer(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """client.json, a current context, and the environment each name a different gate and project."""
    (home / ".config" / "sentinel").mkdir(parents=True)
    (home / ".config" / "sentinel" / "client.json").write_text(
        json.dumps({"url": "https://file.example/v1", "project": "from-file", "environment": "file-env"})
    )
    write_contexts(
        {
            "current": "staging",
            "contexts": {"staging": {"url": "https://context.example/v1", "project": "from-context"}},
        }
    )
    monkeypatch.setenv("SENTINEL_URL", "https://env.example/v1")


def test_flags_beat_the_environment_which_beats_the_context_which_beats_the_file(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given_every_layer(home, monkeypatch)
    # When a flag names the URL, it is used
    assert load_persona(args(url="https://flag.example/v1")).settings.url == "https://flag.example"
    # Without the flag, SENTINEL_URL beats the context
    persona = load_persona(args())
    assert persona.settings.url == "https://env.example" and persona.context == "staging"
    # What the environment does not set comes from the context, before client.json
    assert persona.settings.project == "from-context"
    # And what neither sets comes from client.json
    assert persona.settings.environment == "file-env"
    # Without the environment, the context's URL is used
    monkeypatch.delenv("SENTINEL_URL")
    assert load_persona(args()).settings.url == "https://context.example"
    # And a flag beats the context for the project too
    assert load_persona(args(project="from-flag")).settings.project == "from-flag"


def test_without_a_context_client_json_is_used(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given_every_layer(home, monkeypatch)
    monkeypatch.delenv("SENTINEL_URL")
    write_contexts({"current": None, "contexts": {}})
    persona = load_persona(args())
    assert (persona.settings.url, persona.settings.project, persona.context) == (
        "https://file.example",
        "from-file",
        None,
    )


@pytest.mark.parametrize("how", ["flag", "environment", "current"])
def test_a_context_that_does_not_exist_is_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    # Given one saved context
    write_contexts({"current": "prod", "contexts": {"prod": {"url": "https://gate.example/v1"}}})
    # When another is named (by --context, SENTINEL_CONTEXT, or a current one that went missing)
    if how == "flag":
        given = args(context="nope")
    else:
        given = args()
        if how == "environment":
            monkeypatch.setenv("SENTINEL_CONTEXT", "nope")
        else:
            write_contexts({"current": "nope", "contexts": {"prod": {"url": "https://gate.example/v1"}}})
    # Then it is refused by name, not silently replaced by another
    with pytest.raises(ClientConfigError) as refused:
        load_persona(given)
    assert refused.value.code == "CONTEXT_UNKNOWN" and "nope" in refused.value.message


def test_the_token_comes_from_the_environment_or_a_file_in_the_settings_order(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given no token anywhere: none
    assert load_persona(args()).token is None
    # Given SENTINEL_TOKEN alone: that token
    monkeypatch.setenv("SENTINEL_TOKEN", TOKEN)
    assert load_persona(args()).token == TOKEN
    # Given a context whose token file holds another: the environment still wins (SENTINEL_* > context)
    theirs = token_file(home, "context-token", OTHER_TOKEN)
    write_contexts({"current": "c", "contexts": {"c": {"url": "https://g.example/v1", "token_file": theirs}}})
    assert load_persona(args()).token == TOKEN
    # Given --token-file: the flag wins over SENTINEL_TOKEN
    mine = token_file(home, "flag-token", OTHER_TOKEN)
    assert load_persona(args(token_file=mine)).token == OTHER_TOKEN
    # Given SENTINEL_TOKEN_FILE and SENTINEL_TOKEN: the file the environment names
    monkeypatch.setenv("SENTINEL_TOKEN_FILE", mine)
    assert load_persona(args()).token == OTHER_TOKEN
    # Without the environment, the context's token file
    monkeypatch.delenv("SENTINEL_TOKEN_FILE")
    monkeypatch.delenv("SENTINEL_TOKEN")
    assert load_persona(args()).token == OTHER_TOKEN


def test_a_token_in_the_environment_that_is_not_one_token_is_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SENTINEL_TOKEN", f"{TOKEN}\r\nX-Injected: 1")
    with pytest.raises(ClientConfigError) as refused:
        load_persona(args())
    assert refused.value.code == "TOKEN_UNAVAILABLE"


def test_the_contexts_file_is_private_in_a_private_directory(home: Path) -> None:
    # Given a lax umask, and a config directory someone made readable by all
    config = home / ".config" / "sentinel"
    config.mkdir(parents=True, mode=0o755)
    config.chmod(0o755)
    previous = os.umask(0o022)
    try:
        # When the contexts are written (twice: a replacement keeps the mode)
        write_contexts({"current": "a", "contexts": {"a": {"url": "https://g.example/v1"}}})
        path = write_contexts({"current": "a", "contexts": {"a": {"url": "https://h.example/v1"}}})
    finally:
        os.umask(previous)
    # Then the file is 0600 and its directory 0700, and nothing else is left beside it
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.stat().st_mode) == 0o700
    assert sorted(p.name for p in config.iterdir()) == ["contexts.json"]
    assert read_contexts()["contexts"]["a"]["url"] == "https://h.example/v1"


def test_a_token_is_never_written_into_the_contexts_file(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a gate that accepts the token (the client's whoami, answered without a network)
    seen: list[str] = []

    def whoami(client: SentinelClient) -> Response:
        seen.append(client._token)  # the token the request would carry
        return Response(200, {"principal_id": "alice", "kind": "human", "roles": {}})

    monkeypatch.setattr(SentinelClient, "whoami", whoami)
    monkeypatch.setattr("sys.stdin", io.StringIO(TOKEN + "\n"))
    # When a person logs in with the token on standard input
    given = argparse.Namespace(
        name="work",
        url="https://gate.example/v1",
        project="shop",
        subject=None,
        environment=None,
        token_stdin=True,
        token_file=None,
        json=True,
    )
    assert cli_context.cmd_login(given) == 0
    # Then the token was checked, is kept in its own 0600 file, and the contexts file only names that file
    assert seen == [TOKEN]
    saved = (home / ".config" / "sentinel" / "contexts.json").read_text()
    assert TOKEN not in saved
    body = json.loads(saved)["contexts"]["work"]
    assert set(body) == {"url", "project", "token_file"}
    kept = Path(body["token_file"])
    assert kept.read_text().strip() == TOKEN and stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    # And standard output carries no token either
    assert TOKEN not in capsys.readouterr().out
    # And a context body handed over with a token in it keeps only the context's keys
    write_contexts({"current": "x", "contexts": {"x": {"url": "https://g.example/v1", "token": TOKEN}}})
    assert TOKEN not in (home / ".config" / "sentinel" / "contexts.json").read_text()
