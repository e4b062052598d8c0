"""The isolated fixture every run starts from: a fresh store (in memory, or SQLite: backings.py), a fixed
clock, sequential ids, the demo project (created by the operator, configured by its admin through the API), a
directory of principals behind an in-process authorizer fake, and the scripted fakes a scenario may ask for
(model proposer, store faults, concurrent writers).

Nothing here reads the wall clock, the environment or a random source: two runs of one scenario see the
same ids, instants and digests."""

import copy
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sentinel_domain.integrity import ChainSeal
from sentinel_domain.memory import FixedClock, MemoryWitness, SequentialIds
from sentinel_domain.models import Actor
from sentinel_domain.plans import fill_template
from sentinel_domain.ports import Append, IdempotencyRecord, StateStore, Stream, StreamRef
from sentinel_domain.usecases import Gate
from sentinel_gateway.gateway import LocalGateway
from sentinel_service.adapters.proposers import NoModel
from sentinel_service.adapters.receipt_signer import PemReceiptSigner, new_private_key_pem
from sentinel_service.compose import compose
from sentinel_service.settings import Settings

from .backings import Backing, MemoryBacking

START = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
PROJECT = "demo"
REVISION = "a" * 40
BASE_REVISION = "b" * 40
OTHER_REVISION = "c" * 40
ZERO_DIGEST = "0" * 64
SUBJECT = "payments"
ENVIRONMENT = "staging"
DEFAULT_FILES = ("services/payments/api.py",)
PAGE_BUDGET = 50
# A fixed chain key for the throwaway stores of a batch (see build_world).
EVALUATION_SEAL = ChainSeal(b"sentinel-evaluation-chain-key-not-secret")
# A fixed receipt key, for the same reason: receipts are signed deterministically, so a batch's answers (and
# its report's digest) do not depend on a random key.
EVALUATION_RECEIPT_SIGNER = PemReceiptSigner(new_private_key_pem(secret=0xE7A1_0A7E))

POLICIES: dict[str, dict[str, Any]] = {
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
        "remediation_hint": "Run ruff check",
        "max_evidence_age_seconds": 3600,
        "trusted_publishers": ["ci-bot"],
        "min_tests": 0,
    },
}

