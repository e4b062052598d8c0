"""The example workflow: Node 22, every action pinned by a commit (its tag in a comment), no persisted
credentials, the least permissions, the pinned CPython 3.13 for the bytecode, and the reports uploaded
from where the gate writes them. (`zizmor --offline .github/workflows/deploy.yml` finds nothing either: run
it where zizmor is installed; it is not a dependency of this project.)"""

import re
from typing import Any

import yaml

from sentinel_acceptance.report import DEFAULT_REPORTS
from sentinel_infra import runtime
from support.infra import REPO

WORKFLOW = REPO / ".github" / "workflows" / "deploy.yml"
PINNED = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def steps() -> list[dict[str, Any]]:
    return [step for job in workflow()["jobs"].values() for step in job["steps"]]


def test_every_action_is_pinned_by_a_commit_with_its_tag_beside_it() -> None:
    # Given every `uses:` line of the workflow
    lines = [line.strip() for line in WORKFLOW.read_text().splitlines() if "uses:" in line]
    assert lines
    for line in lines:
        # Then it names a full commit SHA, never a movable tag or branch, and says which release that was
        reference, _, comment = line.removeprefix("- ").removeprefix("uses:").strip().partition("#")
        assert PINNED.match(reference.strip()), line
        assert re.match(r"^\s*v\d+\.\d+\.\d+$", comment), line


def test_node_22_the_pinned_python_3_13_and_no_persisted_credentials() -> None:
    for step in steps():
        uses, given = step.get("uses", ""), step.get("with", {})
        # Then Node is 22 (the pinned CDK CLI no longer supports 20)
        if uses.startswith("actions/setup-node@"):
            assert str(given["node-version"]) == "22"
        # And Python is 3.11 for the project with the pinned 3.13 beside it for the packages' bytecode
        if uses.startswith("actions/setup-python@"):
            versions = str(given["python-version"]).split()
            assert versions == [runtime.BYTECODE_PYTHON, "3.11"]
        # And no checkout leaves the token in the clone's git config
        if uses.startswith("actions/checkout@"):
            assert given.get("persist-credentials") is False
        # And the attempt reports are uploaded from where the gate writes them
        if uses.startswith("actions/upload-artifact@"):
            assert REPO / given["path"] == DEFAULT_REPORTS


def test_permissions_are_none_by_default_and_only_what_each_job_needs() -> None:
    # Given the workflow, then it grants nothing by default
    flow = workflow()
    assert flow["permissions"] == {}
    # And the test job only reads the repository; the deploy job also gets the OIDC token for AWS
    assert flow["jobs"]["test"]["permissions"] == {"contents": "read"}
    assert flow["jobs"]["deploy"]["permissions"] == {"contents": "read", "id-token": "write"}
    # And no `run:` step expands a context expression into the shell (template injection)
    assert not [s["run"] for s in steps() if "run" in s and "${{" in s["run"]]


def test_the_deploy_job_deploys_behind_the_gate() -> None:
    # Given the deploy job's steps, then its one deployment step is `make deploy`, which promotes only after
    # the gate passes (tests/infrastructure/test_checks.py checks the order of make deploy's steps)
    runs = [s["run"] for s in workflow()["jobs"]["deploy"]["steps"] if "run" in s]
    assert len(runs) == 1 and runs[0].startswith("make deploy")
