"""Every decision finding code (DOMAIN.md rules 1 to 10 and 22), made to fire through the Gate use cases
on the in-memory store with a fixed clock. Each test starts from a candidate that is one step away from
`ready` (or from `ready` itself) and changes one thing."""

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.models import (
    ChangeContextRequest,
    EvidenceRequest,
    Policy,
    ReportRequest,
    ReviewRequest,
    SettlementRequest,
)
from sentinel_domain.plan_walk import PlanWalk
from sentinel_domain.ports import Stream, StreamRef
from sentinel_domain.usecases import Gate
from support.world import (
    ADMIN,
    CI,
    CONFIG,
    LINT_POLICY,
    PROJECT,
    REQUESTER,
    REV,
    REVIEWER,
    REVIEWER_2,
    UNIT_POLICY,
    UNTRUSTED_CI,
    World,
)

PAYMENTS = ("services/payments/api.py",)


@pytest.fixture(autouse=True, params=["walk", "every-pair-judged"])
def judging(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs twice: as decisions run (the plan walk passes over the pairs its bounds show
    satisfied), and with every (check, obligation) pair judged in full by the Judge. Both must give the
    findings each test expects, so the walk never passes over a pair the Judge would hold on."""
    if request.param == "every-pair-judged":
        monkeypatch.setattr(PlanWalk, "to_judge", lambda self, *_: list(range(len(self.pairs))))
    return str(request.param)


OBSERVED = "2026-11-29T11:59:00Z"  # one minute before the world's START
HINT = UNIT_POLICY["remediation_hint"]


def junit(*cases: str) -> str:
    return '<testsuite name="s">' + "".join(cases) + "</testsuite>"


def case(name: str, inner: str = "") -> str:
    return f'<testcase classname="a" name="{name}">{inner}</testcase>'


JUNIT_PASS = junit(case("t1"), case("t2"))
JUNIT_FAIL = junit(case("t1"), case("t2", '<failure message="boom"/>'))
JUNIT_SKIPPED = junit(case("t1", "<skipped/>"), case("t2", "<skipped/>"))


# ---- the steps of the ready flow ----------------------------------------------------------------------


def new_candidate(world: World, files: tuple[str, ...] = PAYMENTS, attest: bool = True) -> str:
    cid = world.candidate(files=files)["candidate_id"]
    if attest:
        world.gate.add_change_context(
            PROJECT, cid, CI, ChangeContextRequest.model_validate({"change": {"files": list(files)}}), None
        )
    return cid


def fallback_plan(world: World, cid: str) -> tuple[str, dict[str, Any]]:
    body = world.gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()
    return body["plan_digest"], body["plan"]


def amend_plan(world: World, cid: str, current_digest: str, plan: dict[str, Any]) -> str:
    return world.gate.put_plan(PROJECT, cid, REQUESTER, plan, f'"{current_digest}"').plan_digest


def review(world: World, cid: str, digest: str, decision: str = "approve", by=REVIEWER) -> None:
    world.gate.review(
        PROJECT, cid, by, ReviewRequest(decision=decision, plan_digest=digest, revision=REV), None
    )


def post_evidence(world: World, cid: str, by=CI, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "check_id": "C1",
        "subject": "payments",
        "revision": REV,
        "environment": "staging",
        "scope": ["payments-api"],
        "observed_at": OBSERVED,
        "source": {"system": "ci", "run_id": "1", "url": ""},
        "junit_xml": JUNIT_PASS,
    }
    body.update(fields)
    return world.gate.post_evidence(PROJECT, cid, by, EvidenceRequest.model_validate(body), None).as_json()


def report(
    world: World,
    cid: str,
    digest: str,
    status: str = "completed",
    evidence_ids: tuple[str, ...] = (),
    task_id: str = "T1",
    blocked_reason: str | None = None,
) -> dict[str, Any]:
    body = {
        "plan_digest": digest,
        "status": status,
        "blocked_reason": blocked_reason,
        "checks": [{"check_id": "C1", "evidence_id": e} for e in evidence_ids],
    }
    return world.gate.report(
        PROJECT, cid, task_id, REQUESTER, ReportRequest.model_validate(body), None
    ).as_json()


def decide(world: World, cid: str, as_of: str | None = None, gate: Gate | None = None) -> dict[str, Any]:
    return (gate or world.gate).decision(PROJECT, cid, REQUESTER, as_of).as_json()


def codes(decision: dict[str, Any]) -> list[str]:
    return sorted({f["code"] for f in decision["findings"]})


def the(decision: dict[str, Any], code: str) -> dict[str, Any]:
    """The one finding with this code, asserting the decision holds."""
    assert decision["decision"] == "hold"
    found = [f for f in decision["findings"] if f["code"] == code]
    assert len(found) == 1, decision["findings"]
    return found[0]


def where(f: dict[str, Any]) -> tuple[Any, Any, Any]:
    return f["obligation_id"], f["check_id"], f["task_id"]


def chain_length(world: World, cid: str) -> int:
    return len(world.store.streams[StreamRef(PROJECT, cid)].events)


@dataclass
class Cand:
    cid: str
    digest: str
    plan: dict[str, Any]
    obligation: str


def approved(world: World, attest: bool = True) -> Cand:
    """Attested, planned (fallback: T1/C1 covering the payments obligation) and approved; no evidence yet."""
    cid = new_candidate(world, attest=attest)
    digest, plan = fallback_plan(world, cid)
    review(world, cid, digest)
    return Cand(cid, digest, plan, plan["tasks"][0]["checks"][0]["covers"][0])


def ready(world: World, attest: bool = True) -> Cand:
    """Everything proved: verified passing evidence and a completed report."""
    cand = approved(world, attest)
    evidence = post_evidence(world, cand.cid)
    report(world, cand.cid, cand.digest, evidence_ids=(evidence["evidence_id"],))
    return cand


def test_the_baseline_flow_is_ready(world: World) -> None:
    # Given a candidate with every fact proved
    cand = ready(world)
    # When the gate decides
    decision = decide(world, cand.cid)
    # Then it is ready with no findings
    assert decision["decision"] == "ready", decision["findings"]
    assert decision["findings"] == []


# ---- change context and obligations (rules 5 and 6) -----------------------------------------------------


def test_no_obligations_holds_even_when_everything_else_is_in_order(world: World) -> None:
    # Given an attested candidate whose change derives nothing, with an approved plan reported complete
    cid = world.candidate(files=(), by=CI)["candidate_id"]
    plan = {
        "tasks": [
            {
                "task_id": "T1",
                "title": "nothing owed",
                "checks": [
                    {
                        "check_id": "C1",
                        "policy_ref": "lint",
                        "command": "ruff check .",
                        "expected_exit_code": 0,
                    }
                ],
            }
        ]
    }
    digest = world.gate.put_plan(PROJECT, cid, REQUESTER, plan, None).plan_digest
    review(world, cid, digest)
    assert report(world, cid, digest)["passes"] is True
    # When the gate decides
    decision = decide(world, cid)
    # Then zero obligations is not a pass
    assert codes(decision) == ["NO_OBLIGATIONS"]
    assert where(the(decision, "NO_OBLIGATIONS")) == (None, None, None)


def test_an_empty_change_holds_with_no_obligations(world: World) -> None:
    # Given a candidate created with an empty files list
    cid = world.candidate(files=())["candidate_id"]
    # When the gate decides
    decision = decide(world, cid)
    # Then it holds with NO_OBLIGATIONS
    assert "NO_OBLIGATIONS" in codes(decision)
    the(decision, "NO_OBLIGATIONS")


def test_change_context_unverified_until_a_trusted_publisher_attests(world: World) -> None:
    # Given a candidate proved in every other way, whose change context was only declared by the agent
    cand = ready(world, attest=False)
    # When the gate decides
    decision = decide(world, cand.cid)
    # Then it holds with CHANGE_CONTEXT_UNVERIFIED alone
    assert codes(decision) == ["CHANGE_CONTEXT_UNVERIFIED"]
    assert where(the(decision, "CHANGE_CONTEXT_UNVERIFIED")) == (None, None, None)


def test_a_ci_publisher_not_listed_for_change_context_does_not_attest(world: World) -> None:
    # Given a ready-but-unattested candidate
    cand = ready(world, attest=False)
    # When a ci publisher outside change_context_publishers sends the change context
    body = world.gate.add_change_context(
        PROJECT,
        cand.cid,
        UNTRUSTED_CI,
        ChangeContextRequest.model_validate({"change": {"files": list(PAYMENTS)}}),
        None,
    ).as_json()
    # Then it is only declared, and the decision still holds
    assert body["change_context"] == "declared"
    assert codes(decide(world, cand.cid)) == ["CHANGE_CONTEXT_UNVERIFIED"]


# ---- plans and reviews (rules 13 and 14) ----------------------------------------------------------------


def test_plan_missing_when_no_plan_was_stored(world: World) -> None:
    # Given an attested candidate without a plan
    cid = new_candidate(world)
    # When the gate decides
    decision = decide(world, cid)
    # Then it holds with PLAN_MISSING alone
    assert codes(decision) == ["PLAN_MISSING"]
    assert where(the(decision, "PLAN_MISSING")) == (None, None, None)


def test_review_missing_when_the_plan_is_not_approved(world: World) -> None:
    # Given an attested candidate with a plan, evidence and a report, but no review
    cid = new_candidate(world)
    digest, _plan = fallback_plan(world, cid)
    evidence = post_evidence(world, cid)
    report(world, cid, digest, evidence_ids=(evidence["evidence_id"],))
    # When the gate decides
    decision = decide(world, cid)
    # Then it holds with REVIEW_MISSING alone
    assert codes(decision) == ["REVIEW_MISSING"]
    assert where(the(decision, "REVIEW_MISSING")) == (None, None, None)


def test_review_rejected_is_final_for_the_digest(world: World) -> None:
    # Given an otherwise ready candidate
    cand = ready(world)
    # When one reviewer rejects the current digest and another approves it afterwards
    review(world, cand.cid, cand.digest, "reject", by=REVIEWER_2)
    review(world, cand.cid, cand.digest, "approve", by=REVIEWER)
    # Then the rejection stands
    decision = decide(world, cand.cid)
    assert codes(decision) == ["REVIEW_REJECTED"]
    assert where(the(decision, "REVIEW_REJECTED")) == (None, None, None)


@pytest.mark.parametrize(("elapsed", "expired"), [(3599, False), (3600, True)])
def test_review_expired_exactly_at_expiry(elapsed: int, expired: bool) -> None:
    # Given a ready candidate in a project whose approvals live one hour
    world = World(config=dict(CONFIG, approval_ttl_seconds=3600))
    cand = ready(world)
    # When the service clock reaches the expiry (or one second before it)
    world.clock.advance(elapsed)
    decision = decide(world, cand.cid)
    # Then exactly at expiry the approval is expired; one second before it still counts
    if expired:
        assert codes(decision) == ["REVIEW_EXPIRED"]
        assert where(the(decision, "REVIEW_EXPIRED")) == (None, None, None)
    else:
        assert decision["decision"] == "ready", decision["findings"]


def test_review_stale_after_the_plan_is_amended(world: World) -> None:
    # Given a ready candidate with an approved plan
    cand = ready(world)
    # When the requester amends the plan with If-Match (adding one action)
    plan = dict(
        cand.plan, actions=[{"action_id": "A1", "type": "notify", "params": {"channel": "release-room"}}]
    )
    new_digest = amend_plan(world, cand.cid, cand.digest, plan)
    # Then the approval of the older digest no longer counts
    decision = decide(world, cand.cid)
    assert decision["plan_digest"] == new_digest != cand.digest
    assert "REVIEW_STALE" in codes(decision)
    assert where(the(decision, "REVIEW_STALE")) == (None, None, None)
    assert "REVIEW_MISSING" not in codes(decision)


# ---- evidence (rules 7 to 10) ---------------------------------------------------------------------------


def test_evidence_missing_names_obligation_check_and_task(world: World) -> None:
    # Given an approved candidate with no evidence
    cand = approved(world)
    # When the gate decides
    decision = decide(world, cand.cid)
    # Then EVIDENCE_MISSING names the (obligation, check, task) and the policy's remediation hint
    assert codes(decision) == ["EVIDENCE_MISSING", "TASK_NOT_REPORTED"]
    missing = the(decision, "EVIDENCE_MISSING")
    assert where(missing) == (cand.obligation, "C1", "T1")
    assert missing["remediation_hint"] == HINT


def test_evidence_negative_for_a_failing_junit_report(world: World) -> None:
    # Given an approved candidate
    cand = approved(world)
    # When the trusted publisher posts a failing JUnit report
    assert post_evidence(world, cand.cid, junit_xml=JUNIT_FAIL)["outcome"] == "fail"
    # Then the decision holds with EVIDENCE_NEGATIVE for that check
    decision = decide(world, cand.cid)
    assert codes(decision) == ["EVIDENCE_NEGATIVE", "TASK_NOT_REPORTED"]
    negative = the(decision, "EVIDENCE_NEGATIVE")
    assert where(negative) == (cand.obligation, "C1", "T1")
    assert negative["remediation_hint"] == HINT


def test_evidence_unknown_when_only_skipped_tests_ran(world: World) -> None:
    # Given an approved candidate
    cand = approved(world)
    # When the trusted publisher posts a report whose tests were all skipped
    assert post_evidence(world, cand.cid, junit_xml=JUNIT_SKIPPED)["outcome"] == "unknown"
    # Then the decision holds with EVIDENCE_UNKNOWN
    decision = decide(world, cand.cid)
    assert codes(decision) == ["EVIDENCE_UNKNOWN", "TASK_NOT_REPORTED"]
    assert where(the(decision, "EVIDENCE_UNKNOWN")) == (cand.obligation, "C1", "T1")


@pytest.mark.parametrize(("elapsed", "stale"), [(82799, False), (82800, True)])
def test_evidence_stale_exactly_at_max_age(world: World, elapsed: int, stale: bool) -> None:
    # Given a ready candidate whose evidence was observed one hour before it was recorded
    # (max_evidence_age_seconds is 86400; the approval lives 86400 s from START)
    cand = approved(world)
    evidence = post_evidence(world, cand.cid, observed_at="2026-11-29T11:00:00Z")
    report(world, cand.cid, cand.digest, evidence_ids=(evidence["evidence_id"],))
    # When the clock reaches exactly 86400 s after observed_at (or one second less)
    world.clock.advance(elapsed)
    decision = decide(world, cand.cid)
    # Then exactly at the limit the evidence is stale; one second before it is fresh
    if stale:
        assert codes(decision) == ["EVIDENCE_STALE"]
        assert where(the(decision, "EVIDENCE_STALE")) == (cand.obligation, "C1", "T1")
    else:
        assert decision["decision"] == "ready", decision["findings"]


def test_evidence_unverified_when_posted_by_the_agent(world: World) -> None:
    # Given an approved candidate
    cand = approved(world)
    # When the agent requester posts a passing report itself
    assert post_evidence(world, cand.cid, by=REQUESTER)["trust"] == "unverified"
    # Then it never decides: the decision holds with EVIDENCE_UNVERIFIED
    decision = decide(world, cand.cid)
    assert codes(decision) == ["EVIDENCE_UNVERIFIED", "TASK_NOT_REPORTED"]
    assert where(the(decision, "EVIDENCE_UNVERIFIED")) == (cand.obligation, "C1", "T1")


def test_evidence_untrusted_from_a_ci_publisher_not_on_the_policy_list(world: World) -> None:
    # Given an approved candidate
    cand = approved(world)
    # When a ci publisher not listed in the policy's trusted_publishers posts a passing report
    assert post_evidence(world, cand.cid, by=UNTRUSTED_CI)["trust"] == "untrusted"
    # Then the decision holds with EVIDENCE_UNTRUSTED
    decision = decide(world, cand.cid)
    assert codes(decision) == ["EVIDENCE_UNTRUSTED", "TASK_NOT_REPORTED"]
    assert where(the(decision, "EVIDENCE_UNTRUSTED")) == (cand.obligation, "C1", "T1")


def test_evidence_untrusted_after_its_publisher_is_revoked_as_compromised(world: World) -> None:
    # Given a ready candidate proved by the trusted ci publisher
    cand = ready(world)
    before = "2026-11-29T12:00:00Z"
    # When the operator revokes that publisher as compromised
    world.clock.advance(1)
    world.gate.record_project_event(
        PROJECT, "principal.revoked", {"principal_id": CI.id, "compromised": True}
    )
    # Then all of its evidence is untrusted from then on (and its attestation no longer counts either)
    decision = decide(world, cand.cid)
    assert codes(decision) == ["ATTESTATION_REVOKED", "EVIDENCE_UNTRUSTED"]
    untrusted = the(decision, "EVIDENCE_UNTRUSTED")
    assert where(untrusted) == (cand.obligation, "C1", "T1")
    assert "revoked as compromised at 2026-11-29T12:00:01" in untrusted["detail"]
    assert untrusted["remediation_hint"] and "not compromised" in untrusted["remediation_hint"]
    # And a what-if read before the revocation still sees it trusted
    assert decide(world, cand.cid, as_of=before)["decision"] == "ready"


def test_evidence_too_few_tests_for_the_policy_minimum() -> None:
    # Given a project whose unit-tests policy needs at least 3 executed tests
    world = World()
    world.gate.put_policy(PROJECT, "unit-tests", ADMIN, Policy.model_validate(dict(UNIT_POLICY, min_tests=3)))
    cand = approved(world)
    # When the trusted publisher posts a passing report with 2 tests
    assert post_evidence(world, cand.cid)["counts"]["tests"] == 2
    # Then the decision holds with EVIDENCE_TOO_FEW_TESTS
    decision = decide(world, cand.cid)
    assert codes(decision) == ["EVIDENCE_TOO_FEW_TESTS", "TASK_NOT_REPORTED"]
    assert where(the(decision, "EVIDENCE_TOO_FEW_TESTS")) == (cand.obligation, "C1", "T1")


def test_evidence_too_few_tests_for_exit_code_evidence_under_a_test_suite_policy(world: World) -> None:
    # Given an approved candidate whose policy has min_tests 1
    cand = approved(world)
    # When the trusted publisher posts passing exit-code evidence (no JUnit report)
    evidence = post_evidence(world, cand.cid, junit_xml=None, result={"exit_code": 0, "artifacts": []})
    assert (evidence["outcome"], evidence["trust"]) == ("pass", "verified")
    # Then it proves no tests: EVIDENCE_TOO_FEW_TESTS
    decision = decide(world, cand.cid)
    assert codes(decision) == ["EVIDENCE_TOO_FEW_TESTS", "TASK_NOT_REPORTED"]
    assert where(the(decision, "EVIDENCE_TOO_FEW_TESTS")) == (cand.obligation, "C1", "T1")


def test_exit_code_evidence_satisfies_a_min_tests_zero_policy(world: World) -> None:
    # Given an attested candidate owing only the lint policy (min_tests 0), planned and approved
    cid = new_candidate(world, files=("docs/guide.md",))
    digest, _plan = fallback_plan(world, cid)
    review(world, cid, digest)
    # When the trusted publisher posts passing exit-code evidence and the task is reported
    evidence = post_evidence(
        world, cid, junit_xml=None, result={"exit_code": 0, "artifacts": []}, scope=["docs/guide.md"]
    )
    report(world, cid, digest, evidence_ids=(evidence["evidence_id"],))
    # Then the candidate is ready
    decision = decide(world, cid)
    assert decision["decision"] == "ready", decision["findings"]


class IncompleteStore:
    """The in-memory store, but every read stops at the page budget."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def load(self, ref: StreamRef) -> Stream | None:
        stream = self.inner.load(ref)
        return dataclasses.replace(stream, complete=False, pages=10) if stream else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_evidence_query_incomplete_when_the_read_hits_the_page_budget(world: World) -> None:
    # Given a ready candidate
    cand = ready(world)
    # When the store can read only part of the candidate's state
    gate = Gate(IncompleteStore(world.store), world.clock, world.ids)
    decision = decide(world, cand.cid, gate=gate)
    # Then nothing unread may count: the decision holds with EVIDENCE_QUERY_INCOMPLETE
    assert codes(decision) == ["EVIDENCE_QUERY_INCOMPLETE"]


class ProjectIncompleteStore(IncompleteStore):
    """Only the project's stream stops at the page budget."""

    def load(self, ref: StreamRef) -> Stream | None:
        return super().load(ref) if ref.candidate_id is None else self.inner.load(ref)


def test_evidence_query_incomplete_when_the_project_read_hits_the_page_budget(world: World) -> None:
    # Given a ready candidate
    cand = ready(world)
    # When only the project's chain (policies, configuration, revocations) cannot be read in full
    gate = Gate(ProjectIncompleteStore(world.store), world.clock, world.ids)
    decision = decide(world, cand.cid, gate=gate)
    # Then what was not read cannot count as proved: the decision holds
    assert decision["decision"] == "hold"
    assert "EVIDENCE_QUERY_INCOMPLETE" in codes(decision)


def test_evidence_for_a_check_not_in_the_plan_never_decides(world: World) -> None:
    # Given an attested candidate with no plan yet, and verified passing evidence sent for C1 anyway
    cid = new_candidate(world)
    early = post_evidence(world, cid)
    assert early["binding"]["mismatches"] == ["CHECK_NOT_IN_PLAN"]
    # When a plan introducing C1 is stored and approved
    digest, plan = fallback_plan(world, cid)
    review(world, cid, digest)
    # Then the early evidence still does not count for C1
    decision = decide(world, cid)
    assert codes(decision) == ["EVIDENCE_MISSING", "TASK_NOT_REPORTED"]
    assert where(the(decision, "EVIDENCE_MISSING")) == (
        plan["tasks"][0]["checks"][0]["covers"][0],
        "C1",
        "T1",
    )


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("subject", "billing", "EVIDENCE_WRONG_SUBJECT"),
        ("revision", "c" * 40, "EVIDENCE_WRONG_REVISION"),
        ("environment", "production", "EVIDENCE_WRONG_ENVIRONMENT"),
        ("scope", ["other-api"], "EVIDENCE_WRONG_SCOPE"),
        ("scope", ["payments-api/refunds"], "EVIDENCE_WRONG_SCOPE"),  # the run covered less than was owed
    ],
)
def test_evidence_bound_to_something_else_never_decides(
    world: World, field: str, value: Any, code: str
) -> None:
    # Given an approved candidate
    cand = approved(world)
    # When the trusted publisher posts passing evidence with one wrong field
    evidence = post_evidence(world, cand.cid, **{field: value})
    assert (evidence["outcome"], evidence["trust"]) == ("pass", "verified")
    # Then it never decides, and the decision names the binding problem
    decision = decide(world, cand.cid)
    assert codes(decision) == [code, "TASK_NOT_REPORTED"]
    assert where(the(decision, code)) == (cand.obligation, "C1", "T1")


