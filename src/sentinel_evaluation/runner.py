"""One run of one scenario: a fresh fixture, every step through the emulated API Gateway and the real
handlers, the oracles after every step, and an observation that leaves out durations, random ids, ports and
paths, so that two runs of one scenario must give the same observation digest."""

import json
from dataclasses import dataclass, field
from typing import Any

from sentinel_domain.canonical import digest
from sentinel_domain.models import Actor
from sentinel_domain.ports import StreamRef
from sentinel_domain.times import format_time, parse_time
from sentinel_service.http.problems import REFUSAL_STATUS
from sentinel_service.http.routes import route_for

from .catalog import OUT_OF_BAND, Scenario
from .fixture import CONFIG, POLICIES, PROJECT, World, build_world, token
from .oracles import Shadow, ShadowEvidence, ShadowPlan, identity_claims, route_refusal
from .requests import P, Request, RequestBuilder, Response

# What the harness expects the gate to make of each named JUnit body (DOMAIN.md rule 8).
JUNIT_OUTCOME = {
    "pass": "pass",
    "fail": "fail",
    "error": "fail",
    "skipped": "unknown",
    "empty": "unknown",
    "flaky": "pass",
    "suite_failure": "fail",
}
# What the gate must record for each misbehaviour of the scripted model (DOMAIN.md rule 23). Kept in step
# with sentinel_domain.proposals.FALLBACK_REASONS (issue 4's table of fallback reasons).
FALLBACK_REASON = {
    "transport_error": "MODEL_TRANSPORT_ERROR",
    "throttled": "MODEL_THROTTLED",
    "timeout": "MODEL_TIMEOUT",
    "crash": "MODEL_ERROR",
    "unknown_code": "MODEL_ERROR",
    "invalid_schema": "MODEL_OUTPUT_INVALID",
    "not_an_object": "MODEL_OUTPUT_MALFORMED",
    "out_of_scope": "MODEL_OUTPUT_OUT_OF_SCOPE",
}
# The fields of a response an observation keeps: stable ids, digests and verdicts, never free text (a
# reworded detail is not a behaviour change).
KEPT = (
    "candidate_id",
    "seq",
    "plan_version",
    "plan_digest",
    "mode",
    "fallback_reason",
    "review_id",
    "decision",
    "expires_at",
    "execution_id",
    "action_id",
    "evidence_id",
    "outcome",
    "trust",
    "attempt",
    "recorded_status",
    "passes",
    "facts_digest",
    "as_of",
    "as_of_source",
    "change_context",
    "version",
    "settled",
    "recorded",
    "raw_sha256",
    "counts",
    "status",
    "code",
    "scope",
)


@dataclass
class RunResult:
    scenario: str
    observation: dict[str, Any]
    digest: str
    failures: list[str] = field(default_factory=list)  # expectations the gate did not meet
    false_ready: list[str] = field(default_factory=list)
    unauthorized_side_effects: list[str] = field(default_factory=list)
    wrong_binding: list[str] = field(default_factory=list)
    identity_boundary: list[str] = field(default_factory=list)
    outcome_mixups: list[str] = field(default_factory=list)  # negative and unknown not kept apart
    fallback_problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not (
            self.failures
            or self.false_ready
            or self.unauthorized_side_effects
            or self.wrong_binding
            or self.identity_boundary
            or self.outcome_mixups
            or self.fallback_problems
        )


def _snapshot(world: World) -> tuple[Any, ...]:
    return world.memory.snapshot()


def _summary(body: Any) -> dict[str, Any]:
    """The stable part of a response body."""
    if not isinstance(body, dict):
        return {}
    out = {k: body[k] for k in KEPT if k in body}
    if isinstance(body.get("findings"), list):
        out["findings"] = sorted({f.get("code", "") for f in body["findings"] if isinstance(f, dict)})
    if isinstance(body.get("binding"), dict):
        out["binding"] = {
            k: body["binding"].get(k) for k in ("obligation_ids", "policy_id", "policy_version", "mismatches")
        }
    for name in ("obligations", "added_obligations"):
        if isinstance(body.get(name), list):
            out[name] = [o.get("obligation_id") for o in body[name] if isinstance(o, dict)]
    if isinstance(body.get("plan"), dict):
        out["actions"] = [a.get("action_id") for a in body["plan"].get("actions", [])]
    if isinstance(body.get("side_effect"), dict):
        out["outbox_id"] = body["side_effect"].get("outbox_id")
    return out


