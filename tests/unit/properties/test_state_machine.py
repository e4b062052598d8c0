"""Stateful property test of the use cases: random interleavings of every operation, several principals, a
clock the machine advances, and invariants checked after every step.

The gate runs over the in-memory store with a fixed clock. Beside it the machine keeps its own model: every
write the gate accepted, as the caller sent it, with the instant and order it landed in. An independent
oracle written from DOMAIN.md (never `decide()` or the core's folds) judges that model, and:

- a candidate is `ready` exactly when the oracle says it is justified (rules 1-22: attested context,
  obligations, a plan covering them, a valid approval of the current digest by eligible humans, every
  (check, obligation) satisfied by evidence under rule 7, every task passing, settled where required), both at
  the service clock and as a what-if at any earlier instant (rule 2);
- no side effect (outbox item) exists without an accepted execution that the oracle finds approved, declared,
  allowed, with equal params and under max_executions;
- every chain verifies, and grows by exactly one event per accepted write (none for a replay);
- a refused operation changes nothing: chains, claims, idempotency records and outbox are as before.

Budget: MAX_EXAMPLES runs of at most STEPS steps each (about 10 s); deterministic unless
SENTINEL_PBT_RANDOM=1 (then a fresh random search, for exploring locally); no shrinking unless
SENTINEL_PBT_SHRINK=1.
"""

import copy
import hashlib
import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import hypothesis
import rfc8785
from hypothesis import HealthCheck, Phase
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from sentinel_domain.audit import AuditChain
from sentinel_domain.errors import Refusal
from sentinel_domain.memory import FixedClock, MemoryStore
from sentinel_domain.models import (
    CandidateRequest,
    ChangeContextRequest,
    EvidenceRequest,
    ExecutionRequest,
    Policy,
    ProjectConfig,
    ReportRequest,
    ReviewRequest,
    SettlementRequest,
)
from sentinel_domain.outcomes import Replayable
from sentinel_domain.ports import StreamRef
from sentinel_domain.times import format_time
from sentinel_domain.usecases import Gate
from sentinel_service.http.problems import refusal_status
from support.world import (
    ADMIN,
    AUDITOR,
    CI,
    CONFIG,
    HUMAN_REQUESTER,
    LINT_POLICY,
    OUTSIDER,
    PROJECT,
    RECEIPT_SIGNER,
    REQUESTER,
    REVIEWER,
    REVIEWER_2,
    UNIT_POLICY,
    UNTRUSTED_CI,
    World,
    actor,
)

RANDOM = os.environ.get("SENTINEL_PBT_RANDOM") == "1"
SHRINK = os.environ.get("SENTINEL_PBT_SHRINK") == "1"
MAX_EXAMPLES = 100
STEPS = 50

# Two principals beyond the shared world: a human who both requests and reviews (self-approval), and an agent
# whose sponsor is a reviewer (sponsor exclusion).
SAM = actor("sam-both", "human", "requester", "reviewer")
ROB_AGENT = actor("agent-rob", "agent", "requester", sponsor=REVIEWER_2.id)
SUBJECT = "payments"
BASE = "b" * 40
REVISIONS = ["a" * 40, "c" * 64, "A" * 40, "main"]  # "A"*40 folds to "a"*40; "main" is a branch name
FILE_SETS = [
    ("services/payments/api.py",),
    ("docs/guide.md",),
    ("services/payments/api.py", "docs/guide.md"),
    ("scripts/release.sh",),
    (),
]
POLICIES = {"unit-tests": UNIT_POLICY, "lint": LINT_POLICY}


# ---- the oracle's own primitives (RFC 8785 + SHA-256, as DOMAIN.md defines them) ------------------------


def sha(value: Any) -> str:
    return hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def obligation_id(policy: str, scope: str) -> str:
    return "obl_" + sha([policy, scope])[:24]


def derive(files: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """The shared world's derivation rules, written out: payments files owe unit-tests on payments-api, docs
    owe lint on the file itself, anything else owes the unclassified policy (unit-tests) on its path."""
    out = {}
    for path in files:
        if path.startswith("services/payments/"):
            policy, scope = "unit-tests", "payments-api"
        elif path.startswith("docs/"):
            policy, scope = "lint", path
        else:
            policy, scope = "unit-tests", path
        out[obligation_id(policy, scope)] = (policy, scope)
    return out


def covers(scopes: list[str], scope: str) -> bool:
    return any(scope == s.rstrip("/") or scope.startswith(s.rstrip("/") + "/") for s in scopes)


# ---- the model: what the gate accepted, as sent, in arrival order -----------------------------------------


@dataclass
class PlanV:
    digest: str
    plan: dict[str, Any]
    author: Any
    at: datetime


@dataclass
class Review:
    reviewer: Any
    decision: str
    digest: str
    at: datetime
    expires: datetime
    excluded: frozenset[str]  # who could not approve this digest when it was reviewed (rule 12)


@dataclass
class Evidence:
    evidence_id: str
    check_id: str
    subject: str
    revision: str
    environment: str
    scope: list[str]
    observed: datetime
    recorded: datetime
    publisher: Any
    outcome: str
    kind: str
    tests: int
    binding: tuple[tuple[str, ...], str, int] | None  # (covered obligations, policy, policy version) at write
    trusted_at_write: bool
    seq: int
    # A kind the policy at write does not take (a JUnit report for an exit-code policy): never decides.
    wrong_kind: bool = False


@dataclass
class Report:
    digest: str
    task_id: str
    passes: bool
    at: datetime


@dataclass
class Candidate:
    cid: str
    revision: str
    environment: str
    creator: Any
    contexts: list[tuple[datetime, bool, dict[str, tuple[str, str]]]] = field(default_factory=list)
    plans: list[PlanV] = field(default_factory=list)
    reviews: list[Review] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)
    settlements: list[tuple[str, str, datetime]] = field(default_factory=list)
    executions: list[dict[str, Any]] = field(default_factory=list)
    writes: int = 0  # accepted writes on this candidate's chain

    def plan(self, t: datetime | None = None) -> PlanV | None:
        visible = [p for p in self.plans if t is None or p.at <= t]
        return visible[-1] if visible else None

    def obligations(self, t: datetime) -> dict[str, tuple[str, str]]:
        out: dict[str, tuple[str, str]] = {}
        for at, _attested, added in self.contexts:
            if at <= t:
                out.update(added)
        return out

    def attested(self, t: datetime) -> bool:
        return any(attested for at, attested, _added in self.contexts if at <= t)


