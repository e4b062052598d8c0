"""The GitHub App adapter (sentinel_service.adapters.github_app) against the fake GitHub, which checks every
request it makes against GitHub's REST description: the fake fails the test at teardown on any request
GitHub would not admit, so each test here also proves the adapter speaks GitHub's documented API."""

import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sentinel_domain.forge import CheckRun, ForgeRefused, ForgeUnavailable
from sentinel_service.adapters.github_app import COMPARE_FILE_LIMIT, GitHubApp
from support.fake_github import FakeGitHub, running_fake

REPO = "acme/shop"
INSTALLATION = 77


class Clock:
    def __init__(self) -> None:
        self.at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def github(clock: Clock) -> Any:
    """The fake GitHub on the test's clock, with the app installed on one repository."""
    with running_fake(now=clock) as fake:
        fake.install(INSTALLATION, REPO)
        yield fake


@pytest.fixture
def forge(github: FakeGitHub, clock: Clock) -> GitHubApp:
    built: GitHubApp = github.forge(INSTALLATION, clock=clock)
    return built


def asked(github: FakeGitHub, fragment: str) -> list[str]:
    return [target for _, target in github.requests if fragment in target]


# ---- changed files ---------------------------------------------------------------------------------------


def test_changed_files_come_from_compare_with_both_paths_of_a_rename(
    github: FakeGitHub, forge: GitHubApp
) -> None:
    # Given a commit that edits, adds, deletes and renames (same content, new path)
    base = github.commit(REPO, {"api/openapi.yaml": "v: 1\n", "docs/old.md": "notes\n", "gone.txt": "x\n"})
    head = github.commit(
        REPO,
        {
            "api/openapi.yaml": "v: 2\n",
            "docs/old.md": None,
            "docs/new.md": "notes\n",
            "gone.txt": None,
            "add.py": "1",
        },
        parent=base,
    )
    # When the adapter asks for the changed files
    changed = forge.changed_files(REPO, base, head)
    # Then the forge's list is complete and names every path, the rename with both of its paths
    assert changed.complete and changed.source == "compare"
    assert changed.files == ("add.py", "api/openapi.yaml", "docs/new.md", "docs/old.md", "gone.txt")
    assert (changed.base, changed.head) == (base, head)
    # And compare reported the rename as one renamed entry (so both paths came from previous_filename)
    assert not asked(github, "/git/trees/")


def test_a_comparison_at_githubs_300_file_cap_falls_back_to_the_tree_diff(
    github: FakeGitHub, forge: GitHubApp
) -> None:
    # Given a change of 305 files (compare lists only 300) and one renamed file among them
    base = github.commit(REPO, {"keep.txt": "k", "moved/a.txt": "same"})
    changes: dict[str, str | None] = {f"gen/f{i:03}.txt": str(i) for i in range(COMPARE_FILE_LIMIT + 4)}
    changes |= {"moved/a.txt": None, "moved/b.txt": "same"}
    head = github.commit(REPO, changes, parent=base)
    # When the adapter asks for the changed files
    changed = forge.changed_files(REPO, base, head)
    # Then it did not trust the capped list: the trees of both commits were diffed, and nothing is missing
    assert changed.complete and changed.source == "tree_diff"
    assert len(changed.files) == COMPARE_FILE_LIMIT + 4 + 2
    assert {"moved/a.txt", "moved/b.txt", "gen/f303.txt"} <= set(changed.files)
    assert "keep.txt" not in changed.files
    assert len(asked(github, "/git/trees/")) == 2


def test_a_tree_github_truncated_makes_the_list_incomplete_never_a_guess(
    github: FakeGitHub, forge: GitHubApp
) -> None:
    # Given a change over compare's cap, in a repository whose tree GitHub truncates
    base = github.commit(REPO, {"a.txt": "a"})
    head = github.commit(REPO, {f"gen/{i}.txt": str(i) for i in range(COMPARE_FILE_LIMIT)}, parent=base)
    github.tree_entry_cap = 100
    # When the adapter asks for the changed files
    changed = forge.changed_files(REPO, base, head)
    # Then the answer says it is incomplete and carries no partial list
    assert not changed.complete and changed.files == () and changed.source == "tree_diff"


