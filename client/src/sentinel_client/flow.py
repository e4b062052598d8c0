"""The end-to-end ready flow of API.md, through the HTTP API only. The demo, the HTTP tests and the live
acceptance gate all run this one flow; it raises FlowError the moment a step does not behave as specified."""

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sentinel_client.api import Response, SentinelClient


class FlowError(Exception):
    pass


@dataclass
class FlowResult:
    candidate_id: str = ""
    plan_digest: str = ""
    accepted_writes: int = 0
    decision: dict[str, Any] = field(default_factory=dict)
    verification: dict[str, Any] = field(default_factory=dict)
    execution: dict[str, Any] = field(default_factory=dict)
    evidence: list[dict[str, Any]] = field(default_factory=list)


def junit_report(suite: str, tests: int) -> str:
    cases = "".join(
        f'<testcase classname="{suite}" name="test_{n}" time="0.01"/>' for n in range(1, tests + 1)
    )
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><testsuite name="{suite}" tests="{tests}">{cases}</testsuite>'
    )


def _expect(response: Response, status: int, step: str) -> dict[str, Any]:
    if response.status != status:
        raise FlowError(f"{step}: expected HTTP {status}, got {response.status}: {response.body}")
    return response.body if isinstance(response.body, dict) else {}


def _codes(decision: dict[str, Any]) -> list[str]:
    return sorted({f["code"] for f in decision.get("findings", [])})


