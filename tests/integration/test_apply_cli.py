"""`sentinel apply` and `sentinel export` against a real local gate: `sentinel serve` without `--seed` as a
child process, the project and its admin provisioned with the operator's commands, and the commands run as
the admin would run them (with `--json` parsed). An apply that fails changes nothing."""

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sentinel_client.api import SentinelClient
from sentinel_runner.cli import main
from support.paths import REPO

pytestmark = pytest.mark.http

EXAMPLE = REPO / "docs" / "examples" / "sentinel.yaml"


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A fresh gate on its own data directory, without the demo seed."""
    data = tmp_path_factory.mktemp("gate")
    process = subprocess.Popen(
        [sys.executable, "-m", "sentinel_runner.cli", "serve", "--data", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = json.loads(process.stdout.readline())
        yield {"url": banner["url"], "data": str(data)}
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def sentinel(gate, tmp_path: Path, monkeypatch, capsys):
    """`sentinel ARGS…` in-process, as a person whose environment names the gate; returns (code, out, err)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("SENTINEL_PROJECT", "SENTINEL_CONTEXT", "SENTINEL_TOKEN", "SENTINEL_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SENTINEL_URL", gate["url"])

    def run(*argv: str, token: str | None = None) -> tuple[int, str, str]:
        if token is not None:
            path = tmp_path / "token"
            path.write_text(token + "\n")
            path.chmod(0o600)
            monkeypatch.setenv("SENTINEL_TOKEN_FILE", str(path))
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


_PROJECTS = iter(f"shop-{n}" for n in range(1000))


@pytest.fixture
def project(gate, sentinel) -> dict[str, str]:
    """A new project with an admin (and a requester), provisioned by the operator's commands."""
    name = next(_PROJECTS)
    assert sentinel("projects", "create", "--id", name, "--data", gate["data"])[0] == 0
    tokens = {}
    for role in ("admin", "requester"):
        code, out, err = sentinel(
            "principals", "add", "--data", gate["data"], "--id", f"{name}-{role}", "--kind", "human",
            "--project", name, "--role", role,
        )  # fmt: skip
        assert code == 0, err
        tokens[role] = out.strip()
    return {"name": name, **tokens}


def example_for(project: str, tmp_path: Path, **config_changes: Any) -> Path:
    document = yaml.safe_load(EXAMPLE.read_text())
    document["project"] = project
    document["config"].update(config_changes)
    path = tmp_path / f"{project}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def chain_length(gate, project: dict[str, str]) -> int:
    client = SentinelClient(gate["url"], token=project["admin"])
    body = client.request("GET", f"/projects/{project['name']}/audit").body
    assert body["verification"]["valid"] is True, body
    return int(body["verification"]["length"])


def policies(gate, project: dict[str, str]) -> dict[str, int]:
    client = SentinelClient(gate["url"], token=project["admin"])
    return {p["policy_id"]: p["version"] for p in client.list_policies(project["name"]).body["policies"]}


def test_dry_run_shows_everything_new_and_writes_nothing(gate, sentinel, project, tmp_path) -> None:
    # Given a fresh project and the example file
    path = example_for(project["name"], tmp_path)
    before = chain_length(gate, project)
    # When the admin asks for a dry run, in words and in JSON
    code, out, err = sentinel("apply", "-f", str(path), "--dry-run", token=project["admin"])
    assert code == 0, err
    assert "config: new (version 1)" in out and "policy unit-tests: new" in out
    code, out, _err = sentinel("apply", "-f", str(path), "--dry-run", "--json")
    shown = json.loads(out)
    # Then it names the new configuration and policies, applied nothing, and nothing was written
    assert shown["dry_run"] is True and shown["applied"] is None
    assert shown["changes"]["config"]["status"] == "added"
    assert sorted(shown["changes"]["policies"]["added"]) == ["api-contract-tests", "lint", "unit-tests"]
    assert chain_length(gate, project) == before and policies(gate, project) == {}