def test_a_list_just_under_the_cap_is_taken_from_compare(github: FakeGitHub, forge: GitHubApp) -> None:
    # Given 299 changed files (one fewer than compare's cap)
    base = github.commit(REPO, {"a.txt": "a"})
    head = github.commit(REPO, {f"gen/{i}.txt": str(i) for i in range(COMPARE_FILE_LIMIT - 1)}, parent=base)
    # Then compare's list is complete as it stands
    changed = forge.changed_files(REPO, base, head)
    assert changed.complete and changed.source == "compare" and len(changed.files) == COMPARE_FILE_LIMIT - 1


def test_a_diverged_base_is_compared_from_the_merge_base_on_both_paths(
    github: FakeGitHub, forge: GitHubApp
) -> None:
    # Given a base branch that moved on (main.txt) after the pull request's branch left it
    root = github.commit(REPO, {"shared.txt": "s"})
    base = github.commit(REPO, {"main.txt": "m"}, parent=root)
    head = github.commit(REPO, {"feature.txt": "f"}, parent=root)
    # When compared, then only the pull request's own change is listed (three-dot semantics)
    assert forge.changed_files(REPO, base, head).files == ("feature.txt",)
    # And the tree diff answers the same question when compare's list cannot be trusted
    many = github.commit(REPO, {f"gen/{i}.txt": "x" for i in range(COMPARE_FILE_LIMIT)}, parent=head)
    changed = forge.changed_files(REPO, base, many)
    assert (
        changed.source == "tree_diff" and "main.txt" not in changed.files and "feature.txt" in changed.files
    )


def test_pull_request_files_are_paged_and_a_list_at_the_3000_cap_falls_back(
    github: FakeGitHub, forge: GitHubApp
) -> None:
    # Given a pull request of 3,001 changed files (GitHub lists at most 3,000)
    base = github.commit(REPO, {"a.txt": "a"})
    head = github.commit(REPO, {f"gen/{i:04}.txt": str(i) for i in range(3001)}, parent=base)
    github.open_pull(REPO, 9, base, head)
    # When the adapter reads the pull request's files
    changed = forge.pull_request_files(REPO, 9, base, head)
    # Then it read all 30 pages, saw the cap, and took the tree diff instead of a truncated list
    assert len(asked(github, "/pulls/9/files")) == 30
    assert changed.complete and changed.source == "tree_diff" and len(changed.files) == 3001
    # And a small pull request is answered from its own list
    small = github.commit(REPO, {"one.txt": "1"}, parent=base)
    github.open_pull(REPO, 10, base, small)
    assert forge.pull_request_files(REPO, 10, base, small).files == ("one.txt",)


def test_a_pull_requests_author_is_read_from_github(github: FakeGitHub, forge: GitHubApp) -> None:
    # Given pull request 11, opened by hank
    base = github.commit(REPO, {"a.txt": "a"})
    head = github.commit(REPO, {"a.txt": "b"}, parent=base)
    github.open_pull(REPO, 11, base, head, author="hank")
    # When the adapter asks who opened it (as the worker does for a merge queue's commit)
    # Then GitHub's answer names hank, and a pull request GitHub does not know names nobody
    assert forge.pull_request_author(REPO, 11) == "hank"
    assert forge.pull_request_author(REPO, 12) is None


# ---- documents -------------------------------------------------------------------------------------------


def test_a_document_is_read_at_each_commit_and_a_missing_one_is_none(
    github: FakeGitHub, forge: GitHubApp
) -> None:
    # Given a document that changes between two commits and one that exists only in the second
    base = github.commit(REPO, {"api/openapi.yaml": "openapi: 3.0.0\nv: 1 é\n"})
    head = github.commit(
        REPO, {"api/openapi.yaml": "openapi: 3.0.0\nv: 2\n", "api/new.yaml": "n: 1\n"}, parent=base
    )
    # When each is read at each commit
    # Then each commit's text comes back as it was there, and an absent path is None, not an error
    assert forge.read_file(REPO, base, "api/openapi.yaml").text == "openapi: 3.0.0\nv: 1 é\n"
    assert forge.read_file(REPO, head, "api/openapi.yaml").text == "openapi: 3.0.0\nv: 2\n"
    missing = forge.read_file(REPO, base, "api/new.yaml")
    assert missing.text is None and (missing.path, missing.revision) == ("api/new.yaml", base)
    assert all(f"ref={c}" in t for c, t in zip((base, head, base), asked(github, "/contents/"), strict=True))


