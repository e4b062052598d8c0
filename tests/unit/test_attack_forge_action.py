"""Attacks on the composite action's verify mode (.github/actions/sentinel/action.yml): the deploy step's
check must use the key the workflow pins and the subject it deploys, whatever else the job's environment
holds. The action's run step is run by bash as the runner runs it, with a stand-in `sentinel` that records
the arguments it was given."""

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import yaml

from support.paths import REPO

REVISION = "a" * 40
PEM = "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----"


def run_step() -> dict[str, Any]:
    steps = yaml.safe_load((REPO / ".github/actions/sentinel/action.yml").read_text())["runs"]["steps"]
    return [s for s in steps if "run" in s][1]


def verify(tmp_path: Path, **given: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    runner_temp = tmp_path / "runner-temp"
    binary = runner_temp / "sentinel-client" / "bin" / "sentinel"
    binary.parent.mkdir(parents=True)
    argv = tmp_path / "argv"
    binary.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > {argv}\n')
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    step = run_step()
    env = {
        **dict.fromkeys(step["env"], ""),
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "RUNNER_TEMP": str(runner_temp),
        "SENTINEL_MODE": "verify",
        "SENTINEL_PROJECT": "demo",
        "SENTINEL_SUBJECT": "payments",
        "SENTINEL_ENVIRONMENT": "production",
        "SENTINEL_REVISION": REVISION,
        "SENTINEL_RECEIPT": str(tmp_path / "receipt.json"),
        **given,
    }
    ran = subprocess.run(
        ["bash", "-e", "-c", step["run"]], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    return ran, (argv.read_text().splitlines() if argv.exists() else [])


def test_verify_without_a_pinned_key_refuses_rather_than_trust_whatever_key_the_runner_holds(
    tmp_path: Path,
) -> None:
    # Given a deploy job whose `key` input is empty (an unset repository variable), on a runner where an
    # earlier step can set SENTINEL_RECEIPT_KEY_FILE or SENTINEL_DATA_DIR through $GITHUB_ENV, or write the
    # data directory's receipt.key (the verifier's default)
    # When the action verifies the receipt
    ran, argv = verify(tmp_path, SENTINEL_KEY="", SENTINEL_RECEIPT_KEY_FILE=str(tmp_path / "mine.key"))
    # Then it refuses before verifying anything, naming the missing input
    assert ran.returncode != 0 and argv == [], (ran.returncode, argv)
    assert "key" in ran.stdout + ran.stderr


def test_verify_names_the_subject_it_deploys_and_the_pinned_key(tmp_path: Path) -> None:
    # Given the deploy job's subject and pinned key
    ran, argv = verify(tmp_path, SENTINEL_KEY=PEM)
    # Then the verifier is asked for that subject, with that key
    assert ran.returncode == 0, ran.stderr
    assert argv[argv.index("--subject") + 1] == "payments"
    assert "--key" in argv