def test_apply_then_export_round_trips_to_no_change(gate, sentinel, project, tmp_path) -> None:
    # Given the example applied to a fresh project
    path = example_for(project["name"], tmp_path)
    before = chain_length(gate, project)
    code, out, err = sentinel("apply", "-f", str(path), "--yes", "--json", token=project["admin"])
    assert code == 0, err
    applied = json.loads(out)["applied"]
    # Then it was one write: one event on the project chain, every version 1
    assert applied["config_version"] == 1 and applied["changed"]["config"] is True
    assert applied["policies"] == {"api-contract-tests": 1, "lint": 1, "unit-tests": 1}
    assert chain_length(gate, project) == before + 1
    # When the project is exported, as YAML and as JSON
    for name in ("exported.yaml", "exported.json"):
        code, out, err = sentinel(
            "export", "--project", project["name"], "-o", str(tmp_path / name), "--json"
        )
        assert code == 0, err
        assert json.loads(out)["policies"] == applied["policies"]
        # Then applying the export shows no change
        code, out, err = sentinel("apply", "-f", str(tmp_path / name), "--dry-run", "--json")
        assert code == 0, err
        changes = json.loads(out)["changes"]
        assert changes["config"]["status"] == "unchanged"
        assert changes["policies"]["added"] == {} and changes["policies"]["changed"] == {}
        assert sorted(changes["policies"]["unchanged"]) == sorted(applied["policies"])
    # And the export printed to standard output reads back as the same file
    code, out, err = sentinel("export", "--project", project["name"])
    assert code == 0 and out.startswith("# sentinel export: project "), err
    assert yaml.safe_load(out) == yaml.safe_load((tmp_path / "exported.yaml").read_text())
    # And applying the example again writes nothing
    code, out, err = sentinel("apply", "-f", str(path), "--yes")
    assert code == 0 and "no change" in out, err
    assert chain_length(gate, project) == before + 1


def test_a_change_is_applied_as_one_new_version(gate, sentinel, project, tmp_path) -> None:
    # Given an applied example
    sentinel("apply", "-f", str(example_for(project["name"], tmp_path)), "--yes", token=project["admin"])
    length = chain_length(gate, project)
    # When the file raises approvals and tightens one policy
    document = yaml.safe_load(example_for(project["name"], tmp_path, approvals_required=2).read_text())
    document["policies"]["unit-tests"]["min_tests"] = 3
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(document))
    code, out, err = sentinel("apply", "-f", str(path), "--yes")
    # Then the diff named exactly those keys, and one event recorded both
    assert code == 0, err
    assert "~ approvals_required: 1 → 2" in out and "~ min_tests: 1 → 3" in out
    assert "applied to" in out and "unit-tests v2" in out
    assert chain_length(gate, project) == length + 1
    assert policies(gate, project) == {"api-contract-tests": 1, "lint": 1, "unit-tests": 2}


def test_a_refused_apply_changes_nothing(gate, sentinel, project, tmp_path) -> None:
    # Given an applied example
    sentinel("apply", "-f", str(example_for(project["name"], tmp_path)), "--yes", token=project["admin"])
    length, versions = chain_length(gate, project), policies(gate, project)
    # When a file changes a policy but its configuration names a policy that exists nowhere
    document = yaml.safe_load(example_for(project["name"], tmp_path).read_text())
    document["policies"]["lint"]["min_tests"] = 0
    document["policies"]["lint"]["fail_message"] = "changed"
    document["config"]["unclassified_policy"] = "no-such-policy"
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(document))
    code, out, err = sentinel("apply", "-f", str(path), "--yes")
    # Then the gate refuses it in one line, and neither the policy nor the configuration changed
    assert code == 1 and out.count("\n") >= 1
    assert (
        err.startswith("error: VALIDATION_FAILED: unknown policies no-such-policy") and "Traceback" not in err
    )
    assert chain_length(gate, project) == length and policies(gate, project) == versions


def test_a_change_made_meanwhile_is_refused_with_the_next_step(
    gate, sentinel, project, tmp_path, monkeypatch
) -> None:
    # Given an applied example, and another admin who applies a change between this apply's read and write
    sentinel("apply", "-f", str(example_for(project["name"], tmp_path)), "--yes", token=project["admin"])
    other = yaml.safe_load(example_for(project["name"], tmp_path, approvals_required=3).read_text())
    original = SentinelClient.put_bundle

    def racing(self, name, body, if_match=None):
        meanwhile = original(self, name, {"config": other["config"], "policies": {}}, if_match=if_match)
        assert meanwhile.status == 201, meanwhile.body
        return original(self, name, body, if_match=if_match)

    monkeypatch.setattr(SentinelClient, "put_bundle", racing)
    length = chain_length(gate, project)
    # When this apply writes with the version it read
    path = example_for(project["name"], tmp_path, approvals_required=2)
    code, _out, err = sentinel("apply", "-f", str(path), "--yes")
    # Then it is refused: someone changed it, run again; only the other change was written
    assert code == 1
    assert err.startswith("error: VERSION_CONFLICT: ") and "next: run apply again to see the new diff" in err
    assert chain_length(gate, project) == length + 1


