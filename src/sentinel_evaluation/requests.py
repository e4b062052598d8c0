"""From a step of the catalog to the HTTP request it stands for: the vocabulary's defaults (who calls, which
digest, which evidence) are filled from what the harness has seen the gate accept so far."""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sentinel_domain.plans import fill_template
from sentinel_domain.times import format_time

from .fixture import (
    BASE_REVISION,
    DEFAULT_FILES,
    ENVIRONMENT,
    JUNIT,
    OTHER_REVISION,
    POLICIES,
    PROJECT,
    REVISION,
    SUBJECT,
    ZERO_DIGEST,
)
from .oracles import Shadow

P = f"/v1/projects/{PROJECT}"
NO_CANDIDATE = "cand_never_created"


@dataclass
class Request:
    method: str
    path: str
    as_name: str | None  # the caller's name in the fixture's directory (its token is `tok-<name>`)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] | None = None
    authorization: str | None = None  # a raw Authorization value ("" sends none), overriding as_name


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def replayed(self) -> bool:
        return self.headers.get("idempotent-replay") == "true"

    @property
    def code(self) -> str | None:
        if self.ok or not isinstance(self.body, dict):
            return None
        if isinstance(self.body.get("code"), str):
            return str(self.body["code"])
        if set(self.body) == {"message"}:  # the gateway's own answers (401, 403, 404, 500)
            return "GATEWAY_" + str(self.body["message"]).upper().replace(" ", "_")
        return None


