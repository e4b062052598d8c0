"""The AWS witness on moto (in-process): an Object Lock bucket in compliance mode, an ECC signing key, the
chain key as a fixed test key, and the state table's stream read back as the pipe would deliver it.

What moto enforces and what it does not (checked in tests/integration/test_s3_witness.py): If-None-Match on
PutObject (412 PreconditionFailed), and compliance retention (deleting a locked version is AccessDenied).
It enforces no IAM at all, so the witness writer's create-only permission is a template assertion
(tests/infrastructure/test_stack_integrity.py). Its KMS signs MessageType DIGEST wrongly (it hashes the
digest again), which is one reason the witness signs RAW messages."""

import json
from typing import Any

from sentinel_domain.integrity import ChainSeal
from sentinel_domain.ports import StreamRef
from sentinel_service.adapters.s3_witness import S3Witness
from sentinel_service.adapters.witness_records import KmsSigner
from support.world import SEAL as WORLD_SEAL

# The tests' one chain key (support.world): the gate seals its chains under it, the witness checks them.
SEAL: ChainSeal = WORLD_SEAL
BUCKET = "sentinel-witness-test"
RETENTION_DAYS = 400


def witness_bucket(s3: Any, name: str = BUCKET) -> str:
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    s3.put_object_lock_configuration(
        Bucket=name,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": RETENTION_DAYS}},
        },
    )
    return name


def signing_key(kms: Any) -> str:
    return str(
        kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY", Description="witness test key")[
            "KeyMetadata"
        ]["KeyId"]
    )


def aws_clients() -> tuple[Any, Any]:
    import boto3

    return boto3.client("s3", region_name="us-east-1"), boto3.client("kms", region_name="us-east-1")


def make_witness(s3: Any, kms: Any, bucket: str, clock: Any = None, signed: bool = True) -> S3Witness:
    signer = KmsSigner(kms, signing_key(kms)) if signed else None
    return S3Witness(s3, bucket, SEAL, signer=signer, clock=clock)


def checkpoint_outbox_item(ref: StreamRef, checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The outbox item an accepted write carries in its transaction (dynamodb_items.outbox_item's shape)."""
    pk = f"P#{ref.project}" + (f"#C#{ref.candidate_id}" if ref.candidate_id else "")
    return {
        "pk": {"S": pk},
        "sk": {"S": f"O#checkpoint-{checkpoint.get('seq')}"},
        "item": {"S": json.dumps(checkpoint, sort_keys=True, separators=(",", ":"))},
        "outbox_kind": {"S": "checkpoint"},
        "outbox_pending": {"S": "1"},
        "seq": {"N": str(checkpoint.get("seq"))},
        "recorded_at": {"S": str(checkpoint.get("at"))},
    }


def stream_record(event_name: str, item: dict[str, Any]) -> dict[str, Any]:
    """One DynamoDB stream record (view NEW_IMAGE) as the pipe hands it to the witness writer. moto 5.2.5
    answers DescribeStream with "Not yet implemented", so the tests build the records the stream would hold
    for the writes they make, in the shape AWS documents."""
    keys = {"pk": item["pk"], "sk": item["sk"]}
    body: dict[str, Any] = {"Keys": keys, "StreamViewType": "NEW_IMAGE"}
    if event_name != "REMOVE":
        body["NewImage"] = item
    return {
        "eventID": f"{event_name}-{item['pk']['S']}-{item['sk']['S']}",
        "eventName": event_name,
        "eventSource": "aws:dynamodb",
        "dynamodb": body,
    }
