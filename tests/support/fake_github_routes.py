"""The fake GitHub's repository routes: what each documented operation answers, built on the smallest
instance of its documented response schema with the meaningful fields set from the fake's world (the whole
answer is then validated by the fake against the same schema)."""

from __future__ import annotations

import base64
from collections import deque
from typing import TYPE_CHECKING, Any

from support.github_description import Operation

if TYPE_CHECKING:
    from support.fake_github import Answer, FakeGitHub, Repository

API = "https://api.github.invalid"
WEB = "https://github.invalid"


def route(
    fake: FakeGitHub,
    op: Operation,
    repo: Repository,
    params: dict[str, str],
    query: dict[str, list[str]],
    headers: dict[str, str],
    body: Any,
) -> Answer:
    from support.fake_github import Answer, _error

    accept = {k.lower(): v for k, v in headers.items()}.get("accept", "")
    handlers = {
        "repos/compare-commits": lambda: _compare(fake, op, repo, params, query),
        "pulls/list-files": lambda: _pull_files(fake, op, repo, params, query),
        "pulls/get": lambda: _pull(fake, op, repo, params),
        "git/get-tree": lambda: _tree(fake, op, repo, params["tree_sha"], query),
        "git/get-commit": lambda: _git_commit(fake, op, repo, params["commit_sha"]),
        "git/get-blob": lambda: _blob(fake, op, repo, params["file_sha"], accept),
        "repos/get-content": lambda: _contents(fake, op, repo, params["path"], query),
        "checks/create": lambda: _create_run(fake, op, repo, body),
        "checks/update": lambda: _update_run(fake, op, repo, int(params["check_run_id"]), body),
    }
    handler = handlers.get(op.operation_id)
    if handler is None:
        fake.violations.append(f"{op.method} {op.template}: the fake GitHub does not model this operation")
        return _error(404, "Not Found")
    answer: Answer = handler()
    assert isinstance(answer, Answer)
    return answer


def _one(query: dict[str, list[str]], name: str, default: int) -> int:
    values = query.get(name)
    return int(values[-1]) if values and values[-1].isdigit() else default


# ---- objects ---------------------------------------------------------------------------------------------


def repository_object(fake: FakeGitHub, repo: Repository) -> dict[str, Any]:
    owner, name = repo.full_name.split("/")
    value = fake.description.instance(fake.description.at("#/components/schemas/repository"))
    value.update(id=repo.id, name=name, full_name=repo.full_name, private=True)
    value["owner"] = _user(fake, owner)
    return value


def _user(fake: FakeGitHub, login: str) -> dict[str, Any]:
    value = fake.description.instance(fake.description.at("#/components/schemas/simple-user"))
    value.update(login=login, id=abs(hash(login)) % 10**6 + 1, type="User")
    return value


def _commit_object(fake: FakeGitHub, repo: Repository, sha: str) -> dict[str, Any]:
    commit = repo.commits[sha]
    value = fake.description.instance(fake.description.at("#/components/schemas/commit"))
    value.update(
        sha=sha,
        url=f"{API}/repos/{repo.full_name}/commits/{sha}",
        html_url=f"{WEB}/{repo.full_name}/commit/{sha}",
    )
    value["commit"]["message"] = commit.message
    value["commit"]["tree"] = {
        "sha": commit.tree_sha,
        "url": f"{API}/repos/{repo.full_name}/git/trees/{commit.tree_sha}",
    }
    value["parents"] = [
        {"sha": p, "url": f"{API}/repos/{repo.full_name}/commits/{p}"} for p in commit.parents
    ]
    return value


def _ancestors(repo: Repository, sha: str) -> list[str]:
    """`sha` and its ancestors, nearest first."""
    seen: list[str] = []
    queue = deque([sha])
    while queue:
        current = queue.popleft()
        if current in seen:
            continue
        seen.append(current)
        queue.extend(repo.commits[current].parents)
    return seen


