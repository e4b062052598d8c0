"""Which refs a push updates, with every git config source the command can see, read by the real git (at an
absolute path) the way the hook reads it: -c, --config-env, GIT_CONFIG_COUNT/KEY/VALUE, GIT_CONFIG_GLOBAL,
GIT_CONFIG_SYSTEM and GIT_CONFIG_NOSYSTEM, HOME and XDG_CONFIG_HOME, include and includeIf, push.default,
remote.<name>.push, --all, --mirror, `:` and abbreviated `heads/` refs; and which source wins."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from sentinel_client.git_push import is_protected, plan_push
from sentinel_client.git_repository import GitRepository
from sentinel_client.managed_settings import DEFAULT_PROTECTED_REFS, find_git
from sentinel_client.shell_lexer import Word

GIT = find_git(None)
IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@x.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@x.invalid",
}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout of `feature` with a local `main`, and a HOME of its own (the hook inherits the agent's)."""
    if not os.access(GIT, os.X_OK):
        pytest.skip(f"git is not at {GIT}")
    home = tmp_path / "home"
    home.mkdir()
    for name in ("GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "XDG_CONFIG_HOME", "GIT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    work = tmp_path / "w"
    work.mkdir()
    env = {**os.environ, **IDENTITY}
    for args in (
        ["init", "-q", "-b", "main"],
        ["commit", "-q", "--allow-empty", "-m", "m"],
        ["checkout", "-qb", "feature"],
        ["commit", "-q", "--allow-empty", "-m", "f"],
    ):
        subprocess.run([GIT, *args], cwd=work, env=env, check=True)
    return work


def destinations(repo: Path, command: str, env: dict[str, str] | None = None, options: tuple[str, ...] = ()):
    """The protected refs `git [options] push ARGS` updates, and whether something is unknown."""
    facts = GitRepository(GIT).facts(str(repo), options, env or {})
    words = [Word(part) for part in command.split()]
    plan = plan_push(words, facts)
    return sorted({d for _, d in plan.updates if is_protected(d, DEFAULT_PROTECTED_REFS)}), plan.unknown


def config(*args: str, file: Path | None = None, repo: Path | None = None) -> None:
    where = ["--file", str(file)] if file else []
    subprocess.run([GIT, "config", *where, *args], cwd=repo, check=True)


def test_the_default_pushes_the_branch_of_the_same_name(repo: Path) -> None:
    assert destinations(repo, "") == ([], None)
    assert destinations(repo, "origin HEAD") == ([], None)


@pytest.mark.parametrize(
    ("refspec", "expected"),
    [
        ("main", ["refs/heads/main"]),
        ("feature:main", ["refs/heads/main"]),
        ("feature:heads/main", ["refs/heads/main"]),
        ("feature:refs/heads/main", ["refs/heads/main"]),
        ("+feature:main", ["refs/heads/main"]),
        ("HEAD:main", ["refs/heads/main"]),
        ("feature:release/1", ["refs/heads/release/1"]),
        (":", ["refs/heads/main"]),
        ("refs/heads/*:refs/heads/*", ["refs/heads/main"]),
        ("^refs/heads/main", []),
        ("feature:feature-2", []),
    ],
)
def test_refspecs_are_completed_the_way_git_completes_them(repo: Path, refspec: str, expected) -> None:
    assert destinations(repo, f"origin {refspec}")[0] == expected


def test_all_and_mirror(repo: Path) -> None:
    assert destinations(repo, "--all origin")[0] == ["refs/heads/main"]
    assert destinations(repo, "--mirror origin")[1] is not None


def test_each_config_source_can_set_push_default(repo: Path, tmp_path: Path) -> None:
    # -c
    assert destinations(repo, "origin", options=("-c", "push.default=matching"))[0] == ["refs/heads/main"]
    # --config-env
    env = {"PD": "matching"}
    assert destinations(repo, "origin", env, ("--config-env", "push.default=PD"))[0] == ["refs/heads/main"]
    # GIT_CONFIG_COUNT / KEY / VALUE
    env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "push.default", "GIT_CONFIG_VALUE_0": "matching"}
    assert destinations(repo, "origin", env)[0] == ["refs/heads/main"]
    # GIT_CONFIG_GLOBAL
    global_file = tmp_path / "global"
    config("push.default", "matching", file=global_file)
    assert destinations(repo, "origin", {"GIT_CONFIG_GLOBAL": str(global_file)})[0] == ["refs/heads/main"]
    # GIT_CONFIG_SYSTEM, honoured only when GIT_CONFIG_NOSYSTEM is off
    system = {"GIT_CONFIG_SYSTEM": str(global_file), "GIT_CONFIG_NOSYSTEM": "0"}
    assert destinations(repo, "origin", system)[0] == ["refs/heads/main"]
    assert destinations(repo, "origin", {**system, "GIT_CONFIG_NOSYSTEM": "1"})[0] == []
    # HOME and XDG_CONFIG_HOME
    other_home = tmp_path / "other-home"
    other_home.mkdir()
    config("push.default", "matching", file=other_home / ".gitconfig")
    assert destinations(repo, "origin", {"HOME": str(other_home)})[0] == ["refs/heads/main"]
    xdg = tmp_path / "xdg"
    (xdg / "git").mkdir(parents=True)
    config("push.default", "matching", file=xdg / "git" / "config")
    assert destinations(repo, "origin", {"XDG_CONFIG_HOME": str(xdg)})[0] == ["refs/heads/main"]


