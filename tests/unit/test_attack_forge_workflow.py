"""Attacks on the example workflow (docs/examples/github/sentinel.yml): a pull request's code runs in CI, so a
job that runs it must hold no Sentinel token. A step that runs the repository's code can plant a program for
the steps after it ($GITHUB_PATH, $GITHUB_ENV, the runner's files), so in a job that also publishes, the
publisher's token (trusted, verified evidence for any candidate of the project) is the pull request's."""

import yaml

from support.paths import REPO

EXAMPLE = REPO / "docs" / "examples" / "github" / "sentinel.yml"


def test_no_job_that_runs_the_repositorys_code_holds_a_sentinel_token() -> None:
    jobs = yaml.safe_load(EXAMPLE.read_text())["jobs"]
    for name, job in jobs.items():
        text = yaml.safe_dump(job)
        holds_secret = "secrets." in text
        checks_out = any(step.get("uses", "").startswith("actions/checkout@") for step in job["steps"])
        runs_code = checks_out and any("run" in step for step in job["steps"])
        # Then a job either runs the checked-out code or holds a token, never both
        assert not (holds_secret and runs_code), f"job {name} runs the repository's code and holds a secret"