def _body(response: Response) -> dict[str, Any]:
    return response.body if isinstance(response.body, dict) else {}


class Run:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        config = dict(CONFIG, **scenario.fixture.config)
        policies = {pid: dict(p, **scenario.fixture.policies.get(pid, {})) for pid, p in POLICIES.items()}
        self.shadow = Shadow(
            config=config, policies={pid: {"version": 1, "policy": p} for pid, p in policies.items()}
        )
        self.world = build_world(scenario.fixture.proposer)
        self.labels: dict[str, str] = {}
        self.requests = RequestBuilder(self.shadow, self.world.clock.now, self.labels)
        self.result = RunResult(scenario.name, {}, "")
        self.trace: list[dict[str, Any]] = []
        self.modes: list[dict[str, Any]] = []
        self.idempotency: list[dict[str, Any]] = []
        self.approval_accepted = False
        self.executed = False
        self.n = 0

    # ---- plumbing ------------------------------------------------------------------------------------

    @property
    def now(self) -> str:
        return format_time(self.world.clock.now())

    @property
    def where(self) -> str:
        return f"{self.scenario.name} step {self.n}" if self.n else f"{self.scenario.name} final"

    def fail(self, message: str) -> None:
        self.result.failures.append(f"step {self.n}: {message}" if self.n else message)

    def send(self, request: Request) -> Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        if request.authorization is not None:
            if request.authorization:
                headers["authorization"] = request.authorization
        elif request.as_name is not None:
            headers["authorization"] = f"Bearer {token(request.as_name)}"
        data = json.dumps(request.body) if request.body is not None else None
        status, out_headers, raw = self.world.gateway.invoke(
            request.method, request.path, headers, data, request.query
        )
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = {"unreadable": True}
        return Response(status, {k.lower(): v for k, v in out_headers.items()}, body)

    def caller(self, request: Request) -> Actor | None:
        """The principal the credential names, as the authorizer fake resolves it (None: nobody)."""
        value = request.authorization
        if value is None:
            return self.world.directory.get(request.as_name) if request.as_name else None
        if not value.startswith("Bearer tok-"):
            return None
        return self.world.directory.get(value.removeprefix("Bearer tok-"))

    # ---- one request step ----------------------------------------------------------------------------

    def request_step(self, verb: str, step: dict[str, Any]) -> None:
        request = self.requests.build(verb, step, self.n)
        caller = self.caller(request)
        before = _snapshot(self.world)
        hooks_before = len(self.world.hooks.fired)
        outbox_before = len(self.world.memory.outbox)
        proposer_calls = self.world.proposer.calls if self.world.proposer else 0
        response = self.send(request)
        after = _snapshot(self.world)
        self.trace.append(
            {
                "n": self.n,
                "do": verb,
                "as": request.as_name,
                "status": response.status,
                "code": response.code,
                "replayed": response.replayed,
                "out": _summary(response.body),
            }
        )
        if "idempotency-key" in request.headers:
            outcome = "replayed" if response.replayed else ("accepted" if response.ok else response.code)
            self.idempotency.append(
                {"step": self.n, "key": request.headers["idempotency-key"], "outcome": outcome}
            )

        self.judge_identity(request, caller, response)
        self.judge_side_effects(verb, response, outbox_before)
        self.check_step(verb, self.expectation(step), response)
        # A concurrent writer the harness let in during this step changes the store on its own account; the
        # side-effect oracle above still judged the outbox.
        raced = len(self.world.hooks.fired) > hooks_before
        if (not response.ok or response.replayed) and not raced and before != after:
            self.fail(f"{verb} was {'replayed' if response.replayed else 'refused'} yet changed the store")
        if response.ok and not response.replayed:
            self.apply(verb, step, request, caller, response, proposer_calls)

    @staticmethod
    def expectation(step: dict[str, Any]) -> dict[str, Any]:
        raw = step.get("expect")
        if raw is None:
            return {}
        if isinstance(raw, int):
            return {"status": raw}
        if isinstance(raw, str):
            return {"refusal": raw}
        return dict(raw)

    def check_step(self, verb: str, want: dict[str, Any], response: Response) -> None:
        body = _body(response)
        self.check_status(verb, want, response)
        self.check_decision_and_findings(verb, want, body)
        self.check_outcome(verb, want, body, response)
        self.check_false_ready(verb, want, body)

    def check_status(self, verb: str, want: dict[str, Any], response: Response) -> None:
        """The refusal, the HTTP status, or success, as the step expects."""
        got, code = response.status, response.code
        refusal = want.get("refusal")
        if refusal is not None:
            status = want.get("status") or REFUSAL_STATUS.get(refusal)
            if response.ok or code != refusal or (status and got != status):
                self.fail(
                    f"{verb}: expected refusal {refusal}{f' ({status})' if status else ''}, got {got} "
                    f"{code or ''}".rstrip()
                )
        elif "status" in want and got != want["status"]:
            self.fail(f"{verb}: expected HTTP {want['status']}, got {got} {code or ''}".rstrip())
        elif "status" not in want and not response.ok:
            self.fail(f"{verb}: expected success, got {got} {code or ''}".rstrip())

    def check_decision_and_findings(self, verb: str, want: dict[str, Any], body: dict[str, Any]) -> None:
        """The decision, its finding codes, and preflight's finding codes (each as often as found)."""
        codes = sorted({f["code"] for f in body.get("findings", []) if isinstance(f, dict) and "code" in f})
        if "decision" in want and body.get("decision") != want["decision"]:
            self.fail(f"{verb}: expected decision {want['decision']}, got {body.get('decision')} {codes}")
        if "findings" in want and codes != sorted(want["findings"]):
            self.fail(f"{verb}: expected findings {sorted(want['findings'])}, got {codes}")
        if "preflight" in want:
            every = sorted(f.get("code", "") for f in body.get("findings", []) if isinstance(f, dict))
            if every != sorted(want["preflight"]):
                self.fail(f"{verb}: expected preflight findings {sorted(want['preflight'])}, got {every}")

    def check_outcome(
        self, verb: str, want: dict[str, Any], body: dict[str, Any], response: Response
    ) -> None:
        """Everything else the step names: replay, binding mismatches, counts, clock, candidate, fields."""
        if "replayed" in want and response.replayed != want["replayed"]:
            self.fail(f"{verb}: expected replayed={want['replayed']}, got {response.replayed}")
        mismatches = (body.get("binding") or {}).get("mismatches")
        if "mismatches" in want and mismatches != want["mismatches"]:
            self.fail(f"{verb}: expected mismatches {want['mismatches']}, got {mismatches}")
        actions = len((body.get("plan") or {}).get("actions") or [])
        if "actions" in want and actions != want["actions"]:
            self.fail(f"{verb}: expected {want['actions']} declared action(s), got {actions}")
        obligations = len(body.get("obligations") or [])
        if "obligations" in want and obligations != want["obligations"]:
            self.fail(f"{verb}: expected {want['obligations']} obligation(s), got {obligations}")
        if want.get("as_of") == "service" and body.get("as_of") != self.now:
            self.fail(f"{verb}: expected the service clock's instant {self.now}, got {body.get('as_of')}")
        if want.get("existing_candidate") and body.get("candidate_id") != self.requests.cid:
            self.fail(f"{verb}: expected the existing candidate's id, got {body.get('candidate_id')!r}")
        for name in (
            "mode",
            "fallback_reason",
            "outcome",
            "trust",
            "recorded_status",
            "passes",
            "attempt",
            "as_of_source",
            "change_context",
        ):
            if name in want and body.get(name) != want[name]:
                self.fail(f"{verb}: expected {name} {want[name]!r}, got {body.get(name)!r}")

    def check_false_ready(self, verb: str, want: dict[str, Any], body: dict[str, Any]) -> None:
        """A decision or record that came out ready where the step expected a hold or a refusal."""
        expects_ready = want.get("decision") == "ready" or want.get("findings") == []
        judged = bool({"decision", "findings", "refusal", "status"} & set(want))
        if verb in ("decide", "record") and body.get("decision") == "ready" and judged and not expects_ready:
            self.result.false_ready.append(
                f"{self.where}: ready where {want.get('refusal') or 'hold'} was expected"
            )

    # ---- the oracles after every request -------------------------------------------------------------

    def judge_identity(self, request: Request, caller: Actor | None, response: Response) -> None:
        if not response.ok:
            return
        route = route_for(request.method, request.path)
        where = f"{self.where} ({request.method} {route.path if route else request.path})"
        claims = identity_claims(request.body)
        if claims and not response.replayed:
            self.result.identity_boundary.append(f"{where}: accepted a body claiming {', '.join(claims)}")
        reason = route_refusal(route.path, route.roles, route.public, caller) if route else None
        if reason:
            self.result.identity_boundary.append(f"{where}: accepted although {reason}")

    def judge_side_effects(self, verb: str, response: Response, outbox_before: int) -> None:
        new = self.world.memory.outbox[outbox_before:]
        if not new:
            return
        if not (verb == "execute" and response.status == 201 and not response.replayed):
            self.result.unauthorized_side_effects.extend(
                f"{self.where}: outbox item {item.get('outbox_id')} from a request that executed nothing"
                for item in new
            )
            return
        if len(new) > 1:
            self.result.unauthorized_side_effects.append(
                f"{self.where}: {len(new)} outbox items from one execution"
            )
        for item in new:
            problems = self.shadow.execution_problems(item, self.now)
            if item.get("execution_id") != _body(response).get("execution_id"):
                problems.append("it names another execution than the one accepted")
            if problems:
                self.result.unauthorized_side_effects.append(
                    f"{self.where}: outbox item {item.get('outbox_id')}: {'; '.join(problems)}"
                )

    def judge_decision(self, body: dict[str, Any], what_if: bool) -> None:
        findings = [f for f in body.get("findings", []) if isinstance(f, dict)]
        codes = {f.get("code") for f in findings}
        plan = self.shadow.plan
        if what_if or "STATE_UNAVAILABLE" in codes or plan is None or body.get("plan_digest") != plan.digest:
            return  # the gate did not judge the current plan's checks at the service clock's now
        if "STATE_TAMPERED" in codes:
            return  # the gate read facts the harness never wrote, and held: nothing was decided on them
        for pair in self.shadow.satisfied_without_binding(findings):
            self.result.wrong_binding.append(
                f"{self.where}: {pair} counted as proved without evidence bound to it"
            )
        for problem in self.shadow.outcome_problems(findings):
            self.result.outcome_mixups.append(f"{self.where}: {problem}")

    # ---- what an accepted request adds to the shadow -------------------------------------------------

    def apply(
        self,
        verb: str,
        step: dict[str, Any],
        request: Request,
        caller: Actor | None,
        response: Response,
        proposer_calls: int,
    ) -> None:
        body, shadow = _body(response), self.shadow
        if verb == "create" and shadow.candidate is None:
            shadow.candidate = {
                "candidate_id": body["candidate_id"],
                "subject": request.body["subject"],
                "revision": request.body["revision"].lower(),
                "environment": request.body["environment"],
                "files": list(request.body["change"]["files"]),
            }
            shadow.created_by = caller
            self.absorb_context(body, caller)
        elif verb in ("context", "attest"):
            self.absorb_context(body, caller)
        elif verb in ("propose", "plan"):
            assert caller is not None
            shadow.plans.append(
                ShadowPlan(body["plan_digest"], body["plan"], caller, body.get("mode", "submitted"))
            )
            if verb == "propose":
                self.judge_proposal(body, proposer_calls)
        elif verb in ("approve", "reject"):
            shadow.reviews.append(
                {
                    "reviewer": caller,
                    "decision": verb,
                    "plan_digest": body["plan_digest"],
                    "expires_at": body["expires_at"],
                }
            )
            if verb == "approve":
                self.approval_accepted = True
                if caller is not None and caller.id in shadow.excluded_approvers(body["plan_digest"]):
                    self.result.identity_boundary.append(
                        f"{self.where}: {caller.id} approved a plan it created, authored or sponsors"
                    )
        elif verb == "execute":
            self.executed = True
            shadow.executions.append(
                {
                    "execution_id": body["execution_id"],
                    "action_id": body["action_id"],
                    "plan_digest": body["plan_digest"],
                }
            )
        elif verb == "evidence":
            self.absorb_evidence(step, request, caller, body)
        elif verb == "report" and body.get("passes"):
            for pair in shadow.report_without_binding(step.get("task", "T1")):
                self.result.wrong_binding.append(
                    f"{self.where}: the report writer passed {pair} without evidence bound to it"
                )
        elif verb in ("decide", "record"):
            self.judge_decision(body, verb == "decide" and "as_of" in step)
        elif verb == "policy":
            shadow.policies[step["id"]] = {"version": body["version"], "policy": request.body}
        elif verb == "config":
            shadow.config = dict(request.body)
            shadow.config_version = int(body["version"])

    def absorb_context(self, body: dict[str, Any], caller: Actor | None) -> None:
        shadow = self.shadow
        now = {o["obligation_id"]: o for o in body.get("obligations", [])}
        removed = sorted(set(shadow.obligations) - set(now))
        if removed:
            self.fail("a change context removed obligations: " + ", ".join(removed))
        for oid, o in now.items():
            shadow.obligations.setdefault(oid, {"policy_id": o["policy_id"], "scope": o["scope"]})
        attests = caller is not None and shadow.attests(caller)
        if body.get("change_context") == "attested" and not attests and not shadow.attested:
            self.result.identity_boundary.append(
                f"{self.where}: change context attested by "
                f"{caller.id if caller else 'nobody'}, not a listed ci publisher"
            )
        shadow.attested = shadow.attested or attests

    def absorb_evidence(
        self, step: dict[str, Any], request: Request, caller: Actor | None, body: dict[str, Any]
    ) -> None:
        shadow, sent = self.shadow, request.body
        check = shadow.check(sent["check_id"])
        policy_id = check["policy_ref"] if check else None
        trust = shadow.trust_of(caller, policy_id) if caller else "unverified"
        if body.get("trust") == "verified" and trust != "verified":
            self.result.identity_boundary.append(
                f"{self.where}: evidence from {caller.id if caller else 'nobody'} was recorded verified"
            )
        elif body.get("trust") != trust:
            self.fail(f"evidence trust {body.get('trust')!r}, the harness expected {trust!r}")
        outcome = self.expected_outcome(step, sent, policy_id)
        if outcome is not None and body.get("outcome") != outcome:
            self.result.outcome_mixups.append(
                f"{self.where}: evidence judged {body.get('outcome')!r}, the harness expected {outcome!r}"
            )
        evidence = ShadowEvidence(
            evidence_id=body["evidence_id"],
            check_id=sent["check_id"],
            subject=sent["subject"],
            revision=sent["revision"].lower(),
            environment=sent["environment"],
            scope=list(sent["scope"]),
            policy=policy_id,
            policy_version=shadow.policies[policy_id]["version"] if policy_id else None,
            covers=frozenset(check["covers"]) if check else frozenset(),
            outcome=outcome or str(body.get("outcome")),
            trust=trust,
            observed_at=format_time(parse_time(sent["observed_at"])),
            recorded_at=self.now,
            arrival=len(shadow.evidence),
            publisher=caller.id if caller else "",
        )
        shadow.evidence.append(evidence)
        if "label" in step:
            self.labels[str(step["label"])] = evidence.evidence_id

    def expected_outcome(
        self, step: dict[str, Any], sent: dict[str, Any], policy_id: str | None
    ) -> str | None:
        """Rule 8, recomputed where the harness knows the answer: a named JUnit body, or an exit code."""
        if "junit_xml" in sent:
            return JUNIT_OUTCOME.get(step.get("junit", "pass"))
        if policy_id is None:
            return None
        policy, result = self.shadow.policies[policy_id]["policy"], sent["result"]
        names = [a["name"] for a in result.get("artifacts", [])]
        missing = [p for p in policy["expected_artifacts"] if p not in names]
        return "pass" if result["exit_code"] == policy["expected_exit_code"] and not missing else "fail"

    def judge_proposal(self, body: dict[str, Any], calls_before: int) -> None:
        """The fallback is fail-closed: the reason names the model's failure, and the plan is review-only."""
        proposer = self.world.proposer
        behaviour = None
        if proposer is not None and proposer.calls > calls_before:
            behaviour = proposer.script[min(calls_before, len(proposer.script) - 1)]
        expected = (
            ("model", None)
            if behaviour == "valid"
            else ("fallback", FALLBACK_REASON.get(behaviour or "", "MODEL_NOT_CONFIGURED"))
        )
        got = (body.get("mode"), body.get("fallback_reason"))
        self.modes.append({"step": self.n, "mode": got[0], "fallback_reason": got[1]})
        if got != expected:
            self.result.fallback_problems.append(
                f"{self.where}: model behaviour {behaviour or 'none'} gave "
                f"{got[0]} ({got[1]}); expected {expected[0]} ({expected[1]})"
            )
        if got[0] == "fallback":
            plan = body.get("plan") or {}
            if plan.get("actions"):
                self.result.fallback_problems.append(f"{self.where}: the fallback plan declares actions")
            covered = {
                o
                for t in plan.get("tasks", [])
                for c in t["checks"]
                for o in c.get("covers", [])
                if self.shadow.obligations.get(o, {}).get("policy_id") == c["policy_ref"]
            }
            if covered != set(self.shadow.obligations):
                self.result.fallback_problems.append(
                    f"{self.where}: the fallback plan does not cover every "
                    "obligation with its own policy's check"
                )

    # ---- out-of-band steps ---------------------------------------------------------------------------

    def out_of_band(self, verb: str, step: dict[str, Any]) -> None:
        entry: dict[str, Any] = {
            "n": self.n,
            "do": verb,
            **{k: v for k, v in step.items() if k not in ("do", "note")},
        }
        world = self.world
        if verb == "advance":
            world.clock.advance(int(step["seconds"]))
        elif verb == "revoke":
            # The operator's CLI records revocations on the project chain; the harness does the same directly.
            principal = world.directory[step["principal"]]
            revoked = {"principal_id": principal.id, "compromised": bool(step.get("compromised"))}
            world.gate.record_project_event(PROJECT, "principal.revoked", revoked)
            if step.get("compromised"):
                self.shadow.compromised.add(principal.id)
        elif verb == "tamper":
            entry["seq"] = self.tamper(step)
        elif verb == "fault":
            world.store.incomplete = step.get("incomplete")
        elif verb == "race":
            self.arm_race(step)
        self.trace.append(entry)

    def tamper(self, step: dict[str, Any]) -> int:
        """Edit the store behind the chain's back, as anyone with write access to the table could."""
        candidate = step.get("chain", "candidate") == "candidate"
        ref = StreamRef(PROJECT, self.requests.cid) if candidate else StreamRef(PROJECT)
        stream = self.world.memory.streams.get(ref)
        if stream is None:
            self.fail("tamper: no such chain")
            return 0
        if "remove_event" in step:
            position = next(
                (i for i, e in enumerate(stream.events) if e["type"] == step["remove_event"]), None
            )
            if position is None:
                self.fail(f"tamper: no {step['remove_event']} event to remove")
                return 0
            seq = int(stream.events[position]["seq"])
            del stream.events[position]
            return seq
        old, new = step["replace"]
        marker = f'"type":"{step["fact"]}"'
        seqs = [s for s, text in stream.facts.items() if marker in text and old in text]
        if not seqs:
            self.fail(f"tamper: no {step['fact']} fact containing {old}")
            return 0
        stream.facts[max(seqs)] = stream.facts[max(seqs)].replace(old, new)
        return max(seqs)

    def arm_race(self, step: dict[str, Any]) -> None:
        world, shadow = self.world, self.shadow
        if step["kind"] == "amend_before_execution_write":

            def amend() -> None:
                # Another Lambda instance amends the plan after the execution's checks, before its write.
                plan = shadow.plan
                assert plan is not None
                amended = json.loads(json.dumps(plan.plan))
                amended["tasks"][0]["title"] += " (amended concurrently)"
                author = world.directory["requester"]
                stored = world.gate.put_plan(PROJECT, self.requests.cid, author, amended, f'"{plan.digest}"')
                shadow.plans.append(ShadowPlan(stored.plan_digest, stored.plan, author, "submitted"))

            world.hooks.before_append["action.executed"] = amend
        else:
            seconds = int(step.get("seconds", 1))
            world.hooks.before_new_id["exe"] = lambda: world.clock.advance(seconds)

    # ---- the run -------------------------------------------------------------------------------------

    def setup(self) -> None:
        """The admin configures the project through the API: policies first, then the configuration."""
        for policy_id, entry in sorted(self.shadow.policies.items()):
            response = self.send(Request("PUT", f"{P}/policies/{policy_id}", "admin", entry["policy"]))
            if response.status != 201:
                self.fail(f"setup: policy {policy_id} answered {response.status} {response.code}")
        response = self.send(Request("PUT", f"{P}/config", "admin", self.shadow.config))
        if response.status != 201:
            self.fail(f"setup: config answered {response.status} {response.code}")

    def final(self) -> dict[str, Any]:
        """The recorded decision at the service clock, and both chains' verification."""
        self.n = 0
        decision = audit = None
        if self.shadow.candidate:
            response = self.send(Request("POST", f"{self.requests.cpath}/decisions", "requester"))
            body = _body(response)
            if response.ok:
                self.judge_decision(body, what_if=False)
            findings = [f for f in body.get("findings", []) if isinstance(f, dict)]
            decision = {
                "status": response.status,
                "decision": body.get("decision"),
                "findings": sorted({f["code"] for f in findings}),
                "finding_keys": sorted(
                    [f["code"], f.get("obligation_id") or "", f.get("check_id") or "", f.get("task_id") or ""]
                    for f in findings
                ),
                "plan_digest": body.get("plan_digest"),
                "facts_digest": body.get("facts_digest"),
                "as_of": body.get("as_of"),
                "recorded": body.get("recorded", True),
            }
            response = self.send(
                Request("GET", f"{self.requests.cpath}/audit", "auditor", query={"limit": "500"})
            )
            audit = _body(response).get("verification") if response.ok else {"status": response.status}
        response = self.send(Request("GET", f"{P}/audit", "admin", query={"limit": "500"}))
        project_audit = _body(response).get("verification") if response.ok else {"status": response.status}
        return {"decision": decision, "audit": audit, "project_audit": project_audit}

    def execute(self) -> RunResult:
        self.setup()
        for n, step in enumerate(self.scenario.steps, 1):
            self.n = n
            if step["do"] in OUT_OF_BAND:
                self.out_of_band(step["do"], step)
            else:
                self.request_step(step["do"], step)
        final = self.final()
        self.judge_final(final)
        shadow = self.shadow
        observation = {
            "scenario": self.scenario.name,
            "steps": self.trace,
            "decision": final["decision"],
            "approval_accepted": self.approval_accepted,
            "executed": self.executed,
            "side_effects": [dict(item) for item in self.world.memory.outbox],
            "modes": self.modes,
            "idempotency": self.idempotency,
            "plan_digest": shadow.plan.digest if shadow.plan else None,
            "trace_ids": {
                "candidate_id": shadow.candidate["candidate_id"] if shadow.candidate else None,
                "evidence_ids": [e.evidence_id for e in shadow.evidence],
                "execution_ids": [e["execution_id"] for e in shadow.executions],
                "plan_digests": [p.digest for p in shadow.plans],
                "head_hash": (final["audit"] or {}).get("head_hash"),
                "project_head_hash": (final["project_audit"] or {}).get("head_hash"),
            },
            "audit": final["audit"],
            "project_audit": final["project_audit"],
            "hooks_fired": list(self.world.hooks.fired),
        }
        self.result.observation = observation
        self.result.digest = digest(observation)
        return self.result

    def judge_final(self, final: dict[str, Any]) -> None:
        want, decision = self.scenario.expect, final["decision"]
        got = decision["decision"] if decision else None
        codes = decision["findings"] if decision else []
        if got != want.decision:
            self.fail(f"final: expected decision {want.decision}, got {got} {codes}")
        if codes != sorted(want.findings):
            self.fail(f"final: expected findings {sorted(want.findings)}, got {codes}")
        if got == "ready" and want.decision != "ready":
            self.result.false_ready.append(
                f"{self.scenario.name} final: ready where {want.decision} was expected"
            )
        outbox, executions = len(self.world.memory.outbox), len(self.shadow.executions)
        if outbox != want.side_effects:
            self.fail(f"final: expected {want.side_effects} side effect(s) in the outbox, got {outbox}")
        if outbox > executions:
            self.result.unauthorized_side_effects.append(
                f"{self.scenario.name} final: {outbox} outbox items for {executions} accepted execution(s)"
            )
        if final["audit"] is not None and bool(final["audit"].get("valid")) != want.audit_valid:
            self.fail(f"final: expected the candidate chain valid={want.audit_valid}, got {final['audit']}")
        if bool((final["project_audit"] or {}).get("valid")) != want.project_audit_valid:
            self.fail(
                f"final: expected the project chain valid={want.project_audit_valid}, got "
                f"{final['project_audit']}"
            )
        if want.approval_accepted is not None and self.approval_accepted != want.approval_accepted:
            self.fail(f"final: expected approval accepted={want.approval_accepted}")
        if want.executed is not None and self.executed != want.executed:
            self.fail(f"final: expected an action executed={want.executed}")


def run_scenario(scenario: Scenario) -> RunResult:
    return Run(scenario).execute()
