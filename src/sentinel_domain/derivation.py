"""Obligations derived from the change itself, by the project's rules (DOMAIN.md rules 5 and 6): changed files
by glob, OpenAPI documents by their diff (sentinel_domain.openapi)."""

import re
from datetime import date
from functools import lru_cache
from typing import Any

from .canonical import digest
from .errors import Refusal
from .models import Change, DerivationRule, ProjectConfig
from .openapi import (
    WARNING,
    ApiChange,
    Budget,
    DiffOptions,
    MalformedOpenApi,
    OpenApiDiff,
    diff_openapi_graded,
    quote,
)

MAX_OBLIGATIONS = 2000
_NO_RULE = DerivationRule(openapi="-", policy_id="none")  # the defaults, for a document no rule names


@lru_cache(maxsize=1024)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """`**` spans folders, `*` and `?` stay inside one path segment."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def normalise_path(path: str) -> str:
    """Change paths are `/`-separated and relative; Windows separators and `./` are folded."""
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def obligation_id(policy_id: str, scope: str) -> str:
    return "obl_" + digest([policy_id, scope])[:24]


def _obligation(policy_id: str, scope: str, reason: str) -> dict[str, Any]:
    return {
        "obligation_id": obligation_id(policy_id, scope),
        "policy_id": policy_id,
        "scope": scope,
        "reason": reason,
    }


MAX_REASON_CHARS = 1000  # 2,000 obligations of this size still fit one candidate fact comfortably


def _selected(change: ApiChange, when: str, kinds: frozenset[str] | None = None) -> bool:
    if kinds is not None and change.kind not in kinds:
        return False
    if when == "breaking":
        return change.breaking
    if when == "warning":
        return change.at_least(WARNING)
    if when == "security":
        return change.weakens_security or change.kind.startswith("security-")
    return True


def diff_options(rule: DerivationRule, today: date | None) -> DiffOptions:
    """How `rule` grades changes: its own options over the defaults."""
    defaults = DiffOptions()
    return DiffOptions(
        min_sunset_days=defaults.min_sunset_days if rule.min_sunset_days is None else rule.min_sunset_days,
        response_patterns=rule.response_patterns or defaults.response_patterns,
        today=today,
    )


def _reason(document: str, parts: list[tuple[str, str, list[ApiChange]]]) -> str:
    """Why an obligation exists: which operations and which changes. Every piece of text that came from the
    document is quoted (see sentinel_domain.openapi.quote), so it reaches people and a model only as data."""
    pieces = []
    for operation, status, changes in parts:
        head = f"operation {quote(operation)} {status}" if operation else "the document as a whole"
        breaking = sum(c.breaking for c in changes)
        head += f" ({len(changes)} change(s), {breaking} breaking)"
        listed = [c.describe() for c in changes if c.kind not in ("operation-added", "operation-removed")]
        pieces.append(head + (": " + "; ".join(listed) if listed else ""))
    text = f"OpenAPI document {quote(document)}: " + " | ".join(pieces)
    if len(text) > MAX_REASON_CHARS:
        text = text[: MAX_REASON_CHARS - 20].rsplit(";", 1)[0] + "; ... (truncated)"
    return text


def derive_openapi(rule: DerivationRule, name: str, diff: OpenApiDiff) -> list[dict[str, Any]]:
    """The obligations one rule derives from one document's diff.

    `per: "operation"`: each added or changed operation with a selected change owes the policy scoped
    `<document scope>/<METHOD> <path>`. A removed operation has nothing left to test on its own, so it owes
    the policy on the document's scope, as do changes to the document as a whole. Otherwise (`per` absent or
    `"document"`) any selected change owes the policy once, on the document's scope. `when` selects by level
    (or security) and `changes`, when given, by change id; both must hold."""
    when = rule.when or "any"
    kinds = frozenset(rule.changes) if rule.changes is not None else None
    base = rule.scope or name
    by_scope: dict[str, list[tuple[str, str, list[ApiChange]]]] = {}
    document_changes = [c for c in diff.document_changes if _selected(c, when, kinds)]
    if document_changes:
        by_scope.setdefault(base, []).append(("", "changed", document_changes))
    for operation in diff.operations:
        changes = [c for c in operation.changes if _selected(c, when, kinds)]
        if not changes:
            continue
        per_operation = rule.per == "operation" and operation.status != "removed"
        scope = f"{base}/{operation.operation}" if per_operation else base
        by_scope.setdefault(scope, []).append((operation.operation, operation.status, changes))
    return [_obligation(rule.policy_id, scope, _reason(name, parts)) for scope, parts in by_scope.items()]


def derive(change: Change, config: ProjectConfig, today: date | None = None) -> list[dict[str, Any]]:
    """Every changed path owes the policy of each rule it matches, or the unclassified policy.

    `today` is the date OpenAPI sunsets are measured from (the core has no clock); without it, a rule that
    needs it is reported breaking (sentinel_domain.openapi.lifecycle).

    Raises Refusal(MALFORMED_CHANGE_CONTEXT) when an OpenAPI document cannot be read within the caps of
    sentinel_domain.openapi: a document nobody can read is refused, never taken as "no changes"."""
    found: dict[str, dict[str, Any]] = {}

    def add(obligation: dict[str, Any]) -> None:
        found.setdefault(obligation["obligation_id"], obligation)

    for raw in sorted({normalise_path(p) for p in change.files}):
        matched = False
        for rule in config.derivation_rules:
            if rule.files and any(glob_regex(p).match(raw) for p in rule.files):
                matched = True
                scope = rule.scope or raw
                add(_obligation(rule.policy_id, scope, f"changed file {raw} matches {', '.join(rule.files)}"))
        if not matched:
            add(
                _obligation(config.unclassified_policy, raw, f"changed file {raw} matches no derivation rule")
            )
    budget = Budget()  # shared: a change context's documents are capped together, not one by one
    for doc in change.openapi:
        rules = [r for r in config.derivation_rules if r.openapi == doc.name]
        # One diff per distinct grading the document's rules ask for (usually one): read once, one budget.
        gradings = [diff_options(r, today) for r in rules] or [diff_options(_NO_RULE, today)]
        try:
            diffs = diff_openapi_graded(doc.before, doc.after, gradings, budget)
        except MalformedOpenApi as error:
            raise Refusal(
                "MALFORMED_CHANGE_CONTEXT", f"the OpenAPI document {quote(doc.name)} cannot be read: {error}"
            ) from None
        for rule in rules:
            for obligation in derive_openapi(rule, doc.name, diffs[diff_options(rule, today)]):
                add(obligation)
        diff = next(iter(diffs.values()))
        if not rules and diff.differs:
            # Like a changed file no rule matches: any difference at all, documentation included, is owed.
            add(
                _obligation(
                    config.unclassified_policy,
                    doc.name,
                    f"OpenAPI document {quote(doc.name)} changed and matches no derivation rule",
                )
            )
    return sorted(found.values(), key=lambda o: (o["scope"], o["policy_id"]))
