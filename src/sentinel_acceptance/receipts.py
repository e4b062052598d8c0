"""The acceptance checks of signed decision receipts (docs/receipts.md), judged from what the service
answered:

- `receipt_keys`: GET /v1/keys answers anonymously, with ECDSA P-256 public keys and nothing else (no secret,
  token, account id or ARN: the same rule as /v1/health);
- `receipt`: the flow's recorded `ready` decision carries a receipt that the published key verifies, offline,
  for the flow's commit, the acceptance project and its environment, now; and the same receipt is refused for
  another commit (a verifier that accepts anything is not one)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from sentinel_domain.receipts import SIGNING_ALGORITHM, ReceiptRefused, verify_receipt
from sentinel_domain.times import format_time

from .checks import BLOCKED, CheckFailed, CheckSkipped
from .service import Front, RecordingClient, leaks
from .target import Target

KMS_KEY_ID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
FLOW_ENVIRONMENT = "staging"  # the environment sentinel_client.flow.run_ready_flow creates its candidate in
TITLES = {
    "receipt_keys": "/v1/keys answers anonymously with the receipt signing key (ECDSA P-256) and no secret",
    "receipt": "The ready decision's receipt verifies offline with the published key, for its commit only",
}


def receipt_keys(target: Target, front: Front, published: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """Fills `published` (key id -> PEM) for the `receipt` check."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    answer = RecordingClient(front.url(), None, "anonymous", front.record).request("GET", "/keys")
    text = answer.raw.decode("utf-8", "replace")
    if (
        answer.status != 200
        or not isinstance(answer.body, dict)
        or not isinstance(answer.body.get("keys"), list)
    ):
        raise CheckFailed(f"GET /v1/keys without a token answered {answer.status}", {"body": text[:500]})
    problems = []
    keys = answer.body["keys"]
    if not keys:
        problems.append("no key: the gate cannot sign receipts, so it records no ready decision")
    for key in keys:
        if not isinstance(key, dict) or set(key) != {"key_id", "algorithm", "public_key"}:
            problems.append(f"a key entry of another shape: {str(key)[:120]}")
            continue
        if key["algorithm"] != SIGNING_ALGORITHM:
            problems.append(f"{key['key_id']}: algorithm {key['algorithm']}")
        try:
            public = serialization.load_pem_public_key(str(key["public_key"]).encode("ascii"))
        except (ValueError, UnicodeEncodeError):
            problems.append(f"{key['key_id']}: not a PEM public key")
            continue
        if not isinstance(public, ec.EllipticCurvePublicKey) or public.curve.name != "secp256r1":
            problems.append(f"{key['key_id']}: not a P-256 key")
        published[str(key["key_id"])] = str(key["public_key"])
    # A KMS key id is a UUID, whose last group may be twelve digits: not an account id, so it is not scanned.
    scanned = KMS_KEY_ID.sub("", text)
    problems += [f"carries {what}" for what in leaks(answer.body, scanned, [])]
    evidence = {"keys": [{"key_id": k.get("key_id"), "algorithm": k.get("algorithm")} for k in keys]}
    if problems:
        published.clear()
        raise CheckFailed("keys: " + "; ".join(problems), evidence)
    return f"{len(keys)} ECDSA P-256 key(s), anonymously, no secret or account id", evidence


def receipt(target: Target, front: Front, published: dict[str, str]) -> tuple[str, dict[str, Any]]:
    from sentinel_service.adapters.receipt_signer import signature_check

    if front.flow is None or not front.flow.decision:
        raise CheckSkipped(BLOCKED, "the flow recorded no decision")
    if not published:
        raise CheckSkipped(BLOCKED, "no published key to verify with (receipt_keys did not pass)")
    decision = front.flow.decision
    envelope = decision.get("receipt")
    if not isinstance(envelope, dict):
        raise CheckFailed(f"the recorded {decision.get('decision')} decision carries no receipt")
    check = signature_check(dict(published))
    at = format_time(datetime.now(UTC))
    revision = str(decision.get("revision"))
    try:
        statement = verify_receipt(envelope, check, revision, target.project, FLOW_ENVIRONMENT, at)
    except ReceiptRefused as refused:
        raise CheckFailed(f"the receipt is refused: {refused.code}: {refused.detail}") from None
    other = "0" * 40 if revision != "0" * 40 else "1" * 40
    try:
        verify_receipt(envelope, check, other, target.project, FLOW_ENVIRONMENT, at)
    except ReceiptRefused as refused:
        if refused.code != "RECEIPT_REVISION_MISMATCH":
            raise CheckFailed(f"for another commit the receipt is refused as {refused.code}") from None
    else:
        raise CheckFailed("the receipt verified for another commit too")
    predicate = statement["predicate"]
    evidence = {
        "key_id": envelope["signatures"][0].get("keyid"),
        "revision": predicate["revision"],
        "expires_at": predicate["expires_at"],
        "facts_digest_matches": predicate["facts_digest"] == decision.get("facts_digest"),
    }
    if not evidence["facts_digest_matches"]:
        raise CheckFailed("the receipt's facts digest is not the decision's", evidence)
    return (
        f"verifies for {revision[:12]}… until {predicate['expires_at']}; refused for another commit",
        evidence,
    )
