"""`sentinel projects` and `sentinel principals` against a DynamoDB-compatible endpoint (moto's server)."""

import json

import pytest

from sentinel_runner.cli import main
from sentinel_runner.embedded import EmbeddedStore


@pytest.fixture(scope="module")
def endpoint():
    store = EmbeddedStore()
    url = store.start()
    yield url
    store.stop()


@pytest.fixture
def run(endpoint, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SENTINEL_TOKEN_KEY_FILE", str(tmp_path / "token.key"))
    monkeypatch.setenv("SENTINEL_STATE_TABLE", f"state-{tmp_path.name}")
    monkeypatch.setenv("SENTINEL_PRINCIPALS_TABLE", f"principals-{tmp_path.name}")
    (tmp_path / "token.key").write_text("ab" * 32)

    def sentinel(*argv: str) -> tuple[int, str, str]:
        code = main([*argv[:2], "--dynamodb-endpoint", endpoint, *argv[2:]])
        out, err = capsys.readouterr()
        return code, out, err

    return sentinel


def test_principals_add_prints_the_new_token_alone(run) -> None:
    # Given a project
    assert run("projects", "create", "--id", "shop")[0] == 0
    # When a ci principal is added with two roles
    code, out, _err = run(
        "principals",
        "add",
        "--id",
        "ci-bot",
        "--kind",
        "ci",
        "--project",
        "shop",
        "--role",
        "publisher",
        "--project",
        "shop",
        "--role",
        "requester",
    )
    # Then standard output is the token alone, in the documented format
    assert code == 0
    token = out.strip()
    assert out == token + "\n" and token.startswith("snt_") and len(token) == 4 + 43 + 6


def test_refusals_are_explained_and_change_nothing(run) -> None:
    run("projects", "create", "--id", "shop")
    code, out, err = run(
        "principals", "add", "--id", "bot", "--kind", "agent", "--project", "shop", "--role", "reviewer"
    )
    assert code == 1 and out == "" and "ROLE_NOT_ALLOWED" in err
    code, _out, err = run(
        "principals",
        "add",
        "--id",
        "bot",
        "--kind",
        "agent",
        "--sponsor",
        "nobody",
        "--project",
        "shop",
        "--role",
        "requester",
    )
    assert code == 1 and "SPONSOR_INVALID" in err
    code, _out, err = run(
        "principals", "add", "--id", "bot", "--kind", "human", "--project", "ghost", "--role", "admin"
    )
    assert code == 1 and "NOT_FOUND" in err
    code, _out, err = run("projects", "create", "--id", "shop")
    assert code == 1 and "exists" in err
    assert run("principals", "list")[1] == ""


def test_list_never_shows_a_token_and_revoke_and_rotate_are_audited(run) -> None:
    run("projects", "create", "--id", "shop")
    token = run(
        "principals", "add", "--id", "rita", "--kind", "human", "--project", "shop", "--role", "reviewer"
    )[1].strip()
    new_token = run("principals", "rotate", "--id", "rita", "--yes")[1].strip()
    assert new_token != token and new_token.startswith("snt_")
    code, out, _err = run("principals", "revoke", "--id", "rita", "--compromised", "--yes")
    assert code == 0 and json.loads(out)["compromised"] is True
    listing = run("principals", "list")[1]
    assert token not in listing and new_token not in listing and "hmac" not in listing
    assert json.loads(listing.splitlines()[0])["revoked"] is True
    code, _out, err = run(
        "principals", "add", "--id", "rita", "--kind", "human", "--project", "shop", "--role", "reviewer"
    )
    assert code == 1 and "PRINCIPAL_EXISTS" in err


def test_principal_changes_append_to_the_chain_of_each_project_they_hold_a_role_in(run, endpoint) -> None:
    from sentinel_domain.models import Actor
    from sentinel_domain.ports import StreamRef
    from sentinel_runner.runtime import connect

    run("projects", "create", "--id", "shop")
    run("projects", "create", "--id", "blog")
    run(
        "principals",
        "add",
        "--id",
        "aud",
        "--kind",
        "human",
        "--project",
        "shop",
        "--role",
        "auditor",
        "--project",
        "blog",
        "--role",
        "auditor",
    )
    run("principals", "revoke", "--id", "aud", "--yes")
    gate = connect(endpoint).gate
    auditor = Actor(id="x", kind="human", roles=("auditor",))
    for project in ("shop", "blog"):
        body = gate.audit(StreamRef(project), auditor, 500, None).as_json()
        assert [e["type"] for e in body["events"]] == [
            "project.created",
            "principal.added",
            "principal.revoked",
        ]
        assert body["verification"]["valid"] is True
