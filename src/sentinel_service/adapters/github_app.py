"""The `Forge` port (sentinel_domain.forge) for one GitHub App installation, over GitHub's REST API.

What it asks GitHub, and why (docs/github.md has the app's permissions):
- changed files: `GET /repos/{owner}/{repo}/compare/{base}...{head}`. GitHub lists at most 300 files for a
  whole comparison (only on the first page; paging walks the commits, never the files), so a list of 300
  or more, or none at all, may be truncated: the adapter then diffs the two commits' trees
  (`GET /repos/{owner}/{repo}/git/trees/{tree}?recursive=1`), and a tree GitHub itself truncated (over
  100,000 entries or 7 MB) makes the answer `complete=False`. Never a guess. A rename or copy owes both its
  paths. Like compare (three dots), the tree diff starts from the merge base, so both answer one question.
- the pull request's files (`pulls/{n}/files`, at most 3,000) are offered too, under the same rule.
- documents: the contents API at `ref=<commit>`; 404 is "no such file at that commit" once GitHub has
  confirmed it knows the commit (else the 404 is refused, never taken for absence); a file over 1 MB
  comes from the blobs API; anything larger than `max_document_bytes`, a directory, a symlink or a
  submodule is refused rather than read in part.
- check runs: created completed with their conclusion, or updated when the run's id is known.

Installation tokens are cached until five minutes before they expire; a token GitHub refuses (401) is
dropped and one fresh token is tried before the call is refused."""

from __future__ import annotations

import base64
import re
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sentinel_domain.forge import (
    CHECK_SUMMARY_LIMIT,
    ChangedFiles,
    CheckRun,
    ForgeDocument,
    ForgeRefused,
    PublishedCheck,
)
from sentinel_service.adapters.github_auth import AppCredentials, InstallationToken, parse_expiry
from sentinel_service.adapters.github_http import Answer, GitHubHttp, GitHubRefused

COMPARE_FILE_LIMIT = 300  # GitHub: "up to 300 changed files for the entire comparison"
PULL_FILES_LIMIT = 3000  # GitHub: "Responses include a maximum of 3000 files"
PULL_FILES_PER_PAGE = 100
TREE_MAX_BYTES = 16 * 1024 * 1024  # a recursive tree is at most 7 MB by GitHub's rule; room for JSON overhead
DEFAULT_MAX_DOCUMENT_BYTES = 2 * 1024 * 1024
# What the installation token may do: no more than the app needs, whatever the app was granted.
TOKEN_PERMISSIONS = {"checks": "write", "contents": "read", "pull_requests": "read", "metadata": "read"}

REPOSITORY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
COMMIT = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
TRUNCATED_MARK = "\n\n…(summary truncated at GitHub's limit)"


def _repo_path(repository: str) -> str:
    if not REPOSITORY.match(repository) or repository.split("/")[1] in {".", ".."}:
        raise ForgeRefused(f"not a GitHub repository name: {repository[:120]!r}")
    return "/repos/" + repository


def _commit(sha: str) -> str:
    if not COMMIT.match(sha):
        raise ForgeRefused(f"not a full commit id: {sha[:80]!r}")
    return sha


def _file_path(path: str) -> str:
    """`path` quoted for the contents URL, after refusing what is not a plain repository path."""
    segments = path.split("/")
    if (
        not path
        or len(path) > 4096
        or any(s in {"", ".", ".."} for s in segments)
        or any(ord(c) < 32 or c == "\x7f" for c in path)
    ):
        raise ForgeRefused(f"not a repository file path: {path[:120]!r}")
    return "/".join(urllib.parse.quote(s, safe="") for s in segments)


def _file_entry_paths(entries: object, where: str) -> list[str]:
    """The paths of a compare or pull-request file list: each file's name and, for a rename or copy, its
    previous name too (a rename changes both paths)."""
    if not isinstance(entries, list):
        raise GitHubRefused(f"GitHub's {where} has no file list")
    paths = []
    for entry in entries:
        name = entry.get("filename") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise GitHubRefused(f"GitHub's {where} lists a file without a name")
        paths.append(name)
        previous = entry.get("previous_filename")
        if isinstance(previous, str) and previous:
            paths.append(previous)
    return paths


