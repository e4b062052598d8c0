"""The end-to-end ready flow of API.md, through the use cases on the in-memory store."""

from sentinel_domain.models import (
    ChangeContextRequest,
    EvidenceRequest,
    ExecutionRequest,
    ReportRequest,
    ReviewRequest,
)
from sentinel_domain.ports import StreamRef
from support.world import CI, PROJECT, REQUESTER, REV, REVIEWER, World

JUNIT_PASS = (
    '<testsuite name="s"><testcase classname="a" name="t1"/><testcase classname="a" name="t2"/></testsuite>'
)


def codes(decision) -> list[str]:
    return sorted({f["code"] for f in decision["findings"]})


def test_ready_flow_reaches_ready_with_a_verified_chain(world: World) -> None:
    gate = world.gate
    # Given a candidate created by an agent and attested by the trusted CI publisher
    created = world.candidate()
    cid = created["candidate_id"]
    assert created["change_context"] == "declared"
    assert [o["scope"] for o in created["obligations"]] == ["payments-api"]
    attested = gate.add_change_context(
        PROJECT,
        cid,
        CI,
        ChangeContextRequest.model_validate({"change": {"files": ["services/payments/api.py"]}}),
        None,
    ).as_json()
    assert attested["change_context"] == "attested" and attested["added_obligations"] == []

    # When the requester asks for a proposal and amends it with one dispatch_checks action
    proposal = gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()
    assert proposal["mode"] == "fallback"
    plan = dict(
        proposal["plan"],
        actions=[{"action_id": "A1", "type": "dispatch_checks", "params": {"checks": ["C1"]}}],
    )
    stored = gate.put_plan(PROJECT, cid, REQUESTER, plan, f'"{proposal["plan_digest"]}"').as_json()
    digest = stored["plan_digest"]

    # Then the decision holds for the review, the evidence and the report
    assert codes(gate.decision(PROJECT, cid, REQUESTER, None).as_json()) == [
        "EVIDENCE_MISSING",
        "REVIEW_MISSING",
        "TASK_NOT_REPORTED",
    ]

    # When a human approves the exact digest and revision
    gate.review(
        PROJECT, cid, REVIEWER, ReviewRequest(decision="approve", plan_digest=digest, revision=REV), None
    )
    assert codes(gate.decision(PROJECT, cid, REQUESTER, None).as_json()) == [
        "EVIDENCE_MISSING",
        "TASK_NOT_REPORTED",
    ]

    # And the requester executes the declared action, twice with one key
    body = ExecutionRequest(plan_digest=digest, params={"checks": ["C1"]})
    first = gate.execute(PROJECT, cid, "A1", REQUESTER, body, "key-1")
    replay = gate.execute(PROJECT, cid, "A1", REQUESTER, body, "key-1")
    assert replay.replayed and replay.as_json() == first.as_json()
    assert len(world.store.outbox) == 1

    # And the publisher posts a passing JUnit report, and the task is reported completed
    evidence = gate.post_evidence(
        PROJECT,
        cid,
        CI,
        EvidenceRequest.model_validate(
            {
                "check_id": "C1",
                "subject": "payments",
                "revision": REV,
                "environment": "staging",
                "scope": ["payments-api"],
                "observed_at": "2026-11-29T11:59:00Z",
                "source": {"system": "ci", "run_id": "1", "url": ""},
                "junit_xml": JUNIT_PASS,
            }
        ),
        None,
    ).as_json()
    assert (evidence["outcome"], evidence["trust"]) == ("pass", "verified")
    report = gate.report(
        PROJECT,
        cid,
        "T1",
        REQUESTER,
        ReportRequest.model_validate(
            {
                "plan_digest": digest,
                "status": "completed",
                "checks": [{"check_id": "C1", "evidence_id": evidence["evidence_id"]}],
            }
        ),
        None,
    ).as_json()
    assert report["passes"] is True and report["attempt"] == 1

    # Then the recorded decision is ready and the chain verifies with one event per accepted write
    recorded = gate.record_decision(PROJECT, cid, REQUESTER, None).as_json()
    assert recorded["decision"] == "ready", recorded["findings"]
    audit = gate.audit(StreamRef(PROJECT, cid), REQUESTER, 500, None).as_json()
    assert audit["verification"]["valid"] is True
    assert audit["verification"]["length"] == recorded["seq"] == 9


def test_an_allow_list_change_between_check_and_write_refuses_the_execution(world: World) -> None:
    # Given an approved plan that declares a dispatch_checks action
    from sentinel_domain.models import ProjectConfig
    from support.world import ADMIN, CONFIG

    gate = world.gate
    cid = world.candidate()["candidate_id"]
    proposal = gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()
    plan = dict(
        proposal["plan"],
        actions=[{"action_id": "A1", "type": "dispatch_checks", "params": {"checks": ["C1"]}}],
    )
    digest = gate.put_plan(PROJECT, cid, REQUESTER, plan, f'"{proposal["plan_digest"]}"').plan_digest
    gate.review(
        PROJECT, cid, REVIEWER, ReviewRequest(decision="approve", plan_digest=digest, revision=REV), None
    )
    # When the admin drops dispatch_checks from the allow-list just before the execution's write lands
    store_append = world.store.append
    dropped = []

    def append_after_config_change(a):
        if not dropped and any(entry.get("kind") == "action" for entry in a.outbox):
            dropped.append(
                gate.put_config(
                    PROJECT,
                    ADMIN,
                    ProjectConfig.model_validate(dict(CONFIG, allowed_action_types=["notify"])),
                    '"1"',
                )
            )
        return store_append(a)

    world.store.append = append_after_config_change
    # Then the write's condition on the project chain fails, the re-judged execution is refused
    import pytest

    from sentinel_domain.errors import Refusal

    with pytest.raises(Refusal) as refused:
        gate.execute(
            PROJECT,
            cid,
            "A1",
            REQUESTER,
            ExecutionRequest(plan_digest=digest, params={"checks": ["C1"]}),
            "key-1",
        )
    assert refused.value.code == "ACTION_NOT_ALLOWED"
    assert world.store.outbox == []