def test_an_invalid_file_is_refused_before_any_request(sentinel, tmp_path, monkeypatch) -> None:
    # Given a file with a wrong type, and a URL where nothing listens (any request would be UNREACHABLE)
    document = yaml.safe_load(EXAMPLE.read_text())
    document["config"]["approvals_required"] = "two"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(document))
    monkeypatch.setenv("SENTINEL_URL", "http://127.0.0.1:9")
    code, out, err = sentinel("apply", "-f", str(path), "--dry-run", token="snt_" + "A" * 49)
    # Then the refusal names the file and the path, and a next step
    assert (code, out) == (1, "")
    first, second = err.splitlines()
    assert first.startswith(f"error: VALIDATION_FAILED: {path}:config.approvals_required: ")
    assert second.startswith("next: fix the file")


def test_without_confirmation_off_a_terminal_nothing_is_applied(gate, sentinel, project, tmp_path) -> None:
    path = example_for(project["name"], tmp_path)
    before = chain_length(gate, project)
    code, _out, err = sentinel("apply", "-f", str(path), token=project["admin"])
    assert code == 1 and err.startswith("error: CONFIRMATION_REQUIRED: ")
    assert chain_length(gate, project) == before


def test_a_requester_may_not_apply(gate, sentinel, project, tmp_path) -> None:
    path = example_for(project["name"], tmp_path)
    sentinel("apply", "-f", str(path), "--yes", token=project["admin"])
    # The reads are open to any role; the write is not
    changed = example_for(project["name"], tmp_path, approvals_required=2)
    code, _out, err = sentinel("apply", "-f", str(changed), "--yes", token=project["requester"])
    assert code == 1 and err.startswith("error: FORBIDDEN_ROLE: ")


def test_export_of_a_project_without_configuration_says_what_to_do(gate, sentinel, project) -> None:
    code, out, err = sentinel("export", "--project", project["name"], token=project["admin"])
    assert (code, out) == (1, "")
    assert err.startswith("error: NOT_FOUND: ") and "next: write a sentinel.yaml" in err


def test_a_gate_that_does_not_answer_is_one_line_and_exit_3(sentinel, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SENTINEL_URL", "http://127.0.0.1:9")
    code, _out, err = sentinel("apply", "-f", str(EXAMPLE), "--dry-run", token="snt_" + "A" * 49)
    assert code == 3 and err.startswith("error: UNREACHABLE: ") and "Traceback" not in err


def test_attack_a_policy_tightened_meanwhile_is_not_reverted_by_an_apply_that_showed_it_unchanged(
    gate, sentinel, project, tmp_path, monkeypatch
) -> None:
    # Given an applied example, and another admin who tightens unit-tests between this apply's read and write
    sentinel("apply", "-f", str(example_for(project["name"], tmp_path)), "--yes", token=project["admin"])
    original = SentinelClient.put_bundle
    tightened = yaml.safe_load(EXAMPLE.read_text())["policies"]["unit-tests"] | {"min_tests": 5}

    def racing(self, name, body, if_match=None):
        meanwhile = self.put_policy(name, "unit-tests", tightened)
        assert meanwhile.status == 201, meanwhile.body
        return original(self, name, body, if_match=if_match)

    monkeypatch.setattr(SentinelClient, "put_bundle", racing)
    # When this apply, whose diff showed unit-tests unchanged, raises approvals_required only
    path = example_for(project["name"], tmp_path, approvals_required=2)
    code, out, err = sentinel("apply", "-f", str(path), "--yes")
    assert code == 0, err
    assert "policy unit-tests" not in out.split("applied")[0].replace("policies unchanged", "")
    # Then the tightened policy stands: nobody saw, or confirmed, a change of unit-tests back to min_tests 1
    client = SentinelClient(gate["url"], token=project["admin"])
    current = client.get_policy(project["name"], "unit-tests").body
    assert (current["version"], current["policy"]["min_tests"]) == (2, 5)