class RequestBuilder:
    """One method per request verb of the catalog (evaluation/catalog.py VERBS)."""

    def __init__(self, shadow: Shadow, now: Callable[[], datetime], labels: dict[str, str]) -> None:
        self.shadow = shadow
        self.now = now
        self.labels = labels  # evidence labels given by steps -> evidence ids
        self.n = 0  # the step being built (default idempotency keys name it)

    # ---- references a step may use -------------------------------------------------------------------

    @property
    def cid(self) -> str:
        return str(self.shadow.candidate["candidate_id"]) if self.shadow.candidate else NO_CANDIDATE

    @property
    def cpath(self) -> str:
        return f"{P}/candidates/{self.cid}"

    def digest(self, ref: Any) -> str:
        plans = self.shadow.plans
        if ref in (None, "current"):
            return plans[-1].digest if plans else ZERO_DIGEST
        if ref == "previous":
            return plans[-2].digest if len(plans) > 1 else ZERO_DIGEST
        if ref == "first":
            return plans[0].digest if plans else ZERO_DIGEST
        if ref == "zero":
            return ZERO_DIGEST
        return str(ref)

    def revision(self, ref: Any) -> str:
        if ref in (None, "candidate"):
            return str(self.shadow.candidate["revision"]) if self.shadow.candidate else REVISION
        if ref == "other":
            return OTHER_REVISION
        return str(ref)

    def instant(self, value: Any) -> str:
        """An int is seconds from the service clock's now; a string is an RFC 3339 instant, sent as given."""
        if isinstance(value, int):
            return format_time(self.now() + timedelta(seconds=value))
        return str(value)

    def if_match(self, step: dict[str, Any], current: str | None) -> dict[str, str]:
        wanted = step.get("if_match", "auto")
        if wanted == "none" or (wanted == "auto" and current is None):
            return {}
        if wanted == "auto":
            return {"if-match": f'"{current}"'}
        if wanted == "stale":
            return {"if-match": f'"{ZERO_DIGEST}"'}
        return {"if-match": f'"{wanted}"'}

    # ---- the plan a step describes -------------------------------------------------------------------

    def obligation_ref(self, ref: str, policy: str) -> str:
        """`obl_…` as given; `policy:scope` or a bare scope (of the check's policy) resolved to its id."""
        if ref.startswith("obl_"):
            return ref
        policy_id, scope = ref.split(":", 1) if ":" in ref else (policy, ref)
        for oid, o in sorted(self.shadow.obligations.items()):
            if o["policy_id"] == policy_id and o["scope"] == scope:
                return oid
        return f"obl_unresolved_{scope}"

    def default_tasks(self) -> list[dict[str, Any]]:
        """One task per obligation, in (scope, policy) order: the shape of the fallback plan."""
        ordered = sorted(self.shadow.obligations.values(), key=lambda o: (o["scope"], o["policy_id"]))
        return [
            {
                "task_id": f"T{n}",
                "checks": [{"check_id": f"C{n}", "policy_ref": o["policy_id"], "covers": [o["scope"]]}],
            }
            for n, o in enumerate(ordered, 1)
        ]

    def tasks(self, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """API-shaped tasks whose covers name scopes; commands and exit codes default to the policy's."""
        out = []
        for spec in specs:
            task = dict(spec)
            task.setdefault("title", f"Task {task['task_id']}")
            checks = []
            for raw in spec.get("checks", []):
                check = dict(raw)
                policy_id = check["policy_ref"]
                check["covers"] = [self.obligation_ref(r, policy_id) for r in raw.get("covers", [])]
                policy = self.shadow.policies.get(policy_id, {}).get("policy")
                scopes = [
                    self.shadow.obligations[o]["scope"]
                    for o in check["covers"]
                    if o in self.shadow.obligations
                ]
                if policy is not None:
                    check.setdefault(
                        "command", fill_template(policy["command"], scopes[0] if scopes else ".")
                    )
                    check.setdefault("expected_exit_code", policy["expected_exit_code"])
                else:
                    check.setdefault("command", "true")
                    check.setdefault("expected_exit_code", 0)
                checks.append(check)
            task["checks"] = checks
            out.append(task)
        return out

    # ---- the verbs -----------------------------------------------------------------------------------

    def build(self, verb: str, step: dict[str, Any], n: int) -> Request:
        self.n = n
        request: Request = getattr(self, f"_{verb}")(step, step.get("as"))
        if step.get("key") is not None:
            request.headers["idempotency-key"] = str(step["key"])
        if "extra" in step and isinstance(request.body, dict):
            request.body = dict(request.body, **step["extra"])
        request.headers.update({k.lower(): str(v) for k, v in (step.get("headers") or {}).items()})
        return request

    def _create(self, step: dict[str, Any], as_: str | None) -> Request:
        body: dict[str, Any] = {
            "subject": step.get("subject", SUBJECT),
            "base_revision": step.get("base_revision", BASE_REVISION),
            "revision": step.get("revision", REVISION),
            "environment": step.get("environment", ENVIRONMENT),
            "change": {"files": list(step.get("files", DEFAULT_FILES))},
        }
        if "openapi" in step:
            body["change"]["openapi"] = step["openapi"]
        return Request("POST", f"{P}/candidates", as_ or "requester", body)

    def _context(self, step: dict[str, Any], as_: str | None, default_caller: str = "requester") -> Request:
        files = step.get("files", (self.shadow.candidate or {}).get("files", list(DEFAULT_FILES)))
        body: dict[str, Any] = {"change": {"files": list(files)}}
        if "openapi" in step:
            body["change"]["openapi"] = step["openapi"]
        return Request("POST", f"{self.cpath}/change-context", as_ or default_caller, body)

    def _attest(self, step: dict[str, Any], as_: str | None) -> Request:
        return self._context(step, as_, default_caller="ci")

    def _propose(self, step: dict[str, Any], as_: str | None) -> Request:
        current = self.shadow.plan.digest if self.shadow.plan else None
        return Request(
            "POST", f"{self.cpath}/proposals", as_ or "requester", None, self.if_match(step, current)
        )

    def _plan(self, step: dict[str, Any], as_: str | None) -> Request:
        if "raw" in step:
            body = step["raw"]
        else:
            if "tasks" in step:
                tasks = self.tasks(step["tasks"])
            elif step.get("base") == "current" and self.shadow.plan:
                tasks = json.loads(json.dumps(self.shadow.plan.plan["tasks"]))
            else:
                tasks = self.tasks(self.default_tasks())
            body = {"tasks": tasks, "actions": list(step.get("actions", [])), **step.get("plan_extra", {})}
        current = self.shadow.plan.digest if self.shadow.plan else None
        return Request("PUT", f"{self.cpath}/plan", as_ or "requester", body, self.if_match(step, current))

    def _review(self, step: dict[str, Any], as_: str | None, decision: str) -> Request:
        body = {
            "decision": decision,
            "plan_digest": self.digest(step.get("digest")),
            "revision": self.revision(step.get("revision")),
        }
        if "comment" in step:
            body["comment"] = step["comment"]
        return Request("POST", f"{self.cpath}/reviews", as_ or "reviewer", body)

    def _approve(self, step: dict[str, Any], as_: str | None) -> Request:
        return self._review(step, as_, "approve")

    def _reject(self, step: dict[str, Any], as_: str | None) -> Request:
        return self._review(step, as_, "reject")

    def _execute(self, step: dict[str, Any], as_: str | None) -> Request:
        action = step.get("action", "A1")
        declared = None
        for plan in reversed(self.shadow.plans):  # the newest declaration of the action, if any
            declared = next((a for a in plan.plan.get("actions", []) if a["action_id"] == action), None)
            if declared:
                break
        params = step["params"] if "params" in step else (declared["params"] if declared else {})
        # Executions need a key: absent means one named after the step; `key: null` means none at all.
        headers = {} if "key" in step else {"idempotency-key": f"exec-{self.n}"}
        return Request(
            "POST",
            f"{self.cpath}/actions/{action}/executions",
            as_ or "requester",
            {"plan_digest": self.digest(step.get("digest")), "params": params},
            headers,
        )

    def _evidence(self, step: dict[str, Any], as_: str | None) -> Request:
        check_id = step.get("check", "C1")
        check = self.shadow.check(check_id)
        covered = [
            self.shadow.obligations[o]["scope"]
            for o in (check or {}).get("covers", [])
            if o in self.shadow.obligations
        ]
        owed = sorted({o["scope"] for o in self.shadow.obligations.values()})
        candidate = self.shadow.candidate or {}
        body: dict[str, Any] = {
            "check_id": check_id,
            "subject": step.get("subject", candidate.get("subject", SUBJECT)),
            "revision": self.revision(step.get("revision")),
            "environment": step.get("environment", candidate.get("environment", ENVIRONMENT)),
            "scope": list(step.get("scope") or covered or owed or ["payments-api"]),
            "observed_at": self.instant(step.get("observed", -60)),
            "source": {"system": "ci", "run_id": "run-1", "url": ""},
        }
        if "result" in step:
            body["result"] = step["result"]
        if "junit" in step or "result" not in step:
            name = step.get("junit", "pass")
            body["junit_xml"] = JUNIT.get(name, name)
        return Request("POST", f"{self.cpath}/evidence", as_ or "ci", body)

    def _report(self, step: dict[str, Any], as_: str | None) -> Request:
        task = step.get("task", "T1")
        body = {
            "plan_digest": self.digest(step.get("digest")),
            "status": step.get("status", "completed"),
            "checks": self.claims(task, step.get("claims")),
        }
        for name in ("blocked_reason", "summary"):
            if name in step:
                body[name] = step[name]
        return Request("POST", f"{self.cpath}/tasks/{task}/reports", as_ or "requester", body)

    def claims(self, task_id: str, spec: Any) -> list[dict[str, str]]:
        """As given (labels resolved), else the newest evidence the harness posted for each of the task's
        checks: what an honest agent would cite."""
        if isinstance(spec, list):
            out = []
            for claim in spec:
                ref = str(claim.get("evidence", "last"))
                if ref == "last":
                    found = [e for e in self.shadow.evidence if e.check_id == claim["check"]]
                    ref = found[-1].evidence_id if found else "ev_none"
                out.append({"check_id": claim["check"], "evidence_id": self.labels.get(ref, ref)})
            return out
        out = []
        for task, check in self.shadow.checks():
            found = [e for e in self.shadow.evidence if e.check_id == check["check_id"]]
            if task == task_id and found:
                out.append({"check_id": check["check_id"], "evidence_id": found[-1].evidence_id})
        return out

    def _settle(self, step: dict[str, Any], as_: str | None) -> Request:
        body = {"plan_digest": self.digest(step.get("digest")), "note": step.get("note", "reconciled")}
        return Request(
            "POST", f"{self.cpath}/tasks/{step.get('task', 'T1')}/settlement", as_ or "reviewer", body
        )

    def _decide(self, step: dict[str, Any], as_: str | None) -> Request:
        query = {"as_of": self.instant(step["as_of"])} if "as_of" in step else None
        return Request("GET", f"{self.cpath}/decision", as_ or "requester", None, query=query)

    def _record(self, step: dict[str, Any], as_: str | None) -> Request:
        # The route takes no as_of: a caller sending one anyway must not choose the recorded instant.
        query = {"as_of": self.instant(step["as_of"])} if "as_of" in step else None
        return Request("POST", f"{self.cpath}/decisions", as_ or "requester", None, query=query)

    def _read(self, step: dict[str, Any], as_: str | None) -> Request:
        return Request("GET", self.cpath, as_ or "requester")

    def _policy(self, step: dict[str, Any], as_: str | None) -> Request:
        policy_id = step["id"]
        base = self.shadow.policies.get(policy_id, {}).get("policy", POLICIES.get(policy_id, {}))
        return Request("PUT", f"{P}/policies/{policy_id}", as_ or "admin", dict(base, **step.get("set", {})))

    def _config(self, step: dict[str, Any], as_: str | None) -> Request:
        wanted = step.get("if_match", "auto")
        version = self.shadow.config_version if wanted == "auto" else wanted
        headers = {} if wanted == "none" else {"if-match": f'"{version}"'}
        return Request(
            "PUT", f"{P}/config", as_ or "admin", dict(self.shadow.config, **step.get("set", {})), headers
        )

    def _call(self, step: dict[str, Any], as_: str | None) -> Request:
        """Any route: `{candidate}`, `{digest}`, `{revision}` are filled; a relative path is the
        candidate's."""

        def fill(text: str) -> str:
            return (
                text.replace("{candidate}", self.cid)
                .replace("{project}", PROJECT)
                .replace("{digest}", self.digest("current"))
                .replace("{revision}", self.revision("candidate"))
            )

        path = fill(str(step["path"]))
        if not path.startswith("/"):
            path = f"{self.cpath}/{path}" if path else self.cpath
        body = step.get("body")
        if body is not None:
            body = json.loads(fill(json.dumps(body)))
        return Request(
            step.get("method", "GET"),
            path,
            as_ or "requester",
            body,
            query=step.get("query"),
            authorization=step.get("token"),
        )