def test_include_and_include_if_are_followed(repo: Path, tmp_path: Path) -> None:
    included = tmp_path / "included"
    config("remote.origin.push", "refs/heads/feature:refs/heads/main", file=included)
    config("include.path", str(included), repo=repo)
    assert destinations(repo, "")[0] == ["refs/heads/main"]
    config("--unset", "include.path", repo=repo)
    config("includeIf.onbranch:feature.path", str(included), repo=repo)
    assert destinations(repo, "")[0] == ["refs/heads/main"]


def test_remote_push_refspecs_and_push_default_modes(repo: Path) -> None:
    config("remote.origin.push", "feature:main", repo=repo)
    assert destinations(repo, "origin")[0] == ["refs/heads/main"]
    config("--unset", "remote.origin.push", repo=repo)
    config("branch.feature.merge", "refs/heads/main", repo=repo)
    config("branch.feature.remote", "origin", repo=repo)
    config("push.default", "upstream", repo=repo)
    assert destinations(repo, "")[0] == ["refs/heads/main"]
    config("push.default", "nothing", repo=repo)
    assert destinations(repo, "")[0] == []


def test_precedence_command_line_over_environment_over_files(repo: Path) -> None:
    # Given the repository's config says matching (pushes main)
    config("push.default", "matching", repo=repo)
    # When the environment says nothing, Then the environment wins over the file
    env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "push.default", "GIT_CONFIG_VALUE_0": "nothing"}
    assert destinations(repo, "origin", env)[0] == []
    # And -c wins over both
    assert destinations(repo, "origin", env, ("-c", "push.default=matching"))[0] == ["refs/heads/main"]
    # And the local file wins over the global one
    assert destinations(repo, "origin", {"GIT_CONFIG_GLOBAL": os.devnull})[0] == ["refs/heads/main"]


def test_an_unreadable_config_is_not_guessed(repo: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.write_text("[push\n")
    assert destinations(repo, "origin", {"GIT_CONFIG_GLOBAL": str(broken)})[1] is not None


def test_a_protected_ref_is_matched_case_insensitively() -> None:
    assert is_protected("refs/heads/MAIN", DEFAULT_PROTECTED_REFS)
    assert is_protected("refs/heads/release/2.0", DEFAULT_PROTECTED_REFS)
    assert not is_protected("refs/heads/mainline", DEFAULT_PROTECTED_REFS)
