"""Exit-code evidence (DOMAIN.md rule 8): `result: {exit_code, artifacts}` judged at write time by
evidence.judge against the policy's expected exit code and expected artifact patterns. It passes only when
the exit code is the expected one and every expected pattern is matched by an artifact (each artifact carries
its sha256; the model refuses one without). Its raw_sha256 is that of the RFC 8785 form of `result`."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
import rfc8785
from pydantic import ValidationError

from sentinel_domain.evidence import EvidenceRefused, judge
from sentinel_domain.models import EvidenceRequest, Policy
from support.world import ADMIN, CI, LINT_POLICY, PROJECT, REQUESTER, REV, START, World

SHA = "a" * 64
OTHER_SHA = "b" * 64


def policy(expected_exit_code: int = 0, expected_artifacts: tuple[str, ...] = ()) -> Policy:
    return Policy.model_validate(
        dict(LINT_POLICY, expected_exit_code=expected_exit_code, expected_artifacts=list(expected_artifacts))
    )


def request(exit_code=0, artifacts=(), **overrides) -> EvidenceRequest:
    body = {
        "check_id": "C1",
        "subject": "payments",
        "revision": REV,
        "environment": "staging",
        "scope": ["docs"],
        "observed_at": START.isoformat(),
        "source": {"system": "ci"},
        "result": {"exit_code": exit_code, "artifacts": [{"name": n, "sha256": s} for n, s in artifacts]},
    }
    body.update(overrides)
    return EvidenceRequest.model_validate(body)


def outcome(req: EvidenceRequest, pol: Policy | None) -> str:
    return judge(req, pol)[0]


# ---- exit codes ------------------------------------------------------------------------------------------


def test_the_expected_exit_code_with_no_expected_artifacts_passes():
    result, counts, _sha, kind = judge(request(0), policy())
    # Then it passes, as exit-code evidence with no test counts
    assert (result, kind) == ("pass", "exit_code")
    assert counts == {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}


@pytest.mark.parametrize(
    ("expected", "actual", "verdict"),
    [(0, 1, "fail"), (0, 255, "fail"), (1, 1, "pass"), (1, 0, "fail"), (2, 2, "pass")],
)
def test_any_exit_code_but_the_policys_fails(expected, actual, verdict):
    # Given a policy expecting one exit code (a linter that signals findings with 1 can expect 1)
    # When evidence reports another, Then it fails; the expected one passes
    assert outcome(request(actual), policy(expected_exit_code=expected)) == verdict


@pytest.mark.parametrize("exit_code", ["0", 0.0, True, -1, 256, None])
def test_an_exit_code_that_is_not_an_integer_from_0_to_255_is_refused_by_the_model(exit_code):
    # Given "0", 0.0, true, -1, 256 or null (strict: JSON text is never coerced into an exit code)
    # When the request is validated, Then it is refused before it is judged
    with pytest.raises(ValidationError):
        request(exit_code)


# ---- artifacts -------------------------------------------------------------------------------------------


def test_every_expected_artifact_present_passes_one_missing_fails():
    pol = policy(expected_artifacts=("coverage.xml", "dist/*.whl"))
    both = [("coverage.xml", SHA), ("dist/app-1.0-py3-none-any.whl", OTHER_SHA)]
    assert outcome(request(0, both), pol) == "pass"
    assert outcome(request(0, both[:1]), pol) == "fail"
    assert outcome(request(0, both[1:]), pol) == "fail"
    assert outcome(request(0, []), pol) == "fail"


def test_a_missing_artifact_fails_even_with_the_right_exit_code_and_a_wrong_code_fails_with_all_artifacts():
    pol = policy(expected_artifacts=("report.json",))
    assert outcome(request(0, [("other.json", SHA)]), pol) == "fail"
    assert outcome(request(1, [("report.json", SHA)]), pol) == "fail"


@pytest.mark.parametrize(
    ("pattern", "name", "present"),
    [
        ("dist/*.whl", "dist/app.whl", True),
        ("dist/*.whl", "dist/nested/app.whl", False),  # * stays inside one folder, like derivation globs
        ("dist/**/*.whl", "dist/nested/deeper/app.whl", True),
        ("dist/**/*.whl", "dist/app.whl", True),
        ("*.xml", "reports/junit.xml", False),
        ("coverage.xml", "./coverage.xml", True),  # a leading ./ is the same file
        ("coverage.xml", "Coverage.xml", False),  # names are case-sensitive
        ("reports/?.txt", "reports/a.txt", True),
        ("reports/?.txt", "reports/ab.txt", False),
    ],
)
def test_expected_artifact_patterns_are_the_projects_globs(pattern, name, present):
    # Given a policy expecting one pattern and evidence naming one artifact
    # When it is judged, Then the artifact satisfies the pattern only as the derivation globs would match it
    assert outcome(request(0, [(name, SHA)]), policy(expected_artifacts=(pattern,))) == (
        "pass" if present else "fail"
    )


def test_an_artifact_without_a_valid_sha256_is_refused_by_the_model():
    for digest in ("", "abc", "A" * 64, "g" * 64, None):
        with pytest.raises(ValidationError):
            request(0, [("coverage.xml", digest)])
    with pytest.raises(ValidationError):
        EvidenceRequest.model_validate(
            {
                "check_id": "C1",
                "subject": "payments",
                "revision": REV,
                "environment": "staging",
                "scope": ["docs"],
                "observed_at": START.isoformat(),
                "source": {"system": "ci"},
                "result": {"exit_code": 0, "artifacts": [{"name": "coverage.xml"}]},
            }
        )


def test_one_artifact_listed_with_two_digests_is_refused():
    # Given the same artifact named twice with different digests (which one was produced?)
    req = request(0, [("coverage.xml", SHA), ("./coverage.xml", OTHER_SHA)])
    # When it is judged, Then it is refused and nothing can be stored
    with pytest.raises(EvidenceRefused) as caught:
        judge(req, policy(expected_artifacts=("coverage.xml",)))
    assert caught.value.code == "MALFORMED_EVIDENCE"
    # And the same artifact named twice with one digest is simply present
    assert (
        outcome(
            request(0, [("coverage.xml", SHA), ("coverage.xml", SHA)]),
            policy(expected_artifacts=("coverage.xml",)),
        )
        == "pass"
    )


# ---- what is stored ---------------------------------------------------------------------------------------


def test_without_a_policy_exit_code_evidence_is_unknown_never_pass():
    # Given evidence for a check no plan names (so no policy to judge it by)
    # When it is judged, Then nothing is expected of it and nothing can pass
    assert outcome(request(0, [("coverage.xml", SHA)]), None) == "unknown"


def test_raw_sha256_is_the_sha256_of_the_rfc_8785_form_of_result():
    req = request(3, [("b.txt", OTHER_SHA), ("a.txt", SHA)])
    expected = hashlib.sha256(
        rfc8785.dumps(
            {
                "exit_code": 3,
                "artifacts": [{"name": "b.txt", "sha256": OTHER_SHA}, {"name": "a.txt", "sha256": SHA}],
            }
        )
    ).hexdigest()
    assert judge(req, policy())[2] == expected


@pytest.mark.parametrize("both", [True, False])
def test_exactly_one_of_junit_xml_or_result(both):
    body = {"junit_xml": "<testsuite><testcase/></testsuite>"} if both else {"result": None}
    with pytest.raises(EvidenceRefused) as caught:
        judge(request(0, **body), policy())
    assert caught.value.code == "VALIDATION_FAILED"


def test_exit_code_evidence_decides_a_zero_test_policy_through_the_gate():
    # Given a lint obligation (min_tests 0) whose policy expects a report artifact, a plan and an approval
    world = World()
    cid = world.candidate(files=("docs/guide.md",))["candidate_id"]
    gate = world.gate
    gate.put_policy(PROJECT, "lint", ADMIN, policy(expected_artifacts=("lint/report.json",)))
    state = gate.get_candidate(PROJECT, cid, CI).as_json()
    obligation = state["obligations"][0]
    plan = {
        "tasks": [
            {
                "task_id": "T1",
                "title": "lint",
                "checks": [
                    {
                        "check_id": "C1",
                        "policy_ref": "lint",
                        "command": "ruff check docs",
                        "expected_exit_code": 0,
                        "covers": [obligation["obligation_id"]],
                    }
                ],
            }
        ]
    }
    gate.put_plan(PROJECT, cid, REQUESTER, plan, None)
    observed = (START + timedelta(seconds=1)).isoformat()
    # When the trusted publisher posts exit-code evidence without the artifact, then with it
    missing = gate.post_evidence(
        PROJECT, cid, CI, request(0, [("lint/other.json", SHA)], observed_at=observed), None
    ).as_json()
    present = gate.post_evidence(
        PROJECT, cid, CI, request(0, [("lint/report.json", SHA)], observed_at=observed), None
    ).as_json()
    # Then the first is stored as a failure and the second as a pass, both verified and bound
    assert (missing["outcome"], missing["trust"]) == ("fail", "verified")
    assert (present["outcome"], present["trust"]) == ("pass", "verified")
    assert present["binding"]["obligation_ids"] == [obligation["obligation_id"]]
    assert present["binding"]["policy_version"] == 2