def merge_base(repo: Repository, base: str, head: str) -> str | None:
    behind = set(_ancestors(repo, base))
    return next((sha for sha in _ancestors(repo, head) if sha in behind), None)


def diff_entries(fake: FakeGitHub, repo: Repository, start: str, head: str) -> list[dict[str, Any]]:
    """GitHub's file list from `start` to `head`, sorted by path; an exact rename is one `renamed` entry."""
    from support.fake_github import git_blob_sha

    before, after = repo.commits[start].files, repo.commits[head].files
    removed = {p: git_blob_sha(c) for p, c in before.items() if p not in after}
    added = {p: git_blob_sha(c) for p, c in after.items() if p not in before}
    renamed: dict[str, str] = {}
    for new_path, sha in sorted(added.items()):
        old_path = next(
            (p for p, s in sorted(removed.items()) if s == sha and p not in renamed.values()), None
        )
        if old_path is not None:
            renamed[new_path] = old_path
    entries = []
    for path in sorted(before.keys() | after.keys()):
        if path in renamed.values():
            continue
        if path in renamed:
            status = "renamed"
        elif path in added:
            status = "added"
        elif path in removed:
            status = "removed"
        elif before[path] != after[path]:
            status = "modified"
        else:
            continue
        content = after.get(path, before.get(path, b""))
        entry = {
            "sha": git_blob_sha(content),
            "filename": path,
            "status": status,
            "additions": 1 if status != "removed" else 0,
            "deletions": 1 if status != "added" else 0,
            "changes": 2 if status == "modified" else 1,
            "blob_url": f"{WEB}/{repo.full_name}/blob/{head}/{path}",
            "raw_url": f"{WEB}/{repo.full_name}/raw/{head}/{path}",
            "contents_url": f"{API}/repos/{repo.full_name}/contents/{path}?ref={head}",
        }
        if status == "renamed":
            entry["previous_filename"] = renamed[path]
        entries.append(entry)
    return entries


# ---- routes ----------------------------------------------------------------------------------------------


def _compare(
    fake: FakeGitHub, op: Operation, repo: Repository, params: dict[str, str], query: dict[str, list[str]]
) -> Answer:
    from support.fake_github import Answer, _error

    base, head = params.get("base"), params.get("head")
    if base is None or head is None:
        base, _, head = params.get("basehead", "").partition("...")
    if base not in repo.commits or head not in repo.commits:
        return _error(404, "Not Found")
    start = merge_base(repo, base, head)
    if start is None:
        return _error(404, f"No common ancestor between {base} and {head}.")
    ahead = _ancestors(repo, head)
    ahead = ahead[: ahead.index(start)] if start in ahead else ahead
    behind = _ancestors(repo, base)
    behind = behind[: behind.index(start)] if start in behind else behind
    status = "identical" if base == head else "ahead" if not behind else "behind" if not ahead else "diverged"
    per_page, page = _one(query, "per_page", 250), _one(query, "page", 1)
    chronological = list(reversed(ahead))
    value = fake.description.response_instance(op, 200)
    value.update(
        url=f"{API}/repos/{repo.full_name}/compare/{base}...{head}",
        status=status,
        ahead_by=len(ahead),
        behind_by=len(behind),
        total_commits=len(ahead),
        base_commit=_commit_object(fake, repo, base),
        merge_base_commit=_commit_object(fake, repo, start),
        commits=[
            _commit_object(fake, repo, s) for s in chronological[(page - 1) * per_page : page * per_page]
        ],
    )
    if page == 1:  # GitHub: "the list of changed files is only shown on the first page of results"
        value["files"] = diff_entries(fake, repo, start, head)[: fake.compare_file_cap]
    return Answer(200, value)


