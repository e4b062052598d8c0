"""The promote step on an emulated Lambda (moto, in-process): `live` moves to the `next` versions only after a
passing acceptance run of exactly those versions for exactly the built digests; every planted fault leaves the
previous versions serving, and a promotion that breaks off half-way puts back what it moved.

(moto's CloudFormation creates no Lambda alias, so these functions, versions and aliases are made with the
Lambda API, as a deploy would leave them: `live` on the version serving, `next` on the one just published.)"""

import base64
import hashlib
import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sentinel_acceptance.promote import (
    EVERY_FUNCTION,
    PROMOTED,
    PromotionFailed,
    PromotionRefused,
    aliases,
    promote,
)
from sentinel_acceptance.target import BuiltPackage
from sentinel_service import names

STACK = "Sentinel-test"
REGION = "us-east-1"


def a_zip(text: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("sentinel_service/__init__.py", text)
    return buffer.getvalue()


def built_package(key: str, data: bytes) -> BuiltPackage:
    digest = hashlib.sha256(data).digest()
    return BuiltPackage(key, key, Path(key), digest.hex(), base64.b64encode(digest).decode())


@dataclass
class Deployed:
    lam: Any
    functions: dict[str, str]
    built: dict[str, BuiltPackage]
    reports: Path

    def live(self) -> dict[str, str | None]:
        return aliases(self.lam, self.functions, names.LIVE_ALIAS)

    def publish(self, function: str, code: bytes) -> str:
        """A new version of one function behind `next` (what a later deploy, or a planted fault, does)."""
        name = self.functions[function]
        self.lam.update_function_code(FunctionName=name, ZipFile=code)
        version = self.lam.publish_version(FunctionName=name)["Version"]
        self.lam.update_alias(FunctionName=name, Name=names.NEXT_ALIAS, FunctionVersion=version)
        return str(version)

    def report(self, **changes: Any) -> Path:
        """An attempt report as the gate writes it after checking `next`: passed, for this build."""
        body: dict[str, Any] = {
            "schema": "sentinel.acceptance.attempt/1",
            "status": "passed",
            "failing_checks": [],
            "target": {"kind": "aws", "stack": STACK, "alias": names.NEXT_ALIAS},
            "digests": {
                "built": {
                    k: {"sha256": p.sha256, "code_sha256": p.code_sha256} for k, p in self.built.items()
                },
                "deployed": {fn: {"version": "2"} for fn in EVERY_FUNCTION},
            },
        }
        for key, value in changes.items():
            body[key] = value
        number = len(list(self.reports.glob("attempt-*.json"))) + 1
        path = self.reports / f"attempt-{number:04d}.json"
        path.write_text(json.dumps(body))
        return path


@pytest.fixture
def deployed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    """Seven functions after a deploy: version 1 (the previous build) behind `live`, version 2 (this build)
    behind `next`, both with the two built layers."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    import boto3
    from moto import mock_aws

    with mock_aws():
        iam = boto3.client("iam", region_name=REGION)
        role = iam.create_role(RoleName="fn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        lam = boto3.client("lambda", region_name=REGION)
        core, deps, previous, current = a_zip("core"), a_zip("deps"), a_zip("previous"), a_zip("current")
        layers = [
            lam.publish_layer_version(LayerName=name, Content={"ZipFile": data})["LayerVersionArn"]
            for name, data in (("core", core), ("deps", deps))
        ]
        functions = {fn: f"{STACK}-{fn}" for fn in PROMOTED}
        for name in functions.values():
            lam.create_function(
                FunctionName=name,
                Runtime="python3.13",
                Role=role,
                Handler="sentinel_service.handlers.x.handler",
                Code={"ZipFile": previous},
                Layers=layers,
                Publish=True,
            )
            lam.create_alias(FunctionName=name, Name=names.LIVE_ALIAS, FunctionVersion="1")
            lam.update_function_code(FunctionName=name, ZipFile=current)
            assert lam.publish_version(FunctionName=name)["Version"] == "2"
            lam.create_alias(FunctionName=name, Name=names.NEXT_ALIAS, FunctionVersion="2")
        reports = tmp_path / "reports"
        reports.mkdir()
        built = {
            "functions": built_package("functions", current),
            "core_layer": built_package("core_layer", core),
            "deps_layer": built_package("deps_layer", deps),
        }
        yield Deployed(lam, functions, built, reports)


def run_promote(world: Deployed, lam: Any = None) -> Any:
    return promote(lam or world.lam, STACK, world.functions, world.built, world.reports)


def test_a_passing_run_of_next_promotes_every_function_to_the_accepted_version(deployed: Deployed) -> None:
    # Given a deploy (live on version 1, next on 2) and a passing acceptance run of next for this build
    report = deployed.report()
    # When the promote step runs
    done = run_promote(deployed)
    # Then every function's live alias serves the accepted version, and the previous ones are on record
    assert deployed.live() == {fn: "2" for fn in PROMOTED}
    assert done.previous == {fn: "1" for fn in PROMOTED}
    record = json.loads(report.with_name("promotion-0001.json").read_text())
    assert record["live"] == {fn: "2" for fn in PROMOTED} and record["report"] == str(report)


@pytest.mark.parametrize(
    ("fault", "changes", "says"),
    [
        (
            "failing health",
            {"status": "failed", "failing_checks": ["health"]},
            "did not pass (health)",
        ),
        (
            "an open route",
            {"status": "failed", "failing_checks": ["auth_refusals", "route_integrations"]},
            "did not pass (auth_refusals, route_integrations)",
        ),
        (
            "a run of live, not next",
            {"target": {"stack": STACK, "alias": names.LIVE_ALIAS}},
            "checked 'live'",
        ),
        (
            "a run of another stack",
            {"target": {"stack": "Sentinel-prod", "alias": names.NEXT_ALIAS}},
            "checked",
        ),
    ],
)
def test_without_a_passing_run_of_next_for_this_stack_live_does_not_move(
    deployed: Deployed, fault: str, changes: dict[str, Any], says: str
) -> None:
    # Given an acceptance report with a planted fault
    deployed.report(**changes)
    # When the promote step runs, then it refuses, saying why
    with pytest.raises(PromotionRefused, match=says.replace("(", r"\(").replace(")", r"\)")):
        run_promote(deployed)
    # And the previous versions keep serving
    assert deployed.live() == {fn: "1" for fn in PROMOTED}, fault


def test_a_run_that_accepted_other_packages_promotes_nothing(deployed: Deployed) -> None:
    # Given a passing run, recorded for another build's digests
    other = {k: {"sha256": "0" * 64, "code_sha256": p.code_sha256} for k, p in deployed.built.items()}
    deployed.report(digests={"built": other, "deployed": {fn: {"version": "2"} for fn in EVERY_FUNCTION}})
    # When the promote step runs, then it refuses and live does not move
    with pytest.raises(PromotionRefused, match="other packages"):
        run_promote(deployed)
    assert deployed.live() == {fn: "1" for fn in PROMOTED}


def test_a_wrong_package_behind_an_accepted_version_promotes_nothing(deployed: Deployed) -> None:
    # Given a planted fault: one function's next version runs another zip than the build's
    version = deployed.publish("gating", a_zip("tampered"))
    deployed.report(
        digests={
            "built": {
                k: {"sha256": p.sha256, "code_sha256": p.code_sha256} for k, p in deployed.built.items()
            },
            "deployed": {fn: {"version": version if fn == "gating" else "2"} for fn in EVERY_FUNCTION},
        }
    )
    # When the promote step runs, then it reads the code again, refuses, and live does not move
    with pytest.raises(PromotionRefused, match=f"{STACK}-gating:{version} runs CodeSha256"):
        run_promote(deployed)
    assert deployed.live() == {fn: "1" for fn in PROMOTED}


def test_a_deploy_between_acceptance_and_promotion_promotes_nothing(deployed: Deployed) -> None:
    # Given a passing run of next, then another deploy that moved next before the promotion
    deployed.report()
    deployed.publish("plans", a_zip("current"))
    # When the promote step runs, then it refuses: what next serves now was not accepted
    with pytest.raises(PromotionRefused, match="no longer names the accepted versions"):
        run_promote(deployed)
    assert deployed.live() == {fn: "1" for fn in PROMOTED}


def test_a_promotion_that_breaks_off_half_way_puts_back_what_it_moved(deployed: Deployed) -> None:
    # Given a passing run, and Lambda failing the fourth alias update
    deployed.report()

    class Flaky:
        def __init__(self, real: Any) -> None:
            self.real, self.updates = real, 0

        def update_alias(self, **kwargs: Any) -> Any:
            self.updates += 1
            if self.updates == 4:
                raise ConnectionError("the network dropped")
            return self.real.update_alias(**kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

    # When the promote step runs, then it fails, saying live is unchanged
    with pytest.raises(PromotionFailed, match="live is unchanged"):
        run_promote(deployed, Flaky(deployed.lam))
    # And no mix serves: every function is back on the previous version
    assert deployed.live() == {fn: "1" for fn in PROMOTED}
    # And a second promotion, once Lambda answers, completes
    run_promote(deployed)
    assert deployed.live() == {fn: "2" for fn in PROMOTED}


def test_a_background_function_running_another_package_promotes_nothing(deployed: Deployed) -> None:
    # Given a passing run of the API's functions, and a planted fault in one the gate cannot call over HTTP:
    # the witness writer's next version runs another zip
    deployed.report()
    version = deployed.publish(names.WITNESS_WRITER_FUNCTION, a_zip("tampered"))
    # When the promote step runs, then it reads that version's code too, refuses, and live does not move
    with pytest.raises(PromotionRefused, match=f"witness_writer:{version} runs CodeSha256"):
        run_promote(deployed)
    assert deployed.live() == {fn: "1" for fn in PROMOTED}


def test_before_the_first_deploy_no_version_is_live_and_the_deploy_pins_none(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    from sentinel_acceptance.__main__ import main

    # Given a stack that does not exist yet, when make deploy reads what its live aliases serve
    assert main(["live-versions", "--stack", "Sentinel-notyet", "--region", REGION]) == 0
    # Then it reads nothing, so the first deploy starts live on its first versions
    assert json.loads(capsys.readouterr().out) == {}
    # And promoting it is refused: there is nothing to promote
    assert main(["promote", "--stack", "Sentinel-notyet", "--region", REGION]) == 1
    assert "does not exist" in capsys.readouterr().err
