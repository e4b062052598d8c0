"""Part 8: what the AWS witness costs per million witness writes (issue 13), measured on moto for the request
counts and priced with bench/pricing.py.

Every accepted write of the gate leaves one checkpoint outbox item; the witness writer re-verifies it and
appends it to the S3 witness, signing each record with a KMS ECC key (one by one). This section counts the
S3 and KMS requests one append really issues (moto, in-process), the record's size, and the requests the
newest-checkpoint read issues, then prices:

- per-record signing (what is built): one S3 PUT and one KMS Sign per witness write;
- periodic signed digests (CloudTrail's design, not built): the same PUT per write, plus one digest object
  and one Sign per 5-minute period, whatever the volume;

and the volume at which the two cost the same. Lambda and Pipes for the writer are priced from assumed
in-region latencies (S3 PUT 20 ms, KMS Sign 10 ms, GET and LIST 10 ms) and the pipe's batches of ten."""

import json
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from bench.common import ensure_repo_on_path, r, section_main, set_fake_aws
from bench.pricing import PRICES, lambda_cost

PERIODS_PER_MONTH = 30 * 24 * 12  # one digest per 5-minute period
STREAM_RECORDS_PER_WRITE = 3  # the event, the head and the checkpoint item (a large fact adds its parts)
WRITER_BATCH = 10
LATENCY_MS = {"put_object": 20.0, "sign": 10.0, "get_object": 10.0, "list_object_versions": 10.0}


class Counting:
    def __init__(self, client: Any, counts: Counter[str]) -> None:
        self._client, self._counts = client, counts

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(**kwargs: Any) -> Any:
            self._counts[name] += 1
            return attr(**kwargs)

        return call


def measure(n: int) -> dict[str, Any]:
    import boto3
    from moto import mock_aws

    from sentinel_domain.integrity import ChainSeal
    from sentinel_domain.ports import StreamRef
    from sentinel_service.adapters.s3_witness import S3Witness
    from sentinel_service.adapters.witness_records import KmsSigner

    seal = ChainSeal(bytes(range(32)))
    counts: Counter[str] = Counter()
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        kms = boto3.client("kms", region_name="us-east-1")
        s3.create_bucket(Bucket="bench-witness", ObjectLockEnabledForBucket=True)
        key = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
        witness = S3Witness(
            Counting(s3, counts), "bench-witness", seal, signer=KmsSigner(Counting(kms, counts), key)
        )
        at = "2026-12-01T00:00:00.000000Z"
        started = time.perf_counter()
        for seq in range(1, n + 1):
            witness.append(seal.checkpoint("bench", "cand_bench", seq, f"{seq:064x}", at))
        append_local_ms = (time.perf_counter() - started) * 1000 / n
        appends = dict(counts)
        body = s3.get_object(
            Bucket="bench-witness", Key=s3.list_objects_v2(Bucket="bench-witness")["Contents"][0]["Key"]
        )
        record_bytes = len(body["Body"].read())
        counts.clear()
        witness.newest(StreamRef("bench", "cand_bench"))
        newest = dict(counts)
    return {
        "appends": n,
        "requests_per_append": {k: v / n for k, v in sorted(appends.items())},
        "requests_per_newest": newest,
        "record_bytes": record_bytes,
        "append_local_ms_on_moto": r(append_local_ms),
    }


def price(m: dict[str, Any]) -> dict[str, Any]:
    per = m["requests_per_append"]
    put = per.get("put_object", 0) * PRICES["s3_put_per_thousand"] * 1000  # per million appends
    sign = per.get("sign", 0) * PRICES["kms_asymmetric_per_ten_thousand"] * 100
    writer_ms = sum(LATENCY_MS.get(op, 10.0) * count for op, count in per.items())
    invocations = STREAM_RECORDS_PER_WRITE / WRITER_BATCH
    # Each invocation is billed for the records it handles; every record but the checkpoint notes a chain
    # change (at most one PUT per chain per 5 minutes, none when a container noted it already).
    lam = invocations * lambda_cost(writer_ms * WRITER_BATCH / STREAM_RECORDS_PER_WRITE) * 1e6
    pipes = STREAM_RECORDS_PER_WRITE * PRICES["pipes_per_million"]
    change_notes_max = PRICES["s3_put_per_thousand"] * 1000  # a chain written once per window: one note each
    storage = m["record_bytes"] * 1e6 / 1e9 * PRICES["s3_standard_gb_month"] * (400 / 30)  # kept 400 days
    digest_month = PERIODS_PER_MONTH * (
        PRICES["s3_put_per_thousand"] / 1000 + PRICES["kms_asymmetric_per_ten_thousand"] / 10_000
    )
    newest = m["requests_per_newest"]
    read = (
        newest.get("list_object_versions", 0) * PRICES["s3_list_per_thousand"]
        + newest.get("get_object", 0) * PRICES["s3_get_per_thousand"]
    ) * 1000
    return {
        "per_million_witness_writes": {
            "s3_put": r(put),
            "kms_sign": r(sign),
            "writer_lambda": r(lam),
            "pipes": r(pipes),
            "change_notes_at_most": r(change_notes_max),
            "storage_for_400_days": r(storage),
            "per_record_signing_total": r(put + sign + lam + pipes),
            "digest_signing_total": r(put + lam + pipes),
        },
        "digest_fixed_per_month": r(digest_month, 3),
        "kms_key_per_month": PRICES["kms_key_month"],
        "break_even_writes_per_month": int(digest_month / (sign / 1e6)) if sign else None,
        "newest_read_per_million": r(read),
        "assumed_latency_ms": LATENCY_MS,
        "prices_as_of": PRICES["witness_prices_as_of"],
    }


def run(quick: bool) -> dict[str, Any]:
    ensure_repo_on_path()
    set_fake_aws()
    measured = measure(20 if quick else 200)
    result = {"measured": measured, "cost": price(measured), "at": datetime.now(UTC).isoformat()}
    cost = result["cost"]["per_million_witness_writes"]
    print(
        f"witness: per million writes ${cost['per_record_signing_total']} signed one by one "
        f"(S3 PUT ${cost['s3_put']} + KMS Sign ${cost['kms_sign']} + Lambda ${cost['writer_lambda']} + "
        f"Pipes ${cost['pipes']}), ${cost['digest_signing_total']} with 5-minute digests "
        f"(+ ${result['cost']['digest_fixed_per_month']} a month); equal at "
        f"{result['cost']['break_even_writes_per_month']:,} writes a month",
        flush=True,
    )
    return json.loads(json.dumps(result, default=str))


if __name__ == "__main__":
    section_main("witness_cost", run)