class GitHubApp:
    """The Forge port for one app installation. Nothing is read or called at construction."""

    def __init__(
        self,
        http: GitHubHttp,
        credentials: AppCredentials,
        *,
        max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
    ) -> None:
        self.http = http
        self.credentials = credentials
        self.max_document_bytes = max_document_bytes

    @classmethod
    def build(
        cls,
        api_url: str,
        app_id: int,
        installation_id: int,
        read_key: Callable[[], bytes],
        clock: Callable[[], datetime],
        **options: Any,
    ) -> GitHubApp:
        http = GitHubHttp(api_url, clock_seconds=lambda: clock().timestamp())
        return cls(http, AppCredentials(app_id, installation_id, read_key, clock), **options)

    def __repr__(self) -> str:
        return f"GitHubApp({self.http.base_url!r}, {self.credentials!r})"

    # ---- authentication ----------------------------------------------------------------------------------

    def _mint(self, jwt: str) -> InstallationToken:
        path = f"/app/installations/{self.credentials.installation_id}/access_tokens"
        answer = self.http.call("POST", path, token=jwt, body={"permissions": TOKEN_PERMISSIONS})
        body = answer.json()
        try:
            return InstallationToken(str(body["token"]), parse_expiry(body["expires_at"]))
        except (KeyError, TypeError, ValueError):
            raise GitHubRefused("GitHub's installation token answer has no token or expiry") from None

    def _call(self, method: str, path: str, **kwargs: Any) -> Answer:
        token = self.credentials.token(self._mint)
        try:
            return self.http.call(method, path, token=token, **kwargs)
        except GitHubRefused as refused:
            if refused.status != 401:
                raise
            # Revoked or rotated behind our back: one fresh token, then GitHub's word stands.
            self.credentials.forget(token)
            return self.http.call(method, path, token=self.credentials.token(self._mint), **kwargs)

    def _json_object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        body = self._call(method, path, **kwargs).json()
        if not isinstance(body, dict):
            raise GitHubRefused(f"GitHub's answer to {method} {path} is not an object")
        return body

    # ---- changed files -----------------------------------------------------------------------------------

    def changed_files(self, repository: str, base: str, head: str) -> ChangedFiles:
        repo = _repo_path(repository)
        base, head = _commit(base), _commit(head)
        # One commit per page: the files come whole on the first page, the commits are not needed.
        compare = self._json_object(
            "GET", f"{repo}/compare/{base}...{head}", query={"per_page": "1", "page": "1"}
        )
        files = compare.get("files")
        if isinstance(files, list) and len(files) < COMPARE_FILE_LIMIT:
            return ChangedFiles(base, head, _sorted(_file_entry_paths(files, "comparison")), True, "compare")
        merge_base = compare.get("merge_base_commit")
        tree = _nested(merge_base, "commit", "tree", "sha")
        if not isinstance(tree, str):
            raise GitHubRefused("GitHub's comparison names no merge base")
        return self._tree_diff(repo, base, head, tree)

    def pull_request_files(self, repository: str, number: int, base: str, head: str) -> ChangedFiles:
        """The pull request's own file list (up to 3,000 entries); a list that reaches GitHub's cap falls
        back to `changed_files`, which diffs the trees when it must."""
        repo = _repo_path(repository)
        base, head = _commit(base), _commit(head)
        if not isinstance(number, int) or number < 1:
            raise ForgeRefused("not a pull request number")
        paths: list[str] = []
        listed = 0
        for page in range(1, PULL_FILES_LIMIT // PULL_FILES_PER_PAGE + 1):
            query = {"per_page": str(PULL_FILES_PER_PAGE), "page": str(page)}
            entries = self._call("GET", f"{repo}/pulls/{number}/files", query=query).json()
            paths += _file_entry_paths(entries, "pull request file list")
            listed += len(entries)
            if len(entries) < PULL_FILES_PER_PAGE:
                break
        if listed >= PULL_FILES_LIMIT:
            return self.changed_files(repository, base, head)
        return ChangedFiles(base, head, _sorted(paths), True, "pull_files")

    def pull_request_author(self, repository: str, number: int) -> str | None:
        """`GET /repos/{owner}/{repo}/pulls/{number}`'s `user.login`; None for a pull request GitHub does not
        know (404), any other refusal raised."""
        repo = _repo_path(repository)
        if type(number) is not int or number < 1:
            raise ForgeRefused("not a pull request number")
        try:
            pull = self._json_object("GET", f"{repo}/pulls/{number}")
        except GitHubRefused as refused:
            if refused.status == 404:
                return None
            raise
        login = _nested(pull, "user", "login")
        return login if isinstance(login, str) and login else None

    def _tree_diff(self, repo: str, base: str, head: str, start_tree: str) -> ChangedFiles:
        """The paths whose entry differs between the merge base's tree and the head commit's tree."""
        head_commit = self._json_object("GET", f"{repo}/git/commits/{head}")
        head_tree = _nested(head_commit, "tree", "sha")
        if not isinstance(head_tree, str):
            raise GitHubRefused("GitHub's commit answer names no tree")
        before = self._tree(repo, start_tree)
        after = self._tree(repo, head_tree) if head_tree != start_tree else before
        if before is None or after is None:
            return ChangedFiles(base, head, (), False, "tree_diff")
        changed = [path for path in before.keys() | after.keys() if before.get(path) != after.get(path)]
        return ChangedFiles(base, head, _sorted(changed), True, "tree_diff")

    def _tree(self, repo: str, tree_sha: str) -> dict[str, tuple[str, str, str]] | None:
        """{path: (type, mode, sha)} of every non-tree entry, or None when GitHub truncated the tree."""
        answer = self._call(
            "GET", f"{repo}/git/trees/{_commit(tree_sha)}", query={"recursive": "1"}, max_bytes=TREE_MAX_BYTES
        ).json()
        if not isinstance(answer, dict) or not isinstance(answer.get("tree"), list):
            raise GitHubRefused("GitHub's tree answer has no entries")
        if answer.get("truncated") is not False:
            return None
        entries: dict[str, tuple[str, str, str]] = {}
        for entry in answer["tree"]:
            if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
                raise GitHubRefused("GitHub's tree lists an entry without a path")
            if entry.get("type") == "tree":
                continue  # a directory changes only through what it holds
            entries[entry["path"]] = (str(entry.get("type")), str(entry.get("mode")), str(entry.get("sha")))
        return entries

    # ---- documents ---------------------------------------------------------------------------------------

    def read_file(self, repository: str, revision: str, path: str) -> ForgeDocument:
        repo = _repo_path(repository)
        revision = _commit(revision)
        try:
            answer = self._json_object("GET", f"{repo}/contents/{_file_path(path)}", query={"ref": revision})
        except GitHubRefused as refused:
            if refused.status != 404:
                raise
            # "Not found" is the file's absence only when GitHub knows the commit: a commit it cannot see
            # (or a repository the installation cannot) raises here instead of passing for a missing file.
            self._json_object("GET", f"{repo}/git/commits/{revision}")
            return ForgeDocument(path, revision, None)
        if answer.get("type") != "file":
            raise ForgeRefused(f"{path} at {revision[:12]} is a {answer.get('type')}, not a file")
        size = answer.get("size")
        if not isinstance(size, int) or size > self.max_document_bytes:
            raise ForgeRefused(f"{path} at {revision[:12]} is larger than {self.max_document_bytes} bytes")
        content, encoding = answer.get("content"), answer.get("encoding")
        if encoding == "base64" and isinstance(content, str) and (content or size == 0):
            data = _base64(content)
        else:
            # Over 1 MB the contents API answers without content: read the blob itself, raw.
            sha = answer.get("sha")
            if not isinstance(sha, str):
                raise GitHubRefused(f"GitHub's contents answer for {path} names no blob")
            data = self._call(
                "GET",
                f"{repo}/git/blobs/{_commit(sha)}",
                accept="application/vnd.github.raw+json",
                max_bytes=self.max_document_bytes,
            ).body
        if len(data) != size:
            raise GitHubRefused(f"GitHub's contents of {path} do not have the size it announced")
        try:
            return ForgeDocument(path, revision, data.decode("utf-8"))
        except UnicodeDecodeError:
            raise ForgeRefused(f"{path} at {revision[:12]} is not UTF-8 text") from None

    # ---- check runs --------------------------------------------------------------------------------------

    def publish_check(self, repository: str, check: CheckRun) -> PublishedCheck:
        repo = _repo_path(repository)
        summary = check.summary
        if len(summary) > CHECK_SUMMARY_LIMIT:
            summary = summary[: CHECK_SUMMARY_LIMIT - len(TRUNCATED_MARK)] + TRUNCATED_MARK
        body: dict[str, Any] = {
            "name": check.name,
            "status": "completed",
            "conclusion": check.conclusion,
            "output": {"title": check.title, "summary": summary},
        }
        if check.external_id:
            body["external_id"] = check.external_id
        if check.details_url:
            body["details_url"] = check.details_url
        if check.check_run_id is None:
            body["head_sha"] = _commit(check.head_sha)
            answer = self._json_object("POST", f"{repo}/check-runs", body=body)
        else:
            if not check.check_run_id.isdigit():
                raise ForgeRefused(f"not a check run id: {check.check_run_id[:40]!r}")
            answer = self._json_object("PATCH", f"{repo}/check-runs/{check.check_run_id}", body=body)
        run_id = answer.get("id")
        if not isinstance(run_id, int):
            raise GitHubRefused("GitHub's check run answer has no id")
        html_url = answer.get("html_url")
        return PublishedCheck(str(run_id), html_url if isinstance(html_url, str) else "")


def _sorted(paths: list[str]) -> tuple[str, ...]:
    return tuple(sorted(set(paths)))


def _nested(value: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _base64(content: str) -> bytes:
    try:
        return base64.b64decode("".join(content.split()), validate=True)
    except ValueError:
        raise GitHubRefused("GitHub's file content is not base64") from None
