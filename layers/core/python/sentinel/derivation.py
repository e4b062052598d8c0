"""Obligations derived from the change itself, by the project's rules (DOMAIN.md rules 5 and 6)."""

import re
from functools import lru_cache
from typing import Any

from .canonical import digest
from .models import Change, ProjectConfig

MAX_OBLIGATIONS = 2000


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
    return {"obligation_id": obligation_id(policy_id, scope), "policy_id": policy_id, "scope": scope,
            "reason": reason}


def derive_openapi(rule_policy: str, per: str | None, name: str, before: Any, after: Any) -> list[dict[str, Any]]:
    """The seam for per-operation OpenAPI derivation (issue 3). Until then every changed document
    owes its policy scoped to the whole document: never fewer obligations than the change needs."""
    if before == after:
        return []
    return [_obligation(rule_policy, name, f"OpenAPI document {name} changed")]


def derive(change: Change, config: ProjectConfig) -> list[dict[str, Any]]:
    """Every changed path owes the policy of each rule it matches, or the unclassified policy."""
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
            add(_obligation(config.unclassified_policy, raw, f"changed file {raw} matches no derivation rule"))
    for doc in change.openapi:
        rules = [r for r in config.derivation_rules if r.openapi == doc.name]
        for rule in rules:
            for obligation in derive_openapi(rule.policy_id, rule.per, doc.name, doc.before, doc.after):
                add(obligation)
        if not rules and doc.before != doc.after:
            add(_obligation(config.unclassified_policy, doc.name,
                            f"OpenAPI document {doc.name} changed and matches no derivation rule"))
    return sorted(found.values(), key=lambda o: (o["scope"], o["policy_id"]))