class Model:
    def __init__(self, start: datetime) -> None:
        self.configs: list[tuple[datetime, dict[str, Any]]] = [(start, copy.deepcopy(CONFIG))]
        self.policies: dict[str, list[tuple[datetime, dict[str, Any]]]] = {
            pid: [(start, copy.deepcopy(p))] for pid, p in POLICIES.items()
        }
        self.candidates: dict[str, Candidate] = {}
        self.project_writes = 4  # created, two policies, the configuration (tests/support/world.py)
        self.compromised_at: datetime | None = None
        self.keys: dict[tuple[str, str, str], tuple[str, dict[str, Any], dict[str, Any]]] = {}

    def config(self, t: datetime | None = None) -> dict[str, Any]:
        return [c for at, c in self.configs if t is None or at <= t][-1]

    def policy(self, pid: str, t: datetime | None = None) -> tuple[int, dict[str, Any]] | None:
        versions = [p for at, p in self.policies.get(pid, []) if t is None or at <= t]
        return (len(versions), versions[-1]) if versions else None

    # ---- rule 12 --------------------------------------------------------------------------------------

    @staticmethod
    def excluded(c: Candidate, digest: str | None) -> frozenset[str]:
        """The creator and every author of a plan version up to the digest's latest version, and their
        sponsors (rule 12: a re-submitted digest counts its re-submitter too)."""
        versions = [n for n, p in enumerate(c.plans) if p.digest == digest]
        last = versions[-1] if versions else len(c.plans) - 1
        people = [c.creator, *(p.author for p in c.plans[: last + 1])]
        return frozenset({x.id for x in people} | {x.sponsor for x in people if x.sponsor})

    # ---- rules 11 to 14 -------------------------------------------------------------------------------

    def approved(self, c: Candidate, t: datetime) -> bool:
        plan = c.plan(t)
        if plan is None:
            return False
        mine = [
            r
            for r in c.reviews
            if r.at <= t
            and r.digest == plan.digest
            and r.reviewer.kind == "human"
            and "reviewer" in r.reviewer.roles
        ]
        if any(r.decision == "reject" for r in mine):
            return False
        newest: dict[str, datetime] = {}
        for r in mine:
            if r.decision == "approve" and r.reviewer.id not in r.excluded:
                newest[r.reviewer.id] = max(newest.get(r.reviewer.id, r.expires), r.expires)
        valid = [e for e in newest.values() if t < e]  # exactly at expiry it is expired
        return len(valid) >= self.config(t)["approvals_required"]

    # ---- rules 7 to 10 --------------------------------------------------------------------------------

    def trusted(self, e: Evidence, t: datetime) -> bool:
        return e.trusted_at_write and not (
            self.compromised_at is not None and e.publisher.id == CI.id and self.compromised_at <= t
        )

    def satisfied(self, c: Candidate, check: dict[str, Any], oid: str, t: datetime) -> bool:
        entry = self.policy(check["policy_ref"], t)
        obligation = c.obligations(t).get(oid)
        if entry is None or obligation is None:
            return False
        version, policy = entry
        deciding = [
            e
            for e in c.evidence
            if e.recorded <= t
            and e.check_id == check["check_id"]
            and e.binding is not None
            and oid in e.binding[0]
            and e.binding[1] == check["policy_ref"]
            and e.binding[2] == version
            and self.trusted(e, t)
            and e.subject == SUBJECT
            and e.revision == c.revision
            and e.environment == c.environment
            and covers(e.scope, obligation[1])
            and not e.wrong_kind
        ]
        if not deciding:
            return False
        newest = max(deciding, key=lambda e: (e.observed, e.recorded, e.seq))
        age = (t - min(newest.observed, newest.recorded)).total_seconds()
        enough = policy["min_tests"] == 0 or (newest.kind == "junit" and newest.tests >= policy["min_tests"])
        return newest.outcome == "pass" and 0 <= age < policy["max_evidence_age_seconds"] and enough

    def task_passes(self, c: Candidate, digest: str, task_id: str, t: datetime | None = None) -> bool:
        reports = [
            r for r in c.reports if r.digest == digest and r.task_id == task_id and (t is None or r.at <= t)
        ]
        return bool(reports) and reports[-1].passes

    # ---- rule 1: ready if and only if nothing is unproven ---------------------------------------------

    def ready(self, c: Candidate, t: datetime) -> bool:
        obligations = c.obligations(t)
        plan = c.plan(t)
        if not obligations or not c.attested(t) or plan is None or not self.approved(c, t):
            return False
        config = self.config(t)
        covered: set[str] = set()
        for task in plan.plan["tasks"]:
            for check in task["checks"]:
                for oid in check["covers"]:
                    covered.add(oid)
                    if not self.satisfied(c, check, oid, t):
                        return False
            if not self.task_passes(c, plan.digest, task["task_id"], t):
                return False
            if config["settlement_required"] and not any(
                d == plan.digest and task_id == task["task_id"] and at <= t
                for d, task_id, at in c.settlements
            ):
                return False
        return set(obligations) <= covered


# ---- request shapes ---------------------------------------------------------------------------------------


def junit(kind: str) -> tuple[str, str, int]:
    """(body, outcome, executed tests) for one kind of JUnit report."""
    case = '<testcase classname="c" name="t{}"/>'
    return {
        "pass1": (f"<testsuite>{case.format(1)}</testsuite>", "pass", 1),
        "pass3": ("<testsuite>" + "".join(case.format(n) for n in range(3)) + "</testsuite>", "pass", 3),
        "fail": (
            f'<testsuite>{case.format(1)}<testcase name="x"><failure/></testcase></testsuite>',
            "fail",
            2,
        ),
        "skipped": ('<testsuite><testcase name="s"><skipped/></testcase></testsuite>', "unknown", 0),
        "flaky": ('<testsuite><testcase name="f"><flakyFailure/></testcase></testsuite>', "pass", 1),
    }[kind]


def build_plan(obligations: dict[str, tuple[str, str]], shape: str, salt: int = 1) -> dict[str, Any]:
    ordered = sorted(obligations.items(), key=lambda kv: (kv[1][1], kv[1][0]))
    if shape == "per_policy":
        groups: dict[str, list[str]] = {}
        for oid, (policy, _scope) in ordered:
            groups.setdefault(policy, []).append(oid)
        units = [(policy, oids, obligations[oids[0]][1]) for policy, oids in sorted(groups.items())]
    else:
        units = [(policy, [oid], scope) for oid, (policy, scope) in ordered]
    if shape == "uncovered":
        units = units[:-1]
    tasks = []
    for n, (policy, oids, scope) in enumerate(units, 1):
        command = ("pytest -q " if policy == "unit-tests" else "ruff check ") + scope
        tasks.append(
            {
                "task_id": f"T{n}",
                "title": f"Prove {policy}",
                "files": [],
                "depends_on": [f"T{n - 1}"] if shape == "chained" and n > 1 else [],
                "checks": [
                    {
                        "check_id": f"C{n}",
                        "policy_ref": policy,
                        "command": command,
                        "expected_exit_code": 0,
                        "covers": oids,
                        "assertions": [],
                    }
                ],
            }
        )
    actions = [
        {
            "action_id": "A1",
            "type": "dispatch_checks",
            "params": {"checks": [f"C{n}" for n in range(1, len(tasks) + 1)]},
            "max_executions": salt,
        }
    ]
    if shape == "notify":
        actions.append(
            {"action_id": "N1", "type": "notify", "params": {"channel": "release-room"}, "max_executions": 2}
        )
    return {"tasks": tasks, "actions": actions}


