"""The out-of-band steps of a scenario: what happens beside the API (the clock advancing, an operator's
revocation, tampering with the store, a fault, a concurrent writer armed to race the next request)."""

import json
from typing import Any

from sentinel_domain.ports import StreamRef

from .fixture import PROJECT
from .oracles import ShadowPlan
from .run_state import RunState


class OutOfBandSteps(RunState):
    """The steps that act beside the API."""

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
        backing = self.world.backing
        stream = backing.stream(ref)
        if stream is None:
            self.fail("tamper: no such chain")
            return 0
        if "remove_event" in step:
            seq = next((int(e["seq"]) for e in stream.events if e["type"] == step["remove_event"]), None)
            if seq is None:
                self.fail(f"tamper: no {step['remove_event']} event to remove")
                return 0
            backing.remove_event(ref, seq)
            return seq
        old, new = step["replace"]
        marker = f'"type":"{step["fact"]}"'
        seqs = [s for s, text in stream.facts.items() if marker in text and old in text]
        if not seqs:
            self.fail(f"tamper: no {step['fact']} fact containing {old}")
            return 0
        backing.replace_fact(ref, max(seqs), stream.facts[max(seqs)].replace(old, new))
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
