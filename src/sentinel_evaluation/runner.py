"""One run of one scenario: a fresh fixture, every step through the emulated API Gateway and the real
handlers, the oracles after every step, and an observation that leaves out durations, random ids, ports and
paths, so that two runs of one scenario must give the same observation digest.

The run is composed of the steps' modules: request_steps.py (with step_checks.py, the checks of a step's
outcome), out_of_band.py, and run_state.py (the state and plumbing they share)."""

from collections.abc import Callable
from typing import Any

from sentinel_domain.canonical import digest

from .backings import Backing, MemoryBacking
from .catalog import OUT_OF_BAND, Scenario
from .out_of_band import OutOfBandSteps
from .request_steps import RequestSteps
from .requests import P, Request
from .run_state import RunResult, body_of


class Run(RequestSteps, OutOfBandSteps):
    """One run: the setup, every step in order, the final decision and chains, and the observation."""

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
            body = body_of(response)
            if response.ok:
                self.judge_decision(body, what_if=False)
            findings = [f for f in body.get("findings", []) if isinstance(f, dict)]
            # A chain that fails verification refuses the write (503) with the hold's findings: a hold,
            # not recorded.
            refused_hold = response.status == 503 and bool(findings)
            decision = {
                "status": response.status,
                "decision": body.get("decision") or ("hold" if refused_hold else None),
                "findings": sorted({f["code"] for f in findings}),
                "finding_keys": sorted(
                    [f["code"], f.get("obligation_id") or "", f.get("check_id") or "", f.get("task_id") or ""]
                    for f in findings
                ),
                "plan_digest": body.get("plan_digest"),
                "facts_digest": body.get("facts_digest"),
                "as_of": body.get("as_of"),
                "recorded": body.get("recorded", not refused_hold),
            }
            response = self.send(
                Request("GET", f"{self.requests.cpath}/audit", "auditor", query={"limit": "500"})
            )
            audit = body_of(response).get("verification") if response.ok else {"status": response.status}
        response = self.send(Request("GET", f"{P}/audit", "admin", query={"limit": "500"}))
        project_audit = body_of(response).get("verification") if response.ok else {"status": response.status}
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
            "side_effects": [dict(item) for item in self.world.backing.outbox()],
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
        outbox, executions = len(self.world.backing.outbox()), len(self.shadow.executions)
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


def run_scenario(scenario: Scenario, backing: Callable[[], Backing] = MemoryBacking) -> RunResult:
    """One run over a fresh backing (in memory unless another maker is given), closed when the run ends."""
    run = Run(scenario, backing())
    try:
        return run.execute()
    finally:
        run.world.backing.close()
