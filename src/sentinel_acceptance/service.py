"""The checks that go through the front door: health, the refusals of every stateful route, the acceptance
principals' scope, and the end-to-end ready flow (sentinel_client.flow.run_ready_flow, the one the demo runs),
each of whose steps is judged again from the recorded HTTP exchanges rather than taken on the flow's word."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sentinel_client.api import Response, SentinelClient
from sentinel_client.flow import FlowError, FlowResult, run_ready_flow
from sentinel_service import names
from sentinel_service.adapters.tokens import new_token
from sentinel_service.http.routes import ROUTES

from .checks import BLOCKED, CheckFailed, CheckSkipped
from .target import BuiltPackage, Target
from .tokens import PRINCIPALS, Tokens, lifetime_problems
from .webhook import unsigned_deliveries_refused

HTTP_TIMEOUT = 30.0  # a cold Lambda with its layers answers in a few seconds; the plans function may use 28
HEALTH_FIELDS = ("status", "service", "version", "runtime", "region", "model", "package_digest")
# Field names that would mean health says more than it may (a secret, token or account id).
SENSITIVE_KEY = re.compile(
    r"secret|token|password|credential|access_?key|account|authorization", re.IGNORECASE
)
# Twelve digits standing alone: not a run inside a hex digest or another identifier (a 64-hex package digest
# holds twelve digits in a row in about 3% of builds), but still inside an ARN (`::123456789012:`) or a path.
ACCOUNT_ID = re.compile(r"(?<![0-9A-Za-z])\d{12}(?![0-9A-Za-z])")
PLACEHOLDERS = {
    "project": None,
    "candidate_id": "cand_acceptance_probe",
    "policy_id": "acceptance-probe",
    "task_id": "T1",
    "action_id": "A1",
    "version": "1",
}
RETRIES_ON_429 = 4
FLOW_ROLES = ("requester", "publisher", "reviewer")


@dataclass
class Exchange:
    role: str
    method: str
    path: str
    status: int
    replayed: bool
    body: Any
    ms: int


class RecordingClient(SentinelClient):
    """The stdlib client, recording every answer (never a request header, so never a token)."""

    def __init__(self, base_url: str, token: str | None, role: str, record: list[Exchange]) -> None:
        super().__init__(base_url, token=token, timeout=HTTP_TIMEOUT)
        self.role, self.record = role, record

    def request(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Response:
        for attempt in range(RETRIES_ON_429 + 1):
            started = time.monotonic()
            answer = super().request(method, path, body, **kwargs)
            self.record.append(
                Exchange(
                    self.role,
                    method,
                    path,
                    answer.status,
                    answer.replayed,
                    answer.body,
                    int((time.monotonic() - started) * 1000),
                )
            )
            # API Gateway's throttle is not what is being tested; a write it refused changed nothing.
            if answer.status != 429 or attempt == RETRIES_ON_429:
                return answer
            time.sleep(min(answer.retry_after or 1.0, 5.0))
        raise AssertionError("unreachable")


@dataclass
class Front:
    """What the HTTP checks learned, for the checks after them."""

    api_url: str | None = None
    health: dict[str, Any] = field(default_factory=dict)
    tokens: Tokens | None = None
    token_problem: str = ""
    record: list[Exchange] = field(default_factory=list)
    flow: FlowResult | None = None
    flow_error: str = ""
    failed_step: int = 0
    steps: list[dict[str, Any]] = field(default_factory=list)

    def url(self) -> str:
        if not self.api_url:
            raise CheckSkipped(BLOCKED, "no API URL: the stack has no ApiUrl output")
        return self.api_url

    def need_tokens(self) -> Tokens:
        if self.tokens is None:
            raise CheckSkipped(BLOCKED, f"no acceptance tokens: {self.token_problem}")
        return self.tokens


# ---- health ------------------------------------------------------------------------------------------------


def health(
    target: Target,
    front: Front,
    built: Mapping[str, BuiltPackage],
    environments: Mapping[str, Any],
    forbidden: list[str],
) -> tuple[str, dict[str, Any]]:
    answer = RecordingClient(front.url(), None, "anonymous", front.record).health()
    text = answer.raw.decode("utf-8", "replace")
    if answer.status != 200 or not isinstance(answer.body, dict):
        raise CheckFailed(
            f"GET /v1/health without a token answered {answer.status}, not 200",
            {"status": answer.status, "body": text[:500]},
        )
    body = front.health = answer.body
    problems = [f"no {f}" for f in HEALTH_FIELDS if f not in body]
    if body.get("status") != "ok":
        problems.append(f"status {body.get('status')!r}")
    if body.get("runtime") != target.expected_runtime:
        problems.append(f"runtime {body.get('runtime')!r}, expected {target.expected_runtime!r}")
    deployed_provider = environments.get("plans", {}).get(names.ENV_MODEL_PROVIDER)
    provider = (body.get("model") or {}).get("provider") if isinstance(body.get("model"), dict) else None
    if not provider:
        problems.append("no model provider")
    elif deployed_provider and provider != deployed_provider:
        problems.append(f"model provider {provider!r}, the deployment configures {deployed_provider!r}")
    if body.get("package_digest") != built["functions"].sha256:
        problems.append(
            f"package_digest {body.get('package_digest')!r} is not the built functions.zip "
            f"{built['functions'].sha256}"
        )
    problems += [f"carries {what}" for what in leaks(body, text, forbidden)]
    evidence = {
        "body": body,
        "expected_runtime": target.expected_runtime,
        "expected_package_digest": built["functions"].sha256,
        "deployed_model_provider": deployed_provider,
    }
    if problems:
        raise CheckFailed("health: " + "; ".join(problems), evidence)
    return (
        f"answers anonymously: runtime {body['runtime']}, model {provider}, package "
        f"{body['package_digest'][:16]}…, no secret, token or account id",
        evidence,
    )


def leaks(body: Any, text: str, forbidden: list[str]) -> list[str]:
    """What in an anonymous answer would be a secret, a token or an account id."""
    found = []

    def keys(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if SENSITIVE_KEY.search(str(key)):
                    found.append(f"a field named {where}{key}")
                keys(value, f"{where}{key}.")
        elif isinstance(node, list):
            for value in node:
                keys(value, where)

    keys(body, "")
    if "snt_" in text:
        found.append("something shaped like a token (snt_…)")
    if ACCOUNT_ID.search(text):
        found.append("a 12-digit number (an account id)")
    if "arn:" in text:
        found.append("an ARN")
    found += ["a value it must never show" for value in forbidden if value and value in text]
    return found


# ---- refusals ----------------------------------------------------------------------------------------------


def auth_refusals(target: Target, front: Front) -> tuple[str, dict[str, Any]]:
    """Every non-public route: 401 {"message": "Unauthorized"} without a token, 403 {"message": "Forbidden"}
    with a well-formed token that was never issued. The public routes answer without one."""
    url = front.url()
    anonymous = RecordingClient(url, None, "anonymous", front.record)
    stranger = RecordingClient(url, new_token(), "wrong-token", front.record)
    problems, probed = [], 0
    for route in ROUTES:
        path = _fill(route.path, target.project)
        if route.public and route.method == "POST":  # the GitHub webhook: signed by GitHub, never a token
            problems += unsigned_deliveries_refused(url, path)
            continue
        if route.public:
            answer = anonymous.request(route.method, path)
            if answer.status != 200:
                problems.append(
                    f"{route.method} {route.path}: public, but answered {answer.status} without a token"
                )
            continue
        probed += 1
        for client, status, message in ((anonymous, 401, "Unauthorized"), (stranger, 403, "Forbidden")):
            answer = client.request(route.method, path)
            if (answer.status, answer.body) != (status, {"message": message}):
                who = "without a token" if client is anonymous else "with a wrong token"
                problems.append(
                    f"{route.method} {route.path} {who}: {answer.status} "
                    f"{json.dumps(answer.body)[:120] if answer.body is not None else ''}".rstrip()
                    + f", expected {status}"
                    + (" — the route is open" if answer.ok else "")
                )
    evidence = {
        "stateful_routes": probed,
        "public_routes": sum(1 for r in ROUTES if r.public),
        "requests": 2 * probed + sum(1 for r in ROUTES if r.public),
    }
    if problems:
        raise CheckFailed(
            f"{len(problems)} refusal(s) wrong: " + "; ".join(problems[:6]),
            {**evidence, "problems": problems},
        )
    return (
        f"all {probed} stateful routes answer 401 without a token and 403 with a wrong one; the "
        f"public routes answer anonymously, and the webhook refuses unsigned deliveries (401)",
        evidence,
    )


def _fill(path: str, project: str) -> str:
    values = dict(PLACEHOLDERS, project=project)
    return re.sub(r"\{([a-z_]+)\}", lambda m: str(values[m.group(1)]), path).removeprefix("/v1")


# ---- the acceptance principals -----------------------------------------------------------------------------


def principals(target: Target, front: Front) -> tuple[str, dict[str, Any]]:
    """Each token names the expected principal, which holds roles only in the acceptance project; a token
    whose expiry is known must be short-lived."""
    tokens = front.need_tokens()
    problems, seen = lifetime_problems(tokens), {}
    for role, (principal_id, kind, roles) in PRINCIPALS.items():
        answer = RecordingClient(front.url(), tokens.tokens[role], role, front.record).whoami()
        if answer.status != 200 or not isinstance(answer.body, dict):
            problems.append(f"{role}: whoami answered {answer.status} (token refused, expired or revoked?)")
            continue
        me = answer.body
        seen[role] = {
            "principal_id": me.get("principal_id"),
            "kind": me.get("kind"),
            "roles": me.get("roles"),
        }
        if me.get("principal_id") != principal_id:
            problems.append(f"{role}: the token is {me.get('principal_id')!r}'s, expected {principal_id!r}")
        if me.get("kind") != kind:
            problems.append(f"{role}: kind {me.get('kind')!r}, expected {kind!r}")
        if set(me.get("roles") or {}) != {target.project}:
            problems.append(
                f"{role}: roles in {sorted(me.get('roles') or {})}, must be only {target.project}"
            )
        elif not set(roles) <= set(me["roles"][target.project]):
            problems.append(f"{role}: roles {me['roles'][target.project]} lack {list(roles)}")
    evidence = {"source": tokens.source, "principals": seen, "expires_at": tokens.expires_at}
    if problems:
        raise CheckFailed("; ".join(problems), evidence)
    return (
        f"tokens from {tokens.source}: requester, publisher and reviewer hold roles only in project "
        f"{target.project}",
        evidence,
    )


# ---- the ready flow ----------------------------------------------------------------------------------------

FLOW_CHECKS: tuple[tuple[str, str], ...] = (
    ("candidate", "A fresh candidate is created and the trusted publisher attests its change context"),
    ("proposal", "One proposal is drafted in the expected mode and amended with one allow-listed action"),
    ("approval", "The approval is accepted and the candidate still holds"),
    ("action_replay", "One allow-listed action executes; its replay causes no second side effect"),
    ("evidence_binding", "One JUnit report per check binds as verified"),
    ("task_reports", "Each task reported completed passes"),
    ("decision_ready", "The final recorded decision is ready"),
    ("audit_chain", "The audit chain verifies with exactly as many events as the flow made accepted writes"),
)
STEP_CHECK = {
    1: "candidate",
    2: "proposal",
    3: "proposal",
    4: "approval",
    5: "action_replay",
    6: "evidence_binding",
    7: "task_reports",
    8: "decision_ready",
}


def run_flow(target: Target, front: Front, outbox_count: Callable[[str], int]) -> None:
    """Run the ready flow once, recording every exchange; a FlowError is kept, not raised."""
    tokens = front.need_tokens()
    clients = {
        role: RecordingClient(front.url(), tokens.tokens[role], role, front.record) for role in FLOW_ROLES
    }
    clock = {"step": 0, "at": time.monotonic()}

    def say(line: str) -> None:
        step = re.match(r"^(\d+)\. ", line)
        if step:
            _close_step(front, clock)
            clock.update(step=int(step.group(1)), at=time.monotonic(), title=line[len(step.group(0)) :])

    try:
        front.flow = run_ready_flow(clients, target.project, say=say, outbox_count=outbox_count)
    except FlowError as error:
        front.flow_error, front.failed_step = str(error), int(clock["step"]) or 1
    except Exception as error:  # a transport failure mid-flow is a failed step too
        front.flow_error, front.failed_step = f"{type(error).__name__}: {error}", int(clock["step"]) or 1
    _close_step(front, clock)


def _close_step(front: Front, clock: dict[str, Any]) -> None:
    if clock["step"]:
        front.steps.append(
            {
                "step": clock["step"],
                "title": clock.get("title", ""),
                "ms": int((time.monotonic() - clock["at"]) * 1000),
            }
        )


def flow_check(
    name: str, target: Target, front: Front, outbox_count: Callable[[str], int]
) -> tuple[str, dict[str, Any]]:
    """Judge one flow check from the recorded exchanges; where the flow stopped decides failed or blocked."""
    if front.tokens is None:
        raise CheckSkipped(BLOCKED, f"no acceptance tokens: {front.token_problem}")
    failing = _failing_check(front)
    order = [n for n, _ in FLOW_CHECKS]
    if failing is not None:
        if name == failing:
            raise CheckFailed(front.flow_error, {"failed_step": front.failed_step})
        if order.index(name) > order.index(failing):
            raise CheckSkipped(BLOCKED, f"the flow stopped before this step: {failing} failed")
    return JUDGES[name](target, front, outbox_count)


def _failing_check(front: Front) -> str | None:
    if not front.flow_error:
        return None
    if front.failed_step == 8 and front.flow_error.startswith("audit"):
        return "audit_chain"
    return STEP_CHECK.get(front.failed_step, "candidate")


def _calls(front: Front, method: str, suffix: str) -> list[Exchange]:
    pattern = re.compile(suffix + r"$")
    return [
        x
        for x in front.record
        if x.method == method and x.role in FLOW_ROLES and pattern.search(x.path.split("?")[0])
    ]


def _one(front: Front, method: str, suffix: str, what: str) -> Exchange:
    found = _calls(front, method, suffix)
    if len(found) != 1:
        raise CheckFailed(f"expected one {what}, the record has {len(found)}")
    return found[0]


def _judge_candidate(
    target: Target, front: Front, _outbox: Callable[[str], int]
) -> tuple[str, dict[str, Any]]:
    created = _one(front, "POST", r"/candidates", "candidate creation")
    attested = _one(front, "POST", r"/change-context", "change context")
    if created.status != 201 or attested.status != 201 or attested.body.get("change_context") != "attested":
        raise CheckFailed(
            f"candidate {created.status}, change context {attested.status} "
            f"{attested.body.get('change_context') if isinstance(attested.body, dict) else ''}"
        )
    return (
        f"candidate {created.body['candidate_id']} ({len(created.body['obligations'])} obligations), "
        "change context attested",
        {"candidate_id": created.body["candidate_id"], "obligations": len(created.body["obligations"])},
    )


def _judge_proposal(
    target: Target, front: Front, _outbox: Callable[[str], int]
) -> tuple[str, dict[str, Any]]:
    proposal = _one(front, "POST", r"/proposals", "proposal")
    plan = _one(front, "PUT", r"/plan", "plan amendment")
    if proposal.status != 201 or plan.status != 201:
        raise CheckFailed(f"proposal {proposal.status}, amended plan {plan.status}")
    expected = target.expect_mode
    if expected == "auto":
        provider = (front.health.get("model") or {}).get("provider", "none")
        expected = "fallback" if provider in ("none", "", None) else "model"
    mode = proposal.body.get("mode")
    evidence = {
        "mode": mode,
        "expected_mode": expected,
        "fallback_reason": proposal.body.get("fallback_reason"),
        "tasks": len(proposal.body["plan"]["tasks"]),
        "plan_digest": plan.body.get("plan_digest"),
    }
    if mode != expected:
        raise CheckFailed(
            f"the proposal was drafted in mode {mode!r} ({proposal.body.get('fallback_reason')}), "
            f"expected {expected!r}",
            evidence,
        )
    actions = plan.body["plan"].get("actions", [])
    if [a.get("type") for a in actions] != ["dispatch_checks"]:
        raise CheckFailed(
            f"the amended plan declares {actions}, expected one dispatch_checks action", evidence
        )
    return (
        f"proposal drafted in mode {mode} ({evidence['tasks']} task(s)), amended with one dispatch_checks "
        "action",
        evidence,
    )


def _judge_approval(
    target: Target, front: Front, _outbox: Callable[[str], int]
) -> tuple[str, dict[str, Any]]:
    review = _one(front, "POST", r"/reviews", "review")
    if review.status != 201:
        raise CheckFailed(f"the approval answered {review.status}")
    after = [
        x
        for x in front.record[front.record.index(review) + 1 :]
        if x.method == "GET" and x.role in FLOW_ROLES and x.path.split("?")[0].endswith("/decision")
    ]
    if not after or after[0].status != 200:
        raise CheckFailed("no decision was read after the approval")
    decision = after[0].body
    codes = sorted({f["code"] for f in decision.get("findings", [])})
    if decision.get("decision") != "hold" or "REVIEW_MISSING" in codes:
        raise CheckFailed(
            f"after the approval the decision is {decision.get('decision')} {codes}, expected a "
            "hold that no longer lacks the review"
        )
    return (
        f"approved until {review.body.get('expires_at')}; the candidate still holds on {', '.join(codes)}",
        {"expires_at": review.body.get("expires_at"), "findings_after": codes},
    )


def _judge_action(target: Target, front: Front, outbox: Callable[[str], int]) -> tuple[str, dict[str, Any]]:
    runs = _calls(front, "POST", r"/actions/[^/]+/executions")
    if len(runs) != 2:
        raise CheckFailed(f"expected one execution and one replay, the record has {len(runs)} requests")
    first, replay = runs
    if first.status != 201 or first.replayed:
        raise CheckFailed(f"the execution answered {first.status} (replayed={first.replayed})")
    if replay.status != 201 or not replay.replayed or replay.body != first.body:
        raise CheckFailed(
            f"the replay answered {replay.status} replayed={replay.replayed}, not the first answer"
        )
    execution_id = first.body["execution_id"]
    delivered = outbox(execution_id)
    evidence = {
        "execution_id": execution_id,
        "side_effect": first.body.get("side_effect"),
        "outbox_items": delivered,
    }
    if delivered != 1:
        raise CheckFailed(
            f"the outbox holds {delivered} side effects for {execution_id}, expected exactly one", evidence
        )
    return (
        f"execution {execution_id} ({first.body['side_effect']['type']}); the replay answered from the "
        "record (Idempotent-Replay: true) and the outbox holds exactly one side effect",
        evidence,
    )


def _judge_evidence(
    target: Target, front: Front, _outbox: Callable[[str], int]
) -> tuple[str, dict[str, Any]]:
    plan = _one(front, "PUT", r"/plan", "plan amendment").body["plan"]
    checks = [c["check_id"] for t in plan["tasks"] for c in t["checks"]]
    posted = _calls(front, "POST", r"/evidence")
    problems = [
        f"{x.body.get('check_id', '?') if isinstance(x.body, dict) else '?'}: {x.status}"
        for x in posted
        if x.status != 201
    ]
    bound = [x.body for x in posted if x.status == 201]
    problems += [
        f"{b['evidence_id']}: {b['outcome']}/{b['trust']} mismatches {b['binding']['mismatches']}"
        for b in bound
        if (b["outcome"], b["trust"], b["binding"]["mismatches"]) != ("pass", "verified", [])
        or not b["binding"]["obligation_ids"]
    ]
    if len(posted) != len(checks):
        problems.append(f"{len(posted)} reports for {len(checks)} checks")
    evidence = {
        "checks": checks,
        "evidence": [
            {
                "evidence_id": b["evidence_id"],
                "trust": b["trust"],
                "obligations": b["binding"]["obligation_ids"],
            }
            for b in bound
        ],
    }
    if problems:
        raise CheckFailed("; ".join(problems), evidence)
    return f"{len(bound)} JUnit report(s), one per check, each pass, verified and bound", evidence


def _judge_reports(target: Target, front: Front, _outbox: Callable[[str], int]) -> tuple[str, dict[str, Any]]:
    reports = _calls(front, "POST", r"/tasks/[^/]+/reports")
    if not reports or any(x.status != 201 or not x.body.get("passes") for x in reports):
        raise CheckFailed(f"task reports: {[(x.status, x.body) for x in reports][:3]}")
    return f"{len(reports)} task(s) reported completed and passing", {"tasks": len(reports)}


def _judge_decision(
    target: Target, front: Front, _outbox: Callable[[str], int]
) -> tuple[str, dict[str, Any]]:
    recorded = _one(front, "POST", r"/decisions", "recorded decision")
    body = recorded.body if isinstance(recorded.body, dict) else {}
    if recorded.status != 201 or body.get("decision") != "ready" or body.get("findings"):
        raise CheckFailed(
            f"the recorded decision is {recorded.status} {body.get('decision')} "
            f"{[f.get('code') for f in body.get('findings', [])]}"
        )
    return f"recorded decision ready at seq {body.get('seq')}", {
        "seq": body.get("seq"),
        "facts_digest": body.get("facts_digest"),
        "as_of": body.get("as_of"),
    }


def accepted_writes(front: Front) -> int:
    """Accepted writes counted from the transport record itself: 2xx POST/PUT answers that were not
    replays."""
    return sum(
        1
        for x in front.record
        if x.method in ("POST", "PUT") and 200 <= x.status < 300 and not x.replayed and x.role in FLOW_ROLES
    )


def _judge_audit(target: Target, front: Front, _outbox: Callable[[str], int]) -> tuple[str, dict[str, Any]]:
    audit = _calls(front, "GET", r"/candidates/[^/]+/audit")
    if not audit or audit[-1].status != 200:
        raise CheckFailed("the candidate's audit chain was not read")
    verification = audit[-1].body["verification"]
    writes = accepted_writes(front)
    evidence = {
        "verification": verification,
        "accepted_writes": writes,
        "flow_counted": front.flow.accepted_writes if front.flow else None,
    }
    if not verification.get("valid") or verification.get("length") != writes:
        raise CheckFailed(
            f"chain valid={verification.get('valid')} length={verification.get('length')}, the "
            f"flow made {writes} accepted writes",
            evidence,
        )
    return f"chain valid, {verification['length']} events for {writes} accepted writes", evidence


JUDGES: dict[str, Callable[[Target, Front, Callable[[str], int]], tuple[str, dict[str, Any]]]] = {
    "candidate": _judge_candidate,
    "proposal": _judge_proposal,
    "approval": _judge_approval,
    "action_replay": _judge_action,
    "evidence_binding": _judge_evidence,
    "task_reports": _judge_reports,
    "decision_ready": _judge_decision,
    "audit_chain": _judge_audit,
}
