"""The CI publisher's pieces without a service: durations, when waiting stops, the backoff, where a run is
seen, and how report files become one piece of evidence."""

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from sentinel_client.ci_evidence import (
    Refused,
    _files,
    artifacts,
    ci_revision,
    ci_source,
    evidence,
    junit_report,
)
from sentinel_client.ci_gate import _keep_receipt, save_receipt
from sentinel_client.ci_wait import (
    FIRST_INTERVAL_SECONDS,
    MAX_INTERVAL_SECONDS,
    PERSON_ONLY,
    Clock,
    parse_duration,
    stop_reason,
    wait,
)
from sentinel_client.verdicts import Verdict
from sentinel_domain.junit import parse_junit


def verdict(state: str, *codes: str) -> Verdict:
    return Verdict("t", state, "cand_1", [{"code": code} for code in codes])


def test_durations() -> None:
    assert [parse_duration(t) for t in ("90s", "30m", "1h", "1h30m", "2m5s")] == [90, 1800, 3600, 5400, 125]
    for bad in ("", "30", "0s", "7h", "1d", "m", "-5s", "1.5m"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_waiting_stops_on_ready_person_only_holds_and_incurable_errors() -> None:
    assert stop_reason(verdict("ready")) == "ready"
    assert stop_reason(verdict("hold", "EVIDENCE_MISSING", "REVIEW_MISSING")) == (
        "a hold only a person can resolve (REVIEW_MISSING)"
    )
    # What automation can still change keeps the wait going
    for code in (
        "NO_CANDIDATE",
        "CHANGE_CONTEXT_UNVERIFIED",
        "PLAN_MISSING",
        "EVIDENCE_MISSING",
        "EVIDENCE_NEGATIVE",
        "EVIDENCE_UNTRUSTED",
        "TASK_NOT_REPORTED",
        "STATE_UNAVAILABLE",
    ):
        assert code not in PERSON_ONLY and stop_reason(verdict("hold", code)) is None
    assert stop_reason(verdict("error", "UNREACHABLE")) is None
    assert stop_reason(verdict("error", "TOKEN_REFUSED")) == "an error waiting cannot cure (TOKEN_REFUSED)"


class FakeClock:
    def __init__(self, jitter: float = 1.0) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []
        self.clock = Clock(now=lambda: self.t, sleep=self.sleep, jitter=lambda: jitter)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


def test_backoff_doubles_to_its_bound_and_the_deadline_ends_the_wait() -> None:
    # Given a decision that never changes
    fake, said = FakeClock(), []
    reason = wait(lambda: verdict("hold", "EVIDENCE_MISSING"), 300, said.append, fake.clock)
    # Then the sleeps double from the first interval up to the bound, the last one cut at the deadline
    assert reason == "deadline"
    assert fake.sleeps[:6] == [2, 4, 8, 16, 32, 60] and max(fake.sleeps) == MAX_INTERVAL_SECONDS
    assert sum(fake.sleeps) == 300
    # And progress is printed once (nothing changed), then the reason
    assert said == ["[0m00s] hold: EVIDENCE_MISSING", "[5m00s] stopped waiting: the deadline of 5m00s passed"]


def test_jitter_shortens_sleeps_to_between_half_and_all_of_the_interval() -> None:
    fake = FakeClock(jitter=0.0)
    wait(lambda: verdict("hold", "EVIDENCE_MISSING"), 10, lambda _l: None, fake.clock)
    assert fake.sleeps[:3] == [1, 2, 4]


def test_progress_is_printed_when_the_decision_changes_and_the_backoff_restarts() -> None:
    # Given a decision that moves from no candidate to missing evidence to ready
    answers = iter(
        [verdict("hold", "NO_CANDIDATE")] * 3 + [verdict("hold", "EVIDENCE_MISSING")] * 2 + [verdict("ready")]
    )
    fake, said = FakeClock(), []
    reason = wait(lambda: next(answers), 600, said.append, fake.clock)
    # Then each change is one line with the elapsed time, and the interval starts again after a change
    assert reason == "ready"
    assert said == [
        "[0m00s] hold: NO_CANDIDATE",
        "[0m14s] hold: EVIDENCE_MISSING",
        "[0m20s] ready: no findings",
        "[0m20s] stopped waiting: ready",
    ]
    assert fake.sleeps == [2, 4, 8, FIRST_INTERVAL_SECONDS, 4]


def test_the_run_url_comes_from_github_variables_and_source_url_overrides_it() -> None:
    github = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_REPOSITORY": "acme/payments",
        "GITHUB_RUN_ID": "42",
        "GITHUB_RUN_ATTEMPT": "2",
    }
    assert ci_source(github) == {
        "system": "github-actions",
        "run_id": "42/2",
        "url": "https://github.example/acme/payments/actions/runs/42/attempts/2",
    }
    assert ci_source(github, "https://ci.example/r/1")["url"] == "https://ci.example/r/1"
    assert ci_source({}) == {"system": "ci", "run_id": "", "url": ""}
    with pytest.raises(Refused):
        ci_source({}, "https://a b")