def test_evidence_whose_scope_lies_above_the_obligation_covers_it(world: World) -> None:
    # Given an approved candidate whose obligation is scoped payments-api
    cand = approved(world)
    # When the evidence's scope is payments-api itself, with a trailing slash
    evidence = post_evidence(world, cand.cid, scope=["payments-api/"])
    report(world, cand.cid, cand.digest, evidence_ids=(evidence["evidence_id"],))
    # Then it covers the obligation
    assert decide(world, cand.cid)["decision"] == "ready"


# ---- tasks (rules 19 to 22) -----------------------------------------------------------------------------


def test_task_not_reported_until_a_report_exists(world: World) -> None:
    # Given an approved candidate with verified passing evidence and no report
    cand = approved(world)
    post_evidence(world, cand.cid)
    # When the gate decides
    decision = decide(world, cand.cid)
    # Then it holds with TASK_NOT_REPORTED for the task alone
    assert codes(decision) == ["TASK_NOT_REPORTED"]
    assert where(the(decision, "TASK_NOT_REPORTED")) == (None, None, "T1")


def test_task_failed_when_completed_is_reported_without_evidence(world: World) -> None:
    # Given an approved candidate without evidence
    cand = approved(world)
    # When the requester reports the task completed
    body = report(world, cand.cid, cand.digest)
    # Then the report writer records a failed attempt
    assert (body["recorded_status"], body["passes"]) == ("failed", False)
    assert [f["code"] for f in body["findings"]] == ["EVIDENCE_MISSING"]
    # And, even once evidence arrives, the decision holds with TASK_FAILED until a new attempt passes
    post_evidence(world, cand.cid)
    decision = decide(world, cand.cid)
    assert codes(decision) == ["TASK_FAILED"]
    assert where(the(decision, "TASK_FAILED")) == (None, None, "T1")