CONFIG: dict[str, Any] = {
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


def _junit(*cases: str) -> str:
    return '<testsuite name="s">' + "".join(cases) + "</testsuite>"


def _case(name: str, inner: str = "") -> str:
    return f'<testcase classname="suite" name="{name}">{inner}</testcase>'


# Named JUnit bodies a scenario may post (`junit: <name>`); anything else is taken as the XML itself.
JUNIT: dict[str, str] = {
    "pass": _junit(_case("t1"), _case("t2")),
    "fail": _junit(_case("t1"), _case("t2", '<failure message="boom"/>')),
    "error": _junit(_case("t1"), _case("t2", "<error/>")),
    "skipped": _junit(_case("t1", "<skipped/>"), _case("t2", "<skipped/>")),
    "empty": "<testsuites/>",
    "flaky": _junit(
        _case("t1", '<flakyFailure message="once"/>'), _case("t2", '<flakyError message="once"/>')
    ),
    "suite_failure": _junit(_case("t1", "<skipped/>")).replace("</testsuite>", "<failure/></testsuite>"),
    "doctype": '<!DOCTYPE testsuite [<!ENTITY x "boom">]><testsuite name="&x;">'
    + _case("t")
    + "</testsuite>",
}


def _principal(id_: str, kind: str, *roles: str, sponsor: str | None = None) -> Actor:
    return Actor(id=id_, kind=kind, sponsor=sponsor, roles=tuple(roles))


# The directory behind the authorizer fake: token `tok-<name>` names the principal. Some combinations are
# outside DOMAIN.md's kind/role table on purpose (the operator's CLI refuses them): they prove the gate
# checks kind before role even when a directory is wrong.
PRINCIPALS: dict[str, Actor] = {
    "admin": _principal("alice-admin", "human", "admin", "auditor"),
    "requester": _principal("agent-1", "agent", "requester", sponsor="hank-human"),
    "hank": _principal("hank-human", "human", "requester", "reviewer"),
    "reviewer": _principal("rita-reviewer", "human", "reviewer"),
    "reviewer2": _principal("rob-reviewer", "human", "reviewer"),
    "ci": _principal("ci-bot", "ci", "publisher", "requester"),
    "ci-other": _principal("ci-other", "ci", "publisher"),
    "auditor": _principal("aud", "human", "auditor"),
    "outsider": _principal("eve", "human"),
    "rogue-agent": _principal("rogue-agent", "agent", "reviewer", "requester", sponsor="hank-human"),
    "rogue-ci": _principal("rogue-ci", "ci", "reviewer", "publisher"),
}


def token(name: str) -> str:
    return f"tok-{name}"


def make_authorizer(directory: dict[str, Actor]) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The authorizer fake: identity comes from the bearer token alone, as the real authorizer gives it."""

    def authorize(event: dict[str, Any], _context: Any) -> dict[str, Any]:
        header = event["headers"].get("authorization", "")
        if not header.startswith("Bearer tok-"):
            return {"isAuthorized": False}
        principal = directory.get(header.removeprefix("Bearer tok-"))
        if principal is None:
            return {"isAuthorized": False}
        roles = {PROJECT: list(principal.roles)} if principal.roles else {}
        return {
            "isAuthorized": True,
            "context": {
                "principal_id": principal.id,
                "kind": principal.kind,
                "sponsor": principal.sponsor or "",
                "roles": json.dumps(roles),
            },
        }

    return authorize


# ---- the scripted model proposer ----------------------------------------------------------------------


class ModelFailure(Exception):
    """What a model adapter raises on a transport error, a timeout or throttling: a code, never a plan."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def _templates(policies: Any) -> dict[str, tuple[str, int]]:
    """policy id -> (command template, expected exit code), from either shape of the proposal request: a
    list of {policy_id, command_template, ...} or a mapping of policy id to the policy itself."""
    if isinstance(policies, list):
        return {p["policy_id"]: (p["command_template"], p["expected_exit_code"]) for p in policies}
    return {pid: (p["command"], p["expected_exit_code"]) for pid, p in policies.items()}


def drafted_plan(request: dict[str, Any], with_action: bool) -> dict[str, Any]:
    """A plan a well-behaved model would draft: one task per obligation, its policy's check."""
    tasks = []
    templates = _templates(request["policies"])
    obligations = sorted(request["obligations"], key=lambda o: (o["scope"], o["policy_id"]))
    for n, obligation in enumerate(obligations, 1):
        command, exit_code = templates[obligation["policy_id"]]
        tasks.append(
            {
                "task_id": f"T{n}",
                "title": f"Prove {obligation['policy_id']} for {obligation['scope']}",
                "checks": [
                    {
                        "check_id": f"C{n}",
                        "policy_ref": obligation["policy_id"],
                        "command": fill_template(command, obligation["scope"]),
                        "expected_exit_code": exit_code,
                        "covers": [obligation["obligation_id"]],
                    }
                ],
            }
        )
    actions = []
    if with_action and "dispatch_checks" in request["allowed_action_types"] and tasks:
        actions.append(
            {
                "action_id": "A1",
                "type": "dispatch_checks",
                "params": {"checks": [t["checks"][0]["check_id"] for t in tasks]},
            }
        )
    return {"tasks": tasks, "actions": actions}


class ScriptedProposer:
    """The Proposer port, scripted: each call takes the next behaviour (the last one repeats)."""

    provider = "scripted"
    model_id = "scripted-model-v1"

    def __init__(self, script: list[str]) -> None:
        self.script = list(script)
        self.calls = 0

    def propose(self, request: dict[str, Any]) -> dict[str, Any]:
        behaviour = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        if behaviour == "valid":
            return drafted_plan(request, with_action=True)
        if behaviour == "transport_error":
            raise ModelFailure("MODEL_TRANSPORT_ERROR")
        if behaviour == "throttled":
            raise ModelFailure("MODEL_THROTTLED")
        if behaviour == "timeout":
            raise ModelFailure("MODEL_TIMEOUT")
        if behaviour == "crash":
            raise RuntimeError("the adapter failed without classifying it")  # no code: MODEL_ERROR
        if behaviour == "unknown_code":
            raise ModelFailure("MODEL_SAYS_APPROVE_ME")  # a code outside the table never reaches the fact
        if behaviour == "invalid_schema":
            plan = drafted_plan(request, with_action=True)
            plan["reasoning"] = "I checked everything myself; approve me"  # an unknown field
            return plan
        if behaviour == "not_an_object":
            return '```json\n{"tasks": []}\n```'  # type: ignore[return-value]  # prose, not a plan
        if behaviour == "out_of_scope":
            plan = drafted_plan(request, with_action=True)
            plan["tasks"][0]["checks"][0]["covers"].append("obl_invented_by_the_model_0000")
            plan["actions"].append(
                {"action_id": "A9", "type": "promote", "params": {"environment": "production"}}
            )
            return plan
        raise ValueError(f"unknown proposer behaviour {behaviour}")


PROPOSER_BEHAVIOURS = (
    "valid",
    "transport_error",
    "throttled",
    "timeout",
    "crash",
    "unknown_code",
    "invalid_schema",
    "not_an_object",
    "out_of_scope",
)


# ---- the store and ids, with the faults and races a scenario may ask for ------------------------------


@dataclass
class Hooks:
    """Harness-controlled interference, each fired once: before the first append of an event type, or
    before the first id with a prefix is drawn (that is, between an execution's checks and its write)."""

    before_append: dict[str, Callable[[], None]] = field(default_factory=dict)
    before_new_id: dict[str, Callable[[], None]] = field(default_factory=dict)
    fired: list[str] = field(default_factory=list)


class HarnessStore:
    """The run's store, with a switchable read fault (the page budget exceeded) and append hooks."""

    def __init__(self, inner: StateStore, hooks: Hooks) -> None:
        self.inner = inner
        self.hooks = hooks
        self.incomplete: str | None = None  # None, "candidate" or "project"

    def load(self, ref: StreamRef) -> Stream | None:
        stream = self.inner.load(ref)
        hit = (self.incomplete == "candidate" and ref.candidate_id is not None) or (
            self.incomplete == "project" and ref.candidate_id is None
        )
        if stream is not None and hit:
            return dataclasses.replace(stream, complete=False, pages=PAGE_BUDGET)
        return stream

    def load_head(self, ref: StreamRef) -> dict[str, Any] | None:
        return self.inner.load_head(ref)  # one item: no page budget to exceed

    def append(self, append: Append) -> None:
        hook = self.hooks.before_append.pop(append.event["type"], None)
        if hook is not None:
            self.hooks.fired.append(f"before_append:{append.event['type']}")
            hook()
        self.inner.append(append)

    def find_claim(self, project: str, key: str) -> str | None:
        return self.inner.find_claim(project, key)

    def list_claims(
        self, project: str, limit: int, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        return self.inner.list_claims(project, limit, cursor)

    def idempotency_get(self, ref: StreamRef, scope: str, key: str) -> IdempotencyRecord | None:
        return self.inner.idempotency_get(ref, scope, key)

    def idempotency_begin(self, record: IdempotencyRecord) -> bool:
        return self.inner.idempotency_begin(record)

    def idempotency_release(self, record: IdempotencyRecord) -> None:
        self.inner.idempotency_release(record)


class HarnessIds:
    def __init__(self, inner: SequentialIds, hooks: Hooks) -> None:
        self.inner = inner
        self.hooks = hooks

    def new_id(self, prefix: str) -> str:
        hook = self.hooks.before_new_id.pop(prefix, None)
        if hook is not None:
            self.hooks.fired.append(f"before_new_id:{prefix}")
            hook()
        return self.inner.new_id(prefix)


@dataclass
class World:
    """One run's fixture: everything a scenario touches, fresh."""

    backing: Backing
    store: HarnessStore
    clock: FixedClock
    ids: HarnessIds
    hooks: Hooks
    gate: Gate
    gateway: LocalGateway
    directory: dict[str, Actor]
    proposer: ScriptedProposer | None


def build_world(proposer_script: list[str] | None, backing: Backing | None = None) -> World:
    """A fresh world over `backing` (a new in-memory store when none is given)."""
    backing = backing if backing is not None else MemoryBacking()
    hooks = Hooks()
    store = HarnessStore(backing.store, hooks)
    clock = FixedClock(START)
    ids = HarnessIds(SequentialIds(), hooks)
    proposer = ScriptedProposer(proposer_script) if proposer_script else None
    # The composition root over this run's fakes; no model unless the scenario scripts one, whatever the
    # environment configures, so the batch never depends on the machine it runs on.
    # The chains are sealed as the local runner seals them, under a fixed key: the batch's report (and its
    # digest) must not depend on a random key, and nothing a run stores outlives it.
    services = compose(
        Settings.from_env({}),
        store=store,
        clock=clock,
        ids=ids,
        proposer=proposer or NoModel(),
        seal=EVALUATION_SEAL,
        witness=MemoryWitness(EVALUATION_SEAL),
        receipt_signer=EVALUATION_RECEIPT_SIGNER,
    )
    directory = copy.deepcopy(PRINCIPALS)
    gateway = LocalGateway(lambda: services, make_authorizer(directory))
    # The operator creates the project out of band (the CLI's path); everything after goes through the API.
    services.gate.create_project(PROJECT)
    return World(backing, store, clock, ids, hooks, services.gate, gateway, directory, proposer)
