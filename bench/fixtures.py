"""Synthetic, valid facts for large candidates: N obligations, the fallback plan (one task and one check per
obligation), an approval, one verified passing JUnit evidence per check and one passing report per task, so
`decide()` walks every check and answers `ready`. Built directly, without the Gate, so fixtures of 10,000
obligations take seconds (the product caps a candidate at 2,000; the decision itself has no cap).

`chain_items` lays the same facts out as DynamoStateStore writes them (events, fact parts, head), so a table
can be seeded with batch writes instead of one transaction per fact."""

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from sentinel_domain import audit
from sentinel_domain.canonical import canonical_text
from sentinel_domain.derivation import obligation_id
from sentinel_domain.models import Policy, ProjectConfig
from sentinel_domain.plans import fallback_plan, plan_digest
from sentinel_domain.ports import Append, StreamRef
from sentinel_domain.state import CandidateState, ProjectState, parse_facts
from sentinel_domain.times import format_time

PROJECT = "bench"
REV = "c" * 40
BASE = "d" * 40
AGENT = {"id": "agent-bench", "kind": "agent", "sponsor": "hank"}
CI = {"id": "ci-bot", "kind": "ci", "sponsor": None}
REVIEWER = {"id": "rita", "kind": "human", "sponsor": None}
ADMIN = {"id": "alice", "kind": "human", "sponsor": None}
UNIT_POLICY = {
    "check_type": "junit",
    "command": "pytest -q {scope}",
    "expected_exit_code": 0,
    "expected_artifacts": [],
    "fail_message": "Unit tests failed",
    "remediation_hint": "Run pytest -q locally and read the first failure",
    "max_evidence_age_seconds": 86400,
    "trusted_publishers": ["ci-bot"],
    "min_tests": 1,
}
CONFIG = {
    "environments": ["staging", "production"],
    "derivation_rules": [{"files": ["services/**"], "policy_id": "unit-tests"}],
    "unclassified_policy": "unit-tests",
    "change_context_publishers": ["ci-bot"],
    "allowed_action_types": ["dispatch_checks", "notify"],
    "notify_channels": ["release-room"],
    "approvals_required": 1,
    "approval_ttl_seconds": 86400,
    "settlement_required": False,
}


def _at(now: datetime, seconds: float, micros: int = 0) -> str:
    return format_time(now + timedelta(seconds=seconds, microseconds=micros))


def project_facts(now: datetime, project: str = PROJECT) -> list[dict[str, Any]]:
    policy = Policy.model_validate(UNIT_POLICY).model_dump(mode="json")
    config = ProjectConfig.model_validate(CONFIG).model_dump(mode="json")
    return [
        {"type": "project.created", "project": project, "recorded_at": _at(now, -7200)},
        {
            "type": "policy.set",
            "policy_id": "unit-tests",
            "version": 1,
            "policy": policy,
            "actor": ADMIN,
            "recorded_at": _at(now, -7100),
        },
        {
            "type": "config.set",
            "version": 1,
            "config": config,
            "actor": ADMIN,
            "recorded_at": _at(now, -7000),
        },
    ]