def _pull_files(
    fake: FakeGitHub, op: Operation, repo: Repository, params: dict[str, str], query: dict[str, list[str]]
) -> Answer:
    from support.fake_github import Answer, _error

    number = int(params["pull_number"])
    if number not in repo.pulls:
        return _error(404, "Not Found")
    base, head = repo.pulls[number]
    start = merge_base(repo, base, head) or base
    listed = diff_entries(fake, repo, start, head)[: fake.pull_files_cap]
    per_page, page = min(_one(query, "per_page", 30), 100), _one(query, "page", 1)
    return Answer(200, listed[(page - 1) * per_page : page * per_page])


def _pull(fake: FakeGitHub, op: Operation, repo: Repository, params: dict[str, str]) -> Answer:
    from support.fake_github import Answer, _error

    number = int(params["pull_number"])
    if number not in repo.pulls:
        return _error(404, "Not Found")
    base, head = repo.pulls[number]
    value = fake.description.response_instance(op, 200)
    value["number"] = number
    value["user"]["login"] = repo.pull_authors.get(number, "octocat")
    value["base"]["sha"], value["head"]["sha"] = base, head
    return Answer(200, value)


def _tree(
    fake: FakeGitHub, op: Operation, repo: Repository, tree_sha: str, query: dict[str, list[str]]
) -> Answer:
    from support.fake_github import Answer, _error, git_blob_sha

    commit_sha = repo.trees.get(tree_sha) or (tree_sha if tree_sha in repo.commits else None)
    if commit_sha is None:
        return _error(404, "Not Found")
    commit = repo.commits[commit_sha]
    entries: list[dict[str, Any]] = []
    directories: set[str] = set()
    for path, content in sorted(commit.files.items()):
        parts = path.split("/")
        for depth in range(1, len(parts)):
            directories.add("/".join(parts[:depth]))
        sha = git_blob_sha(content)
        entries.append(
            {
                "path": path,
                "mode": "100644",
                "type": "blob",
                "sha": sha,
                "size": len(content),
                "url": f"{API}/repos/{repo.full_name}/git/blobs/{sha}",
            }
        )
    for directory in sorted(directories):
        entries.append(
            {
                "path": directory,
                "mode": "040000",
                "type": "tree",
                "sha": "0" * 40,
                "url": f"{API}/repos/{repo.full_name}/git/trees/{directory}",
            }
        )
    if "recursive" not in query:
        entries = [e for e in entries if "/" not in e["path"]]
    entries.sort(key=lambda e: e["path"])
    truncated = len(entries) > fake.tree_entry_cap
    value = fake.description.response_instance(op, 200)
    value.update(
        sha=commit.tree_sha,
        url=f"{API}/repos/{repo.full_name}/git/trees/{commit.tree_sha}",
        truncated=truncated,
        tree=entries[: fake.tree_entry_cap],
    )
    return Answer(200, value)


def _git_commit(fake: FakeGitHub, op: Operation, repo: Repository, sha: str) -> Answer:
    from support.fake_github import Answer, _error

    if sha not in repo.commits:
        return _error(404, "Not Found")
    commit = repo.commits[sha]
    value = fake.description.response_instance(op, 200)
    value.update(
        sha=sha,
        message=commit.message,
        url=f"{API}/repos/{repo.full_name}/git/commits/{sha}",
        html_url=f"{WEB}/{repo.full_name}/commit/{sha}",
    )
    value["tree"] = {
        "sha": commit.tree_sha,
        "url": f"{API}/repos/{repo.full_name}/git/trees/{commit.tree_sha}",
    }
    value["parents"] = [
        {
            "sha": p,
            "url": f"{API}/repos/{repo.full_name}/git/commits/{p}",
            "html_url": f"{WEB}/{repo.full_name}/commit/{p}",
        }
        for p in commit.parents
    ]
    return Answer(200, value)


def _find_blob(repo: Repository, sha: str) -> bytes | None:
    from support.fake_github import git_blob_sha

    for commit in repo.commits.values():
        for content in commit.files.values():
            if git_blob_sha(content) == sha:
                return content
    return None