def test_a_404_at_a_commit_github_does_not_know_is_refused_not_taken_for_a_missing_file(
    github: FakeGitHub, forge: GitHubApp
) -> None:
    # Given a commit id the repository does not have, and a repository outside the installation
    github.commit(REPO, {"a.txt": "a"})
    github.install(INSTALLATION + 1, "other/repo")
    elsewhere = github.commit("other/repo", {"a.txt": "a"})
    # Then neither 404 passes for "the file is absent"
    with pytest.raises(ForgeRefused, match="404"):
        forge.read_file(REPO, "e" * 40, "a.txt")
    with pytest.raises(ForgeRefused, match="404"):
        forge.read_file("other/repo", elsewhere, "a.txt")


def test_a_file_over_one_megabyte_comes_from_the_blob_and_a_larger_one_is_refused(
    github: FakeGitHub, clock: Clock
) -> None:
    # Given a 1.5 MB document (the contents API answers it without content)
    text = "x" * (1536 * 1024)
    head = github.commit(REPO, {"big.yaml": text, "dir/inner.txt": "i"})
    # Then the adapter reads its blob, raw
    assert github.forge(INSTALLATION, clock=clock).read_file(REPO, head, "big.yaml").text == text
    assert asked(github, "/git/blobs/")
    # And an adapter bounded below that size refuses it rather than reading part of it
    bounded = github.forge(INSTALLATION, clock=clock, max_document_bytes=1024 * 1024)
    with pytest.raises(ForgeRefused, match="larger than"):
        bounded.read_file(REPO, head, "big.yaml")


@pytest.mark.parametrize("path", ["../etc/passwd", "/abs", "a//b", "a/./b", "nul\x00l"])
def test_a_path_that_is_not_a_plain_repository_path_is_refused_before_any_request(
    github: FakeGitHub, forge: GitHubApp, path: str
) -> None:
    head = github.commit(REPO, {"a.txt": "a"})
    with pytest.raises(ForgeRefused):
        forge.read_file(REPO, head, path)
    assert not asked(github, "/contents/")


def test_a_revision_that_is_not_a_full_commit_id_is_refused(github: FakeGitHub, forge: GitHubApp) -> None:
    head = github.commit(REPO, {"a.txt": "a"})
    for revision in ("main", head[:12], head + "/../x", "HEAD"):
        with pytest.raises(ForgeRefused):
            forge.read_file(REPO, revision, "a.txt")
        with pytest.raises(ForgeRefused):
            forge.changed_files(REPO, revision, head)
    assert github.requests == []


# ---- check runs ------------------------------------------------------------------------------------------


def test_a_check_run_is_created_then_updated_in_place(github: FakeGitHub, forge: GitHubApp) -> None:
    # Given a commit and a held decision
    head = github.commit(REPO, {"a.txt": "a"})
    held = CheckRun(
        "sentinel/prod",
        head,
        "failure",
        "Held: tests failed",
        "## Held\n- test_checkout",
        "cand-1",
        "https://s/c/1",
    )
    # When it is published, then GitHub holds a completed run with that conclusion and summary
    published = forge.publish_check(REPO, held)
    [run] = github.check_runs(REPO, head)
    assert (run["name"], run["status"], run["conclusion"]) == ("sentinel/prod", "completed", "failure")
    assert run["output"] == {"title": "Held: tests failed", "summary": "## Held\n- test_checkout"}
    assert (run["external_id"], run["details_url"], str(run["id"])) == (
        "cand-1",
        "https://s/c/1",
        published.check_run_id,
    )
    assert published.html_url.endswith(f"/runs/{published.check_run_id}")
    # When the decision turns ready and the run is updated by its id
    ready = CheckRun(
        "sentinel/prod", head, "success", "Ready", "## Ready", "cand-1", None, published.check_run_id
    )
    again = forge.publish_check(REPO, ready)
    # Then the same run changed (no second run), and the update carried no head_sha (GitHub takes none there)
    assert again.check_run_id == published.check_run_id
    [run] = github.check_runs(REPO, head)
    assert (run["conclusion"], run["output"]["title"]) == ("success", "Ready")
    assert [h["conclusion"] for h in run["history"]] == ["failure", "success"] and "head_sha" not in run[
        "history"
    ][1]


