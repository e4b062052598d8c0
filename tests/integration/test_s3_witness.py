"""The AWS witness (S3 under Object Lock, records signed with a KMS ECC key) on moto: create-only appends,
the newest checkpoint of a chain in two requests, forks and forgeries refused, tamper findings kept once,
faults as StoreUnavailable, and records an auditor verifies offline with the public key alone."""

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.ports import StreamRef, WitnessConflict
from sentinel_service.adapters.s3_witness import (
    CheckpointRejected,
    S3Witness,
    checkpoint_key,
    seq_of_key,
)
from sentinel_service.adapters.witness_records import public_key_pem, verify_witness_record
from support.moto_world import client_error
from support.witness_world import SEAL, aws_clients, make_witness, witness_bucket

CHAIN = StreamRef("payments", "cand-1")
PROJECT_CHAIN = StreamRef("payments")
AT = "2026-12-01T00:00:00Z"


def cp(ref: StreamRef, seq: int, hash_: str | None = None) -> dict[str, Any]:
    return SEAL.checkpoint(ref.project, ref.candidate_id, seq, hash_ or f"{seq:064x}", AT)


@pytest.fixture
def aws(moto: Any) -> Any:
    s3, kms = aws_clients()
    bucket = witness_bucket(s3, f"witness-{len(s3.list_buckets()['Buckets'])}")
    return s3, kms, bucket


@pytest.fixture
def witness(aws: Any) -> S3Witness:
    return make_witness(*aws)


def keys(s3: Any, bucket: str, prefix: str = "") -> list[str]:
    return [c["Key"] for c in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]


# ---- what moto enforces (so the tests below mean what they say) --------------------------------------------


def test_moto_enforces_if_none_match_and_compliance_retention(aws: Any) -> None:
    # Given an object written create-only in the compliance-mode bucket
    s3, _, bucket = aws
    s3.put_object(Bucket=bucket, Key="k", Body=b"1", IfNoneMatch="*", ChecksumAlgorithm="SHA256")
    # When it is written again create-only, Then S3 (moto) answers 412
    with pytest.raises(ClientError) as again:
        s3.put_object(Bucket=bucket, Key="k", Body=b"2", IfNoneMatch="*", ChecksumAlgorithm="SHA256")
    assert again.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    # And the locked version cannot be deleted, while the retention runs
    (version,) = s3.list_object_versions(Bucket=bucket, Prefix="k")["Versions"]
    with pytest.raises(ClientError, match="AccessDenied"):
        s3.delete_object(Bucket=bucket, Key="k", VersionId=version["VersionId"])
    head = s3.head_object(Bucket=bucket, Key="k")
    assert head["ObjectLockMode"] == "COMPLIANCE"


# ---- append and newest -------------------------------------------------------------------------------------


def test_append_is_create_only_and_idempotent(witness: S3Witness) -> None:
    # Given a checkpoint tagged under the chain key
    first = cp(CHAIN, 1)
    # When it is appended twice (at-least-once delivery), Then it is written once
    assert witness.append(first) is True
    assert witness.append(dict(first)) is False
    assert witness.newest(CHAIN) == first


def test_a_different_checkpoint_at_a_witnessed_seq_is_a_fork(witness: S3Witness, aws: Any) -> None:
    # Given seq 3 witnessed
    s3, _, bucket = aws
    witness.append(cp(CHAIN, 3))
    # When a checkpoint with another hash, tagged under the same key, arrives for seq 3
    # Then the witness refuses it as a conflict and keeps the first
    with pytest.raises(WitnessConflict):
        witness.append(cp(CHAIN, 3, "f" * 64))
    assert witness.newest(CHAIN) == cp(CHAIN, 3)
    assert len(s3.list_object_versions(Bucket=bucket)["Versions"]) == 1


@pytest.mark.parametrize(
    "forge",
    [
        lambda c: {**c, "mac": "0" * 64},
        lambda c: {**c, "hash": "e" * 64},
        lambda c: {**c, "seq": c["seq"] + 1},
        lambda c: {**c, "extra": 1},
        lambda c: {k: v for k, v in c.items() if k != "mac"},
    ],
    ids=["mac", "hash", "seq", "extra-field", "no-mac"],
)
def test_a_forged_checkpoint_never_reaches_the_bucket(witness: S3Witness, aws: Any, forge: Any) -> None:
    # Given a checkpoint altered after it was tagged (or tagged by someone without the key)
    s3, _, bucket = aws
    # When it is appended, Then it is refused and nothing is written
    with pytest.raises(CheckpointRejected):
        witness.append(forge(cp(CHAIN, 4)))
    assert keys(s3, bucket) == []


