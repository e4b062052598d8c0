"""Prices and the assumptions that turn measured units and local durations into dollars per million.

Every price is a us-east-1 list price, on demand:

- DynamoDB, since 2024-11-01 (AWS halved on-demand throughput prices that day): $0.625 per million write
  request units and $0.125 per million read request units. These are today's prices: the figures and targets
  stated "at current DynamoDB prices" use them. The brief's figures ($1.25 and $0.25, the list prices until
  2024-10-31) are kept beside them for the targets first stated in them.
- API Gateway HTTP API: $1.00 per million requests (the first 300 million a month; $0.90 after).
- Lambda arm64: $0.0000133334 per GB-s and $0.20 per million requests (the first 7.5 billion GB-s a month);
  INIT is billed like INVOKE since 2025-08-01.

Checked on 2026-11-29 against public pages (AWS Compute blog and third-party pricing summaries found by
search; the AWS pricing pages themselves were not reachable from here), so treat them as assumed until
someone reads the console."""

import re
from pathlib import Path
from typing import Any

PRICES: dict[str, Any] = {
    "as_of": "2026-11-29",
    "region": "us-east-1",
    "dynamodb_on_demand_wru_per_million": 1.25,
    "dynamodb_on_demand_rru_per_million": 0.25,
    "dynamodb_note": "the brief's prices (AWS list prices until 2024-10-31); since 2024-11-01 AWS lists "
    "$0.625 per million WRU and $0.125 per million RRU (a 50% cut), shown as 'current'",
    # Today's DynamoDB on-demand prices, listed since 2024-11-01.
    "dynamodb_current_since": "2024-11-01",
    "dynamodb_current_wru_per_million": 0.625,
    "dynamodb_current_rru_per_million": 0.125,
    "http_api_per_million": 1.00,
    "http_api_note": "first 300 million requests a month; $0.90 after",
    "lambda_arm64_gb_second": 0.0000133334,
    "lambda_requests_per_million": 0.20,
    "lambda_note": "arm64, first 7.5 billion GB-s a month; INIT is billed like INVOKE since 2025-08-01",
    # The witness (bench/witness_cost.py), us-east-1 list prices read on 2026-12-01: S3 Standard requests
    # (aws.amazon.com/s3/pricing), KMS requests (aws.amazon.com/kms/pricing: asymmetric requests other than
    # RSA 2048 at $0.15 per 10,000, i.e. 5x the symmetric rate; the first 20,000 requests a month of an
    # account are free and left out here), EventBridge Pipes ($0.40 per million requests of 64 KB).
    "witness_prices_as_of": "2026-12-01",
    "s3_put_per_thousand": 0.005,  # PUT, COPY, POST, LIST
    "s3_list_per_thousand": 0.005,
    "s3_get_per_thousand": 0.0004,
    "s3_standard_gb_month": 0.023,
    "kms_asymmetric_per_ten_thousand": 0.15,
    "kms_key_month": 1.00,
    "pipes_per_million": 0.40,
}


def _memory_mb() -> tuple[int, str]:
    """The functions' memory as infra/constructs/service_function.py sets it (read, not imported: CDK is
    slow)."""
    path = (
        Path(__file__).resolve().parents[1] / "src" / "sentinel_infra" / "constructs" / "service_function.py"
    )
    try:
        found = re.search(r"^MEMORY_MB = (\d+)", path.read_text(), re.MULTILINE)
    except OSError:
        found = None
    return (int(found.group(1)), "infra/constructs/service_function.py") if found else (1024, "assumed")


MEMORY_MB, MEMORY_SOURCE = _memory_mb()
ASSUMPTIONS: dict[str, Any] = {
    "lambda_memory_mb": MEMORY_MB,
    "lambda_memory_source": MEMORY_SOURCE,
    # Lambda gives a full vCPU at 1,769 MB and a share proportional to memory below it; local compute time
    # (one core of this machine, taken as equal to one Graviton core) is scaled by that share.
    "cpu_scale": round(max(1.0, 1769 / MEMORY_MB), 3),
    # In-region DynamoDB latencies per call (moto's own time is not DynamoDB's and is reported apart).
    "dynamodb_latency_ms": {
        "get_item": 4.0,
        "query": 5.0,
        "scan": 10.0,
        "put_item": 6.0,
        "delete_item": 6.0,
        "update_item": 6.0,
        "transact_write_items": 14.0,
    },
    "cold_start_share": 0.01,  # AWS: INITs occur in under 1% of invocations of production workloads
    "authorizer": "uncached: the HTTP API invokes the authorizer on every request (cached: result TTL hits)",
}


def lambda_cost(billed_ms: float, memory_mb: int | None = None) -> float:
    """Dollars for one invocation of billed_ms at the assumed memory: duration plus the request."""
    gb = (memory_mb or ASSUMPTIONS["lambda_memory_mb"]) / 1024
    return (
        billed_ms / 1000 * gb * PRICES["lambda_arm64_gb_second"] + PRICES["lambda_requests_per_million"] / 1e6
    )


def dynamodb_cost(rru: float, wru: float, current: bool = False) -> float:
    if current:
        return (
            rru * PRICES["dynamodb_current_rru_per_million"]
            + wru * PRICES["dynamodb_current_wru_per_million"]
        ) / 1e6
    return (
        rru * PRICES["dynamodb_on_demand_rru_per_million"]
        + wru * PRICES["dynamodb_on_demand_wru_per_million"]
    ) / 1e6


def http_api_cost(requests: int = 1) -> float:
    return requests * PRICES["http_api_per_million"] / 1e6


def billed_ms(compute_local_ms: float, calls_by_op: dict[str, int]) -> float:
    """The estimated billed duration of one invocation: scaled local compute plus assumed store latency,
    rounded up to Lambda's 1 ms granularity."""
    import math

    latency = sum(ASSUMPTIONS["dynamodb_latency_ms"].get(op, 5.0) * n for op, n in calls_by_op.items())
    return float(math.ceil(compute_local_ms * ASSUMPTIONS["cpu_scale"] + latency))