def test_a_summary_over_githubs_limit_is_cut_to_fit_and_says_so(github: FakeGitHub, forge: GitHubApp) -> None:
    head = github.commit(REPO, {"a.txt": "a"})
    forge.publish_check(REPO, CheckRun("sentinel/prod", head, "failure", "Held", "x" * 70000, "cand-2"))
    [run] = github.check_runs(REPO, head)
    assert len(run["output"]["summary"]) == 65535 and run["output"]["summary"].endswith("limit)")


def test_an_unknown_commit_or_run_is_refused(github: FakeGitHub, forge: GitHubApp) -> None:
    github.commit(REPO, {"a.txt": "a"})
    with pytest.raises(ForgeRefused, match="422"):
        forge.publish_check(REPO, CheckRun("sentinel/prod", "f" * 40, "failure", "t", "s"))
    with pytest.raises(ForgeRefused, match="404"):
        forge.publish_check(
            REPO, CheckRun("sentinel/prod", "f" * 40, "failure", "t", "s", check_run_id="999999")
        )


# ---- faults ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status", "wait"),
    [("secondary", 403, 30), ("429", 429, 30), ("primary", 403, 30), ("bare", 403, 60)],
)
def test_rate_limits_are_unavailable_with_the_wait_github_asked_for(
    github: FakeGitHub, forge: GitHubApp, kind: str, status: int, wait: int
) -> None:
    # Given a rate limit on the next comparison
    head = github.commit(REPO, {"a.txt": "a"})
    # (a bare secondary limit names no wait: GitHub's docs ask for at least a minute)
    github.rate_limit(kind, seconds=wait, operation="repos/compare-commits")
    # When the adapter asks, then it is told to come back later, after the wait GitHub named
    with pytest.raises(ForgeUnavailable) as raised:
        forge.changed_files(REPO, head, head)
    assert raised.value.retry_after_seconds == wait and str(status) in raised.value.detail
    # And the next call, once the limit passed, is answered
    assert forge.changed_files(REPO, head, head).complete


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_server_error_is_unavailable(github: FakeGitHub, forge: GitHubApp, status: int) -> None:
    head = github.commit(REPO, {"a.txt": "a"})
    github.fail(status, operation="checks/create")
    with pytest.raises(ForgeUnavailable):
        forge.publish_check(REPO, CheckRun("sentinel/prod", head, "failure", "t", "s"))
    assert github.check_runs(REPO) == []


def test_an_app_key_github_does_not_know_is_refused_with_401(github: FakeGitHub, clock: Clock) -> None:
    # Given the adapter holding another RSA key than the app's
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    other = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    forge = GitHubApp.build(github.url, github.app_id, INSTALLATION, lambda: other, clock)
    head = github.commit(REPO, {"a.txt": "a"})
    # Then GitHub refuses its JWT and the adapter says so: no retry will help
    with pytest.raises(ForgeRefused, match="401"):
        forge.changed_files(REPO, head, head)
    assert github.tokens_minted == 0


def test_a_repository_outside_the_installation_is_refused(github: FakeGitHub, forge: GitHubApp) -> None:
    github.install(INSTALLATION + 1, "other/repo")
    head = github.commit("other/repo", {"a.txt": "a"})
    with pytest.raises(ForgeRefused, match="404"):
        forge.changed_files("other/repo", head, head)


def test_an_unreachable_github_is_unavailable(clock: Clock) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    forge = GitHubApp.build(f"http://127.0.0.1:{port}", 1, 1, lambda: b"unused", clock)
    with pytest.raises(ForgeUnavailable):
        forge.changed_files(REPO, "a" * 40, "b" * 40)


def test_an_answer_larger_than_the_bound_is_refused(github: FakeGitHub, forge: GitHubApp) -> None:
    head = github.commit(REPO, {"a.txt": "a"})
    forge.http.max_response_bytes = 2000  # a compare answer is larger
    with pytest.raises(ForgeRefused, match="larger than 2000 bytes"):
        forge.changed_files(REPO, head, head)


