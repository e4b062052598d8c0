"""The harness's own account of what it wrote, and the oracles that judge the gate against it.

The shadow is fed only by the requests the gate accepted (and by the harness's out-of-band steps). The
oracles never ask the gate whether it was right: they recompute, from the shadow and the route table, what
the gate may have accepted, executed or counted, and name every place it went further."""

from dataclasses import dataclass, field
from typing import Any

from sentinel_domain.models import Actor

# Body keys that claim an identity, or an authority only a credential or the service may grant.
IDENTITY_CLAIMS = frozenset(
    {
        "actor",
        "author",
        "reviewer",
        "principal",
        "principal_id",
        "requested_by",
        "created_by",
        "approved_by",
        "publisher",
        "reporter",
        "executor",
        "settled_by",
        "sponsor",
        "on_behalf_of",
        "identity",
        "caller",
        "user",
        "trust",
        "roles",
        "attested",
    }
)

# Free-form documents a body may carry (OpenAPI before/after): their keys are the API's data, not claims.
FREE_FORM = frozenset({"before", "after"})

NEGATIVE, UNKNOWN = "EVIDENCE_NEGATIVE", "EVIDENCE_UNKNOWN"


def scope_covers(evidence_scopes: list[str], obligation_scope: str) -> bool:
    """The run covered at least what was owed: the obligation's scope equals or lies under one of them."""
    for scope in evidence_scopes:
        base = scope.rstrip("/")
        if obligation_scope == base or obligation_scope.startswith(base + "/"):
            return True
    return False


def identity_claims(body: Any, path: str = "") -> list[str]:
    """Every identity-claiming key anywhere in a request body, by its path."""
    found: list[str] = []
    if isinstance(body, dict):
        for key, value in body.items():
            where = f"{path}.{key}" if path else str(key)
            if key in IDENTITY_CLAIMS:
                found.append(where)
            if key not in FREE_FORM:
                found.extend(identity_claims(value, where))
    elif isinstance(body, list):
        for n, value in enumerate(body):
            found.extend(identity_claims(value, f"{path}[{n}]"))
    return found


def route_refusal(route_path: str, route_roles: str, public: bool, actor: Actor | None) -> str | None:
    """Why the route table says this caller may not call this route (None: it may)."""
    if public:
        return None
    if actor is None:
        return "no principal stands behind the credential"
    if "/projects/" not in route_path:
        return None
    roles = set(actor.roles)
    if not roles:
        return "the caller holds no role in the project"
    human_only = "(human)" in route_roles
    wanted = {r.strip() for r in route_roles.replace("(human)", "").split(",")} - {"any", ""}
    if wanted and not wanted & roles:
        return f"the caller holds none of the roles {route_roles}"
    if human_only and actor.kind != "human":
        return f"the route needs a human; the caller is {actor.kind}"
    return None


@dataclass
class ShadowEvidence:
    evidence_id: str
    check_id: str
    subject: str
    revision: str
    environment: str
    scope: list[str]
    policy: str | None  # the policy of its check in the plan current when it was written
    policy_version: int | None
    covers: frozenset[str]
    outcome: str
    trust: str  # as the harness judges it, independently of the gate
    observed_at: str
    recorded_at: str
    arrival: int
    publisher: str


@dataclass
class ShadowPlan:
    digest: str
    plan: dict[str, Any]
    author: Actor
    mode: str


