"""A policy says which evidence it takes: `check_type` is `junit` or `exit_code`. Policies stored before the
enumeration (free text such as "unit" or "lint") read as `junit` when `min_tests` >= 1 and `exit_code`
otherwise, without a byte of their facts changing; evidence of a kind its policy does not take is marked at
write time and never decides."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from pydantic import ValidationError

from sentinel_domain.errors import Refusal
from sentinel_domain.models import EvidenceRequest, Policy, stored_check_type
from sentinel_domain.ports import StreamRef
from support.world import ADMIN, CI, LINT_POLICY, PROJECT, REQUESTER, REV, START, UNIT_POLICY, World


@pytest.mark.parametrize(
    ("stored", "min_tests", "reads_as"),
    [
        ("unit", 1, "junit"),
        ("lint", 0, "exit_code"),
        ("integration", 25, "junit"),
        ("build", 0, "exit_code"),
        ("junit", 3, "junit"),
        ("exit_code", 0, "exit_code"),
        (None, 2, "junit"),
        # written before the enumeration, naming a kind its minimum contradicts: the minimum decides
        ("junit", 0, "exit_code"),
        ("exit_code", 4, "junit"),
    ],
)
def test_a_stored_check_type_reads_as_the_enumeration(stored, min_tests, reads_as) -> None:
    # Given a policy as an earlier version stored it
    policy = dict(UNIT_POLICY, check_type=stored, min_tests=min_tests)
    # When it is read back, Then its check type is the one its minimum of tests demanded
    assert stored_check_type(policy) == reads_as
    assert Policy.stored(policy).check_type == reads_as


@pytest.mark.parametrize(
    ("check_type", "min_tests"), [("unit", 1), ("lint", 0), ("junit", 0), ("exit_code", 1), ("JUnit", 1)]
)
def test_a_new_policy_must_name_a_kind_that_agrees_with_its_minimum(check_type, min_tests) -> None:
    # Given free text, or a kind contradicting min_tests, When a new policy is validated, Then it is refused
    with pytest.raises(ValidationError):
        Policy.model_validate(dict(UNIT_POLICY, check_type=check_type, min_tests=min_tests))


def test_a_policy_stored_as_free_text_reads_normalised_and_its_chain_is_unchanged() -> None:
    # Given a project chain holding a policy.set fact written before the enumeration ("unit", "lint")
    world = World()
    legacy = dict(UNIT_POLICY, check_type="unit", min_tests=2)
    old_lint = dict(LINT_POLICY, check_type="lint")
    for pid, policy in (("legacy-tests", legacy), ("legacy-lint", old_lint)):
        world.gate.record_project_event(
            PROJECT, "policy.set", {"policy_id": pid, "version": 1, "policy": policy, "actor": ADMIN.fact()}
        )
    stream = world.gate.store.load(StreamRef(PROJECT))
    texts = dict(stream.facts)
    # When the policies are read through the gate
    tests = world.gate.get_policy(PROJECT, "legacy-tests", REQUESTER, None).as_json()
    lint = world.gate.get_policy(PROJECT, "legacy-lint", REQUESTER, None).as_json()
    listed = {
        p["policy_id"]: p["policy"]
        for p in world.gate.list_policies(PROJECT, REQUESTER).as_json()["policies"]
    }
    # Then they read as junit and exit_code
    assert (tests["policy"]["check_type"], lint["policy"]["check_type"]) == ("junit", "exit_code")
    assert listed["legacy-tests"]["check_type"] == "junit"
    # And the stored facts are byte for byte what was written, and the chain still verifies
    after = world.gate.store.load(StreamRef(PROJECT))
    assert dict(after.facts) == texts
    assert any(json.loads(t).get("policy", {}).get("check_type") == "unit" for t in texts.values())
    assert world.gate.verify(after).valid


# ---- evidence of the wrong kind ----------------------------------------------------------------------------


def _lint_candidate(world: World) -> tuple[str, str]:
    """An attested candidate owing only the lint policy (exit_code), planned and approved."""
    cid = world.candidate(files=("docs/guide.md",), by=CI)["candidate_id"]
    obligation = world.gate.get_candidate(PROJECT, cid, CI).as_json()["obligations"][0]
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
    world.gate.put_plan(PROJECT, cid, REQUESTER, plan, None)
    return cid, obligation["obligation_id"]


def _evidence(**kind: object) -> EvidenceRequest:
    return EvidenceRequest.model_validate(
        {
            "check_id": "C1",
            "subject": "payments",
            "revision": REV,
            "environment": "staging",
            "scope": ["docs"],
            "observed_at": (START + timedelta(seconds=1)).isoformat(),
            "source": {"system": "ci"},
            **kind,
        }
    )


PASSING_JUNIT = '<testsuite><testcase classname="docs" name="lint"/></testsuite>'


def test_a_junit_report_for_an_exit_code_policy_is_marked_and_never_decides() -> None:
    # Given a candidate whose only check is under the lint policy (check_type exit_code)
    world = World()
    cid, obligation = _lint_candidate(world)
    # When the trusted publisher posts a passing JUnit report for it
    posted = world.gate.post_evidence(PROJECT, cid, CI, _evidence(junit_xml=PASSING_JUNIT), None).as_json()
    # Then it is stored, verified and passing, but bound with the mismatch EVIDENCE_WRONG_KIND
    assert (posted["outcome"], posted["trust"]) == ("pass", "verified")
    assert posted["binding"]["mismatches"] == ["EVIDENCE_WRONG_KIND"]
    # And the decision holds with EVIDENCE_WRONG_KIND on that check, saying what the policy takes
    decision = world.gate.decision(PROJECT, cid, REQUESTER, None).as_json()
    wrong = [f for f in decision["findings"] if f["code"] == "EVIDENCE_WRONG_KIND"]
    assert [(f["obligation_id"], f["check_id"]) for f in wrong] == [(obligation, "C1")]
    assert "JUnit report" in wrong[0]["detail"] and "takes exit-code evidence" in wrong[0]["detail"]
    assert "EVIDENCE_MISSING" not in {f["code"] for f in decision["findings"]}
    # And exit-code evidence of the same run is not marked, and is what the check is judged by
    right = world.gate.post_evidence(
        PROJECT, cid, CI, _evidence(result={"exit_code": 0, "artifacts": []}), None
    ).as_json()
    assert right["binding"]["mismatches"] == []
    codes = {f["code"] for f in world.gate.decision(PROJECT, cid, REQUESTER, None).as_json()["findings"]}
    assert "EVIDENCE_WRONG_KIND" not in codes


def test_exit_code_evidence_for_a_junit_policy_keeps_rule_7s_too_few_tests() -> None:
    # Given the unit-tests policy (junit, min_tests 1) and exit-code evidence for its check
    world = World()
    cid = world.candidate(by=CI)["candidate_id"]
    proposal = world.gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()
    check = proposal["plan"]["tasks"][0]["checks"][0]
    request = _evidence(result={"exit_code": 0, "artifacts": []}).model_copy(
        update={"check_id": check["check_id"], "scope": ["payments-api", "services"]}
    )
    # When it is posted
    posted = world.gate.post_evidence(PROJECT, cid, CI, request, None).as_json()
    # Then it is not marked of the wrong kind: rule 7 holds it for the tests it does not report
    assert "EVIDENCE_WRONG_KIND" not in posted["binding"]["mismatches"]
    codes = {f["code"] for f in world.gate.decision(PROJECT, cid, REQUESTER, None).as_json()["findings"]}
    assert "EVIDENCE_TOO_FEW_TESTS" in codes and "EVIDENCE_WRONG_KIND" not in codes


@pytest.mark.parametrize("policy_id", ["-lead", "a b", "x" * 129, ""])
def test_the_gate_refuses_a_policy_id_that_is_not_an_id(policy_id: str) -> None:
    # Given a caller that is not the HTTP edge (the operator's seed, the evaluation), When it names a bad id
    world = World()
    for call in (
        lambda: world.gate.put_policy(PROJECT, policy_id, ADMIN, Policy.model_validate(UNIT_POLICY)),
        lambda: world.gate.get_policy(PROJECT, policy_id, ADMIN, None),
    ):
        # Then the use case refuses it too, as VALIDATION_FAILED
        with pytest.raises(Refusal) as refused:
            call()
        assert refused.value.code == "VALIDATION_FAILED"
