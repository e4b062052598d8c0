"""Decisions by outcome: ready, hold, and holds the gate caused itself, told apart."""

import json

from sentinel_service.adapters.decision_metrics import emf_line, outcome


def test_outcomes_are_told_apart() -> None:
    assert outcome({"decision": "ready", "findings": []}) == "ready"
    assert outcome({"decision": "hold", "findings": [{"code": "EVIDENCE_MISSING"}]}) == "hold"
    assert (
        outcome(
            {"decision": "hold", "findings": [{"code": "EVIDENCE_MISSING"}, {"code": "STATE_UNAVAILABLE"}]}
        )
        == "hold_error"
    )


def test_the_line_is_embedded_metric_format() -> None:
    line = json.loads(
        emf_line({"decision": "hold", "findings": [{"code": "STATE_TAMPERED"}]}, True, now_ms=1)
    )
    directive = line["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "Sentinel" and directive["Dimensions"] == [["Outcome"]]
    assert line["Outcome"] == "hold_error" and line["Decisions"] == 1 and line["_aws"]["Timestamp"] == 1
