"""What the HTTP-level tests share: the demo project's paths and bodies, a ready candidate's handle, a
snapshot of everything a request could change in the in-memory store, and the requests that take a candidate
to ready through `api` (the functional layer's fixture: tests/functional/conftest.py)."""

from dataclasses import dataclass
from typing import Any

from support.world import BASE, REV, World

P = "/v1/projects/demo"
C = P + "/candidates"
OTHER_REV = "c" * 40
NEW = {
    "subject": "payments",
    "base_revision": BASE,
    "revision": REV,
    "environment": "staging",
    "change": {"files": ["services/payments/api.py"]},
}
JUNIT_PASS = (
    '<testsuite name="s"><testcase classname="a" name="t1"/><testcase classname="a" name="t2"/></testsuite>'
)
A1 = {"action_id": "A1", "type": "dispatch_checks", "params": {"checks": ["C1"]}}


@dataclass
class Ready:
    cid: str
    digest: str
    obligation: str

    @property
    def path(self) -> str:
        return f"{C}/{self.cid}"


def snapshot(world: World) -> tuple[Any, ...]:
    return world.store.snapshot()


def audit_length(api, cid: str) -> int:
    status, _h, body = api.call("GET", f"{C}/{cid}/audit", as_="auditor")
    assert status == 200 and body["verification"]["valid"] is True, body
    return int(body["verification"]["length"])


def project_length(api) -> int:
    status, _h, body = api.call("GET", P + "/audit", as_="admin")
    assert status == 200 and body["verification"]["valid"] is True, body
    return int(body["verification"]["length"])


# ---- requests that set a test up -------------------------------------------------------------------------
# `fresh=True` also asserts that each success is a first write, not an idempotent replay (the idempotency
# tests set up that way); without it only the status is checked.


def ok(api, method: str, path: str, expected: int = 201, *, fresh: bool = False, **kw: Any) -> dict[str, Any]:
    status, headers, body = api.call(method, path, **kw)
    assert status == expected, body
    if fresh:
        assert "idempotent-replay" not in headers, headers
    return body


def plan_body(
    obligation: str, actions: list[dict[str, Any]] | None = None, extra_tasks: tuple[dict[str, Any], ...] = ()
) -> dict[str, Any]:
    """T1 with check C1 covering the obligation, then `extra_tasks`; the actions are [A1] unless given."""
    return {
        "tasks": [
            {
                "task_id": "T1",
                "title": "Unit tests for payments",
                "checks": [
                    {
                        "check_id": "C1",
                        "policy_ref": "unit-tests",
                        "command": "pytest -q payments-api",
                        "expected_exit_code": 0,
                        "covers": [obligation],
                    }
                ],
            },
            *extra_tasks,
        ],
        "actions": [A1] if actions is None else actions,
    }


def evidence(**over: Any) -> dict[str, Any]:
    body = {
        "check_id": "C1",
        "subject": "payments",
        "revision": REV,
        "environment": "staging",
        "scope": ["payments-api"],
        "observed_at": "2026-11-29T11:59:00Z",
        "source": {"system": "ci", "run_id": "1", "url": ""},
        "junit_xml": JUNIT_PASS,
    }
    body.update(over)
    return body


def create(api, as_: str = "requester", *, fresh: bool = False, **over: Any) -> dict[str, Any]:
    return ok(api, "POST", C, as_=as_, fresh=fresh, body=dict(NEW, **over))


def ready_candidate(
    api,
    *,
    approve: bool = True,
    actions: list[dict[str, Any]] | None = None,
    extra_tasks: tuple[dict[str, Any], ...] = (),
    creator: str = "requester",
    author: str = "requester",
    fresh: bool = False,
    **over: Any,
) -> Ready:
    """Given a candidate (attested by the trusted CI), a stored plan, and (by default) a human approval."""
    created = create(api, as_=creator, fresh=fresh, **over)
    cid = created["candidate_id"]
    ok(api, "POST", f"{C}/{cid}/change-context", as_="ci", fresh=fresh, body={"change": NEW["change"]})
    obligation = created["obligations"][0]["obligation_id"]
    stored = ok(
        api,
        "PUT",
        f"{C}/{cid}/plan",
        as_=author,
        fresh=fresh,
        body=plan_body(obligation, actions, extra_tasks),
    )
    ready = Ready(cid, stored["plan_digest"], obligation)
    if approve:
        ok(
            api,
            "POST",
            f"{C}/{cid}/reviews",
            as_="reviewer",
            fresh=fresh,
            body={"decision": "approve", "plan_digest": ready.digest, "revision": over.get("revision", REV)},
        )
    return ready


def passed_task(api, ready: Ready, *, fresh: bool = False) -> None:
    """Given trusted passing evidence for C1 and T1 reported completed (it passes)."""
    ev = ok(api, "POST", f"{ready.path}/evidence", as_="ci", fresh=fresh, body=evidence())
    rep = ok(
        api,
        "POST",
        f"{ready.path}/tasks/T1/reports",
        fresh=fresh,
        body={
            "plan_digest": ready.digest,
            "status": "completed",
            "checks": [{"check_id": "C1", "evidence_id": ev["evidence_id"]}],
        },
    )
    assert rep["passes"] is True, rep
