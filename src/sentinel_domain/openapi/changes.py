"""What a diff reports, and the words every rule family classifies a change with: which way a value travels
(REQUEST, RESPONSE), how a change moved the values accepted (LOOSENED, TIGHTENED, BOTH), and how much it
matters to a client (its level: BREAKING, WARNING, INFO, as oasdiff grades its rules)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .errors import quote

# ---- what a diff reports -----------------------------------------------------------------------------------

BREAKING, WARNING, INFO = "breaking", "warning", "info"
LEVELS = (INFO, WARNING, BREAKING)  # ascending: a rule asking for "warning" takes warnings and breaking ones


@dataclass(frozen=True)
class ApiChange:
    """One difference that matters to a client. `operation` is `METHOD /path/{template}` (or
    `METHOD webhook:<name>`), empty for a change to the whole document; `where` says where inside it."""

    operation: str
    kind: str
    breaking: bool
    where: str = ""
    detail: str = ""
    weakens_security: bool = False
    level: str = ""  # BREAKING exactly when `breaking`; otherwise WARNING or INFO (the default)

    def __post_init__(self) -> None:
        # `breaking` stays the one verdict every caller reads; the level only grades what is not breaking.
        level = BREAKING if self.breaking else (self.level if self.level in (WARNING, INFO) else INFO)
        object.__setattr__(self, "level", level)

    def at_least(self, level: str) -> bool:
        return LEVELS.index(self.level) >= LEVELS.index(level)

    def describe(self) -> str:
        text = self.kind
        if self.where:
            text += f" at {quote(self.where)}"
        if self.detail:
            text += f" ({self.detail})"
        return text + (f" [{self.level}]" if self.level != INFO else "")


@dataclass(frozen=True)
class OperationDiff:
    operation: str
    status: str  # "added" | "removed" | "changed"
    changes: tuple[ApiChange, ...]

    @property
    def breaking(self) -> bool:
        return any(c.breaking for c in self.changes)


@dataclass(frozen=True)
class OpenApiDiff:
    operations: tuple[OperationDiff, ...]
    document_changes: tuple[ApiChange, ...]
    differs: bool  # the documents differ at all, documentation included

    @property
    def changes(self) -> tuple[ApiChange, ...]:
        return self.document_changes + tuple(c for op in self.operations for c in op.changes)

    @property
    def breaking(self) -> bool:
        return any(c.breaking for c in self.changes)


# ---- directions and effects -----------------------------------------------------------------------------

REQUEST = "request"  # the client writes, the API reads: accepting fewer values breaks the client
RESPONSE = "response"  # the API writes, the client reads: producing more values breaks the client
_FLIP = {REQUEST: RESPONSE, RESPONSE: REQUEST}
LOOSENED, TIGHTENED, BOTH = "loosened", "tightened", "both"


def _breaks(effect: str, direction: str) -> bool:
    if effect == BOTH:
        return True
    return effect == (TIGHTENED if direction == REQUEST else LOOSENED)


def _render(value: Any) -> str:
    if value is None:
        return "absent"
    if isinstance(value, str):
        return quote(value, 80)
    return (
        quote(json.dumps(value, sort_keys=True), 80) if isinstance(value, dict | list) else json.dumps(value)
    )