@dataclass
class Shadow:
    config: dict[str, Any]
    policies: dict[str, dict[str, Any]]  # id -> {"version": n, "policy": {...}}
    config_version: int = 1
    candidate: dict[str, Any] | None = None
    created_by: Actor | None = None
    obligations: dict[str, dict[str, Any]] = field(default_factory=dict)
    plans: list[ShadowPlan] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[ShadowEvidence] = field(default_factory=list)
    executions: list[dict[str, Any]] = field(default_factory=list)
    compromised: set[str] = field(default_factory=set)
    attested: bool = False

    @property
    def plan(self) -> ShadowPlan | None:
        return self.plans[-1] if self.plans else None

    def checks(self) -> list[tuple[str, dict[str, Any]]]:
        """(task id, check) of the current plan."""
        plan = self.plan
        return [(t["task_id"], c) for t in (plan.plan["tasks"] if plan else []) for c in t["checks"]]

    def check(self, check_id: str) -> dict[str, Any] | None:
        return next((c for _t, c in self.checks() if c["check_id"] == check_id), None)

    def excluded_approvers(self, digest: str) -> set[str]:
        """Rule 12, recomputed: the creator and every plan author up to the digest, and their sponsors."""
        people = [self.created_by] if self.created_by else []
        for plan in self.plans:
            people.append(plan.author)
            if plan.digest == digest:
                break
        excluded: set[str] = set()
        for person in people:
            excluded.add(person.id)
            if person.sponsor:
                excluded.add(person.sponsor)
        return excluded

    def trust_of(self, publisher: Actor, policy_id: str | None) -> str:
        """Rule 9, recomputed: only a listed ci publisher verifies; an agent never certifies work."""
        if publisher.kind == "ci" and "publisher" in publisher.roles:
            listed = (
                policy_id is not None
                and publisher.id in self.policies[policy_id]["policy"]["trusted_publishers"]
            )
            return "verified" if listed else "untrusted"
        return "unverified"

    def attests(self, actor: Actor) -> bool:
        return (
            actor.kind == "ci"
            and "publisher" in actor.roles
            and actor.id in self.config.get("change_context_publishers", [])
        )

    def bound(self, e: ShadowEvidence, check: dict[str, Any], obligation_id: str) -> bool:
        """Written for this check, its policy and version, this obligation, and this exact change."""
        candidate = self.candidate or {}
        obligation = self.obligations.get(obligation_id)
        policy = self.policies.get(check["policy_ref"])
        return (
            obligation is not None
            and policy is not None
            and e.check_id == check["check_id"]
            and e.policy == check["policy_ref"]
            and e.policy_version == policy["version"]
            and obligation_id in e.covers
            and e.subject == candidate.get("subject")
            and e.revision == candidate.get("revision")
            and e.environment == candidate.get("environment")
            and scope_covers(e.scope, obligation["scope"])
        )

    # ---- the side-effect oracle --------------------------------------------------------------------

    def execution_problems(self, item: dict[str, Any], now: str) -> list[str]:
        """Rule 16, recomputed for one outbox item at the instant its execution was accepted."""
        problems = []
        plan = self.plan
        if plan is None or item.get("plan_digest") != plan.digest:
            problems.append("its plan digest is not the current plan's")
            return problems
        declared = next(
            (a for a in plan.plan.get("actions", []) if a["action_id"] == item.get("action_id")), None
        )
        if declared is None:
            return problems + ["the current plan does not declare the action"]
        if declared["type"] != item.get("action_type"):
            problems.append("the type differs from the declared one")
        if declared["type"] not in self.config.get("allowed_action_types", []):
            problems.append(f"type {declared['type']} is not allow-listed")
        if item.get("params") != declared["params"]:
            problems.append("the params differ from the declared ones")
        done = [
            e
            for e in self.executions
            if e["plan_digest"] == plan.digest and e["action_id"] == declared["action_id"]
        ]
        if len(done) >= declared.get("max_executions", 1):
            problems.append(f"max_executions {declared.get('max_executions', 1)} was reached")
        problems.extend(self.approval_problems(plan.digest, now))
        return problems

    def approval_problems(self, digest: str, now: str) -> list[str]:
        current = [r for r in self.reviews if r["plan_digest"] == digest]
        if any(r["decision"] == "reject" for r in current):
            return ["the digest was rejected"]
        excluded = self.excluded_approvers(digest)
        valid = {
            r["reviewer"].id
            for r in current
            if r["decision"] == "approve"
            and now < r["expires_at"]
            and r["reviewer"].kind == "human"
            and "reviewer" in r["reviewer"].roles
            and r["reviewer"].id not in excluded
            and r["reviewer"].id not in self.compromised  # rule 26
        }
        needed = int(self.config.get("approvals_required", 1))
        if len(valid) < needed:
            return [f"{len(valid)} valid approval(s) of the digest; {needed} needed"]
        return []

    # ---- the binding oracle ------------------------------------------------------------------------

    def satisfied_without_binding(self, findings: list[dict[str, Any]]) -> list[str]:
        """(check, obligation) pairs a decision treats as proved although no evidence the harness wrote is
        bound to that check, policy version, obligation, subject, revision, environment and scope."""
        named = {(f.get("obligation_id"), f.get("check_id")) for f in findings}
        out = []
        for _task, check in self.checks():
            for obligation_id in check.get("covers", []):
                if (obligation_id, check["check_id"]) in named:
                    continue
                if not any(self.bound(e, check, obligation_id) for e in self.evidence):
                    out.append(f"{check['check_id']}/{obligation_id}")
        return out

    def report_without_binding(self, task_id: str) -> list[str]:
        out = []
        for task, check in self.checks():
            if task != task_id:
                continue
            for obligation_id in check.get("covers", []):
                if not any(self.bound(e, check, obligation_id) for e in self.evidence):
                    out.append(f"{check['check_id']}/{obligation_id}")
        return out

    # ---- negative and unknown apart ----------------------------------------------------------------

    def outcome_problems(self, findings: list[dict[str, Any]]) -> list[str]:
        """A failure must read EVIDENCE_NEGATIVE and an unknown EVIDENCE_UNKNOWN, never both, never
        swapped."""
        by_pair: dict[tuple[Any, Any], set[str]] = {}
        for f in findings:
            by_pair.setdefault((f.get("obligation_id"), f.get("check_id")), set()).add(f["code"])
        problems = [
            f"{c}/{o}: both {NEGATIVE} and {UNKNOWN}"
            for (o, c), codes in sorted(by_pair.items(), key=lambda kv: (str(kv[0][1]), str(kv[0][0])))
            if {NEGATIVE, UNKNOWN} <= codes
        ]
        for _task, check in self.checks():
            for obligation_id in check.get("covers", []):
                deciding = [
                    e
                    for e in self.evidence
                    if self.bound(e, check, obligation_id)
                    and e.trust == "verified"
                    and e.publisher not in self.compromised
                ]
                if not deciding:
                    continue
                newest = max(deciding, key=lambda e: (e.observed_at, e.recorded_at, e.arrival))
                codes = by_pair.get((obligation_id, check["check_id"]), set())
                want = {"fail": NEGATIVE, "unknown": UNKNOWN}.get(newest.outcome)
                other = {NEGATIVE: UNKNOWN, UNKNOWN: NEGATIVE}.get(want or "")
                if want and (want not in codes or other in codes):
                    problems.append(
                        f"{check['check_id']}/{obligation_id}: newest bound evidence "
                        f"{newest.evidence_id} is {newest.outcome}, findings {sorted(codes)}"
                    )
                if newest.outcome == "pass" and codes & {NEGATIVE, UNKNOWN}:
                    problems.append(
                        f"{check['check_id']}/{obligation_id}: newest bound evidence passed, "
                        f"findings {sorted(codes)}"
                    )
        return problems