def test_newest_is_the_highest_seq_of_exactly_that_chain(witness: S3Witness) -> None:
    # Given checkpoints written out of order, on a candidate chain, its project chain and a look-alike chain
    for seq in (1, 10, 2, 9):
        witness.append(cp(CHAIN, seq))
    witness.append(cp(PROJECT_CHAIN, 7))
    witness.append(cp(StreamRef("payments", "cand-10"), 11))
    # When each chain's newest checkpoint is asked for, Then it is that chain's highest seq
    assert witness.newest(CHAIN)["seq"] == 10  # type: ignore[index]
    assert witness.newest(PROJECT_CHAIN)["seq"] == 7  # type: ignore[index]
    assert witness.newest(StreamRef("payments", "cand-2")) is None
    assert witness.newest(StreamRef("other")) is None


def test_newest_costs_one_listing_and_one_read(aws: Any) -> None:
    # Given a chain with many checkpoints
    s3, kms, bucket = aws
    calls: list[str] = []

    class Counting:
        def __getattr__(self, name: str) -> Any:
            calls.append(name)
            return getattr(s3, name)

    writer = make_witness(s3, kms, bucket)
    for seq in range(1, 6):
        writer.append(cp(CHAIN, seq))
    reader = S3Witness(Counting(), bucket, SEAL)
    # When the newest checkpoint is read, Then two requests suffice
    assert reader.newest(CHAIN)["seq"] == 5  # type: ignore[index]
    assert calls == ["list_object_versions", "get_object"]


def test_the_key_layout_sorts_newest_first() -> None:
    assert checkpoint_key(CHAIN, 1) == "checkpoints/payments/cand-1/999999999999.json"
    assert checkpoint_key(PROJECT_CHAIN, 10**12 - 1) == "checkpoints/payments/_project/000000000001.json"
    assert sorted(checkpoint_key(CHAIN, s) for s in (1, 2, 10, 100)) == [
        checkpoint_key(CHAIN, s) for s in (100, 10, 2, 1)
    ]
    assert seq_of_key(checkpoint_key(CHAIN, 42)) == 42
    with pytest.raises(CheckpointRejected):
        checkpoint_key(CHAIN, 10**12)


# ---- a witness someone else wrote to is not trusted --------------------------------------------------------


def test_a_hidden_newest_record_is_a_fault_not_an_older_newest(witness: S3Witness, aws: Any) -> None:
    # Given seqs 1 and 2 witnessed, then a delete marker put on seq 2 (it hides it from a plain listing)
    s3, _, bucket = aws
    witness.append(cp(CHAIN, 1))
    witness.append(cp(CHAIN, 2))
    s3.delete_object(Bucket=bucket, Key=checkpoint_key(CHAIN, 2))
    # When the newest checkpoint is read, Then the witness is not trusted (never "seq 1 is the newest")
    with pytest.raises(StoreUnavailable, match="overwritten or hidden"):
        witness.newest(CHAIN)


def test_an_overwritten_record_is_a_fault(witness: S3Witness, aws: Any) -> None:
    # Given seq 2 witnessed, then written again without If-None-Match (a new version on top)
    s3, _, bucket = aws
    witness.append(cp(CHAIN, 2))
    forged = {"format": "sentinel.witness/1", "kind": "checkpoint", "checkpoint": cp(CHAIN, 2, "a" * 64)}
    s3.put_object(Bucket=bucket, Key=checkpoint_key(CHAIN, 2), Body=json.dumps(forged).encode())
    # When it is read, Then it is a fault
    with pytest.raises(StoreUnavailable):
        witness.newest(CHAIN)


def test_a_record_the_chain_key_does_not_vouch_for_is_a_fault(witness: S3Witness, aws: Any) -> None:
    # Given a record put straight into the bucket with a checkpoint tagged under another key
    s3, _, bucket = aws
    record = {
        "format": "sentinel.witness/1",
        "kind": "checkpoint",
        "checkpoint": {**cp(CHAIN, 5), "mac": "0"},
    }
    s3.put_object(Bucket=bucket, Key=checkpoint_key(CHAIN, 5), Body=json.dumps(record).encode())
    # When it is read as the newest, Then it is refused
    with pytest.raises(StoreUnavailable, match="does not vouch"):
        witness.newest(CHAIN)


# ---- tamper findings ---------------------------------------------------------------------------------------


def test_the_first_tamper_finding_is_kept(witness: S3Witness) -> None:
    # Given a chain marked tampered twice
    assert witness.tampered(CHAIN) is None
    witness.mark_tampered(CHAIN, {"first_bad_seq": 4, "reason": "rolled back"})
    witness.mark_tampered(CHAIN, {"first_bad_seq": 9, "reason": "later"})
    # Then the first finding stands, and no other chain is marked
    assert witness.tampered(CHAIN) == {"first_bad_seq": 4, "reason": "rolled back"}
    assert witness.tampered(PROJECT_CHAIN) is None
    assert witness.tampered(StreamRef("payments", "cand-1.json")) is None


