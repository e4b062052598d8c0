"""The shared test world: a gate over the in-memory store with a fixed clock, and the demo project's
actors."""

from datetime import UTC, datetime
from typing import Any

from sentinel_domain.integrity import ChainSeal
from sentinel_domain.memory import FixedClock, MemoryStore, MemoryWitness, SequentialIds
from sentinel_domain.models import Actor, CandidateRequest, Policy, ProjectConfig
from sentinel_service.adapters.proposers import NoModel
from sentinel_service.adapters.receipt_signer import PemReceiptSigner, new_private_key_pem
from sentinel_service.compose import compose
from sentinel_service.settings import Settings

START = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
REV = "a" * 40
BASE = "b" * 40
PROJECT = "demo"
# The tests' chain key: every world's chains are sealed under it, as the composition root seals them.
SEAL = ChainSeal(b"sentinel-tests-chain-key-0123456789abcdef")
# The tests' GitHub webhook secret: a world's webhook refuses what it did not sign (401), never 503.
WEBHOOK_SECRET = b"sentinel-tests-webhook-secret-0123456789"
# The tests' receipt key: fixed, so receipts (deterministic signatures) are the same in every run.
RECEIPT_SIGNER = PemReceiptSigner(new_private_key_pem(secret=0x5E47_14E1_7E57))

UNIT_POLICY = {
    "check_type": "junit",
    "command": "pytest -q {scope}",
    "expected_exit_code": 0,
    "expected_artifacts": [],
    "fail_message": "Unit tests failed",
    "remediation_hint": "Run pytest -q locally and read the first failure",
    "max_evidence_age_seconds": 86400,
    "trusted_publishers": ["ci-bot"],
    "min_tests": 1,
}
LINT_POLICY = {
    "check_type": "exit_code",
    "command": "ruff check {scope}",
    "expected_exit_code": 0,
    "expected_artifacts": [],
    "fail_message": "Lint failed",
    "remediation_hint": "Run ruff check",
    "max_evidence_age_seconds": 3600,
    "trusted_publishers": ["ci-bot"],
    "min_tests": 0,
}
CONFIG = {
    "environments": ["staging", "production"],
    "derivation_rules": [
        {"files": ["services/payments/**"], "policy_id": "unit-tests", "scope": "payments-api"},
        {"files": ["docs/**"], "policy_id": "lint"},
    ],
    "unclassified_policy": "unit-tests",
    "change_context_publishers": ["ci-bot"],
    "allowed_action_types": ["dispatch_checks", "notify"],
    "notify_channels": ["release-room"],
    "approvals_required": 1,
    "approval_ttl_seconds": 86400,
    "settlement_required": False,
}


def sealed() -> dict[str, Any]:
    """The composition root's seal and witness for a test's services: the tests' key and a fresh witness in
    memory (compose refuses every write without a chain key, and every local read without a witness)."""
    return {"seal": SEAL, "witness": MemoryWitness(SEAL), "receipt_signer": RECEIPT_SIGNER}


def actor(id_: str, kind: str, *roles: str, sponsor: str | None = None) -> Actor:
    return Actor(id=id_, kind=kind, sponsor=sponsor, roles=tuple(roles))


ADMIN = actor("alice-admin", "human", "admin", "auditor")
REQUESTER = actor("agent-1", "agent", "requester", sponsor="hank-human")
HUMAN_REQUESTER = actor("hank-human", "human", "requester")
REVIEWER = actor("rita-reviewer", "human", "reviewer")
REVIEWER_2 = actor("rob-reviewer", "human", "reviewer")
CI = actor("ci-bot", "ci", "publisher", "requester")
UNTRUSTED_CI = actor("ci-other", "ci", "publisher")
AUDITOR = actor("aud", "human", "auditor")
OUTSIDER = actor("eve", "human")


class World:
    """A project with two policies and a config, ready for candidates."""

    def __init__(
        self, config: dict | None = None, store=None, witness=None, hold_chains: bool | None = None
    ) -> None:
        self.store = store if store is not None else MemoryStore()
        self.clock = FixedClock(START)
        self.ids = SequentialIds()
        # The composition root over the fakes: the gate the tests drive is the one the handlers serve.
        # The local runner's way with the witness: every read compares with it, every write appends to it.
        self.witness = witness if witness is not None else MemoryWitness(SEAL)
        self.services = compose(
            Settings.from_env({}),
            store=self.store,
            clock=self.clock,
            ids=self.ids,
            proposer=NoModel(),
            seal=SEAL,
            witness=self.witness,
            hold_chains=hold_chains,
            webhook_secret=WEBHOOK_SECRET,
            receipt_signer=RECEIPT_SIGNER,
        )
        self.gate = self.services.gate
        self.gate.create_project(PROJECT)
        self.gate.put_policy(PROJECT, "unit-tests", ADMIN, Policy.model_validate(UNIT_POLICY))
        self.gate.put_policy(PROJECT, "lint", ADMIN, Policy.model_validate(LINT_POLICY))
        self.gate.put_config(PROJECT, ADMIN, ProjectConfig.model_validate(config or CONFIG), None)

    def candidate(
        self,
        files=("services/payments/api.py",),
        by: Actor = REQUESTER,
        revision: str = REV,
        environment: str = "staging",
    ) -> dict:
        body = {
            "subject": "payments",
            "base_revision": BASE,
            "revision": revision,
            "environment": environment,
            "change": {"files": list(files)},
        }
        return self.gate.create_candidate(PROJECT, by, CandidateRequest.model_validate(body), None).as_json()
