"""Schema comparison, the base of the differ: the keyword by keyword comparison of two schemas that every
other rule family calls for the values it carries. That comparison is split by keyword family, the _compare_*
methods called in order from _schema_body, each family group in a mixin module of its own: schema_values.py
(type, enum, bounds, sizes, pattern, format, flags, default) and schema_structure.py (required, properties,
items, composition, not); everything else that constrains is compared whole here. A new family of schema rules
is one more _compare_* method, in a module of its own when it is a new group. Underneath: schema_views.py
(views and projections) and schema_records.py (what a comparison finds)."""

from __future__ import annotations

from typing import Any

from .changes import BOTH
from .document import ANNOTATIONS
from .errors import MalformedOpenApi
from .limits import MAX_COMPARE_DEPTH
from .schema_records import _NEVER, _Found, _Rec
from .schema_structure import _StructureRules
from .schema_values import _ValueRules

MAX_RECORDS = 50
"""The most changes one schema comparison reports; the rest become one summary that keeps their verdict.
A schema shared through many paths would otherwise repeat one change exponentially often."""


def _capped(records: list[_Rec]) -> list[_Rec]:
    if len(records) <= MAX_RECORDS:
        return records
    rest = records[MAX_RECORDS - 1 :]
    summary = _Rec(
        (),
        "schema-changes-truncated",
        any(r.breaking for r in rest),
        f"{len(rest)} more change(s) in this schema, {sum(r.breaking for r in rest)} breaking",
    )
    return [*records[: MAX_RECORDS - 1], summary]


class _SchemaDiffer(_ValueRules, _StructureRules):
    """Compares the schemas of two loaded documents. One instance per document pair; `budget` is shared."""

    # ---- schemas -----------------------------------------------------------------------------------------

    def schema(self, old: Any, new: Any, direction: str) -> list[_Rec]:
        records, _low = self._schema(old, new, direction)
        return records

    def _schema(self, old: Any, new: Any, direction: str) -> tuple[list[_Rec], int]:
        self.budget.step()
        if old is None and new is None:
            return [], _NEVER
        # No schema allows any value, exactly as `true` or `{}` does.
        o, okey, oref = self._view(self.old, True if old is None else old)
        n, nkey, nref = self._view(self.new, True if new is None else new)
        assert o is not None and n is not None
        pair = (okey, nkey, direction)
        if pair in self.active:  # a recursive schema met itself: assume equal there (checked at the top)
            return [], self.active[pair]
        if pair in self.memo:
            cached = self.memo[pair]
            for _ in cached:
                self.budget.step()
            return cached, _NEVER
        if self.depth >= MAX_COMPARE_DEPTH:
            raise MalformedOpenApi(f"schemas nest more than {MAX_COMPARE_DEPTH} levels deep through $ref")
        position = self.depth
        self.active[pair] = position
        self.depth += 1
        try:
            records, low = self._schema_body(o, n, direction)
        finally:
            self.depth -= 1
            del self.active[pair]
        if low >= position:
            # Every assumption made below was about this pair or deeper: the result is complete, reusable.
            low = _NEVER
            if oref or nref:
                self.memo[pair] = records
        return records, low

    def _schema_body(self, o: dict[str, Any], n: dict[str, Any], d: str) -> tuple[list[_Rec], int]:
        """Two schema views compared keyword by keyword, one rule family after another (the order is the
        order of the changes reported)."""
        found = _Found(self, d)
        self._compare_types(o, n, found)
        self._compare_enums(o, n, found)
        self._compare_extensible_enum(o, n, found)
        self._compare_numeric_bounds(o, n, found)
        self._compare_sizes(o, n, found)
        self._compare_multiple_of(o, n, found)
        self._compare_pattern_and_format(o, n, found)
        self._compare_flags(o, n, found)
        self._compare_default_and_deprecation(o, n, found)
        self._compare_required(o, n, found)
        self._compare_properties(o, n, found)
        self._compare_items(o, n, found)
        self._compare_composition(o, n, found)
        self._compare_not(o, n, found)
        self._compare_other_keywords(o, n, found)
        return _capped(found.out), found.low

    # ---- what no rule family models ---------------------------------------------------------------------

    def _compare_other_keywords(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """Everything else that constrains: compared whole, breaking when it differs."""
        for key in sorted((set(o) | set(n)) - _SCHEMA_KEYWORDS):
            if key in ANNOTATIONS or key.startswith("x-"):
                continue
            if not self._same(o.get(key), n.get(key)):
                found.add("schema-keyword-changed", BOTH, f"{key} changed")


_SCHEMA_KEYWORDS = frozenset(
    {
        "type",
        "nullable",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
