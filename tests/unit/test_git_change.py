"""A candidate's change read from a real (temporary) git repository: ranges, files, OpenAPI documents."""

import subprocess
from pathlib import Path

import pytest

from sentinel_client.cli_output import CommandRefused
from sentinel_client.git_change import (
    GitRange,
    GitReader,
    document_path,
    openapi_changes,
    parse_openapi_paths,
    parse_range,
)

SPEC_V1 = "openapi: 3.0.3\ninfo: {title: pay, version: '1'}\npaths:\n  /pay:\n    get:\n      responses:\n"
SPEC_V1 += "        '200': {description: ok}\n"
SPEC_V2 = SPEC_V1.replace("/pay:", "/refund:")
RULES = {
    "derivation_rules": [
        {"files": ["services/**"], "policy_id": "unit-tests", "scope": "payments-api"},
        {"openapi": "payments-api", "policy_id": "api-contract", "per": "operation"},
    ]
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def commit(repo: Path, files: dict[str, str | None], message: str) -> str:
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "clone"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("main..HEAD", GitRange("main", "HEAD", False)),
        ("origin/main...feature", GitRange("origin/main", "feature", True)),
        ("HEAD~2..", GitRange("HEAD~2", "HEAD", False)),
        ("..topic", GitRange("HEAD", "topic", False)),
    ],
)
def test_a_range_names_its_two_ends(text: str, expected: GitRange) -> None:
    # When a range is parsed  Then its ends (and whether it means the merge base) are as git reads them
    assert parse_range(text) == expected


@pytest.mark.parametrize("text", ["", "main", "..", "...", "a b..c", "--output=x..HEAD", "main....x"])
def test_anything_else_is_not_a_range(text: str) -> None:
    with pytest.raises(CommandRefused) as refused:
        parse_range(text)
    assert refused.value.code == "BAD_RANGE" and refused.value.next_step


def test_openapi_paths_are_name_equals_path() -> None:
    assert parse_openapi_paths(["a=specs/a.yaml", "b=-"]) == {"a": "specs/a.yaml", "b": "-"}
    with pytest.raises(CommandRefused):
        parse_openapi_paths(["specs/a.yaml"])


def test_a_directory_outside_git_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CommandRefused) as refused:
        GitReader(str(tmp_path))
    assert refused.value.code == "NOT_A_GIT_REPOSITORY"


def test_a_commit_that_does_not_exist_is_a_bad_range(repo: Path) -> None:
    commit(repo, {"a.txt": "a"}, "one")
    reader = GitReader(str(repo))
    with pytest.raises(CommandRefused) as refused:
        reader.resolve(parse_range("nosuchbranch..HEAD"))
    assert refused.value.code == "BAD_RANGE"
    with pytest.raises(CommandRefused):
        reader.resolve(parse_range("0" * 40 + "..HEAD"))  # a full id git does not have


def test_the_change_lists_both_paths_of_a_rename_and_the_changed_document(repo: Path) -> None:
    # Given a base commit, and a head that renames a file, edits the service and changes the document
    base = commit(repo, {"services/pay.py": "x = 1\n", "old.txt": "same\n", "api/pay.yaml": SPEC_V1}, "one")
    head = commit(
        repo,
        {"services/pay.py": "x = 2\n", "old.txt": None, "new.txt": "same\n", "api/pay.yaml": SPEC_V2},
        "two",
    )
    reader = GitReader(str(repo / "services"))  # from a subfolder: paths are still the repository's
    # When the change is read
    resolved = reader.resolve(parse_range("HEAD~1..HEAD"))
    files = reader.changed_files(*resolved)
    documents = openapi_changes(reader, *resolved, files, RULES, "pay", {"payments-api": "api/pay.yaml"})
    # Then the commits are full ids, both paths of the rename are listed, and the document is read at both
    assert resolved == (base, head)
    assert files == ["api/pay.yaml", "new.txt", "old.txt", "services/pay.py"]
    assert documents == [{"name": "payments-api", "before": SPEC_V1, "after": SPEC_V2}]


def test_an_added_document_has_no_before_and_an_unchanged_one_is_left_out(repo: Path) -> None:
    commit(repo, {"README": "r\n"}, "one")
    commit(repo, {"api/pay.yaml": SPEC_V1}, "two")
    commit(repo, {"README": "changed\n"}, "three")
    reader = GitReader(str(repo))
    paths = {"payments-api": "api/pay.yaml"}
    # When the document was added between the commits  Then its before side is null
    added = reader.resolve(parse_range("HEAD~2..HEAD~1"))
    assert openapi_changes(reader, *added, reader.changed_files(*added), RULES, "pay", paths) == [
        {"name": "payments-api", "before": None, "after": SPEC_V1}
    ]
    # When it did not change  Then nothing is sent for it
    same = reader.resolve(parse_range("HEAD~1..HEAD"))
    assert openapi_changes(reader, *same, reader.changed_files(*same), RULES, "pay", paths) == []


def test_where_a_document_lives_flag_then_forge_config_then_its_own_name() -> None:
    config = {
        "github": {
            "repositories": [
                {"subject": "other", "openapi": {"payments-api": "elsewhere.yaml"}},
                {"subject": "pay", "openapi": {"payments-api": "specs/pay.yaml"}},
            ]
        }
    }
    never = lambda path: False  # noqa: E731
    # Then a flag wins, then the repository of this subject, then a file named like the document
    assert document_path("payments-api", config, "pay", {"payments-api": "x.yaml"}, never) == "x.yaml"
    assert document_path("payments-api", config, "pay", {"payments-api": "-"}, never) is None
    assert document_path("payments-api", config, "pay", {}, never) == "specs/pay.yaml"
    assert document_path("spec.yaml", {}, "pay", {}, lambda path: path == "spec.yaml") == "spec.yaml"
    # And a document nobody can place is refused rather than silently deriving nothing
    with pytest.raises(CommandRefused) as refused:
        document_path("payments-api", {}, "pay", {}, never)
    assert (
        refused.value.code == "OPENAPI_PATH_UNKNOWN" and "--openapi payments-api=" in refused.value.next_step
    )


def test_three_dots_take_the_merge_base_as_the_base(repo: Path) -> None:
    # Given a feature branch made from main, and main moved on since
    fork = commit(repo, {"a.txt": "a\n"}, "one")
    git(repo, "checkout", "-q", "-b", "feature")
    head = commit(repo, {"services/pay.py": "x\n"}, "feature")
    git(repo, "checkout", "-q", "main")
    commit(repo, {"unrelated.txt": "u\n"}, "main moves on")
    reader = GitReader(str(repo))
    # When the range is main...feature  Then the base is where feature left main, and only its change counts
    base, tip = reader.resolve(parse_range("main...feature"))
    assert (base, tip) == (fork, head)
    assert reader.changed_files(base, tip) == ["services/pay.py"]
    # While main..feature compares with main as it is now
    assert "unrelated.txt" in reader.changed_files(*reader.resolve(parse_range("main..feature")))
