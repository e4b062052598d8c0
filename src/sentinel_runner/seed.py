"""`sentinel serve --seed`: the demo project, its policies and configuration, and one principal per role."""

from typing import Any

from sentinel_service.operator import Operator

PROJECT = "demo"

POLICIES = {
    "unit-tests": {
        "check_type": "junit",
        "command": "pytest -q {scope}",
        "expected_exit_code": 0,
        "expected_artifacts": [],
        "fail_message": "Unit tests failed",
        "remediation_hint": "Run pytest -q locally and read the first failure",
        "max_evidence_age_seconds": 86400,
        "trusted_publishers": ["ci-bot"],
        "min_tests": 1,
    },
    "lint": {
        "check_type": "exit_code",
        "command": "ruff check {scope}",
        "expected_exit_code": 0,
        "expected_artifacts": [],
        "fail_message": "Lint failed",
        "remediation_hint": "Run ruff check locally",
        "max_evidence_age_seconds": 86400,
        "trusted_publishers": ["ci-bot"],
        "min_tests": 0,
    },
}
CONFIG = {
    "environments": ["staging", "production"],
    "derivation_rules": [
        {"files": ["services/payments/**"], "policy_id": "unit-tests", "scope": "payments-api"},
        {"files": ["docs/**"], "policy_id": "lint", "scope": "docs"},
    ],
    "unclassified_policy": "unit-tests",
    "change_context_publishers": ["ci-bot"],
    "allowed_action_types": ["dispatch_checks", "notify"],
    "notify_channels": ["release-room"],
    "approvals_required": 1,
    "approval_ttl_seconds": 86400,
    "settlement_required": False,
}
# One principal per role. The agent acts for hank; rita reviews, and sponsors nobody here.
PRINCIPALS = [
    ("admin", "alice", "human", None, ["admin", "auditor"]),
    ("human_requester", "hank", "human", None, ["requester"]),
    ("requester", "agent-demo", "agent", "hank", ["requester"]),
    ("reviewer", "rita", "human", None, ["reviewer"]),
    ("publisher", "ci-bot", "ci", None, ["publisher", "requester"]),
    ("auditor", "audra", "human", None, ["auditor"]),
]


def seed_demo(operator: Operator) -> dict[str, Any]:
    """Idempotent: an existing project keeps its chain; an existing principal gets a fresh token."""
    operator.provision_project(PROJECT, POLICIES, CONFIG)
    principals: dict[str, dict[str, str]] = {}
    for role, principal_id, kind, sponsor, roles in PRINCIPALS:
        issued = operator.issue(principal_id, kind, sponsor, {PROJECT: roles})
        principals[role] = {"id": principal_id, "token": issued.token}
    return {"project": PROJECT, "principals": principals}
