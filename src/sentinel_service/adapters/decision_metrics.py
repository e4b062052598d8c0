"""Decisions by outcome as a CloudWatch embedded-metric-format line: no SDK, no extra cold-start cost."""

import json
import sys
import time
from typing import Any

from sentinel_domain.outcomes import DecisionView
from sentinel_service.names import DECISIONS_DIMENSION as DIMENSION
from sentinel_service.names import DECISIONS_METRIC as METRIC
from sentinel_service.names import DECISIONS_NAMESPACE as NAMESPACE

# A hold the gate caused itself (it could not establish a fact) is told apart from a hold on the evidence.
ERROR_CODES = frozenset({"STATE_UNAVAILABLE", "STATE_TAMPERED", "EVIDENCE_QUERY_INCOMPLETE"})


def outcome(decision: dict[str, Any]) -> str:
    if decision.get("decision") == "ready":
        return "ready"
    codes = {f.get("code") for f in decision.get("findings", [])}
    return "hold_error" if codes & ERROR_CODES else "hold"


def emf_line(decision: dict[str, Any], recorded: bool, now_ms: int | None = None) -> str:
    return json.dumps(
        {
            "_aws": {
                "Timestamp": now_ms if now_ms is not None else int(time.time() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": NAMESPACE,
                        "Dimensions": [[DIMENSION]],
                        "Metrics": [{"Name": METRIC, "Unit": "Count"}],
                    }
                ],
            },
            DIMENSION: outcome(decision),
            METRIC: 1,
            "recorded": recorded,
        }
    )


def emit(decision: DecisionView, recorded: bool, runtime: str) -> None:
    # Only Lambda's log stream turns these lines into metrics; locally they would only clutter stdout.
    if runtime == "aws_lambda":
        print(emf_line(decision.as_json(), recorded), file=sys.stdout, flush=True)
