"""The facts a reviewer reads, on the real stores (SQLite and DynamoDB on moto): a change past the file bound
is stored bounded and shown with its count, and every plan version reads back as it was stored."""

from __future__ import annotations

from typing import Any

from sentinel_domain.models import ChangeContextRequest
from support.world import CI, PROJECT, REQUESTER, World


def test_changed_files_and_plan_versions_read_back_from_each_store(store: Any) -> None:
    # Given the gate over a real store, a candidate of 1,500 changed files, attested with the same files
    world = World(store=store)
    files = [f"services/payments/f{i:04d}.py" for i in range(1500)]
    cid = world.candidate(files=tuple(files))["candidate_id"]
    world.gate.add_change_context(
        PROJECT, cid, CI, ChangeContextRequest.model_validate({"change": {"files": files}}), None
    )
    # And a plan drafted by the service, then amended by its requester
    first = world.gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()
    check = first["plan"]["tasks"][0]["checks"][0]["check_id"]
    dispatch = {"action_id": "A1", "type": "dispatch_checks", "params": {"checks": [check]}}
    amended = first["plan"] | {"actions": [dispatch]}
    second = world.gate.put_plan(PROJECT, cid, REQUESTER, amended, f'"{first["plan_digest"]}"')
    # When the candidate and each version are read back
    view = world.gate.get_candidate(PROJECT, cid, REQUESTER).as_json()
    one = world.gate.get_plan_version(PROJECT, cid, REQUESTER, 1).as_json()
    two = world.gate.get_plan_version(PROJECT, cid, REQUESTER, 2).as_json()
    # Then the changed files are the first 1,000 with the full count
    assert view["changed_files"] == {"files": files[:1000], "count": 1500, "truncated": True}
    # And each version is the one stored, in order, with how it came about
    assert [(one["plan_digest"], one["mode"]), (two["plan_digest"], two["mode"])] == [
        (first["plan_digest"], "fallback"),
        (view["plan_digest"], "submitted"),
    ]
    assert second.plan_digest == two["plan_digest"] != one["plan_digest"]
    assert two["plan"]["actions"] == [dict(dispatch, max_executions=1)]
