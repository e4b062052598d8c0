"""What changed between two versions of a work plan: tasks, checks and declared actions added, removed or
changed, and for each changed one exactly which fields. Pure (no I/O), so the reviewer's view, `sentinel
plan diff` and their tests share one answer.

Checks are keyed by `check_id` across the whole plan (preflight keeps ids unique), so a check moved to
another task is one changed check (its `task_id` field), not a removal and an addition. A task's checks are
diffed as checks; the task's own fields are everything else. Order is part of the plan digest, so a plan
that only reorders tasks or checks says so (`reordered`) even when nothing else differs."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

KINDS = ("tasks", "checks", "actions")
_KEYS = {"tasks": "task_id", "checks": "check_id", "actions": "action_id"}


def _tasks(plan: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    tasks = (plan or {}).get("tasks") or []
    return [t for t in tasks if isinstance(t, dict) and isinstance(t.get("task_id"), str)]


def _items(plan: Mapping[str, Any] | None, kind: str) -> dict[str, dict[str, Any]]:
    """The plan's tasks (without their checks), checks (with the task they sit in) or actions, by id."""
    if kind == "tasks":
        return {t["task_id"]: {k: v for k, v in t.items() if k != "checks"} for t in _tasks(plan)}
    if kind == "checks":
        found: dict[str, dict[str, Any]] = {}
        for task in _tasks(plan):
            for check in task.get("checks") or []:
                if isinstance(check, dict) and isinstance(check.get("check_id"), str):
                    found[check["check_id"]] = {**check, "task_id": task["task_id"]}
        return found
    actions = (plan or {}).get("actions") or []
    return {
        a["action_id"]: dict(a)
        for a in actions
        if isinstance(a, dict) and isinstance(a.get("action_id"), str)
    }


def _field_changes(old: Mapping[str, Any], new: Mapping[str, Any], key: str) -> dict[str, dict[str, Any]]:
    names = sorted((set(old) | set(new)) - {key})
    return {
        name: {"from": old.get(name), "to": new.get(name)} for name in names if old.get(name) != new.get(name)
    }


def _order(ids: Iterable[str], keep: set[str]) -> list[str]:
    return [i for i in ids if i in keep]


def _reordered(
    kind: str, before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], common: set[str]
) -> bool:
    """Whether the items both versions hold come in another order. A check's order counts within its task
    only (reordering tasks is the tasks' change, a moved check is its own)."""
    if kind != "checks":
        return _order(before, common) != _order(after, common)
    stayed = {i for i in common if before[i]["task_id"] == after[i]["task_id"]}
    tasks = {before[i]["task_id"] for i in stayed}
    return any(
        _order((i for i in before if before[i]["task_id"] == t), stayed)
        != _order((i for i in after if after[i]["task_id"] == t), stayed)
        for t in tasks
    )


def diff_plans(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> dict[str, Any]:
    """{tasks|checks|actions: {added: [...], removed: [...], changed: [{<id key>, task_id?, fields}]},
    reordered: [kinds], unchanged: bool}. `added` and `removed` list whole items (checks with their
    `task_id`); `fields` maps each differing field to {from, to}."""
    out: dict[str, Any] = {}
    reordered: list[str] = []
    for kind in KINDS:
        key = _KEYS[kind]
        before, after = _items(old, kind), _items(new, kind)
        common = set(before) & set(after)
        changed = []
        for item_id in (i for i in after if i in common):
            fields = _field_changes(before[item_id], after[item_id], key)
            if fields:
                entry: dict[str, Any] = {key: item_id, "fields": fields}
                if kind == "checks":
                    entry["task_id"] = after[item_id]["task_id"]
                changed.append(entry)
        out[kind] = {
            "added": [after[i] for i in after if i not in before],
            "removed": [before[i] for i in before if i not in after],
            "changed": changed,
        }
        if _reordered(kind, before, after, common):
            reordered.append(kind)
    out["reordered"] = reordered
    out["unchanged"] = not reordered and not any(
        out[kind][part] for kind in KINDS for part in ("added", "removed", "changed")
    )
    return out


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def _describe(kind: str, item: Mapping[str, Any]) -> str:
    if kind == "tasks":
        return f"task {item['task_id']}" + (f" ({item['title']})" if item.get("title") else "")
    if kind == "checks":
        return (
            f"check {item['check_id']} in task {item.get('task_id')}: {item.get('policy_ref')}, "
            f"`{item.get('command')}`"
        )
    return f"action {item['action_id']} ({item.get('type')} {_value(item.get('params'))})"


def render_diff(diff: Mapping[str, Any], title: str = "plan changes") -> str:
    """The diff in words, one line per added or removed item and per changed field."""
    if diff.get("unchanged"):
        return f"{title}: none"
    lines = [f"{title}:"]
    for kind in KINDS:
        part = diff.get(kind) or {}
        for item in part.get("added", []):
            lines.append(f"  + {_describe(kind, item)}")
        for item in part.get("removed", []):
            lines.append(f"  - {_describe(kind, item)}")
        for item in part.get("changed", []):
            name = kind[:-1] + " " + str(item[_KEYS[kind]])
            for field, change in sorted(item["fields"].items()):
                lines.append(f"  ~ {name}: {field}: {_value(change['from'])} -> {_value(change['to'])}")
    for kind in diff.get("reordered", []):
        lines.append(f"  ~ the order of the {kind} changed")
    return "\n".join(lines)
