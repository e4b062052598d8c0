"""Finding the plan's check for a run's policy and scope (sentinel_client.plan_checks): CI names what it ran,
never the plan-local check id."""

import pytest

from sentinel_client.plan_checks import (
    PlanCheck,
    PlanCheckError,
    choose_check,
    plan_checks,
    scope_covers,
    tasks_with_all_evidence,
)


def obligation(oid: str, policy: str, scope: str) -> dict:
    return {"obligation_id": oid, "policy_id": policy, "scope": scope, "reason": "r"}


def check(cid: str, policy: str, *covers: str) -> dict:
    return {
        "check_id": cid,
        "policy_ref": policy,
        "command": "c",
        "expected_exit_code": 0,
        "covers": list(covers),
    }


def candidate(*tasks: dict, evidence: list | None = None, passing: tuple[str, ...] = ()) -> dict:
    return {
        "obligations": [
            obligation("o_pay", "unit-tests", "payments-api"),
            obligation("o_pay_ledger", "unit-tests", "payments-api/ledger"),
            obligation("o_web", "unit-tests", "web"),
            obligation("o_contract", "api-contract-tests", "payments-api"),
        ],
        "plan": {"tasks": list(tasks)},
        "evidence": evidence or [],
        "tasks": [{"task_id": t["task_id"], "passes": t["task_id"] in passing} for t in tasks],
    }


def task(tid: str, *checks: dict) -> dict:
    return {"task_id": tid, "title": tid, "checks": list(checks)}


PLAN = candidate(
    task("T1", check("C1", "unit-tests", "o_pay", "o_pay_ledger")),
    task("T2", check("C2", "unit-tests", "o_web"), check("C3", "api-contract-tests", "o_contract")),
)


def test_the_check_is_found_from_its_policy_and_the_scope_of_what_it_covers() -> None:
    # Given a plan whose unit-test checks cover payments-api (and a folder under it) and web
    # When CI says it ran unit-tests over payments-api
    chosen = choose_check(PLAN, "unit-tests", "payments-api")
    # Then the check covering payments-api and payments-api/ledger is the one, with its task
    assert chosen == PlanCheck("T1", "C1", "unit-tests", ("payments-api", "payments-api/ledger"))
    # And another policy over the same scope finds its own check
    assert choose_check(PLAN, "api-contract-tests", "payments-api").check_id == "C3"


def test_a_run_over_a_narrower_scope_does_not_match_a_check_owing_more() -> None:
    # Given C1 owes payments-api and payments-api/ledger
    # When CI ran only payments-api/ledger
    with pytest.raises(PlanCheckError) as refused:
        choose_check(PLAN, "unit-tests", "payments-api/ledger")
    # Then nothing matches, and the refusal names every check of the plan with its policy and scope
    assert refused.value.code == "NO_MATCHING_CHECK"
    assert refused.value.message == (
        "no check of the current plan has policy unit-tests and covers only obligations in scope "
        "payments-api/ledger; the plan has: C1 (task T1): policy unit-tests, scope payments-api, "
        "payments-api/ledger; C2 (task T2): policy unit-tests, scope web; C3 (task T2): policy "
        "api-contract-tests, scope payments-api"
    )


def test_scopes_compare_by_path_segment_not_by_prefix() -> None:
    assert scope_covers("payments-api", "payments-api/ledger")
    assert scope_covers("payments-api/", "payments-api")
    assert not scope_covers("payments", "payments-api")
    assert not scope_covers("payments-api/ledger", "payments-api")


def test_several_matches_are_named_and_need_check() -> None:
    # Given two unit-test checks over payments-api in different tasks
    plan = candidate(
        task("T1", check("C1", "unit-tests", "o_pay")), task("T2", check("C9", "unit-tests", "o_pay_ledger"))
    )
    # When CI runs unit-tests over payments-api without --check
    with pytest.raises(PlanCheckError) as refused:
        choose_check(plan, "unit-tests", "payments-api")
    # Then it names both and asks for --check
    assert refused.value.code == "AMBIGUOUS_CHECK"
    assert refused.value.message.endswith("say which with --check C1 or --check C9")
    assert "C1 (task T1): policy unit-tests, scope payments-api" in refused.value.message
    # And --check picks one of the matches
    assert choose_check(plan, "unit-tests", "payments-api", "C9").task_id == "T2"


def test_check_must_itself_match_the_policy_and_scope() -> None:
    with pytest.raises(PlanCheckError) as other:
        choose_check(PLAN, "unit-tests", "payments-api", "C3")
    assert other.value.code == "CHECK_NOT_MATCHING"
    assert other.value.message.endswith("it is C3 (task T2): policy api-contract-tests, scope payments-api")
    with pytest.raises(PlanCheckError) as absent:
        choose_check(PLAN, "unit-tests", "payments-api", "C7")
    assert "the current plan has no check C7; it has: C1 (task T1)" in absent.value.message


def test_no_plan_is_refused_as_plan_missing_and_malformed_answers_as_bad_response() -> None:
    with pytest.raises(PlanCheckError) as missing:
        choose_check({"obligations": [], "plan": None}, "unit-tests", "x")
    assert missing.value.code == "PLAN_MISSING"
    with pytest.raises(PlanCheckError) as unknown:
        plan_checks(candidate(task("T1", check("C1", "unit-tests", "o_gone"))))
    assert unknown.value.code == "BAD_RESPONSE"
    with pytest.raises(PlanCheckError):
        plan_checks({"obligations": [], "plan": {"tasks": [{"task_id": "T1", "checks": [{"check_id": 1}]}]}})


def test_a_check_covering_nothing_never_matches() -> None:
    with pytest.raises(PlanCheckError) as refused:
        choose_check(candidate(task("T1", check("C1", "unit-tests"))), "unit-tests", "payments-api")
    assert refused.value.message.endswith(
        "the plan has: C1 (task T1): policy unit-tests, scope no obligations"
    )


def test_tasks_whose_every_check_has_evidence_are_listed_for_the_requester() -> None:
    # Given evidence for C1 (a failure, then a pass) and for C2 but not C3
    evidence = [
        {"check_id": "C1", "outcome": "fail", "trust": "verified"},
        {"check_id": "C1", "outcome": "pass", "trust": "verified"},
        {"check_id": "C2", "outcome": "pass", "trust": "untrusted"},
    ]
    plan = dict(PLAN, evidence=evidence)
    # Then only T1 has evidence for every check, shown with its newest evidence
    assert tasks_with_all_evidence(plan) == [("T1", [("C1", "pass, verified")])]
    # And a task that already passes is not listed again
    passed = candidate(*PLAN["plan"]["tasks"], evidence=evidence, passing=("T1",))
    assert tasks_with_all_evidence(passed) == []
