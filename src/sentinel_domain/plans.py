"""Work plans: preflight (DOMAIN.md rule 18), the plan digest, and the deterministic fallback plan."""

import re
from functools import lru_cache
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError

from .canonical import digest
from .models import ACTION_TYPES, Check, Plan, Policy, ProjectConfig

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
PLACEHOLDER_VALUE = r"[A-Za-z0-9._/:@=,+%-]+"
# What a placeholder may carry as it is; anything else in a scope is percent-encoded (a space, braces).
_PLACEHOLDER_SAFE = "._/:@=,+-"


def plan_digest(project: str, candidate_id: str, revision: str, plan: dict[str, Any]) -> str:
    return digest({"project": project, "candidate_id": candidate_id, "revision": revision, "plan": plan})


@lru_cache(maxsize=512)
def template_regex(template: str) -> re.Pattern[str]:
    """A command template as a pattern: literal text, and each `{name}` one safe token (the same
    name twice must be the same value)."""
    out, seen, pos = [], set(), 0
    for match in PLACEHOLDER.finditer(template):
        out.append(re.escape(template[pos : match.start()]))
        name = match.group(1)
        out.append(f"(?P={name})" if name in seen else f"(?P<{name}>{PLACEHOLDER_VALUE})")
        seen.add(name)
        pos = match.end()
    out.append(re.escape(template[pos:]))
    return re.compile("".join(out) + r"\Z")


def conforms(command: str, template: str) -> bool:
    return template_regex(template).match(command) is not None


def fill_template(template: str, value: str) -> str:
    """Every placeholder filled with one safe token: an OpenAPI operation scope such as
    `payments-api/GET /pets/{id}` becomes `payments-api/GET%20/pets/%7Bid%7D`."""
    token = quote(value, safe=_PLACEHOLDER_SAFE)
    return PLACEHOLDER.sub(lambda _m: token, template)


def _finding(code: str, detail: str, **where: str) -> dict[str, Any]:
    return {"code": code, "detail": detail, **where}


def _schema_findings(error: ValidationError) -> list[dict[str, Any]]:
    out = []
    for e in error.errors():
        where = ".".join(str(p) for p in e["loc"]) or "(plan)"
        msg = "unknown field" if e["type"] == "extra_forbidden" else e["msg"]
        out.append(_finding("PLAN_SCHEMA_INVALID", f"{where}: {msg}"))
    return out


def _cycle(tasks: dict[str, list[str]]) -> list[str] | None:
    colour: dict[str, int] = {}
    for start in tasks:
        if colour.get(start):
            continue
        stack = [(start, iter(tasks[start]))]
        colour[start] = 1
        path = [start]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                colour[node] = 2
                stack.pop()
                path.pop()
            elif child in tasks and colour.get(child) == 1:
                return path[path.index(child) :] + [child]
            elif child in tasks and not colour.get(child):
                colour[child] = 1
                stack.append((child, iter(tasks[child])))
                path.append(child)
    return None


def _action_params_problem(action: Any, check_ids: set[str], config: ProjectConfig) -> str | None:
    params = action.params
    if action.type == "dispatch_checks":
        checks = params.get("checks")
        if set(params) != {"checks"} or not isinstance(checks, list) or not checks:
            return "dispatch_checks takes exactly {checks: [check ids]}"
        unknown = [c for c in checks if not isinstance(c, str) or c not in check_ids]
        return f"unknown checks {unknown}" if unknown else None
    if action.type == "notify":
        channel = params.get("channel")
        if set(params) != {"channel"} or channel not in config.notify_channels:
            return "notify takes exactly {channel: <a configured channel>}"
        return None
    if action.type == "promote":
        if set(params) != {"environment"} or params.get("environment") not in config.environments:
            return "promote takes exactly {environment: <one of the project's>}"
        return None
    return "unknown action type"