# ---- tokens ----------------------------------------------------------------------------------------------


def test_the_installation_token_is_cached_until_shortly_before_it_expires(
    github: FakeGitHub, forge: GitHubApp, clock: Clock
) -> None:
    head = github.commit(REPO, {"a.txt": "a"})
    # Given three calls within the token's hour
    for _ in range(3):
        forge.read_file(REPO, head, "a.txt")
        clock.at += timedelta(minutes=10)
    # Then one token served them all
    assert github.tokens_minted == 1
    # When the clock reaches five minutes before its expiry (at 56 minutes)
    clock.at += timedelta(minutes=26)
    forge.read_file(REPO, head, "a.txt")
    # Then a fresh token was minted before GitHub could refuse the old one
    assert github.tokens_minted == 2


def test_a_token_github_revoked_is_replaced_once_and_the_call_goes_through(
    github: FakeGitHub, forge: GitHubApp
) -> None:
    head = github.commit(REPO, {"a.txt": "a"})
    forge.read_file(REPO, head, "a.txt")
    # Given GitHub forgets every token it issued
    github.revoke_tokens()
    # Then the next call is refused with 401 once, mints a fresh token, and is answered
    assert forge.read_file(REPO, head, "a.txt").text == "a"
    assert github.tokens_minted == 2


def test_the_jwt_is_rs256_backdated_and_short_lived(
    github: FakeGitHub, forge: GitHubApp, clock: Clock
) -> None:
    import base64
    import json

    header, claims, _ = forge.credentials.jwt().split(".")

    def decode(part: str) -> Any:
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))

    now = int(clock().timestamp())
    assert decode(header) == {"alg": "RS256", "typ": "JWT"}
    body = decode(claims)
    assert body["iss"] == str(github.app_id) and body["iat"] == now - 60 and body["exp"] - body["iat"] <= 600
    assert body["exp"] > now


def test_the_compose_root_builds_one_adapter_per_installation_without_reading_a_key(tmp_path: Any) -> None:
    # Given settings that name a key file that does not exist yet
    from sentinel_domain.models import GitHubForge, GitHubRepository
    from sentinel_service.compose import compose
    from sentinel_service.settings import Settings

    settings = Settings.from_env({"SENTINEL_GITHUB_APP_KEY_FILE": str(tmp_path / "absent.pem")})
    services = compose(settings)
    config = GitHubForge(
        app_id=1,
        installation_id=2,
        app_principal="ci-app",
        repositories=[GitHubRepository(repository=REPO, subject="shop", environments=["prod"])],
    )
    # When the forge is asked for, twice
    first, second = services.forge(config), services.forge(config)
    # Then it is one adapter on GitHub's public API, and nothing was read yet
    assert first is second and isinstance(first, GitHubApp)
    assert first.http.base_url == "https://api.github.com"
    # And the key is read only when a token is needed: its absence is then ForgeUnavailable, never a guess
    with pytest.raises(ForgeUnavailable, match="GitHub App private key"):
        first.credentials.jwt()


def test_in_aws_the_key_comes_from_secrets_manager_and_drives_the_adapter(
    github: FakeGitHub, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the app's key in a Secrets Manager secret (moto) and settings naming it
    import boto3
    from moto import mock_aws

    from sentinel_service.adapters.github_auth import key_source
    from sentinel_service.settings import Settings

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        arn = boto3.client("secretsmanager", region_name="eu-west-1").create_secret(
            Name="sentinel/github-app-key", SecretString=github.private_key_pem.decode()
        )["ARN"]
        settings = Settings.from_env({"SENTINEL_GITHUB_APP_KEY_SECRET_ARN": arn, "AWS_REGION": "eu-west-1"})
        forge = GitHubApp.build(github.url, github.app_id, INSTALLATION, key_source(settings), clock)
        head = github.commit(REPO, {"a.txt": "a"})
        # Then the adapter mints its token with that key and is answered
        assert forge.read_file(REPO, head, "a.txt").text == "a"
    assert github.tokens_minted == 1