def test_task_blocked_asks_for_an_amendment(world: World) -> None:
    # Given an approved candidate with verified passing evidence
    cand = approved(world)
    post_evidence(world, cand.cid)
    # When the requester reports the task blocked, with a reason
    body = report(world, cand.cid, cand.digest, status="blocked", blocked_reason="needs a schema change")
    assert (body["recorded_status"], body["passes"]) == ("blocked", False)
    # Then the decision holds with TASK_BLOCKED
    decision = decide(world, cand.cid)
    assert codes(decision) == ["TASK_BLOCKED"]
    assert where(the(decision, "TASK_BLOCKED")) == (None, None, "T1")


def test_task_not_settled_when_the_project_requires_settlement() -> None:
    # Given a project that requires settlement, and a candidate proved in every other way
    world = World(config=dict(CONFIG, settlement_required=True))
    cand = ready(world)
    # When the gate decides
    decision = decide(world, cand.cid)
    # Then it holds with TASK_NOT_SETTLED for the task
    assert codes(decision) == ["TASK_NOT_SETTLED"]
    assert where(the(decision, "TASK_NOT_SETTLED")) == (None, None, "T1")
    # And a reviewer's settlement makes it ready
    world.gate.settle(PROJECT, cand.cid, "T1", REVIEWER, SettlementRequest(plan_digest=cand.digest), None)
    assert decide(world, cand.cid)["decision"] == "ready"


