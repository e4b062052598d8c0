"""Attacks on decision receipts (sentinel_domain.receipts): what a receipt must not verify for."""

import pytest

from sentinel_domain.receipts import ReceiptRefused, verify_receipt
from sentinel_service.adapters.receipt_signer import signature_check
from support.receipts import payload_of, ready_decision
from support.world import PROJECT, RECEIPT_SIGNER, REV, World

AT = "2026-11-29T12:30:00Z"
TRUSTED = signature_check({RECEIPT_SIGNER.key_id: RECEIPT_SIGNER.public_key_pem()})


@pytest.fixture(scope="module")
def receipt() -> dict:
    return ready_decision(World())["receipt"]


def test_a_receipt_for_one_subject_does_not_verify_for_another_subject_at_the_same_commit(receipt) -> None:
    # Given a genuine receipt of a ready decision for subject "payments" at commit REV (candidates are claimed
    # per subject, revision and environment: a monorepo's "billing" at the same commit is judged apart, and
    # may well hold)
    assert payload_of(receipt)["predicate"]["subject"] == "payments"
    # When the deploy step of "billing" verifies it for the commit it deploys
    with pytest.raises(ReceiptRefused) as caught:
        verify_receipt(receipt, TRUSTED, REV, PROJECT, "staging", AT, subject="billing")
    # Then it is refused with a stable reason, and the right subject still verifies
    assert caught.value.code == "RECEIPT_SUBJECT_MISMATCH"
    verify_receipt(receipt, TRUSTED, REV, PROJECT, "staging", AT, subject="payments")
