"""The acceptance check of GET /v1/keys scans the answer as health's is scanned, except a KMS key id: a UUID
whose last group may be twelve digits is not an account id (sentinel_acceptance.receipts)."""

from sentinel_acceptance.receipts import KMS_KEY_ID
from sentinel_acceptance.service import leaks


def test_a_kms_key_id_is_not_taken_for_an_account_id_but_an_account_id_still_is() -> None:
    # Given a key list whose KMS key id ends in twelve digits
    text = '{"keys": [{"key_id": "1234abcd-12ab-34cd-56ef-123456789012", "algorithm": "ECDSA_P256_SHA256"}]}'
    # Then the raw scan would call it an account id, the check's scan does not
    assert leaks({}, text, []) == ["a 12-digit number (an account id)"]
    assert leaks({}, KMS_KEY_ID.sub("", text), []) == []
    # And an account id or an ARN beside it is still found
    arn = text.replace('"ECDSA_P256_SHA256"', '"arn:aws:kms:us-east-1:123456789012:key/x"')
    assert len(leaks({}, KMS_KEY_ID.sub("", arn), [])) == 2