def find_check(plan: PlanV | None, check_id: str) -> dict[str, Any] | None:
    for task in plan.plan["tasks"] if plan else []:
        for check in task["checks"]:
            if check["check_id"] == check_id:
                return check
    return None


def plan_digest(cid: str, revision: str, plan: dict[str, Any]) -> str:
    return sha({"project": PROJECT, "candidate_id": cid, "revision": revision, "plan": plan})


def snapshot(world: World) -> Any:
    """What a refused operation must leave as it was. The store replaces a chain's Stream object on every
    append (copy on write), so each chain's identity and length stand for its content; the other tables are
    small and copied whole."""
    s = world.store
    chains = {ref: (stream, len(stream.events), len(stream.facts)) for ref, stream in s.streams.items()}
    return chains, copy.deepcopy(s.claims), copy.deepcopy(s.idempotency), copy.deepcopy(s.outbox)


def unchanged(before: Any, after: Any) -> bool:
    chains_before, *tables_before = before
    chains_after, *tables_after = after
    return (
        chains_before.keys() == chains_after.keys()
        and all(
            chains_after[ref][0] is stream and list(chains_after[ref][1:]) == rest
            for ref, (stream, *rest) in chains_before.items()
        )
        and tables_before == tables_after
    )


class Outcome:
    def __init__(
        self, status: int | None, code: str | None, body: dict[str, Any] | None, replayed: bool = False
    ):
        self.status, self.code, self.body, self.replayed = status, code, body, replayed

    @property
    def accepted(self) -> bool:
        return self.code is None


class GateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.world = World()
        self.clock = self.world.clock
        self.gate = self.world.gate
        self.model = Model(self.clock.now())
        self.instants: list[datetime] = [self.clock.now()]
        self.order = 0
        # Chains are replaced, never edited, on each append: what was verified or judged for these exact
        # objects (and this instant) needs no second look. The objects are held, so no id is ever reused.
        self.verified: dict[int, Any] = {}
        self.judged: dict[str, tuple[Any, Any, datetime]] = {}

    # ---- plumbing ---------------------------------------------------------------------------------------

    @property
    def now(self) -> datetime:
        return self.clock.now()

    def live(self, who: Any) -> bool:
        """A principal revoked as compromised is refused by the authorizer before any handler runs."""
        return not (who.id == CI.id and self.model.compromised_at is not None)

    def call(self, chain: str | None, fn: Any, *, outbox: int = 0) -> Outcome:
        """Run one operation. Refused: nothing changed. Replayed: nothing changed. Accepted: exactly one event
        on its chain (a new chain for a new candidate) and `outbox` new side effects."""
        before = snapshot(self.world)
        lengths = {ref: len(s.events) for ref, s in self.world.store.streams.items()}
        # The gate method the lambda calls names the operation in the run's statistics.
        operation = next((n for n in fn.__code__.co_names if n != "gate" and hasattr(self.gate, n)), "?")
        try:
            result = fn()
        except Refusal as refusal:
            hypothesis.event(f"{operation}: {refusal.code}")
            assert unchanged(before, snapshot(self.world)), f"refused {refusal.code} but the store changed"
            return Outcome(refusal_status(refusal), refusal.code, None)
        replayed = isinstance(result, Replayable) and result.replayed
        hypothesis.event(f"{operation}: {'replayed' if replayed else 'accepted'}")
        if replayed:
            assert unchanged(before, snapshot(self.world)), "a replay changed the store"
            return Outcome(None, None, result.as_json(), replayed=True)
        after = {ref: len(s.events) for ref, s in self.world.store.streams.items()}
        grown = {ref: after[ref] - lengths.get(ref, 0) for ref in after if after[ref] != lengths.get(ref, 0)}
        assert list(grown.values()) == [1], f"an accepted write must append exactly one event, got {grown}"
        if chain is not None:
            assert StreamRef(PROJECT, chain) in grown or chain == "new", grown
        assert len(self.world.store.outbox) - len(before[3]) == outbox
        return Outcome(None, None, result.as_json())

    def pick(self, index: int) -> Candidate:
        return list(self.model.candidates.values())[index % len(self.model.candidates)]

    def has_candidates(self) -> bool:
        return bool(self.model.candidates)

    # ---- time -------------------------------------------------------------------------------------------

    @rule(seconds=st.sampled_from([1, 1, 59, 59, 299, 1800, 3599, 3600, 3601, 86399, 86400, 90000]))
    def advance_clock(self, seconds: int) -> None:
        self.clock.advance(seconds)
        self.instants.append(self.now)

    # ---- the project: policies, configuration, a compromised publisher ---------------------------------

    @rule(
        who=st.sampled_from([ADMIN, ADMIN, AUDITOR, HUMAN_REQUESTER]),
        pid=st.sampled_from(["unit-tests", "lint"]),
        change=st.sampled_from(["min_tests", "max_age"]),
    )
    def amend_policy(self, who: Any, pid: str, change: str) -> None:
        _version, current = self.model.policy(pid)
        amended = dict(current)
        if change == "min_tests" and pid == "unit-tests":
            amended["min_tests"] = 3 if current["min_tests"] == 1 else 1
        else:
            amended["max_evidence_age_seconds"] = (
                7200 if current["max_evidence_age_seconds"] != 7200 else 3600
            )
        out = self.call(None, lambda: self.gate.put_policy(PROJECT, pid, who, Policy.model_validate(amended)))
        assert out.accepted == ("admin" in who.roles), out.code
        if out.accepted:
            self.model.policies[pid].append((self.now, amended))
            self.model.project_writes += 1

    @rule(
        who=st.sampled_from([ADMIN, ADMIN, REVIEWER]),
        change=st.sampled_from(
            ["approvals_2", "approvals_1", "settlement", "no_settlement", "short_ttl", "no_notify", "base"]
        ),
    )
    def set_config(self, who: Any, change: str) -> None:
        config = copy.deepcopy(self.model.config())
        if change.startswith("approvals"):
            config["approvals_required"] = int(change[-1])
        elif change.endswith("settlement"):
            config["settlement_required"] = change == "settlement"
        elif change == "short_ttl":
            config["approval_ttl_seconds"] = 3600
        elif change == "no_notify":
            config["allowed_action_types"] = ["dispatch_checks"]
        else:
            config = copy.deepcopy(CONFIG)
        version = len(self.model.configs)
        out = self.call(
            None,
            lambda: self.gate.put_config(PROJECT, who, ProjectConfig.model_validate(config), f'"{version}"'),
        )
        assert out.accepted == ("admin" in who.roles), out.code
        if out.accepted:
            self.model.configs.append((self.now, config))
            self.model.project_writes += 1

    @precondition(lambda self: self.model.compromised_at is None)
    @rule(roll=st.integers(0, 19))
    def revoke_the_publisher_as_compromised(self, roll: int) -> None:
        if roll:  # rare: after it nothing can be ready again
            return
        # The operator's CLI records the revocation on the project chain (local/cli.py); the authorizer
        # refuses the principal from then on.
        self.gate.record_project_event(
            PROJECT, "principal.revoked", {"principal_id": CI.id, "compromised": True}
        )
        self.model.compromised_at = self.now
        self.model.project_writes += 1

    # ---- candidates and change context ------------------------------------------------------------------

    @initialize(files=st.sampled_from(FILE_SETS[:3]), steps=st.integers(0, 20))
    def a_first_candidate(self, files: tuple[str, ...], steps: int) -> None:
        # Most runs start at or on the way to ready, so the random rules that follow disturb a candidate that
        # has something to lose; steps 0 starts from the bare candidate.
        self.create_candidate(files, REQUESTER, REVISIONS[0], "staging")
        c = next(iter(self.model.candidates.values()))
        for _ in range(steps):
            self.step_towards_ready(c, (CI, "pass3", 0, "exact", "right", "k1"))

    @precondition(lambda self: len(self.model.candidates) < 3)
    @rule(
        files=st.sampled_from(FILE_SETS),
        who=st.sampled_from(
            [REQUESTER, REQUESTER, HUMAN_REQUESTER, SAM, ROB_AGENT, CI, UNTRUSTED_CI, REVIEWER, OUTSIDER]
        ),
        revision=st.sampled_from(REVISIONS),
        environment=st.sampled_from(["staging", "staging", "production", "qa"]),
    )
    def create_candidate(self, files: tuple[str, ...], who: Any, revision: str, environment: str) -> None:
        if not self.live(who):
            return
        request = CandidateRequest.model_validate(
            {
                "subject": SUBJECT,
                "base_revision": BASE,
                "revision": revision,
                "environment": environment,
                "change": {"files": list(files)},
            }
        )
        out = self.call("new", lambda: self.gate.create_candidate(PROJECT, who, request, None))
        folded = revision.lower()
        taken = any(
            c.revision == folded and c.environment == environment for c in self.model.candidates.values()
        )
        if not who.roles:
            expected = "NOT_FOUND"
        elif not {"requester", "publisher"} & set(who.roles):
            expected = "FORBIDDEN_ROLE"
        elif revision == "main":
            expected = "MUTABLE_REVISION"
        elif environment not in self.model.config()["environments"]:
            expected = "UNKNOWN_ENVIRONMENT"
        elif taken:
            expected = "CANDIDATE_EXISTS"
        else:
            expected = None
        assert out.code == expected, (out.code, expected)
        if out.accepted:
            derived = derive(files)
            assert {
                o["obligation_id"]: (o["policy_id"], o["scope"]) for o in out.body["obligations"]
            } == derived
            c = Candidate(out.body["candidate_id"], folded, environment, who)
            c.contexts.append((self.now, self.attests(who), derived))
            c.writes = 1
            self.model.candidates[c.cid] = c

    def attests(self, who: Any) -> bool:
        return (
            who.kind == "ci"
            and "publisher" in who.roles
            and who.id in self.model.config()["change_context_publishers"]
        )

    @precondition(has_candidates)
    @rule(
        index=st.integers(0, 2),
        files=st.sampled_from(FILE_SETS),
        who=st.sampled_from([CI, CI, UNTRUSTED_CI, REQUESTER, AUDITOR]),
    )
    def add_change_context(self, index: int, files: tuple[str, ...], who: Any) -> None:
        self.context(self.pick(index), files, who)

    def context(self, c: Candidate, files: tuple[str, ...], who: Any) -> None:
        if not self.live(who):
            return
        request = ChangeContextRequest.model_validate({"change": {"files": list(files)}})
        out = self.call(c.cid, lambda: self.gate.add_change_context(PROJECT, c.cid, who, request, None))
        assert out.accepted == bool({"requester", "publisher"} & set(who.roles)), out.code
        if out.accepted:
            c.contexts.append((self.now, self.attests(who), derive(files)))
            c.writes += 1

    # ---- plans ------------------------------------------------------------------------------------------

    def if_match(self, c: Candidate, choice: str) -> str | None:
        current = c.plan()
        return {
            "current": f'"{current.digest}"' if current else None,
            "none": None,
            "stale": '"' + "0" * 64 + '"',
        }[choice]

    def expected_if_match(self, c: Candidate, header: str | None) -> str | None:
        current = c.plan()
        if current is None:
            return "VERSION_CONFLICT" if header is not None else None
        return None if header == f'"{current.digest}"' else "VERSION_CONFLICT"

    @precondition(has_candidates)
    @rule(
        index=st.integers(0, 2),
        who=st.sampled_from([REQUESTER, SAM, HUMAN_REQUESTER, CI, REVIEWER]),
        if_match=st.sampled_from(["current", "current", "none", "stale"]),
    )
    def propose(self, index: int, who: Any, if_match: str) -> None:
        c = self.pick(index)
        if not self.live(who):
            return
        header = self.if_match(c, if_match)
        out = self.call(c.cid, lambda: self.gate.propose(PROJECT, c.cid, who, header, None))
        obligations = c.obligations(self.now)
        if "requester" not in who.roles:
            expected = "FORBIDDEN_ROLE"
        else:
            expected = self.expected_if_match(c, header) or (None if obligations else "PLAN_PREFLIGHT_FAILED")
        assert out.code == expected, (out.code, expected)
        if out.accepted:
            self.record_plan(c, out.body, who)

    def record_plan(self, c: Candidate, body: dict[str, Any], who: Any) -> None:
        # The digest binds project, candidate, revision and the normalised plan (DOMAIN.md, Work plan).
        assert body["plan_digest"] == plan_digest(c.cid, c.revision, body["plan"])
        c.plans.append(PlanV(body["plan_digest"], body["plan"], who, self.now))
        c.writes += 1

    @precondition(has_candidates)
    @rule(
        index=st.integers(0, 2),
        who=st.sampled_from([REQUESTER, REQUESTER, SAM, ROB_AGENT, REVIEWER]),
        shape=st.sampled_from(
            ["per_obligation", "per_obligation", "per_policy", "chained", "notify", "uncovered"]
        ),
        if_match=st.sampled_from(["current", "current", "current", "none", "stale"]),
        salt=st.integers(1, 2),
    )
    def put_plan(self, index: int, who: Any, shape: str, if_match: str, salt: int) -> None:
        self.store_plan(self.pick(index), who, shape, if_match, salt)

    def store_plan(self, c: Candidate, who: Any, shape: str, if_match: str, salt: int) -> Outcome:
        obligations = c.obligations(self.now)
        plan = build_plan(obligations, shape, salt)
        header = self.if_match(c, if_match)
        out = self.call(c.cid, lambda: self.gate.put_plan(PROJECT, c.cid, who, plan, header))
        broken = (
            not plan["tasks"]
            or shape == "uncovered"
            or (shape == "notify" and "notify" not in self.model.config()["allowed_action_types"])
        )
        if "requester" not in who.roles:
            expected = "FORBIDDEN_ROLE"
        else:
            expected = self.expected_if_match(c, header) or ("PLAN_PREFLIGHT_FAILED" if broken else None)
        assert out.code == expected, (out.code, expected)
        if out.accepted:
            assert out.body["plan"]["tasks"] == plan["tasks"]
            self.record_plan(c, out.body, who)
        return out

    # ---- reviews and settlement -------------------------------------------------------------------------

    def digest_choice(self, c: Candidate, choice: str) -> str:
        current = c.plan()
        if choice == "stale" and len(c.plans) > 1:
            return c.plans[0].digest
        return current.digest if current and choice != "garbage" else "f" * 64

    @precondition(has_candidates)
    @rule(
        index=st.integers(0, 2),
        who=st.sampled_from(
            [REVIEWER, REVIEWER, REVIEWER_2, SAM, REQUESTER, CI, HUMAN_REQUESTER, ADMIN, OUTSIDER]
        ),
        decision=st.sampled_from(["approve", "approve", "approve", "reject"]),
        digest=st.sampled_from(["current", "current", "current", "stale", "garbage"]),
        revision=st.sampled_from(["own", "own", "upper", "other"]),
    )
    def review(self, index: int, who: Any, decision: str, digest: str, revision: str) -> None:
        c = self.pick(index)
        self.send_review(c, who, decision, self.digest_choice(c, digest), revision)

    def send_review(
        self, c: Candidate, who: Any, decision: str, digest: str, revision: str = "own"
    ) -> Outcome:
        if not self.live(who):
            return Outcome(None, "GATEWAY", None)
        named = {"own": c.revision, "upper": c.revision.upper(), "other": "e" * 40}[revision]
        request = ReviewRequest(decision=decision, plan_digest=digest, revision=named)
        out = self.call(c.cid, lambda: self.gate.review(PROJECT, c.cid, who, request, None))
        current = c.plan()
        excluded = self.model.excluded(c, digest)
        if not who.roles:
            expected = "NOT_FOUND"
        elif who.kind == "agent":
            expected = "AGENT_CANNOT_REVIEW"
        elif who.kind == "ci":
            expected = "REVIEWER_NOT_HUMAN"
        elif "reviewer" not in who.roles:
            expected = "FORBIDDEN_ROLE"
        elif decision == "approve" and who.id in excluded:
            expected = "SELF_APPROVAL"
        elif current is None or digest != current.digest:
            expected = "DIGEST_MISMATCH"
        elif revision == "other":
            expected = "REVISION_MISMATCH"
        else:
            expected = None
        assert out.code == expected, (out.code, expected)
        if out.accepted:
            ttl = self.model.config()["approval_ttl_seconds"]
            c.reviews.append(
                Review(who, decision, digest, self.now, self.now + timedelta(seconds=ttl), excluded)
            )
            c.writes += 1
        return out

    @precondition(has_candidates)
    @rule(
        index=st.integers(0, 2),
        task=st.sampled_from(["T1", "T2", "T3"]),
        who=st.sampled_from([REVIEWER, SAM, REQUESTER, CI, HUMAN_REQUESTER]),
        digest=st.sampled_from(["current", "current", "stale"]),
    )
    def settle(self, index: int, task: str, who: Any, digest: str) -> None:
        c = self.pick(index)
        self.send_settlement(c, task, who, self.digest_choice(c, digest))

    def send_settlement(self, c: Candidate, task: str, who: Any, digest: str) -> None:
        if not self.live(who):
            return
        out = self.call(
            c.cid,
            lambda: self.gate.settle(PROJECT, c.cid, task, who, SettlementRequest(plan_digest=digest), None),
        )
        current = c.plan()
        tasks = [t["task_id"] for t in current.plan["tasks"]] if current else []
        if who.kind == "agent":
            expected = "AGENT_CANNOT_REVIEW"
        elif who.kind == "ci":
            expected = "REVIEWER_NOT_HUMAN"
        elif "reviewer" not in who.roles:
            expected = "FORBIDDEN_ROLE"
        elif current is None or digest != current.digest:
            expected = "DIGEST_MISMATCH"
        elif task not in tasks:
            expected = "NOT_FOUND"
        elif not self.model.task_passes(c, digest, task):
            expected = "TASK_NOT_ELIGIBLE"
        else:
            expected = None
        assert out.code == expected, (out.code, expected)
        if out.accepted:
            c.settlements.append((digest, task, self.now))
            c.writes += 1

    # ---- actions ----------------------------------------------------------------------------------------

    @precondition(has_candidates)
    @rule(
        index=st.integers(0, 2),
        action=st.sampled_from(["A1", "A1", "A1", "N1", "X9"]),
        who=st.sampled_from([REQUESTER, REQUESTER, HUMAN_REQUESTER, CI, REVIEWER]),
        key=st.sampled_from(["k1", "k2", "k3", None]),
        digest=st.sampled_from(["current", "current", "current", "stale"]),
        params=st.sampled_from(["declared", "declared", "declared", "other"]),
    )
    def execute(self, index: int, action: str, who: Any, key: str | None, digest: str, params: str) -> None:
        c = self.pick(index)
        self.send_execution(c, action, who, key, self.digest_choice(c, digest), params)

    def send_execution(
        self, c: Candidate, action: str, who: Any, key: str | None, digest: str, params: str
    ) -> None:
        if not self.live(who):
            return
        current = c.plan()
        declared = (
            next((a for a in current.plan["actions"] if a["action_id"] == action), None) if current else None
        )
        sent = declared["params"] if declared and params == "declared" else {"checks": ["C9"]}
        request = ExecutionRequest(plan_digest=digest, params=sent)
        before = len(self.world.store.outbox)
        try:
            result = self.gate.execute(PROJECT, c.cid, action, who, request, key)
        except Refusal as refusal:
            code, result = refusal.code, None
        else:
            code = None
        hypothesis.event(f"execute: {code or ('replayed' if result.replayed else 'accepted')}")
        grown = len(self.world.store.outbox) - before
        record = self.model.keys.get((c.cid, action, key or ""))
        if record is not None and code is None and result.replayed:
            # Rule 17: the same key, caller and request replays the first success and causes nothing.
            assert (record[0], record[1]) == (
                who.id,
                request.model_dump(mode="json"),
            ) and result.as_json() == record[2]
            assert grown == 0
            return
        if code is not None:
            assert grown == 0, f"refused {code} but a side effect left"
            if record is not None and (record[0], record[1]) != (who.id, request.model_dump(mode="json")):
                assert code in ("IDEMPOTENCY_CONFLICT", "FORBIDDEN_ROLE", "NOT_FOUND"), code
            return
        # Accepted and new: the oracle must find every precondition of rule 16 true at this instant.
        assert record is None, "a key that already succeeded executed again"
        done = [e for e in c.executions if e["digest"] == digest and e["action_id"] == action]
        assert key and "requester" in who.roles
        assert current is not None and digest == current.digest, "executed an older plan digest"
        assert self.model.approved(c, self.now), "a side effect without a valid approval of the current plan"
        assert declared is not None and declared["type"] in self.model.config()["allowed_action_types"]
        assert sent == declared["params"] and len(done) < declared["max_executions"]
        assert grown == 1
        item = self.world.store.outbox[-1]
        assert (item["candidate_id"], item["action_id"], item["plan_digest"]) == (c.cid, action, digest)
        c.executions.append({"digest": digest, "action_id": action, "execution_id": result.execution_id})
        c.writes += 1
        self.model.keys[(c.cid, action, key)] = (who.id, request.model_dump(mode="json"), result.as_json())

    # ---- evidence and reports ---------------------------------------------------------------------------

    @precondition(has_candidates)
    @rule(
        index=st.integers(0, 2),
        check=st.sampled_from(["C1", "C1", "C2", "C3", "C9"]),
        who=st.sampled_from([CI, CI, CI, UNTRUSTED_CI, REQUESTER, HUMAN_REQUESTER, REVIEWER]),
        report=st.sampled_from(["pass3", "pass3", "pass1", "fail", "skipped", "flaky", "exit0", "exit1"]),
        offset=st.sampled_from([0, 0, -60, -3599, -3600, -86399, -86400, 300, 301]),
        scope=st.sampled_from(["exact", "exact", "exact", "wide", "narrow"]),
        binding=st.sampled_from(["right", "right", "right", "right", "revision", "environment", "subject"]),
    )
    def post_evidence(
        self, index: int, check: str, who: Any, report: str, offset: int, scope: str, binding: str
    ) -> None:
        self.send_evidence(self.pick(index), check, who, report, offset, scope, binding)

    def send_evidence(
        self, c: Candidate, check_id: str, who: Any, report: str, offset: int, scope: str, binding: str
    ) -> None:
        if not self.live(who):
            return
        current = c.plan()
        check = find_check(current, check_id)
        obligations = c.obligations(self.now)
        exact = sorted(
            {obligations[o][1] for o in (check["covers"] if check else []) if o in obligations}
        ) or ["payments-api"]
        scopes = {
            "exact": exact,
            "wide": ["docs", "payments-api", "scripts", "services"],
            "narrow": [s + "/deeper" for s in exact],
        }[scope]
        observed = self.now + timedelta(seconds=offset)
        body: dict[str, Any] = {
            "check_id": check_id,
            "subject": "billing" if binding == "subject" else SUBJECT,
            "revision": "d" * 40 if binding == "revision" else c.revision,
            "environment": ("production" if c.environment == "staging" else "staging")
            if binding == "environment"
            else c.environment,
            "scope": scopes,
            "observed_at": format_time(observed),
            "source": {"system": "ci", "url": ""},
        }
        if report.startswith("exit"):
            body["result"] = {"exit_code": int(report[-1]), "artifacts": []}
            outcome, kind, tests = ("pass" if report == "exit0" else "fail"), "exit_code", 0
        else:
            body["junit_xml"], outcome, kind, tests = (
                *junit(report)[:1],
                junit(report)[1],
                "junit",
                junit(report)[2],
            )
        out = self.call(
            c.cid,
            lambda: self.gate.post_evidence(PROJECT, c.cid, who, EvidenceRequest.model_validate(body), None),
        )
        if not {"publisher", "requester"} & set(who.roles):
            expected = "FORBIDDEN_ROLE"
        elif offset > 300:
            expected = "EVIDENCE_FUTURE_DATED"
        else:
            expected = None
        assert out.code == expected, (out.code, expected)
        if not out.accepted:
            return
        entry = self.model.policy(check["policy_ref"]) if check else None
        if kind == "exit_code" and entry is None:
            outcome = "unknown"  # no policy to judge an exit code against
        trusted = (
            who.kind == "ci"
            and "publisher" in who.roles
            and entry is not None
            and who.id in entry[1]["trusted_publishers"]
        )
        bound = (tuple(check["covers"]), check["policy_ref"], entry[0]) if check and entry else None
        # The gate's own answer at write time must agree with the oracle's reading of the same request.
        assert out.body["outcome"] == outcome and out.body["trust"] == (
            "verified"
            if trusted
            else "untrusted"
            if who.kind == "ci" and "publisher" in who.roles
            else "unverified"
        )
        assert out.body["binding"]["obligation_ids"] == (list(bound[0]) if bound else [])
        self.order += 1
        c.evidence.append(
            Evidence(
                out.body["evidence_id"],
                check_id,
                body["subject"],
                body["revision"],
                body["environment"],
                scopes,
                observed,
                self.now,
                who,
                outcome,
                kind,
                tests,
                bound,
                trusted,
                self.order,
                entry is not None
                and kind != entry[1]["check_type"]
                and not (kind == "exit_code" and entry[1]["min_tests"] >= 1),
            )
        )
        c.writes += 1

    @precondition(has_candidates)
    @rule(
        index=st.integers(0, 2),
        task=st.sampled_from(["T1", "T1", "T2", "T3"]),
        who=st.sampled_from([REQUESTER, REQUESTER, HUMAN_REQUESTER, CI, REVIEWER]),
        status=st.sampled_from(
            ["completed", "completed", "completed", "failed", "blocked", "blocked-silent"]
        ),
        claims=st.sampled_from(["right", "right", "none", "wrong"]),
        digest=st.sampled_from(["current", "current", "current", "stale"]),
    )
    def report(self, index: int, task: str, who: Any, status: str, claims: str, digest: str) -> None:
        c = self.pick(index)
        self.send_report(c, task, who, status, claims, self.digest_choice(c, digest))

    def send_report(
        self, c: Candidate, task_id: str, who: Any, status: str, claims: str, digest: str
    ) -> None:
        if not self.live(who):
            return
        current = c.plan()
        task = next((t for t in current.plan["tasks"] if t["task_id"] == task_id), None) if current else None
        checks = task["checks"] if task else []
        claimed = []
        for check in checks:
            mine = [e for e in c.evidence if e.check_id == check["check_id"]]
            if claims == "right" and mine:
                claimed.append({"check_id": check["check_id"], "evidence_id": mine[-1].evidence_id})
            elif claims == "wrong":
                claimed.append({"check_id": check["check_id"], "evidence_id": "ev_99999999"})
        request = ReportRequest.model_validate(
            {
                "plan_digest": digest,
                "status": status.removesuffix("-silent"),
                "checks": claimed,
                "blocked_reason": "waiting on a human" if status == "blocked" else None,
            }
        )
        out = self.call(c.cid, lambda: self.gate.report(PROJECT, c.cid, task_id, who, request, None))
        if "requester" not in who.roles:
            expected = "FORBIDDEN_ROLE"
        elif current is None or digest != current.digest:
            expected = "DIGEST_MISMATCH"
        elif task is None:
            expected = "NOT_FOUND"
        elif any(not self.model.task_passes(c, digest, d) for d in task["depends_on"]):
            expected = "TASK_NOT_ELIGIBLE"
        elif status == "blocked-silent":
            expected = "VALIDATION_FAILED"
        else:
            expected = None
        assert out.code == expected, (out.code, expected)
        if not out.accepted:
            return
        # Rule 20: completed passes only when every claim names this candidate's evidence for that check and
        # every required check of the task is satisfied under rule 7 now.
        claims_ok = all(
            any(e.evidence_id == cl["evidence_id"] and e.check_id == cl["check_id"] for e in c.evidence)
            for cl in claimed
        )
        passes = (
            status == "completed"
            and claims_ok
            and all(
                self.model.satisfied(c, check, oid, self.now) for check in checks for oid in check["covers"]
            )
        )
        assert out.body["passes"] == passes, (out.body, passes)
        c.reports.append(Report(digest, task_id, passes, self.now))
        c.writes += 1

    # ---- decisions --------------------------------------------------------------------------------------

    @precondition(has_candidates)
    @rule(index=st.integers(0, 2), who=st.sampled_from([REQUESTER, AUDITOR, REVIEWER, OUTSIDER]))
    def record_decision(self, index: int, who: Any) -> None:
        c = self.pick(index)
        out = self.call(c.cid, lambda: self.gate.record_decision(PROJECT, c.cid, who, None))
        assert out.code == (None if who.roles else "NOT_FOUND"), out.code
        if out.accepted:
            assert (out.body["decision"] == "ready") == self.model.ready(c, self.now), out.body["findings"]
            if out.body["decision"] == "ready":
                hypothesis.event("a ready decision was recorded")
            c.writes += 1

    def boundaries(self, c: Candidate) -> list[datetime]:
        """The instants where a verdict may flip: every step's clock, every approval's expiry, and every
        piece of evidence reaching its policy's age limit (rules 7 and 14: exactly at the limit is too
        late)."""
        out = list(self.instants) + [r.expires for r in c.reviews]
        for e in c.evidence:
            for _at, policy in self.model.policies.get(e.binding[1] if e.binding else "", []):
                out.append(
                    min(e.observed, e.recorded) + timedelta(seconds=policy["max_evidence_age_seconds"])
                )
        return out

    @precondition(has_candidates)
    @rule(index=st.integers(0, 2), which=st.integers(0, 10_000), nudge=st.sampled_from([0, 0, -1, 1]))
    def what_if(self, index: int, which: int, nudge: int) -> None:
        # Rule 2: a decision at another instant sees only what was recorded at or before it.
        c = self.pick(index)
        instants = self.boundaries(c)
        at = instants[which % len(instants)] + timedelta(microseconds=nudge)
        verdict = self.gate.decision(PROJECT, c.cid, AUDITOR, format_time(at)).as_json()
        assert (verdict["decision"] == "ready") == self.model.ready(c, at), (at, verdict["findings"])

    def ready_now(self) -> list[Candidate]:
        return [c for c in self.model.candidates.values() if self.model.ready(c, self.now)]

    def fork(self) -> "GateMachine":
        """An independent copy of the gate, its store, clock and ids, and of the model, to try a move on."""
        twin = GateMachine.__new__(GateMachine)
        twin.__dict__.update(self.__dict__)
        store = MemoryStore()
        source = self.world.store
        store.streams, store.claims = copy.deepcopy(source.streams), copy.deepcopy(source.claims)
        store.idempotency, store.outbox = copy.deepcopy(source.idempotency), copy.deepcopy(source.outbox)
        world = copy.copy(self.world)
        world.store, world.clock, world.ids = store, FixedClock(self.now), copy.copy(self.world.ids)
        world.gate = Gate(store, world.clock, world.ids, receipt_signer=RECEIPT_SIGNER)
        twin.world, twin.clock, twin.gate = world, world.clock, world.gate
        twin.model = copy.deepcopy(self.model)
        twin.instants, twin.verified, twin.judged = list(self.instants), {}, {}
        return twin

    def check_everything(self) -> None:
        self.every_chain_verifies_with_one_event_per_accepted_write()
        self.no_side_effect_without_an_approved_execution()
        self.ready_only_when_justified()

    def disturbances(self, c: Candidate) -> list[tuple[str, Any]]:
        """Every move that must (or must not) take a ready candidate out of ready, as (name, move on a
        twin)."""
        plan = c.plan()
        first = plan.plan["tasks"][0]["checks"][0]["check_id"]
        moves: list[tuple[str, Any]] = []
        # Newer evidence with exactly one defect, and failing: it flips the verdict only if wrongly counted.
        for defect, who, scope, binding in [
            ("untrusted", UNTRUSTED_CI, "exact", "right"),
            ("agent", REQUESTER, "exact", "right"),
            ("narrow scope", CI, "narrow", "right"),
            ("other revision", CI, "exact", "revision"),
            ("other environment", CI, "exact", "environment"),
            ("other subject", CI, "exact", "subject"),
        ]:
            moves.append(
                (
                    f"failing evidence, {defect}",
                    lambda t, who=who, scope=scope, binding=binding: t.send_evidence(
                        t.model.candidates[c.cid], first, who, "fail", 0, scope, binding
                    ),
                )
            )
        # Newer trusted, bound evidence decides whatever it says (rule 10); an older failure does not.
        for report, age in [
            ("fail", 0),
            ("skipped", 0),
            ("pass1", 0),
            ("exit0", 0),
            ("pass3", 0),
            ("fail", -86399),
        ]:
            moves.append(
                (
                    f"trusted {report} at {age}",
                    lambda t, report=report, age=age: t.send_evidence(
                        t.model.candidates[c.cid], first, CI, report, age, "exact", "right"
                    ),
                )
            )
        eligible = [r for r in (REVIEWER, REVIEWER_2, SAM) if r.id not in self.model.excluded(c, plan.digest)]
        moves.append(
            (
                "a rejection",
                lambda t: t.send_review(t.model.candidates[c.cid], eligible[0], "reject", plan.digest),
            )
        )
        for change in ("approvals_2", "settlement", "short_ttl"):
            moves.append((f"config {change}", lambda t, change=change: t.set_config(ADMIN, change)))
        for pid, change in (("unit-tests", "min_tests"), ("lint", "max_age")):
            moves.append(
                (
                    f"policy {pid} {change}",
                    lambda t, pid=pid, change=change: t.amend_policy(ADMIN, pid, change),
                )
            )
        # The clock to just before and exactly at each approval expiry and evidence age limit.
        edges = [r.expires for r in c.reviews] + [
            min(e.observed, e.recorded) + timedelta(seconds=policy["max_evidence_age_seconds"])
            for e in c.evidence
            for _at, policy in self.model.policies.get(e.binding[1] if e.binding else "", [])
        ]
        for edge in sorted({e for e in edges if e > self.now}):
            for nudge in (-1, 0):
                moves.append(
                    (
                        f"clock to {format_time(edge)}{nudge:+d}us",
                        lambda t, at=edge + timedelta(microseconds=nudge): t.clock.advance(
                            (at - t.now).total_seconds()
                        ),
                    )
                )
        return moves

    @precondition(lambda self: bool(self.ready_now()))
    @rule(index=st.integers(0, 2), pick=st.integers(0, 1000))
    def disturb_a_ready_candidate(self, index: int, pick: int) -> None:
        # The moments where one wrong judgement turns into a false ready (or a wrong hold). Each is tried on a
        # twin of this machine with every invariant checked; then one of them is applied here, to go on from.
        ready = self.ready_now()
        c = ready[index % len(ready)]
        moves = self.disturbances(c)
        for name, move in moves:
            twin = self.fork()
            try:
                move(twin)
                twin.check_everything()
            except AssertionError as error:
                raise AssertionError(f"after {name} on a ready candidate: {error}") from error
        name, move = moves[pick % len(moves)]
        hypothesis.event(f"disturbed by {name.split(' at ')[0].split(' to ')[0]}")
        move(self)

    @precondition(has_candidates)
    @rule(index=st.integers(0, 2))
    def what_if_at_every_boundary(self, index: int) -> None:
        # Rules 7 and 14 at their edges: exactly at an approval's expiry or an evidence's age limit the
        # verdict flips, a microsecond before it does not.
        c = self.pick(index)
        edges = [r.expires for r in c.reviews]
        for e in c.evidence:
            for _at, policy in self.model.policies.get(e.binding[1] if e.binding else "", []):
                edges.append(
                    min(e.observed, e.recorded) + timedelta(seconds=policy["max_evidence_age_seconds"])
                )
        for edge in sorted(set(edges))[-6:]:
            for nudge in (-1, 0):
                at = edge + timedelta(microseconds=nudge)
                verdict = self.gate.decision(PROJECT, c.cid, AUDITOR, format_time(at)).as_json()
                assert (verdict["decision"] == "ready") == self.model.ready(c, at), (at, verdict["findings"])

    # ---- steering: one correct step towards ready, through the same operations -------------------------

    @precondition(has_candidates)
    @rule(
        index=st.integers(0, 2),
        steps=st.integers(1, 12),
        spoil=st.sampled_from(
            [None] * 7
            + [
                "untrusted",
                "agent",
                "fail",
                "skipped",
                "pass1",
                "exit0",
                "stale",
                "old",
                "wide",
                "narrow",
                "revision",
                "environment",
            ]
        ),
        key=st.sampled_from(["k1", "k2"]),
    )
    def steps_towards_ready(self, index: int, steps: int, spoil: str | None, key: str) -> None:
        # The evidence a burst posts is what a trusted CI run sends, or (three times in ten) spoiled in one
        # way that must keep it from counting: another publisher, a failing, empty or too small report, an age
        # at or near the limit, another scope or binding.
        flavour = (
            {"untrusted": UNTRUSTED_CI, "agent": REQUESTER}.get(spoil or "", CI),
            spoil if spoil in ("fail", "skipped", "pass1", "exit0") else "pass3",
            {"stale": -3600, "old": -86399}.get(spoil or "", 0),
            spoil if spoil in ("wide", "narrow") else "exact",
            spoil if spoil in ("revision", "environment") else "right",
            key,
        )
        for _ in range(steps):
            self.step_towards_ready(self.pick(index), flavour)

    def step_towards_ready(self, c: Candidate, flavour: tuple[Any, str, int, str, str, str]) -> None:
        now = self.now
        plan = c.plan()
        if not c.obligations(now):
            self.context(c, FILE_SETS[0], REQUESTER)
        elif not c.attested(now):
            self.context(c, FILE_SETS[0], CI)
        elif plan is None or not set(c.obligations(now)) <= {
            o for t in plan.plan["tasks"] for ch in t["checks"] for o in ch["covers"]
        }:
            self.store_plan(c, REQUESTER, "per_obligation", "current", len(c.plans) % 3 + 1)
        elif not self.model.approved(c, now):
            rejected = any(r.decision == "reject" and r.digest == plan.digest for r in c.reviews)
            approvers = [
                r
                for r in (REVIEWER, REVIEWER_2, SAM)
                if r.id not in self.model.excluded(c, plan.digest)
                and not any(
                    v.reviewer.id == r.id and v.digest == plan.digest and now < v.expires for v in c.reviews
                )
            ]
            if rejected or not approvers:
                self.store_plan(
                    c,
                    REQUESTER,
                    "per_policy" if len(c.plans) % 2 else "per_obligation",
                    "current",
                    len(c.plans) % 3 + 1,
                )
            else:
                self.send_review(c, approvers[0], "approve", plan.digest)
        elif not any(e["digest"] == plan.digest for e in c.executions):
            # API.md's flow executes the declared action once approved (rule 16), before the evidence.
            self.send_execution(c, "A1", REQUESTER, flavour[5], plan.digest, "declared")
        else:
            for task in plan.plan["tasks"]:
                for check in task["checks"]:
                    if not all(self.model.satisfied(c, check, o, now) for o in check["covers"]):
                        publisher, report, age, scope, binding, _key = flavour
                        self.send_evidence(c, check["check_id"], publisher, report, age, scope, binding)
                        return
            for task in plan.plan["tasks"]:
                if not self.model.task_passes(c, plan.digest, task["task_id"]):
                    if all(self.model.task_passes(c, plan.digest, d) for d in task["depends_on"]):
                        self.send_report(c, task["task_id"], REQUESTER, "completed", "right", plan.digest)
                        return
                if self.model.config()["settlement_required"] and not any(
                    d == plan.digest and t == task["task_id"] for d, t, _at in c.settlements
                ):
                    self.send_settlement(c, task["task_id"], REVIEWER, plan.digest)
                    return

    # ---- invariants -------------------------------------------------------------------------------------

    @invariant()
    def every_chain_verifies_with_one_event_per_accepted_write(self) -> None:
        streams = self.world.store.streams
        for ref, stream in streams.items():
            if self.verified.get(id(stream)) is stream:
                continue
            check = AuditChain.verify(ref.project, ref.candidate_id, stream.events, stream.facts, stream.head)
            assert check.valid, (ref, check)
            self.verified[id(stream)] = stream
        assert len(streams[StreamRef(PROJECT)].events) == self.model.project_writes
        for c in self.model.candidates.values():
            assert len(streams[StreamRef(PROJECT, c.cid)].events) == c.writes, c.cid

    @invariant()
    def no_side_effect_without_an_approved_execution(self) -> None:
        executed = sorted(
            (c.cid, e["execution_id"]) for c in self.model.candidates.values() for e in c.executions
        )
        assert sorted((o["candidate_id"], o["execution_id"]) for o in self.world.store.outbox) == executed

    @invariant()
    def ready_only_when_justified(self) -> None:
        streams = self.world.store.streams
        for c in self.model.candidates.values():
            chain, project = streams[StreamRef(PROJECT, c.cid)], streams[StreamRef(PROJECT)]
            seen = self.judged.get(c.cid)
            if seen is not None and seen[0] is chain and seen[1] is project and seen[2] == self.now:
                continue
            verdict = self.gate.evaluate(PROJECT, c.cid, AUDITOR)
            justified = self.model.ready(c, self.now)
            if verdict.decision == "ready":
                hypothesis.event("ready")
            assert (verdict.decision == "ready") == justified, (c.cid, justified, verdict.findings)
            self.judged[c.cid] = (chain, project, self.now)


# Shrinking a failing stateful run can take minutes, past the suite's time cap; the unshrunk run is printed
# and replays exactly (derandomised). SENTINEL_PBT_SHRINK=1 shrinks it when debugging.
PHASES = tuple(p for p in Phase if SHRINK or p not in (Phase.shrink, Phase.explain))
GateMachine.TestCase.settings = hypothesis.settings(
    max_examples=MAX_EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    database=None,
    derandomize=not RANDOM,
    phases=PHASES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestGateMachine = GateMachine.TestCase
