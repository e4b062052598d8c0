"""The checks of one request step's outcome against what the step's `expect` names: the refusal or status,
the decision and its findings, everything else the step names, and a ready that should not have been."""

from typing import Any

from sentinel_service.http.problems import REFUSAL_STATUS

from .requests import Response
from .run_state import RunState, body_of


class StepChecks(RunState):
    """What a request step expects, judged against its response."""

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
        body = body_of(response)
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
