"""The operator's reads over the store, once on each store (the embedded SQLite store in a data directory, and
DynamoDB on moto's server): `sentinel projects list` and `sentinel principals list --project P --kind K`."""

import json
from pathlib import Path

import pytest

from sentinel_runner.cli import main
from sentinel_runner.embedded import EmbeddedStore


@pytest.fixture(scope="module")
def endpoint():
    store = EmbeddedStore()
    url = store.start()
    yield url
    store.stop()


@pytest.fixture(params=["sqlite", "dynamodb"])
def run(request, tmp_path: Path, monkeypatch, capsys):
    if request.param == "sqlite":
        where = ["--data", str(tmp_path / "data")]
    else:
        monkeypatch.setenv("SENTINEL_TOKEN_KEY_FILE", str(tmp_path / "token.key"))
        monkeypatch.setenv("SENTINEL_STATE_TABLE", f"state-{tmp_path.name}")
        monkeypatch.setenv("SENTINEL_PRINCIPALS_TABLE", f"principals-{tmp_path.name}")
        (tmp_path / "token.key").write_text("ab" * 32)
        where = ["--dynamodb-endpoint", request.getfixturevalue("endpoint")]

    def sentinel(*argv: str) -> tuple[int, str, str]:
        code = main([*argv[:2], *where, *argv[2:]])
        out, err = capsys.readouterr()
        return code, out, err

    return sentinel


def _principals(out: str) -> list[str]:
    return [json.loads(line)["id"] for line in out.splitlines()]


def _world(run) -> None:
    for project in ("shop", "demo"):
        assert run("projects", "create", "--id", project)[0] == 0
    added = [
        ("hank", "human", None, [("shop", "requester"), ("demo", "reviewer")]),
        ("rita", "human", None, [("shop", "reviewer")]),
        ("ci-bot", "ci", None, [("shop", "publisher")]),
        ("agent-7", "agent", "hank", [("demo", "requester")]),
    ]
    for principal_id, kind, sponsor, roles in added:
        argv = ["principals", "add", "--id", principal_id, "--kind", kind]
        argv += ["--sponsor", sponsor] if sponsor else []
        for project, role in roles:
            argv += ["--project", project, "--role", role]
        assert run(*argv)[0] == 0


def test_projects_list_names_each_project_with_its_chain_candidates_and_principals(run) -> None:
    # Given two projects, four principals (one revoked)
    _world(run)
    assert run("principals", "revoke", "--id", "rita", "--yes")[0] == 0
    # When the operator lists the projects as JSON
    code, out, err = run("projects", "list", "--json")
    # Then each project is listed once, its chain verifies, and its principals are counted
    assert code == 0, err
    projects = {p["project"]: p for p in json.loads(out)["projects"]}
    assert sorted(projects) == ["demo", "shop"]
    shop = projects["shop"]
    assert shop["chain_valid"] is True and shop["candidates"] == 0
    # shop: project.created, hank, rita, ci-bot added, rita revoked
    assert shop["chain_length"] == 5
    assert (shop["principals"], shop["revoked_principals"]) == (2, 1)
    assert (projects["demo"]["principals"], projects["demo"]["revoked_principals"]) == (2, 0)


def test_projects_list_in_words_is_a_table(run) -> None:
    _world(run)
    code, out, _err = run("projects", "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["PROJECT", "EVENTS", "CHAIN", "CANDIDATES", "PRINCIPALS"]
    assert [line.split()[0] for line in lines[1:]] == ["demo", "shop"]


def test_principals_list_filters_by_project_and_kind(run) -> None:
    # Given principals across two projects and three kinds
    _world(run)
    # When the operator filters
    everyone = run("principals", "list")[1]
    shop = run("principals", "list", "--project", "shop")[1]
    shop_humans = run("principals", "list", "--project", "shop", "--kind", "human")[1]
    agents = run("principals", "list", "--kind", "agent")[1]
    nobody = run("principals", "list", "--project", "nowhere")[1]
    # Then each filter keeps exactly its principals, in the unfiltered listing's shape (one object a line)
    assert _principals(everyone) == ["agent-7", "ci-bot", "hank", "rita"]
    assert _principals(shop) == ["ci-bot", "hank", "rita"]
    assert _principals(shop_humans) == ["hank", "rita"]
    assert _principals(agents) == ["agent-7"]
    assert nobody == ""
    listed = [json.loads(line) for line in everyone.splitlines()]
    assert all("snt_" not in line and "hash" not in line for line in everyone.splitlines())
    assert all(set(p) >= {"id", "kind", "sponsor", "roles", "revoked"} for p in listed)
