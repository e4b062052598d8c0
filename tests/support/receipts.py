"""A recorded `ready` decision and its receipt, through the use cases on the in-memory store (the unit layer's
way to a real receipt), and the envelope surgery the tamper tests share."""

import base64
import json
from typing import Any

from sentinel_domain.models import ChangeContextRequest, EvidenceRequest, ReportRequest, ReviewRequest
from support.world import CI, PROJECT, REQUESTER, REV, REVIEWER, World

JUNIT_PASS = (
    '<testsuite name="s"><testcase classname="a" name="t1"/><testcase classname="a" name="t2"/></testsuite>'
)
OBSERVED_AT = "2026-11-29T11:59:00Z"


def ready_decision(world: World, observed_at: str = OBSERVED_AT) -> dict[str, Any]:
    """Given an attested candidate, an approved fallback plan, passing trusted evidence and a completed
    report, the recorded decision (as its body)."""
    gate = world.gate
    cid = world.candidate()["candidate_id"]
    change = ChangeContextRequest.model_validate({"change": {"files": ["services/payments/api.py"]}})
    gate.add_change_context(PROJECT, cid, CI, change, None)
    proposal = gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()
    digest = proposal["plan_digest"]
    review = ReviewRequest(decision="approve", plan_digest=digest, revision=REV)
    gate.review(PROJECT, cid, REVIEWER, review, None)
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
                "observed_at": observed_at,
                "source": {"system": "ci", "run_id": "1", "url": ""},
                "junit_xml": JUNIT_PASS,
            }
        ),
        None,
    ).as_json()
    report = {
        "plan_digest": digest,
        "status": "completed",
        "checks": [{"check_id": "C1", "evidence_id": evidence["evidence_id"]}],
    }
    gate.report(PROJECT, cid, "T1", REQUESTER, ReportRequest.model_validate(report), None)
    recorded = gate.record_decision(PROJECT, cid, REQUESTER, None).as_json()
    assert recorded["decision"] == "ready", recorded["findings"]
    return recorded


def payload_of(receipt: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(base64.b64decode(receipt["payload"]))
    return found


def with_payload(receipt: dict[str, Any], statement: dict[str, Any]) -> dict[str, Any]:
    """The receipt with another statement in it and the original signature (what a forger can do)."""
    body = json.dumps(statement, separators=(",", ":"), sort_keys=True).encode()
    return {**receipt, "payload": base64.b64encode(body).decode()}


def flip_byte(text: str, index: int) -> str:
    """The base64 text with one byte of what it encodes changed."""
    raw = bytearray(base64.b64decode(text))
    raw[index % len(raw)] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()