def candidate_facts(
    n: int, now: datetime, candidate_id: str = "cand_bench", project: str = PROJECT, mixed: bool = False
) -> list[dict[str, Any]]:
    """4 + 2n facts in chain order; every recorded_at lies before `now`, every evidence is fresh at `now`.
    `mixed` spoils some of them (failed, unverified, wrongly scoped, missing evidence; failed reports), so
    that a decision holds with findings of many kinds: what an equivalence check needs."""
    scopes = [f"services/mod{i:05d}" for i in range(n)]
    obligations = sorted(
        (
            {
                "obligation_id": obligation_id("unit-tests", s),
                "policy_id": "unit-tests",
                "scope": s,
                "reason": f"changed file {s}/api.py matches services/**",
            }
            for s in scopes
        ),
        key=lambda o: (o["scope"], o["policy_id"]),
    )
    change = {"files": sorted(f"{s}/api.py" for s in scopes), "openapi": []}
    policy = Policy.model_validate(UNIT_POLICY)
    plan = fallback_plan({o["obligation_id"]: o for o in obligations}, {"unit-tests": (1, policy)})
    digest = plan_digest(project, candidate_id, REV, plan)
    facts: list[dict[str, Any]] = [
        {
            "type": "candidate.created",
            "candidate_id": candidate_id,
            "subject": "payments",
            "base_revision": BASE,
            "revision": REV,
            "environment": "staging",
            "created_by": AGENT,
            "attested": False,
            "change": change,
            "obligations_added": obligations,
            "recorded_at": _at(now, -3600),
        },
        {
            "type": "change_context.added",
            "actor": CI,
            "attested": True,
            "change": change,
            "obligations_added": [],
            "recorded_at": _at(now, -3500),
        },
        {
            "type": "plan.stored",
            "plan_version": 1,
            "plan_digest": digest,
            "plan": plan,
            "author": AGENT,
            "mode": "fallback",
            "fallback_reason": "MODEL_NOT_CONFIGURED",
            "recorded_at": _at(now, -3400),
        },
        {
            "type": "review.recorded",
            "review_id": "rev_bench",
            "reviewer": REVIEWER,
            "decision": "approve",
            "plan_digest": digest,
            "revision": REV,
            "comment": "",
            "expires_at": _at(now, 86400 - 3300),
            "recorded_at": _at(now, -3300),
        },
    ]
    tasks = plan["tasks"]
    for i, task in enumerate(tasks):
        check = task["checks"][0]
        assert check["covers"] == [obligations[i]["obligation_id"]]  # the fallback plan keeps scope order
        scope = obligations[i]["scope"]
        if mixed and i % 13 == 5:
            continue  # no evidence for this check
        facts.append(
            {
                "type": "evidence.recorded",
                "evidence_id": f"ev_{i:06d}",
                "check_id": check["check_id"],
                "kind": "junit",
                "subject": "payments",
                "revision": REV,
                "environment": "staging",
                "scope": [scope],
                "observed_at": _at(now, -3100, i),
                "recorded_at": _at(now, -3000, i),
                "source": {"system": "ci", "run_id": f"run-{i}", "url": ""},
                "publisher": CI,
                "trust": "verified",
                "outcome": "pass",
                "counts": {"tests": 3, "failures": 0, "errors": 0, "skipped": 0},
                "exit_code": None,
                "artifacts": [],
                "raw_sha256": hashlib.sha256(f"junit-{i}".encode()).hexdigest(),
                "binding": {
                    "obligation_ids": list(check["covers"]),
                    "policy_id": "unit-tests",
                    "policy_version": 1,
                    "plan_digest": digest,
                    "mismatches": [],
                },
            }
        )
        if mixed:
            spoil = facts[-1]
            if i % 7 == 1:
                spoil["outcome"] = "fail"
            if i % 11 == 2:
                spoil["trust"] = "unverified"
            if i % 17 == 3:
                spoil["scope"] = ["elsewhere"]
            if i % 19 == 4:  # a second, newer evidence for the same check: the newest decides
                facts.append(
                    dict(
                        spoil,
                        evidence_id=f"ev_{i:06d}b",
                        outcome="unknown",
                        observed_at=_at(now, -3050, i),
                        recorded_at=_at(now, -2950, i),
                    )
                )
    for i, task in enumerate(tasks):
        check = task["checks"][0]
        facts.append(
            {
                "type": "task.reported",
                "task_id": task["task_id"],
                "plan_digest": digest,
                "attempt": 1,
                "claimed_status": "completed",
                "recorded_status": "failed" if mixed and i % 5 == 0 else "completed",
                "passes": not (mixed and i % 5 == 0),
                "checks": [{"check_id": check["check_id"], "evidence_id": f"ev_{i:06d}"}],
                "findings": [],
                "summary": "done",
                "blocked_reason": None,
                "reporter": AGENT,
                "recorded_at": _at(now, -2000, i),
            }
        )
    return facts


def fact_texts(facts: list[dict[str, Any]]) -> dict[int, str]:
    return {seq: canonical_text(fact) for seq, fact in enumerate(facts, start=1)}


def states(n: int, now: datetime, mixed: bool = False) -> tuple[CandidateState, ProjectState, str]:
    """The folded candidate and project, and `as_of`, for a candidate of n obligations."""
    as_of = format_time(now)
    project = ProjectState.from_facts(PROJECT, fact_texts(project_facts(now)))
    candidate = CandidateState.from_facts(
        parse_facts(fact_texts(candidate_facts(n, now, mixed=mixed))), as_of
    )
    return candidate, project, as_of


def _actor_id(fact: dict[str, Any]) -> str:
    for name in ("created_by", "actor", "author", "reviewer", "publisher", "reporter"):
        if isinstance(fact.get(name), dict):
            return str(fact[name]["id"])
    return "operator"


class _CaptureClient:
    """Stands in for boto3: keeps the TransactItems DynamoStateStore would send."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
        self.items.extend(op["Put"]["Item"] for op in kwargs["TransactItems"])
        return {}


def chain_items(
    table: str,
    project: str,
    candidate_id: str | None,
    facts: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The items DynamoStateStore writes for this chain, appended fact by fact; only the last HEAD kept."""
    from sentinel_service.adapters.dynamodb_store import DynamoStateStore

    capture = _CaptureClient()
    store = DynamoStateStore(capture, table)
    ref = StreamRef(project, candidate_id)
    prev_hash = None
    plan_digest_ = ""
    for seq, fact in enumerate(facts, start=1):
        text = canonical_text(fact)
        event = audit.next_event(
            project,
            candidate_id,
            seq - 1,
            prev_hash,
            fact["type"],
            _actor_id(fact),
            fact["recorded_at"],
            text,
        )
        if fact["type"] == "plan.stored":
            plan_digest_ = fact["plan_digest"]
        head: dict[str, Any] = {"seq": seq, "hash": event["hash"]}
        if candidate_id is not None:
            head.update(plan_digest=plan_digest_, approval_valid_until="")
        store.append(Append(ref, seq - 1, event, text, head))
        prev_hash = event["hash"]
    heads = [i for i in capture.items if i["sk"]["S"] == "HEAD"]
    return [i for i in capture.items if i["sk"]["S"] != "HEAD"] + heads[-1:]


def fixed_now() -> datetime:
    return datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
