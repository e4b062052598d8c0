"""What a reviewer is shown changed between two plan versions (sentinel_client.plan_diff): exactly the tasks,
checks and actions added, removed or changed, and exactly which fields."""

import copy
from typing import Any

from sentinel_client.plan_diff import diff_plans, render_diff


def check(check_id: str, scope: str, policy: str = "unit-tests", **more: Any) -> dict[str, Any]:
    return {
        "check_id": check_id,
        "policy_ref": policy,
        "command": f"pytest -q {scope}",
        "expected_exit_code": 0,
        "covers": [f"obl_{scope}"],
        "assertions": [],
        **more,
    }


def task(task_id: str, title: str, *checks: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"task_id": task_id, "title": title, "files": [], "depends_on": [], "checks": list(checks), **more}


V1 = {
    "tasks": [
        task("T1", "Unit tests for payments", check("C1", "payments-api")),
        task("T2", "Unit tests for ledger", check("C2", "ledger")),
        task("T3", "Release script", check("C3", "scripts/release.sh")),
    ],
    "actions": [
        {
            "action_id": "A1",
            "type": "dispatch_checks",
            "params": {"checks": ["C1", "C2", "C3"]},
            "max_executions": 1,
        }
    ],
}


def names(diff: dict[str, Any], kind: str, part: str) -> list[str]:
    key = {"tasks": "task_id", "checks": "check_id", "actions": "action_id"}[kind]
    return [item[key] for item in diff[kind][part]]


def test_an_amendment_of_one_task_and_one_check_names_exactly_those() -> None:
    # Given version 2 of a plan that renames one task and points one check (in another task) at a new command
    v2 = copy.deepcopy(V1)
    v2["tasks"][0]["title"] = "Unit and contract tests for payments"
    v2["tasks"][1]["checks"][0]["command"] = "pytest -q ledger -k 'not slow'"
    # When the versions are diffed
    diff = diff_plans(V1, v2)
    # Then exactly task T1 and check C2 changed, each in exactly the field that differs, nothing else
    assert [c["task_id"] for c in diff["tasks"]["changed"]] == ["T1"]
    assert diff["tasks"]["changed"][0]["fields"] == {
        "title": {"from": "Unit tests for payments", "to": "Unit and contract tests for payments"}
    }
    assert diff["checks"]["changed"] == [
        {
            "check_id": "C2",
            "task_id": "T2",
            "fields": {"command": {"from": "pytest -q ledger", "to": "pytest -q ledger -k 'not slow'"}},
        }
    ]
    for kind in ("tasks", "checks", "actions"):
        assert diff[kind]["added"] == [] and diff[kind]["removed"] == []
    assert diff["actions"]["changed"] == [] and diff["reordered"] == [] and diff["unchanged"] is False


def test_an_added_task_with_its_check_and_a_removed_check_are_named() -> None:
    # Given version 2 that drops check C3 (and its task) and adds task T4 with check C4
    v2 = copy.deepcopy(V1)
    del v2["tasks"][2]
    v2["tasks"].append(task("T4", "Docs lint", check("C4", "docs", policy="lint")))
    # When diffed
    diff = diff_plans(V1, v2)
    # Then the additions and removals are named, with their checks, and nothing is called changed
    assert names(diff, "tasks", "added") == ["T4"] and names(diff, "tasks", "removed") == ["T3"]
    assert names(diff, "checks", "added") == ["C4"] and names(diff, "checks", "removed") == ["C3"]
    assert diff["checks"]["added"][0]["task_id"] == "T4"
    assert diff["tasks"]["changed"] == [] and diff["checks"]["changed"] == []


def test_a_check_moved_to_another_task_is_one_change_of_its_task() -> None:
    v2 = copy.deepcopy(V1)
    moved = v2["tasks"][2]["checks"].pop()
    v2["tasks"][0]["checks"].append(moved)
    diff = diff_plans(V1, v2)
    assert diff["checks"]["changed"] == [
        {"check_id": "C3", "task_id": "T1", "fields": {"task_id": {"from": "T3", "to": "T1"}}}
    ]
    assert names(diff, "checks", "added") == [] and names(diff, "checks", "removed") == []


def test_a_changed_declared_action_names_its_params() -> None:
    v2 = copy.deepcopy(V1)
    v2["actions"][0]["params"] = {"checks": ["C1"]}
    diff = diff_plans(V1, v2)
    assert diff["actions"]["changed"] == [
        {
            "action_id": "A1",
            "fields": {"params": {"from": {"checks": ["C1", "C2", "C3"]}, "to": {"checks": ["C1"]}}},
        }
    ]


def test_a_reorder_alone_is_reported_since_order_is_part_of_the_digest() -> None:
    v2 = copy.deepcopy(V1)
    v2["tasks"].reverse()
    diff = diff_plans(V1, v2)
    assert diff["reordered"] == ["tasks"] and diff["unchanged"] is False
    assert all(
        not diff[k][p] for k in ("tasks", "checks", "actions") for p in ("added", "removed", "changed")
    )


def test_the_same_plan_is_unchanged_and_a_first_plan_is_all_additions() -> None:
    assert diff_plans(V1, copy.deepcopy(V1))["unchanged"] is True
    first = diff_plans(None, V1)
    assert names(first, "tasks", "added") == ["T1", "T2", "T3"]
    assert names(first, "checks", "added") == ["C1", "C2", "C3"]


def test_the_words_name_each_change_on_its_own_line() -> None:
    # Given an amendment of one task's title and one check's command, and a new task
    v2 = copy.deepcopy(V1)
    v2["tasks"][0]["title"] = "Renamed"
    v2["tasks"][1]["checks"][0]["command"] = "pytest -q ledger -x"
    v2["tasks"].append(task("T4", "Docs lint", check("C4", "docs", policy="lint")))
    # When rendered
    text = render_diff(diff_plans(V1, v2), "since v1")
    # Then one line per addition and per changed field, and nothing about untouched items
    lines = text.splitlines()
    assert lines[0] == "since v1:"
    assert "  + task T4 (Docs lint)" in lines
    assert "  + check C4 in task T4: lint, `pytest -q docs`" in lines
    assert "  ~ task T1: title: Unit tests for payments -> Renamed" in lines
    assert "  ~ check C2: command: pytest -q ledger -> pytest -q ledger -x" in lines
    assert len(lines) == 5 and "T3" not in text and "C1" not in text
    assert render_diff(diff_plans(V1, V1), "since v1") == "since v1: none"


def test_checks_swapped_within_a_task_are_a_reorder_of_checks() -> None:
    v2 = copy.deepcopy(V1)
    v2["tasks"][0]["checks"].append(check("C9", "payments-api/extra"))
    v3 = copy.deepcopy(v2)
    v3["tasks"][0]["checks"].reverse()
    diff = diff_plans(v2, v3)
    assert diff["reordered"] == ["checks"] and diff["checks"]["changed"] == []
