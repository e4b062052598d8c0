"""POST .../decisions answers a signed receipt for a recorded `ready` decision, and only for it; GET /v1/keys
answers the key that verifies it, without a token. Through the handlers behind the emulated gateway."""

import base64
import json
from typing import Any

import pytest

from sentinel_domain.canonical import digest
from sentinel_domain.ports import StreamRef
from sentinel_domain.receipts import ReceiptSignerUnavailable, verify_receipt
from sentinel_service.adapters.receipt_signer import read_keys, signature_check
from support.api import REV, Ready, audit_length, ok, passed_task, ready_candidate
from support.world import PROJECT, RECEIPT_SIGNER

AT = "2026-11-29T12:30:00Z"  # half an hour after the tests' clock: well inside every limit


def statement_of(receipt: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(base64.b64decode(receipt["payload"]))
    return found


def ready(api) -> Ready:
    handle = ready_candidate(api)
    passed_task(api, handle)
    return handle


def test_a_ready_decision_answers_a_receipt_that_the_published_key_verifies(api) -> None:
    # Given a candidate with everything a ready decision needs
    handle = ready(api)
    # When the decision is recorded
    body = ok(api, "POST", f"{handle.path}/decisions", headers={"Idempotency-Key": "d-1"})
    # Then it is ready and carries a DSSE envelope of an in-toto statement
    assert body["decision"] == "ready", body["findings"]
    receipt = body["receipt"]
    assert receipt["payloadType"] == "application/vnd.in-toto+json"
    # And the key GET /v1/keys answers without a token verifies it, for this commit, project and environment
    status, _h, keys = api.call("GET", "/v1/keys", as_=None)
    assert status == 200 and keys["keys"][0]["key_id"] == receipt["signatures"][0]["keyid"]
    check = signature_check(read_keys(json.dumps(keys)))
    statement = verify_receipt(receipt, check, REV, PROJECT, "staging", AT)
    predicate = statement["predicate"]
    assert statement["subject"][0]["digest"] == {"gitCommit": REV}
    assert predicate["candidate_id"] == handle.cid and predicate["plan_digest"] == handle.digest
    assert predicate["facts_digest"] == body["facts_digest"] and predicate["recorded_at"] == body["as_of"]
    assert [a["reviewer"] for a in predicate["approvals"]] == ["rita-reviewer"]
    assert predicate["policy_versions"] == {"unit-tests": 1}
    assert predicate["repository"] is None  # the project maps no GitHub repository
    # And the evidence (observed 11:59, at most a day old) is what expires first
    assert predicate["expires_at"] == "2026-11-30T11:59:00.000000Z"
    # And the fact on the chain keeps the statement's digest, not the signature
    stream = api.world.store.load(StreamRef(PROJECT, handle.cid))
    fact = json.loads(stream.facts[body["seq"]])
    assert fact["receipt_digest"] == digest(statement)
    # When the same request is replayed with its key
    status, headers, again = api.call("POST", f"{handle.path}/decisions", headers={"Idempotency-Key": "d-1"})
    # Then the replay answers the very same receipt and appends nothing
    assert status == 201 and headers.get("idempotent-replay") == "true"
    assert again["receipt"] == receipt
    assert audit_length(api, handle.cid) == body["seq"]


def test_a_hold_answers_no_receipt(api) -> None:
    # Given a candidate that still lacks evidence and a report
    handle = ready_candidate(api)
    # When the decision is recorded
    body = ok(api, "POST", f"{handle.path}/decisions")
    # Then it holds, is recorded, and carries no receipt
    assert body["decision"] == "hold" and body["seq"] > 0
    assert body["receipt"] is None


class FailingSigner:
    key_id = "broken"

    def public_key_pem(self) -> str:
        raise ReceiptSignerUnavailable("the key cannot be read")

    def sign(self, message: bytes) -> bytes:
        raise RuntimeError("KMS throttled")


@pytest.mark.parametrize("signer", [None, FailingSigner()], ids=["no key configured", "signer fails"])
def test_without_a_receipt_a_ready_decision_is_neither_recorded_nor_answered(api, signer) -> None:
    # Given a ready candidate and a gate whose receipt key is missing or failing
    handle = ready(api)
    before = audit_length(api, handle.cid)
    api.world.gate.receipt_signer = signer
    api.world.services.__dict__["receipt_signer"] = signer  # what the keys route reads (a cached property)
    # When the decision is recorded
    status, _h, body = api.call("POST", f"{handle.path}/decisions")
    # Then it is a hold that says it was not recorded, naming why, and nothing was appended
    assert status == 200 and body["decision"] == "hold" and body["recorded"] is False
    assert [f["code"] for f in body["findings"]] == ["STATE_UNAVAILABLE"]
    assert "receipt" in body["findings"][0]["detail"]
    assert body["receipt"] is None
    assert audit_length(api, handle.cid) == before
    # And the keys route says what it knows: no key, or a key it cannot read (503)
    status, _h, keys = api.call("GET", "/v1/keys", as_=None)
    if signer is None:
        assert (status, keys) == (200, {"keys": []})
    else:
        assert status == 503 and keys["code"] == "STATE_UNAVAILABLE"


def test_the_tests_receipt_key_is_the_one_published(api) -> None:
    # Given the tests' fixed key (a deterministic signer: the same receipt every run)
    status, _h, keys = api.call("GET", "/v1/keys", as_=None)
    # Then the route publishes exactly its public half and names its algorithm
    assert status == 200
    assert keys == {
        "keys": [
            {
                "key_id": RECEIPT_SIGNER.key_id,
                "algorithm": "ECDSA_P256_SHA256",
                "public_key": RECEIPT_SIGNER.public_key_pem(),
            }
        ]
    }


def test_a_signer_that_recovers_serves_the_retry_of_the_same_key(api) -> None:
    # Given a ready candidate whose signer fails once, asked with an idempotency key
    handle = ready(api)
    api.world.gate.receipt_signer = FailingSigner()
    status, _h, body = api.call("POST", f"{handle.path}/decisions", headers={"Idempotency-Key": "k-1"})
    assert status == 200 and body["recorded"] is False
    # When the signer works again and the client retries with the same key
    api.world.gate.receipt_signer = RECEIPT_SIGNER
    status, headers, body = api.call("POST", f"{handle.path}/decisions", headers={"Idempotency-Key": "k-1"})
    # Then the retry is a first write (nothing was kept from the failed attempt), ready with its receipt
    assert status == 201 and "idempotent-replay" not in headers
    assert body["decision"] == "ready" and body["receipt"]["signatures"][0]["keyid"] == RECEIPT_SIGNER.key_id