JUNIT = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="{n}"><testcase name="a"/>{extra}</testsuite>'
)


def test_one_junit_file_is_sent_as_it_is_and_several_as_one_report(tmp_path: Path) -> None:
    first = tmp_path / "a.xml"
    first.write_text(JUNIT.format(n="a", extra=""))
    second = tmp_path / "b.xml"
    second.write_text(JUNIT.format(n="b", extra='<testcase name="f"><failure/></testcase>'))
    # One file: byte for byte, so the service's raw_sha256 is the file's
    assert junit_report([first]) == first.read_text()
    # Several: one report holding both, whose failure is not hidden by the passing file
    merged = junit_report([first, second])
    summary = parse_junit(merged)
    assert (summary.tests, summary.failures, summary.outcome) == (3, 1, "fail")


def test_a_report_with_a_dtd_or_not_utf8_or_a_glob_with_no_file_is_refused(tmp_path: Path) -> None:
    dtd = tmp_path / "dtd.xml"
    dtd.write_text('<!DOCTYPE x [<!ENTITY e "e">]><testsuite/>')
    latin = tmp_path / "latin.xml"
    latin.write_bytes(b"<testsuite name='\xe9'/>")
    for path, code in ((dtd, "MALFORMED_EVIDENCE"), (latin, "MALFORMED_EVIDENCE")):
        with pytest.raises(Refused) as refused:
            junit_report([path])
        assert refused.value.code == code
    with pytest.raises(Refused) as none:
        _files([str(tmp_path / "nothing-*.xml")], "--junit")
    assert none.value.code == "NO_FILES"


def test_artifacts_are_named_by_their_matched_path_with_local_digests(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dist" / "sub").mkdir(parents=True)
    (tmp_path / "dist" / "app.whl").write_bytes(b"wheel")
    (tmp_path / "dist" / "sub" / "sbom.json").write_bytes(b"{}")
    assert artifacts(["dist/**/*.*"]) == [
        {"name": "dist/app.whl", "sha256": hashlib.sha256(b"wheel").hexdigest()},
        {"name": "dist/sub/sbom.json", "sha256": hashlib.sha256(b"{}").hexdigest()},
    ]


ENVELOPE = {"payloadType": "application/vnd.in-toto+json", "payload": "e30=", "signatures": [{"sig": "c2ln"}]}


def test_a_receipt_is_saved_owner_only_and_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "receipt.json"
    path.write_text("old")
    save_receipt(str(path), ENVELOPE)
    assert json.loads(path.read_text()) == ENVELOPE
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["receipt.json"]


def test_a_ready_decision_without_a_receipt_or_with_a_malformed_one_is_an_error(tmp_path: Path) -> None:
    path = str(tmp_path / "r.json")
    missing = _keep_receipt(Verdict("t", "ready", "cand_1"), path)
    assert (missing.state, missing.findings[0]["code"]) == ("error", "RECEIPT_MISSING")
    malformed = _keep_receipt(Verdict("t", "ready", "cand_1", receipt={"payload": "x"}), path)
    assert (malformed.state, malformed.findings[0]["code"]) == ("error", "BAD_RESPONSE")
    # A hold needs no receipt and writes nothing
    assert _keep_receipt(Verdict("t", "hold", "cand_1"), path).state == "hold"
    assert not (tmp_path / "r.json").exists()


def test_a_report_that_cannot_be_read_publishes_nothing(tmp_path: Path, monkeypatch) -> None:
    # Given a report the glob matches but the process cannot read (root reads any file, so the read fails
    # here by hand), and no user settings file
    monkeypatch.setenv("HOME", str(tmp_path))
    report = tmp_path / "unit.xml"
    report.write_text("<testsuite/>")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        Path,
        "read_bytes",
        lambda self: (_ for _ in ()).throw(PermissionError(13, "Permission denied", str(self))),
    )
    code, out, err = evidence(
        ["--revision", "a" * 40, "--policy", "p", "--scope", "s", "--junit", "*.xml"], {}
    )
    assert (code, out) == (2, "")
    assert err == "ERROR  nothing published: UNREADABLE\n  cannot read unit.xml: Permission denied\n"


def test_the_revision_comes_from_the_ci_the_pull_requests_head_not_githubs_merge_commit(
    tmp_path: Path,
) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"head": {"sha": "b" * 40}}}))
    github = {"GITHUB_ACTIONS": "true", "GITHUB_SHA": "c" * 40, "GITHUB_EVENT_PATH": str(event)}
    assert ci_revision(github | {"GITHUB_EVENT_NAME": "pull_request"}) == "b" * 40
    assert ci_revision(github | {"GITHUB_EVENT_NAME": "merge_group"}) == "c" * 40
    assert ci_revision({"GITLAB_CI": "true", "CI_COMMIT_SHA": "d" * 40}) == "d" * 40
    with pytest.raises(Refused):
        ci_revision(
            github | {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(tmp_path / "none")}
        )
    with pytest.raises(Refused) as elsewhere:
        ci_revision({})
    assert elsewhere.value.detail == "--revision is needed outside GitHub Actions and GitLab CI"
