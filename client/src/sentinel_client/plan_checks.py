"""Which check of a candidate's current plan a run's evidence is for, found from the plan itself.

CI knows the policy it ran (the project's policy id, e.g. `unit-tests`) and the scope it covered (e.g.
`payments-api`), never the plan-local check ids (`C1`, `C2`) a plan happens to use. A check matches when its
`policy_ref` is the policy and every obligation it covers has a scope equal to, or under, the scope run:
evidence with that scope then binds to all of them (DOMAIN.md rule 7, the service's `scope_covers`). One
implementation for every command that publishes evidence; it reads the candidate as `GET
…/candidates/{id}` answers it (API.md) and does no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class PlanCheckError(Exception):
    """No single check can be chosen; `code` is stable, the message names what the plan has."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class PlanCheck:
    task_id: str
    check_id: str
    policy_ref: str
    scopes: tuple[str, ...]  # the scopes of the obligations it covers, in plan order, without repeats

    def describe(self) -> str:
        scopes = ", ".join(self.scopes) or "no obligations"
        return f"{self.check_id} (task {self.task_id}): policy {self.policy_ref}, scope {scopes}"


def scope_covers(run_scope: str, obligation_scope: str) -> bool:
    """The run covered at least what was owed: the obligation's scope equals or lies under the run's (the
    service's rule, sentinel_domain.evidence.scope_covers, which the client cannot import)."""
    base = run_scope.rstrip("/")
    return obligation_scope == base or obligation_scope.startswith(base + "/")


def _malformed(what: str) -> PlanCheckError:
    return PlanCheckError("BAD_RESPONSE", f"the candidate's {what} is not what the API describes")


def plan_checks(candidate: Mapping[str, Any]) -> list[PlanCheck]:
    """Every check of the candidate's current plan, with the scopes of the obligations it covers. A
    candidate without a plan raises PLAN_MISSING; a malformed answer, BAD_RESPONSE."""
    plan = candidate.get("plan")
    if plan is None:
        raise PlanCheckError(
            "PLAN_MISSING",
            "the candidate has no plan yet, so no check can take evidence: the requester proposes or submits "
            "one first (POST …/proposals or PUT …/plan)",
        )
    obligations = candidate.get("obligations")
    if not isinstance(plan, dict) or not isinstance(plan.get("tasks"), list):
        raise _malformed("plan")
    if not isinstance(obligations, list) or not all(isinstance(o, dict) for o in obligations):
        raise _malformed("obligations")
    scope_of = {o.get("obligation_id"): o.get("scope") for o in obligations}
    checks = []
    for task in plan["tasks"]:
        if not isinstance(task, dict) or not isinstance(task.get("checks"), list):
            raise _malformed("plan")
        for check in task["checks"]:
            if not isinstance(check, dict) or not all(
                isinstance(check.get(key), str) for key in ("check_id", "policy_ref")
            ):
                raise _malformed("plan")
            scopes: list[str] = []
            for obligation_id in check.get("covers") or []:
                scope = scope_of.get(obligation_id)
                if not isinstance(scope, str):
                    # A check covering an obligation the candidate does not list: preflight forbids it.
                    raise _malformed(f"check {check['check_id']}")
                if scope not in scopes:
                    scopes.append(scope)
            checks.append(
                PlanCheck(str(task.get("task_id")), check["check_id"], check["policy_ref"], tuple(scopes))
            )
    return checks


def matches(check: PlanCheck, policy: str, scope: str) -> bool:
    """Evidence of `policy` run over `scope` would bind to every obligation the check covers."""
    return (
        check.policy_ref == policy
        and bool(check.scopes)
        and all(scope_covers(scope, covered) for covered in check.scopes)
    )


def _listing(checks: list[PlanCheck]) -> str:
    return "; ".join(check.describe() for check in checks) or "no checks"


def choose_check(
    candidate: Mapping[str, Any], policy: str, scope: str, check_id: str | None = None
) -> PlanCheck:
    """The one check of the current plan that evidence of `policy` over `scope` is for; `check_id` picks
    among several matches (and must itself match). Raises PlanCheckError naming what the plan has."""
    checks = plan_checks(candidate)
    found = [check for check in checks if matches(check, policy, scope)]
    if check_id is not None:
        chosen = [check for check in found if check.check_id == check_id]
        if chosen:
            return chosen[0]
        named = [check for check in checks if check.check_id == check_id]
        why = (
            f"it is {named[0].describe()}"
            if named
            else f"the current plan has no check {check_id}; it has: {_listing(checks)}"
        )
        raise PlanCheckError(
            "CHECK_NOT_MATCHING", f"--check {check_id} is not a check of policy {policy} over {scope}: {why}"
        )
    if not found:
        raise PlanCheckError(
            "NO_MATCHING_CHECK",
            f"no check of the current plan has policy {policy} and covers only obligations in scope {scope}; "
            f"the plan has: {_listing(checks)}",
        )
    if len(found) > 1:
        raise PlanCheckError(
            "AMBIGUOUS_CHECK",
            f"{len(found)} checks of the current plan match policy {policy} and scope {scope}: "
            f"{_listing(found)}; say which with --check "
            + " or --check ".join(check.check_id for check in found),
        )
    return found[0]


def tasks_with_all_evidence(candidate: Mapping[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """The current plan's tasks that do not pass yet and whose every check has evidence: (task id, [(check
    id, the newest evidence's outcome and trust)]). Reporting them is the requester's step."""
    evidence = candidate.get("evidence") or []
    newest: dict[str, str] = {}
    for item in evidence if isinstance(evidence, list) else []:
        if isinstance(item, dict) and isinstance(item.get("check_id"), str):
            # The candidate lists evidence in arrival order: the last one seen is the newest.
            newest[item["check_id"]] = f"{item.get('outcome')}, {item.get('trust')}"
    passing = {
        task.get("task_id")
        for task in candidate.get("tasks") or []
        if isinstance(task, dict) and task.get("passes")
    }
    ready = []
    plan = candidate.get("plan")
    for task in plan.get("tasks", []) if isinstance(plan, dict) else []:
        checks = [c.get("check_id") for c in task.get("checks", []) if isinstance(c, dict)]
        if task.get("task_id") in passing or not checks or any(c not in newest for c in checks):
            continue
        ready.append((str(task.get("task_id")), [(str(c), newest[str(c)]) for c in checks]))
    return ready