def run_ready_flow(
    clients: dict[str, SentinelClient],
    project: str,
    *,
    subject: str = "payments",
    environment: str = "staging",
    files: list[str] | None = None,
    say: Callable[[str], None] = lambda _line: None,
    outbox_count: Callable[[str], int] | None = None,
    revision: str | None = None,
) -> FlowResult:
    """clients: requester, publisher, reviewer. `outbox_count(execution_id)` tells how many side effects the
    outbox delivered for an execution, where the caller can see the outbox. `revision` is the commit to
    make ready (a real one, for the hook's tests); by default a random one, so runs never collide."""
    requester, publisher, reviewer = clients["requester"], clients["publisher"], clients["reviewer"]
    out = FlowResult()
    revision, base = revision or secrets.token_hex(20), secrets.token_hex(20)
    change = {
        "files": files or ["services/payments/api.py", "services/payments/ledger.py", "scripts/release.sh"]
    }

    def decision(step: str, expected: list[str] | None) -> dict[str, Any]:
        body = _expect(requester.decision(project, out.candidate_id), 200, f"{step}: decision")
        codes = _codes(body)
        say(f"   decision: {body.get('decision')}  findings: {', '.join(codes) or '-'}")
        if expected is not None and (body.get("decision") != "hold" or codes != sorted(expected)):
            raise FlowError(
                f"{step}: expected hold with {sorted(expected)}, got {body.get('decision')} {codes}"
            )
        return body

    say("1. The requester creates a candidate from its change; the trusted CI publisher attests it")
    created = _expect(
        requester.create_candidate(
            project,
            {
                "subject": subject,
                "base_revision": base,
                "revision": revision,
                "environment": environment,
                "change": change,
            },
        ),
        201,
        "create candidate",
    )
    out.candidate_id, out.accepted_writes = created["candidate_id"], 1
    say(
        f"   candidate {out.candidate_id}: {len(created['obligations'])} obligation(s) on "
        f"{', '.join(created['scope'])} ({created['change_context']})"
    )
    decision("after create", ["CHANGE_CONTEXT_UNVERIFIED", "PLAN_MISSING"])
    attested = _expect(publisher.add_change_context(project, out.candidate_id, change), 201, "attest")
    out.accepted_writes += 1
    if attested["change_context"] != "attested" or attested["added_obligations"]:
        raise FlowError(f"attest: expected attested with nothing added, got {attested}")
    say(f"   change context: {attested['change_context']}")
    decision("after attest", ["PLAN_MISSING"])

    say("2. The requester asks for a proposal, then amends it with one dispatch_checks action")
    proposal = _expect(requester.propose(project, out.candidate_id), 201, "proposal")
    out.accepted_writes += 1
    say(
        f"   proposal v{proposal['plan_version']} mode={proposal['mode']} "
        f"reason={proposal.get('fallback_reason')} tasks={len(proposal['plan']['tasks'])}"
    )
    checks = [c["check_id"] for t in proposal["plan"]["tasks"] for c in t["checks"]]
    plan = dict(
        proposal["plan"],
        actions=[
            {
                "action_id": "dispatch",
                "type": "dispatch_checks",
                "params": {"checks": checks},
                "max_executions": 1,
            }
        ],
    )
    amended = _expect(
        requester.put_plan(project, out.candidate_id, plan, if_match=proposal["plan_digest"]),
        201,
        "amend plan",
    )
    out.accepted_writes += 1
    out.plan_digest = amended["plan_digest"]
    say(f"   plan v{amended['plan_version']} digest {out.plan_digest[:16]}…")

    say("3. The decision holds")
    decision("after plan", ["EVIDENCE_MISSING", "REVIEW_MISSING", "TASK_NOT_REPORTED"])

    say("4. A human reviewer approves the exact digest and revision; the decision still holds")
    review = _expect(
        reviewer.review(
            project,
            out.candidate_id,
            {
                "decision": "approve",
                "plan_digest": out.plan_digest,
                "revision": revision,
                "comment": "looks right",
            },
        ),
        201,
        "approve",
    )
    out.accepted_writes += 1
    say(f"   approved until {review['expires_at']}")
    decision("after approval", ["EVIDENCE_MISSING", "TASK_NOT_REPORTED"])

    say("5. The requester executes the declared action; a replay causes no second side effect")
    key = "flow-" + secrets.token_hex(8)
    body = {"plan_digest": out.plan_digest, "params": {"checks": checks}}
    first = requester.execute(project, out.candidate_id, "dispatch", body, idempotency_key=key)
    out.execution = _expect(first, 201, "execute")
    out.accepted_writes += 1
    replay = requester.execute(project, out.candidate_id, "dispatch", body, idempotency_key=key)
    if replay.status != 201 or not replay.replayed or replay.body != first.body:
        raise FlowError(
            f"replay: expected the first result with Idempotent-Replay, got {replay.status} "
            f"{replay.headers.get('idempotent-replay')} {replay.body}"
        )
    say(
        f"   execution {out.execution['execution_id']}: {out.execution['side_effect']['type']} "
        f"via {out.execution['side_effect']['delivery']}; replay answered from the record "
        "(Idempotent-Replay: true)"
    )
    if outbox_count is not None:
        delivered = outbox_count(out.execution["execution_id"])
        if delivered != 1:
            raise FlowError(f"outbox: expected exactly one side effect, saw {delivered}")
        say("   outbox: exactly one side effect delivered")

    say("6. The trusted publisher posts one JUnit report per check")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    task_checks = [(t["task_id"], c) for t in proposal["plan"]["tasks"] for c in t["checks"]]
    obligations = {o["obligation_id"]: o for o in created["obligations"]}
    by_check: dict[str, str] = {}
    for _task_id, check in task_checks:
        scope = [obligations[o]["scope"] for o in check["covers"]]
        evidence = _expect(
            publisher.post_evidence(
                project,
                out.candidate_id,
                {
                    "check_id": check["check_id"],
                    "subject": subject,
                    "revision": revision,
                    "environment": environment,
                    "scope": scope,
                    "observed_at": now,
                    "source": {"system": "ci", "run_id": key, "url": ""},
                    "junit_xml": junit_report(check["check_id"], 3),
                },
            ),
            201,
            f"evidence {check['check_id']}",
        )
        out.accepted_writes += 1
        out.evidence.append(evidence)
        by_check[check["check_id"]] = evidence["evidence_id"]
        if (evidence["outcome"], evidence["trust"], evidence["binding"]["mismatches"]) != (
            "pass",
            "verified",
            [],
        ):
            raise FlowError(f"evidence {check['check_id']}: expected pass, verified, bound; got {evidence}")
        say(
            f"   {check['check_id']}: {evidence['outcome']}, {evidence['trust']}, "
            f"{evidence['counts']['tests']} tests, bound to {len(evidence['binding']['obligation_ids'])} "
            "obligation(s)"
        )
    decision("after evidence", ["TASK_NOT_REPORTED"])

    say("7. The requester reports each task completed; the report writer sets passes")
    for task in proposal["plan"]["tasks"]:
        claims = [{"check_id": c["check_id"], "evidence_id": by_check[c["check_id"]]} for c in task["checks"]]
        reported = _expect(
            requester.report(
                project,
                out.candidate_id,
                task["task_id"],
                {"plan_digest": out.plan_digest, "status": "completed", "checks": claims, "summary": "done"},
            ),
            201,
            f"report {task['task_id']}",
        )
        out.accepted_writes += 1
        if not reported["passes"]:
            raise FlowError(f"report {task['task_id']}: expected passes, got {reported}")
        say(f"   {task['task_id']}: attempt {reported['attempt']} {reported['recorded_status']}, passes")

    say("8. The recorded decision is ready; the audit chain verifies")
    out.decision = _expect(requester.record_decision(project, out.candidate_id), 201, "record decision")
    out.accepted_writes += 1
    say(f"   decision: {out.decision['decision']}  facts {out.decision['facts_digest'][:16]}…")
    if out.decision["decision"] != "ready" or out.decision["findings"]:
        raise FlowError(f"final: expected ready, got {out.decision}")
    audit = _expect(requester.candidate_audit(project, out.candidate_id, limit=500), 200, "audit")
    out.verification = audit["verification"]
    say(
        f"   audit chain: valid={out.verification['valid']} length={out.verification['length']} "
        f"(accepted writes: {out.accepted_writes})"
    )
    if not out.verification["valid"] or out.verification["length"] != out.accepted_writes:
        raise FlowError(f"audit: expected a valid chain of {out.accepted_writes}, got {out.verification}")
    return out