def _blob(fake: FakeGitHub, op: Operation, repo: Repository, sha: str, accept: str) -> Answer:
    from support.fake_github import Answer, _error

    content = _find_blob(repo, sha)
    if content is None:
        return _error(404, "Not Found")
    if "raw" in accept:
        return Answer(200, raw=content)
    value = fake.description.response_instance(op, 200)
    value.update(
        sha=sha,
        size=len(content),
        encoding="base64",
        content=base64.b64encode(content).decode(),
        url=f"{API}/repos/{repo.full_name}/git/blobs/{sha}",
    )
    return Answer(200, value)


def _contents(
    fake: FakeGitHub, op: Operation, repo: Repository, path: str, query: dict[str, list[str]]
) -> Answer:
    from support.fake_github import LARGE_FILE_BYTES, Answer, _error, git_blob_sha

    ref = (query.get("ref") or [""])[-1]
    if ref not in repo.commits:
        return _error(404, f"No commit found for the ref {ref}")
    files = repo.commits[ref].files
    if path not in files:
        return _error(404, "Not Found")
    content = files[path]
    sha = git_blob_sha(content)
    value = fake.description.instance(fake.description.at("#/components/schemas/content-file"))
    large = len(content) > LARGE_FILE_BYTES
    value.update(
        type="file",
        name=path.rsplit("/", 1)[-1],
        path=path,
        sha=sha,
        size=len(content),
        encoding="none" if large else "base64",
        # GitHub wraps base64 at 60 columns with newlines; a reader must accept that.
        content="" if large else "\n".join(_chunks(base64.b64encode(content).decode(), 60)),
        url=f"{API}/repos/{repo.full_name}/contents/{path}?ref={ref}",
    )
    return Answer(200, value)


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _run_answer(fake: FakeGitHub, op: Operation, status: int, run: dict[str, Any]) -> Answer:
    from support.fake_github import Answer

    value = fake.description.response_instance(op, status)
    value.update({k: v for k, v in run.items() if k in value and k != "output"})
    value["output"] = dict(
        value["output"], title=run["output"].get("title"), summary=run["output"].get("summary")
    )
    value["html_url"] = f"{WEB}/{run['full_name']}/runs/{run['id']}"
    value["app"] = dict(value["app"] or {}, id=fake.app_id) if value.get("app") is not None else value["app"]
    return Answer(status, value)


def _create_run(fake: FakeGitHub, op: Operation, repo: Repository, body: Any) -> Answer:
    from support.fake_github import _error

    if not isinstance(body, dict) or body.get("head_sha") not in repo.commits:
        return _error(422, "No commit found for SHA: " + str((body or {}).get("head_sha")))
    if body.get("status") == "completed" and "conclusion" not in body:
        return _error(422, "conclusion is required when status is completed")
    run = {
        "id": next(fake._ids),
        "repository": repo.full_name.lower(),
        "full_name": repo.full_name,
        "name": body["name"],
        "head_sha": body["head_sha"],
        "status": "completed" if "conclusion" in body else body.get("status", "queued"),
        "conclusion": body.get("conclusion"),
        "external_id": body.get("external_id"),
        "details_url": body.get("details_url"),
        "output": dict(body.get("output") or {}),
        "history": [body],
    }
    fake._runs[run["id"]] = run
    return _run_answer(fake, op, 201, run)


def _update_run(fake: FakeGitHub, op: Operation, repo: Repository, run_id: int, body: Any) -> Answer:
    from support.fake_github import _error

    run = fake._runs.get(run_id)
    if run is None or run["repository"] != repo.full_name.lower() or not isinstance(body, dict):
        return _error(404, "Not Found")
    if body.get("status") == "completed" and "conclusion" not in body:
        return _error(422, "conclusion is required when status is completed")
    for key in ("name", "external_id", "details_url", "conclusion"):
        if key in body:
            run[key] = body[key]
    if "conclusion" in body:
        run["status"] = "completed"
    if "output" in body:
        run["output"] = dict(body["output"])
    run["history"].append(body)
    return _run_answer(fake, op, 200, run)