def preflight(
    raw: Any,
    obligations: dict[str, dict[str, Any]],
    policies: dict[str, tuple[int, Policy]],
    config: ProjectConfig,
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Returns (the normalised plan, []) or (None, one finding per problem)."""
    if not isinstance(raw, dict):
        return None, [_finding("PLAN_SCHEMA_INVALID", "a plan is a JSON object")]
    try:
        plan = Plan.model_validate(raw)
    except ValidationError as error:
        return None, _schema_findings(error)

    findings = _duplicate_id_findings(plan)
    findings += _dependency_findings(plan)
    covered: set[str] = set()
    for task in plan.tasks:
        for check in task.checks:
            findings += _check_findings(task.task_id, check, obligations, policies, covered)
    findings += _uncovered_findings(obligations, covered)
    findings += _action_findings(plan, config)

    if findings:
        return None, findings
    return plan.model_dump(mode="json"), []


def _duplicate_id_findings(plan: Plan) -> list[dict[str, Any]]:
    """Task, check and action ids share one namespace: each may be used once."""
    findings: list[dict[str, Any]] = []
    seen: set[str] = set()
    for kind, ident in (
        [("task", t.task_id) for t in plan.tasks]
        + [("check", c.check_id) for t in plan.tasks for c in t.checks]
        + [("action", a.action_id) for a in plan.actions]
    ):
        if ident in seen:
            findings.append(_finding("PLAN_DUPLICATE_ID", f"{kind} id {ident} is used more than once"))
        seen.add(ident)
    return findings


def _dependency_findings(plan: Plan) -> list[dict[str, Any]]:
    """depends_on names tasks of the plan and forms no cycle."""
    findings: list[dict[str, Any]] = []
    task_ids = {t.task_id for t in plan.tasks}
    for task in plan.tasks:
        for dep in task.depends_on:
            if dep not in task_ids:
                findings.append(
                    _finding(
                        "PLAN_UNKNOWN_DEPENDENCY",
                        f"task {task.task_id} depends on unknown task {dep}",
                        task_id=task.task_id,
                    )
                )
    cycle = _cycle({t.task_id: t.depends_on for t in plan.tasks})
    if cycle:
        findings.append(_finding("PLAN_DEPENDENCY_CYCLE", "depends_on forms a cycle: " + " -> ".join(cycle)))
    return findings


def _check_findings(
    task_id: str,
    check: Check,
    obligations: dict[str, dict[str, Any]],
    policies: dict[str, tuple[int, Policy]],
    covered: set[str],
) -> list[dict[str, Any]]:
    """One check against its policy (known, command and exit code conforming) and the obligations it covers;
    adds to `covered` each obligation it rightly covers."""
    where = {"task_id": task_id, "check_id": check.check_id}
    policy = policies.get(check.policy_ref)
    if policy is None:
        return [
            _finding(
                "PLAN_UNKNOWN_POLICY",
                f"check {check.check_id} names unknown policy {check.policy_ref}",
                **where,
            )
        ]
    _version, rule = policy
    findings: list[dict[str, Any]] = []
    if not conforms(check.command, rule.command):
        findings.append(
            _finding(
                "PLAN_CHECK_NOT_CONFORMING",
                f"check {check.check_id}: command is not an "
                f"instance of the policy's template {rule.command!r}",
                **where,
            )
        )
    if check.expected_exit_code != rule.expected_exit_code:
        findings.append(
            _finding(
                "PLAN_CHECK_NOT_CONFORMING",
                f"check {check.check_id}: expected_exit_code "
                f"must be the policy's ({rule.expected_exit_code})",
                **where,
            )
        )
    for obligation_id in check.covers:
        obligation = obligations.get(obligation_id)
        if obligation is None:
            findings.append(
                _finding(
                    "PLAN_UNKNOWN_OBLIGATION",
                    f"check {check.check_id} covers unknown obligation {obligation_id}",
                    obligation_id=obligation_id,
                    **where,
                )
            )
        elif obligation["policy_id"] != check.policy_ref:
            findings.append(
                _finding(
                    "PLAN_CHECK_NOT_CONFORMING",
                    f"check {check.check_id} "
                    f"({check.policy_ref}) covers {obligation_id}, an obligation of "
                    f"policy {obligation['policy_id']}",
                    obligation_id=obligation_id,
                    **where,
                )
            )
        else:
            covered.add(obligation_id)
    return findings


def _uncovered_findings(obligations: dict[str, dict[str, Any]], covered: set[str]) -> list[dict[str, Any]]:
    """Every obligation is covered by some check of its policy."""
    return [
        _finding(
            "PLAN_OBLIGATION_UNCOVERED",
            f"obligation {obligation_id} "
            f"({obligations[obligation_id]['policy_id']} on "
            f"{obligations[obligation_id]['scope']}) is covered by no check of its policy",
            obligation_id=obligation_id,
        )
        for obligation_id in obligations
        if obligation_id not in covered
    ]


def _action_findings(plan: Plan, config: ProjectConfig) -> list[dict[str, Any]]:
    """Each action is of an allow-listed type, with the parameters that type takes."""
    findings: list[dict[str, Any]] = []
    check_ids = {c.check_id for t in plan.tasks for c in t.checks}
    for action in plan.actions:
        if action.type not in ACTION_TYPES or action.type not in config.allowed_action_types:
            findings.append(
                _finding(
                    "PLAN_ACTION_NOT_ALLOWED",
                    f"action {action.action_id}: type {action.type} is not allow-listed for this project",
                )
            )
            continue
        problem = _action_params_problem(action, check_ids, config)
        if problem:
            findings.append(_finding("PLAN_ACTION_PARAMS_INVALID", f"action {action.action_id}: {problem}"))
    return findings


def fallback_plan(
    obligations: dict[str, dict[str, Any]], policies: dict[str, tuple[int, Policy]]
) -> dict[str, Any]:
    """The deterministic review-only plan: one task per obligation, its policy's check, no actions."""
    tasks = []
    for n, obligation in enumerate(
        sorted(obligations.values(), key=lambda o: (o["scope"], o["policy_id"])), 1
    ):
        _version, policy = policies[obligation["policy_id"]]
        tasks.append(
            {
                "task_id": f"T{n}",
                "title": f"Prove {obligation['policy_id']} for {obligation['scope']}"[:300],
                "files": [],
                "depends_on": [],
                "checks": [
                    {
                        "check_id": f"C{n}",
                        "policy_ref": obligation["policy_id"],
                        "command": fill_template(policy.command, obligation["scope"]),
                        "expected_exit_code": policy.expected_exit_code,
                        "covers": [obligation["obligation_id"]],
                        "assertions": [],
                    }
                ],
            }
        )
    return {"tasks": tasks, "actions": []}
