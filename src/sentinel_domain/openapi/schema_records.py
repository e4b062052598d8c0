"""What one schema comparison finds: its records (`_Rec`, a change with its path inside the schema) and
`_Found`, the records of one pair of schema views so far, which every rule family adds to and which walks into
nested schemas through the differ."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .changes import BOTH, _breaks
from .limits import Budget

_NEVER = 1 << 60


@dataclass(frozen=True)
class _Rec:
    """A change found inside a schema, its path relative to where the comparison started."""

    path: tuple[str, ...]
    kind: str
    breaking: bool
    detail: str


class _Comparer(Protocol):
    """What `_Found` needs of the differ (schemas._SchemaDiffer): its shared budget and nested comparison."""

    budget: Budget

    def _schema(self, old: Any, new: Any, direction: str) -> tuple[list[_Rec], int]: ...


class _Found:
    """The changes one schema comparison finds so far, and the lowest position on the comparison stack that
    a nested comparison assumed equal (see _SchemaDiffer._schema)."""

    def __init__(self, differ: _Comparer, direction: str) -> None:
        self.differ = differ
        self.direction = direction
        self.out: list[_Rec] = []
        self.low = _NEVER

    def add(self, kind: str, effect: str, detail: str, path: tuple[str, ...] = ()) -> None:
        self.out.append(_Rec(path, kind, _breaks(effect, self.direction), detail))

    def nested(self, old: Any, new: Any, direction: str, prefix: tuple[str, ...]) -> None:
        records, child_low = self.differ._schema(old, new, direction)
        self.low = min(self.low, child_low)
        for _ in records:
            self.differ.budget.step()
        self.out.extend(_Rec(prefix + r.path, r.kind, r.breaking, r.detail) for r in records)


def _constraint_kind(effect: str) -> str:
    return "schema-constraint-changed" if effect == BOTH else f"schema-constraint-{effect}"