# ---- what the gate cannot establish (rule 3) ----------------------------------------------------------


class ProjectUnreadableStore:
    """The in-memory store, but the project's stream cannot be read (candidate streams still can)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def load(self, ref: StreamRef) -> Stream | None:
        if ref.candidate_id is None:
            raise StoreUnavailable("throttled")
        return self.inner.load(ref)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_state_unavailable_when_the_project_cannot_be_read(world: World) -> None:
    # Given a ready candidate
    cand = ready(world)
    # When the project's stream cannot be read after the candidate's was
    gate = Gate(ProjectUnreadableStore(world.store), world.clock, world.ids)
    decision = decide(world, cand.cid, gate=gate)
    # Then the decision holds with STATE_UNAVAILABLE instead of raising
    assert decision["decision"] == "hold"
    assert "STATE_UNAVAILABLE" in codes(decision)


def _edit_fact(world: World, ref: StreamRef, fact_type: str, old: str, new: str) -> int:
    stream = world.store.streams[ref]
    seq = max(s for s, text in stream.facts.items() if f'"type":"{fact_type}"' in text and old in text)
    stream.facts[seq] = stream.facts[seq].replace(old, new)
    return seq


def test_state_tampered_when_a_stored_fact_is_edited_in_place(world: World) -> None:
    # Given a ready candidate, then newer failing evidence that makes it hold
    cand = ready(world)
    post_evidence(world, cand.cid, junit_xml=JUNIT_FAIL, observed_at="2026-11-29T11:59:30Z")
    assert codes(decide(world, cand.cid)) == ["EVIDENCE_NEGATIVE"]
    # When someone edits that stored fact to say it passed
    seq = _edit_fact(
        world, StreamRef(PROJECT, cand.cid), "evidence.recorded", '"outcome":"fail"', '"outcome":"pass"'
    )
    # Then the decision still holds, with STATE_TAMPERED naming the sequence number
    decision = decide(world, cand.cid)
    assert codes(decision) == ["STATE_TAMPERED"]
    assert f"seq {seq}" in the(decision, "STATE_TAMPERED")["detail"]


def test_state_tampered_when_an_event_is_removed(world: World) -> None:
    # Given a ready candidate
    cand = ready(world)
    # When someone removes the review's audit event from the chain
    stream = world.store.streams[StreamRef(PROJECT, cand.cid)]
    position = next(i for i, e in enumerate(stream.events) if e["type"] == "review.recorded")
    del stream.events[position]
    # Then the decision holds with STATE_TAMPERED at that sequence number
    decision = decide(world, cand.cid)
    assert codes(decision) == ["STATE_TAMPERED"]
    assert f"seq {position + 1}" in the(decision, "STATE_TAMPERED")["detail"]


def test_state_tampered_when_a_project_fact_is_edited(world: World) -> None:
    # Given a ready candidate
    cand = ready(world)
    # When someone edits the project's unit-tests policy fact in place
    _edit_fact(world, StreamRef(PROJECT), "policy.set", '"min_tests":1', '"min_tests":0')
    # Then the decision holds with STATE_TAMPERED
    decision = decide(world, cand.cid)
    assert codes(decision) == ["STATE_TAMPERED"]


# ---- which evidence decides (rules 8 and 10) ------------------------------------------------------------


def test_newer_failing_evidence_outvotes_an_older_pass(world: World) -> None:
    # Given a ready candidate whose evidence passed at 11:59:00
    cand = ready(world)
    # When newer evidence, observed at 11:59:30, fails
    post_evidence(world, cand.cid, junit_xml=JUNIT_FAIL, observed_at="2026-11-29T11:59:30Z")
    # Then the older pass does not outvote it
    decision = decide(world, cand.cid)
    assert codes(decision) == ["EVIDENCE_NEGATIVE"]
    assert where(the(decision, "EVIDENCE_NEGATIVE")) == (cand.obligation, "C1", "T1")


def test_an_older_pass_arriving_later_does_not_outvote_a_newer_failure(world: World) -> None:
    # Given an approved candidate with a failure observed at 11:59:30
    cand = approved(world)
    post_evidence(world, cand.cid, junit_xml=JUNIT_FAIL, observed_at="2026-11-29T11:59:30Z")
    # When a pass observed earlier (11:59:00) arrives afterwards
    post_evidence(world, cand.cid, observed_at="2026-11-29T11:59:00Z")
    # Then the newest observation, the failure, decides
    assert codes(decide(world, cand.cid)) == ["EVIDENCE_NEGATIVE", "TASK_NOT_REPORTED"]


def test_with_equal_observation_and_recording_times_the_later_arrival_decides(world: World) -> None:
    # Given an approved candidate with a pass and then a failure, both observed and recorded at the same
    # instants
    cand = approved(world)
    post_evidence(world, cand.cid)
    post_evidence(world, cand.cid, junit_xml=JUNIT_FAIL)
    # When the gate decides
    # Then the later arrival, the failure, decides
    assert codes(decide(world, cand.cid)) == ["EVIDENCE_NEGATIVE", "TASK_NOT_REPORTED"]


def test_a_newer_pass_after_a_failure_makes_it_pass(world: World) -> None:
    # Given an approved candidate whose check failed at 11:59:00
    cand = approved(world)
    post_evidence(world, cand.cid, junit_xml=JUNIT_FAIL, observed_at="2026-11-29T11:59:00Z")
    # When a newer run at 11:59:30 passes and the task is reported with it
    evidence = post_evidence(world, cand.cid, observed_at="2026-11-29T11:59:30Z")
    assert report(world, cand.cid, cand.digest, evidence_ids=(evidence["evidence_id"],))["passes"] is True
    # Then the candidate is ready
    decision = decide(world, cand.cid)
    assert decision["decision"] == "ready", decision["findings"]


@pytest.mark.parametrize(
    ("xml", "code", "other"),
    [
        (junit(case("t1"), case("t2", '<failure message="x"/>')), "EVIDENCE_NEGATIVE", "EVIDENCE_UNKNOWN"),
        (junit(case("t1", "<skipped/>"), case("t2", "<error/>")), "EVIDENCE_NEGATIVE", "EVIDENCE_UNKNOWN"),
        (
            junit(case("t1", "<skipped/>")).replace("</testsuite>", "<failure/></testsuite>"),
            "EVIDENCE_NEGATIVE",
            "EVIDENCE_UNKNOWN",
        ),  # a suite-level failure with only skipped tests is a failure
        (junit(case("t1", "<skipped/>")), "EVIDENCE_UNKNOWN", "EVIDENCE_NEGATIVE"),
        ("<testsuites/>", "EVIDENCE_UNKNOWN", "EVIDENCE_NEGATIVE"),
    ],
)
def test_fail_and_unknown_are_reported_apart(world: World, xml: str, code: str, other: str) -> None:
    # Given an approved candidate
    cand = approved(world)
    # When the trusted publisher posts the report
    post_evidence(world, cand.cid, junit_xml=xml)
    # Then the finding is the one for its outcome, never the other
    decision = decide(world, cand.cid)
    assert code in codes(decision)
    assert other not in codes(decision)


def test_flaky_reruns_count_as_passed(world: World) -> None:
    # Given an approved candidate
    cand = approved(world)
    # When the report's tests failed once and then passed on rerun
    xml = junit(case("t1", '<flakyFailure message="once"/>'), case("t2", '<flakyError message="once"/>'))
    evidence = post_evidence(world, cand.cid, junit_xml=xml)
    assert (evidence["outcome"], evidence["counts"]["tests"]) == ("pass", 2)
    report(world, cand.cid, cand.digest, evidence_ids=(evidence["evidence_id"],))
    # Then they count as passed
    decision = decide(world, cand.cid)
    assert decision["decision"] == "ready", decision["findings"]


# ---- versions: policy and plan amendments (rule 7) ------------------------------------------------------


def test_a_policy_amendment_retires_evidence_bound_to_the_older_version(world: World) -> None:
    # Given a ready candidate whose evidence is bound to unit-tests v1
    cand = ready(world)
    # When an admin records unit-tests v2
    world.clock.advance(1)
    world.gate.put_policy(PROJECT, "unit-tests", ADMIN, Policy.model_validate(UNIT_POLICY))
    # Then that evidence no longer counts: EVIDENCE_MISSING for the check
    decision = decide(world, cand.cid)
    assert codes(decision) == ["EVIDENCE_MISSING"]
    assert where(the(decision, "EVIDENCE_MISSING")) == (cand.obligation, "C1", "T1")
    # And a what-if read before the amendment judges under v1
    assert decide(world, cand.cid, as_of="2026-11-29T12:00:00Z")["decision"] == "ready"


def test_a_plan_amendment_keeps_evidence_where_check_policy_and_version_are_unchanged(world: World) -> None:
    # Given a ready candidate
    cand = ready(world)
    evidence_id = world.gate.get_candidate(PROJECT, cand.cid, REQUESTER).as_json()["evidence"][0][
        "evidence_id"
    ]
    # When the plan is amended (an action added) with C1 unchanged
    plan = dict(
        cand.plan, actions=[{"action_id": "A1", "type": "notify", "params": {"channel": "release-room"}}]
    )
    new_digest = amend_plan(world, cand.cid, cand.digest, plan)
    # Then the existing evidence still counts: only the review and the report are owed again
    assert codes(decide(world, cand.cid)) == ["REVIEW_STALE", "TASK_NOT_REPORTED"]
    # And once the new digest is approved and reported with the same evidence, it is ready
    review(world, cand.cid, new_digest)
    assert report(world, cand.cid, new_digest, evidence_ids=(evidence_id,))["passes"] is True
    assert decide(world, cand.cid)["decision"] == "ready"


def test_a_plan_amendment_that_renames_the_check_does_not_keep_its_evidence(world: World) -> None:
    # Given a ready candidate
    cand = ready(world)
    # When the plan is amended so that the check is C9 instead of C1
    plan = {
        "tasks": [
            dict(cand.plan["tasks"][0], checks=[dict(cand.plan["tasks"][0]["checks"][0], check_id="C9")])
        ],
        "actions": [],
    }
    amend_plan(world, cand.cid, cand.digest, plan)
    # Then the evidence written for C1 does not satisfy C9
    decision = decide(world, cand.cid)
    assert where(the(decision, "EVIDENCE_MISSING")) == (cand.obligation, "C9", "T1")


# ---- determinism and what-if reads (rules 2 and 4) -----------------------------------------------------


def test_a_caller_chosen_as_of_is_a_what_if_read_that_records_nothing(world: World) -> None:
    # Given a ready candidate
    cand = ready(world)
    length = chain_length(world, cand.cid)
    # When a caller asks for the decision at an instant of its choosing
    body = decide(world, cand.cid, as_of="2026-11-29T12:00:00+00:00")
    # Then it is marked as the caller's, normalised, and nothing is appended
    assert body["as_of_source"] == "caller"
    assert body["as_of"] == "2026-11-29T12:00:00.000000Z"
    assert chain_length(world, cand.cid) == length
    # And without as_of the service clock is used (still recording nothing)
    assert decide(world, cand.cid)["as_of_source"] == "service"
    assert chain_length(world, cand.cid) == length
    # While a recorded decision appends exactly one event and uses the service clock
    recorded = world.gate.record_decision(PROJECT, cand.cid, REQUESTER, None).as_json()
    assert recorded["as_of_source"] == "service"
    assert chain_length(world, cand.cid) == length + 1


def test_a_what_if_read_before_a_fact_was_recorded_does_not_see_it(world: World) -> None:
    # Given an approved candidate whose passing evidence and report are recorded one minute later
    cand = approved(world)
    world.clock.advance(60)
    evidence = post_evidence(world, cand.cid)
    report(world, cand.cid, cand.digest, evidence_ids=(evidence["evidence_id"],))
    assert decide(world, cand.cid)["decision"] == "ready"
    # When a caller asks at the instant before
    decision = decide(world, cand.cid, as_of="2026-11-29T12:00:30Z")
    # Then only the facts recorded at or before it count
    assert codes(decision) == ["EVIDENCE_MISSING", "TASK_NOT_REPORTED"]


def _multi_obligation_hold(world: World) -> tuple[str, dict[str, Any]]:
    cid = new_candidate(
        world, files=("services/payments/api.py", "README.md", "docs/guide.md", "docs/a.md"), attest=False
    )
    fallback_plan(world, cid)
    return cid, decide(world, cid, as_of="2026-11-29T12:00:00Z")


def test_the_same_inputs_give_the_same_decision_and_facts_digest(world: World) -> None:
    # Given a candidate with many findings
    cid, first = _multi_obligation_hold(world)
    # When the same decision is asked for again, and in a second world built the same way
    again = decide(world, cid, as_of="2026-11-29T12:00:00Z")
    _cid2, elsewhere = _multi_obligation_hold(World())
    # Then findings (in order) and facts digest are identical
    assert again == first == elsewhere
    assert len(first["facts_digest"]) == 64
    # And a new fact changes the facts digest
    world.clock.advance(1)
    review(world, cid, first["plan_digest"])
    assert decide(world, cid)["facts_digest"] != first["facts_digest"]


def test_facts_recorded_after_as_of_change_nothing_about_a_decision_at_as_of(world: World) -> None:
    # Given a decision read at an instant
    cid, first = _multi_obligation_hold(world)
    # When facts are recorded after it, on the candidate's chain and on the project's
    world.clock.advance(1)
    review(world, cid, first["plan_digest"])
    world.gate.put_policy(PROJECT, "lint", ADMIN, Policy.model_validate(dict(LINT_POLICY, min_tests=0)))
    # Then the decision at that same instant is unchanged, facts digest included
    assert decide(world, cid, as_of="2026-11-29T12:00:00Z") == first


def test_findings_are_sorted_by_code_obligation_check_and_task(world: World) -> None:
    # Given a candidate with findings on several obligations, checks and tasks
    _cid, decision = _multi_obligation_hold(world)
    findings = decision["findings"]
    assert len({f["code"] for f in findings}) >= 4 and len({f["obligation_id"] for f in findings}) >= 4
    # Then they are sorted by (code, obligation, check, task), absent fields as empty strings
    keys = [(f["code"], f["obligation_id"] or "", f["check_id"] or "", f["task_id"] or "") for f in findings]
    assert keys == sorted(keys)
    assert [f["code"] for f in findings] == sorted(f["code"] for f in findings)


def test_a_what_if_before_the_candidate_existed_holds_without_claiming_tampering(world: World) -> None:
    # Given a candidate created at START with an intact audit chain
    cid = new_candidate(world)
    # When a caller asks for the decision one hour before it was created
    decision = decide(world, cid, as_of="2026-11-29T11:00:00Z")
    # Then it holds, but nothing was tampered with: STATE_TAMPERED would be a false alarm
    assert decision["decision"] == "hold"
    assert "STATE_TAMPERED" not in codes(decision), decision["findings"]
