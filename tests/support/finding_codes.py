"""Every finding code a decision can carry, read from the domain's source, so a test can hold each of them to
a remediation: a code added to the core without one fails (tests/unit/test_hook_remediation.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import sentinel_domain

DOMAIN = Path(sentinel_domain.__file__).parent
CODE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")


def _constants(node: ast.AST) -> set[str]:
    return {
        n.value
        for n in ast.walk(node)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and CODE.match(n.value)
    }


def _tree(relative: str) -> ast.Module:
    return ast.parse((DOMAIN / relative).read_text(encoding="utf-8"))


def decision_finding_codes() -> set[str]:
    """The codes of `finding(...)` calls anywhere in the core; every code constant of decision.py (its
    tables, its binding and trust problems); the codes reviews.approval_status answers; and the binding
    mismatches evidence.py stores that a decision reports (EVIDENCE_WRONG_*)."""
    codes: set[str] = set()
    for path in DOMAIN.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "finding" and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    codes.add(first.value)
    codes |= _constants(_tree("decision.py"))
    reviews = _tree("reviews.py")
    for node in ast.walk(reviews):
        if isinstance(node, ast.FunctionDef) and node.name == "approval_status":
            codes |= _constants(node)
    codes |= {c for c in _constants(_tree("evidence.py")) if c.startswith("EVIDENCE_WRONG_")}
    return codes
