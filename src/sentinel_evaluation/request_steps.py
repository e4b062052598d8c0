"""One request step: the request sent through the emulated API Gateway and the real handlers, its trace,
the oracles after it (identity, side effects, binding, outcomes), the checks of what the step expects, and
what an accepted request adds to the harness's shadow."""

from typing import Any

from sentinel_domain.models import Actor
from sentinel_domain.times import format_time, parse_time
from sentinel_service.http.routes import route_for

from .fixture import World
from .oracles import ShadowEvidence, ShadowPlan, identity_claims, route_refusal
from .requests import Request, Response
from .run_state import body_of
from .step_checks import StepChecks

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


def _snapshot(world: World) -> tuple[Any, ...]:
    return world.backing.snapshot()


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


class RequestSteps(StepChecks):
    """A request step, the oracles after it, and what it adds to the shadow when accepted."""

    def request_step(self, verb: str, step: dict[str, Any]) -> None:
        request = self.requests.build(verb, step, self.n)
        caller = self.caller(request)
        before = _snapshot(self.world)
        hooks_before = len(self.world.hooks.fired)
        outbox_before = len(self.world.backing.outbox())
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
        new = self.world.backing.outbox()[outbox_before:]
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
            if item.get("execution_id") != body_of(response).get("execution_id"):
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
        body, shadow = body_of(response), self.shadow
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
