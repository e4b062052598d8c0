"""What the HTTP-level tests share: the demo project's paths and bodies, a ready candidate's handle, and a
snapshot of everything a request could change in the in-memory store."""

from dataclasses import dataclass
from typing import Any

from support.world import BASE, REV, World

P = "/v1/projects/demo"
C = P + "/candidates"
OTHER_REV = "c" * 40
NEW = {"subject": "payments", "base_revision": BASE, "revision": REV, "environment": "staging",
       "change": {"files": ["services/payments/api.py"]}}
JUNIT_PASS = ('<testsuite name="s"><testcase classname="a" name="t1"/><testcase classname="a" name="t2"/>'
              '</testsuite>')
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