def test_a_tamper_finding_survives_a_delete_marker(witness: S3Witness, aws: Any) -> None:
    s3, _, bucket = aws
    witness.mark_tampered(PROJECT_CHAIN, {"reason": "x"})
    s3.delete_object(Bucket=bucket, Key="tampered/payments/_project.json")
    assert witness.tampered(PROJECT_CHAIN) == {"reason": "x"}


# ---- signatures --------------------------------------------------------------------------------------------


def test_every_record_verifies_offline_with_the_public_key_alone(witness: S3Witness, aws: Any) -> None:
    # Given a checkpoint and a tamper finding witnessed
    s3, kms, bucket = aws
    witness.append(cp(CHAIN, 1))
    witness.mark_tampered(CHAIN, {"reason": "x"})
    pem = public_key_pem(kms, witness._signer.key_id)  # type: ignore[union-attr]
    records = [json.loads(s3.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in keys(s3, bucket)]
    assert len(records) == 2
    # Then each verifies with the public key, and any change to a field does not
    for record in records:
        assert verify_witness_record(record, pem)
        assert not verify_witness_record({**record, "written_at": "2000-01-01T00:00:00Z"}, pem)
        assert not verify_witness_record({**record, "kind": "other"}, pem)
        assert not verify_witness_record({k: v for k, v in record.items() if k != "signature"}, pem)
    # And a record signed by another key does not verify under this one
    other = public_key_pem(
        kms, kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
    )
    assert not verify_witness_record(records[0], other)
    assert not verify_witness_record("not a record", pem)


# ---- faults ------------------------------------------------------------------------------------------------


class Failing:
    """An S3 client whose named operation fails with the given error code (once, or always)."""

    def __init__(self, s3: Any, operation: str, code: str, status: int, times: int = 1_000) -> None:
        self.s3, self.operation, self.code, self.status, self.left = s3, operation, code, status, times

    def __getattr__(self, name: str) -> Any:
        if name == self.operation and self.left > 0:

            def fail(**_: Any) -> Any:
                self.left -= 1
                raise client_error(self.code, name, self.status)

            return fail
        return getattr(self.s3, name)


@pytest.mark.parametrize(
    ("operation", "code", "status"),
    [
        ("put_object", "SlowDown", 503),
        ("put_object", "AccessDenied", 403),
        ("list_object_versions", "InternalError", 500),
        ("get_object", "AccessDenied", 403),
    ],
)
def test_faults_are_store_unavailable(aws: Any, operation: str, code: str, status: int) -> None:
    s3, kms, bucket = aws
    make_witness(s3, kms, bucket).append(cp(CHAIN, 1))
    witness = make_witness(Failing(s3, operation, code, status), kms, bucket)
    with pytest.raises(StoreUnavailable):
        if operation == "put_object":
            witness.append(cp(CHAIN, 2))
        else:
            witness.newest(CHAIN)


def test_a_concurrent_conditional_write_is_retried(aws: Any) -> None:
    # Given S3 answers 409 ConditionalRequestConflict once
    s3, kms, bucket = aws
    witness = make_witness(Failing(s3, "put_object", "ConditionalRequestConflict", 409, times=1), kms, bucket)
    # When a checkpoint is appended, Then the retry writes it
    assert witness.append(cp(CHAIN, 1)) is True
    assert witness.newest(CHAIN) == cp(CHAIN, 1)


def test_nothing_is_appended_unsigned(aws: Any) -> None:
    # Given a witness without a signing key (as the API functions hold it)
    s3, kms, bucket = aws
    witness = make_witness(s3, kms, bucket, signed=False)
    # When it is asked to append, Then it refuses, and writes nothing
    with pytest.raises(StoreUnavailable, match="signing key"):
        witness.append(cp(CHAIN, 1))
    assert keys(s3, bucket) == []


def test_a_signing_key_that_cannot_sign_is_a_fault(aws: Any) -> None:
    # Given KMS refuses to sign (a disabled key: moto signs with a disabled key, so the refusal is injected)
    s3, kms, bucket = aws
    witness = make_witness(s3, Failing(kms, "sign", "DisabledException", 400), bucket)
    # When a checkpoint is appended, Then it is a fault and nothing is written
    with pytest.raises(StoreUnavailable, match="could not sign"):
        witness.append(cp(CHAIN, 1))
    assert keys(s3, bucket) == []


def test_a_key_the_witness_never_writes_is_a_fault(witness: S3Witness, aws: Any) -> None:
    # Given an object under the chain's prefix whose name is not a reversed seq
    s3, _, bucket = aws
    s3.put_object(Bucket=bucket, Key="checkpoints/payments/cand-1/latest.json", Body=b"{}")
    # When the newest checkpoint is read, Then it is a fault, never a crash or a pass
    with pytest.raises(StoreUnavailable):
        witness.newest(CHAIN)
