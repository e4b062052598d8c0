"""Red team: the change `candidate attest --from-git` reads from a repository the agent wrote must be the one
its commits hold. Two things a committed file or the clone's refs can do to `git diff` are ignored: a
`.gitmodules` saying `ignore = all` (a submodule pointer moved, listed by GitHub, missing from git's list)
and `refs/replace/*` (the commit ids sent stay the real ones while git reads another commit's tree and
blobs), each of which would hand the gate fewer changed paths, or another OpenAPI document, than the
revision holds: obligations never derived, under an *attested* context."""

import subprocess
from pathlib import Path

from sentinel_client.git_change import GitReader, openapi_changes


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "protocol.file.allow=always",
            *args,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def init(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    return path


def test_attack_a_submodule_marked_ignore_all_still_counts_as_changed(tmp_path: Path) -> None:
    # Given a clone whose committed .gitmodules (already in the base) says `ignore = all` for payments
    library = init(tmp_path / "library")
    commit(library, {"x": "1\n"}, "one")
    repo = init(tmp_path / "clone")
    git(repo, "submodule", "add", "-q", str(library), "payments")
    git(repo, "config", "-f", ".gitmodules", "submodule.payments.ignore", "all")
    base = commit(repo, {"README": "hi\n"}, "base")
    # When the agent moves the submodule's pointer in its change
    commit(library, {"x": "2\n"}, "two")
    git(repo / "payments", "pull", "-q", "origin", "main")
    head = commit(repo, {}, "move payments")
    # Then the changed files name it, as GitHub's list of the pull request's files does
    assert GitReader(str(repo)).changed_files(base, head) == ["payments"]


def test_attack_replace_refs_do_not_change_what_a_revision_holds(tmp_path: Path) -> None:
    # Given a change that touches payments code and the OpenAPI document
    repo = init(tmp_path / "clone")
    spec = "openapi: 3.0.3\ninfo: {title: p, version: '1'}\npaths: {}\n"
    base = commit(repo, {"a": "1\n", "api.yaml": spec}, "base")
    head = commit(
        repo,
        {"a": "2\n", "services/payments/x.py": "x\n", "api.yaml": spec.replace("{}", "{/p: {}}")},
        "real",
    )
    # And a replace ref (the agent's, in the clone) standing an innocent commit in for the real one
    git(repo, "checkout", "-q", base)
    decoy = commit(repo, {"a": "2\n"}, "decoy")
    git(repo, "checkout", "-q", "main")
    git(repo, "replace", head, decoy)
    reader = GitReader(str(repo))
    # Then the files and documents are read from the real commit all the same
    assert reader.changed_files(base, head) == ["a", "api.yaml", "services/payments/x.py"]
    config = {"derivation_rules": [{"openapi": "api.yaml", "policy_id": "c"}]}
    documents = openapi_changes(reader, base, head, ["api.yaml"], config, "s")
    assert [d["name"] for d in documents] == ["api.yaml"]


def test_attack_a_git_in_the_working_tree_is_never_run_from_a_path_entry_meaning_here(
    tmp_path: Path, monkeypatch
) -> None:
    # Given the agent's clone with an executable `git` of its own at the top, and a reviewer whose PATH has
    # an empty entry (a trailing colon: "the current directory") running `candidate create --from-git` there
    repo = init(tmp_path / "clone")
    marker = tmp_path / "ran"
    fake = repo / "git"
    fake.write_text(f'#!/bin/sh\ntouch {marker}\nexec /usr/bin/git "$@"\n')
    fake.chmod(0o755)
    commit(repo, {"a": "1\n"}, "one")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("PATH", "/nonexistent-sentinel-test::/usr/bin:/bin")
    # When the command finds git
    try:
        GitReader(str(repo))
    except Exception:  # refusing is fine; running the agent's program is not
        pass
    # Then the working tree's program never ran
    assert not marker.exists()
