"""Schema comparison, the base of the differ: schema views (references followed, `nullable` and type-only
unions folded), projections for what is compared whole, and the keyword by keyword comparison of two schemas
that every other rule family calls for the values it carries. That comparison is itself split by keyword family
(the _compare_* methods, called in order from _schema_body); a new family of schema rules is one more of them."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from .changes import _FLIP, BOTH, LOOSENED, REQUEST, TIGHTENED, _breaks, _render
from .document import _DATA_KEYS, _NAMED_MAPS, ANNOTATIONS, Document
from .errors import MalformedOpenApi, quote
from .limits import MAX_COMPARE_DEPTH, Budget

_NEVER = 1 << 60


@dataclass(frozen=True)
class _Rec:
    """A change found inside a schema, its path relative to where the comparison started."""

    path: tuple[str, ...]
    kind: str
    breaking: bool
    detail: str


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


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _SchemaDiffer:
    """Compares the schemas of two loaded documents. One instance per document pair; `budget` is shared."""

    def __init__(self, old: Document, new: Document, budget: Budget) -> None:
        self.old = old
        self.new = new
        self.budget = budget
        self.memo: dict[tuple[Any, Any, str], list[_Rec]] = {}
        # Schemas being folded right now: a self-referencing Optional[...] is compared as written instead.
        self._folding: set[int] = set()
        self.active: dict[tuple[Any, Any, str], int] = {}
        self.depth = 0

    # ---- schema views ------------------------------------------------------------------------------------

    def _view(self, doc: Document, node: Any) -> tuple[dict[str, Any] | None, Any, bool]:
        """A schema ready to compare: references followed, `nullable` and type-only `anyOf`/`oneOf` folded into
        a `type` list. Returns (view, identity for cycle detection and memo, whether a $ref was followed)."""
        if node is None:
            return None, None, False
        via_ref = False
        if isinstance(node, dict) and "$ref" in node:
            target = doc.resolve(node["$ref"])[0]
            extras = {
                k: v
                for k, v in node.items()
                if k != "$ref" and k not in ANNOTATIONS and not k.startswith("x-")
            }
            via_ref = True
            if extras:  # 3.1 applies siblings of $ref; reading them in 3.0 too only finds more changes
                node = {"allOf": [target, extras]}
                return node, ("id", id(node)), True
            node = target
        if node is True:
            return {}, ("true",), via_ref
        if node is False:
            return {"not": {}}, ("false",), via_ref
        if not isinstance(node, dict):
            raise MalformedOpenApi("a schema must be an object or a boolean")
        identity = ("id", id(node))
        view = dict(node)
        types = self._types(view)
        for combiner in ("anyOf", "oneOf"):
            branches = view.get(combiner)
            if types is not None or not isinstance(branches, list) or len(branches) < 2:
                continue
            plain = [doc.deref(b) for b in branches]
            if all(isinstance(b, dict) and self._type_only(b) for b in plain):
                types = set()
                for branch in plain:
                    types |= self._types(branch) or set()
                del view[combiner]
                break
            nulls = [i for i, b in enumerate(plain) if _is_null_type(b)]
            if len(plain) == 2 and len(nulls) == 1 and id(node) not in self._folding:
                # Optional[X] as generators write it: anyOf [X, {type: null}] is X or null.
                self._folding.add(id(node))
                try:
                    inner = self._view(doc, branches[1 - nulls[0]])[0]
                finally:
                    self._folding.discard(id(node))
                assert inner is not None
                merged = {
                    **inner,
                    **{k: v for k, v in view.items() if k not in (combiner, "type", "nullable")},
                }
                inner_types = self._types(inner)
                if inner_types is None:
                    merged.pop("type", None)
                else:
                    merged["type"] = sorted(inner_types | {"null"})
                return merged, identity, via_ref
            break
        view.pop("nullable", None)
        if types is None:
            view.pop("type", None)
        else:
            view["type"] = sorted(types)
        return view, identity, via_ref

    @staticmethod
    def _type_only(schema: dict[str, Any]) -> bool:
        return "type" in schema and all(
            k in ("type", "nullable") or k in ANNOTATIONS or k.startswith("x-") for k in schema
        )

    @staticmethod
    def _types(schema: dict[str, Any]) -> set[str] | None:
        raw = schema.get("type")
        if raw is None:
            return None
        names = [raw] if isinstance(raw, str) else raw
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise MalformedOpenApi("a schema's type must be a string or an array of strings")
        types = set(names)
        if schema.get("nullable") is True:
            types.add("null")
        return types

    # ---- projections (for what is compared as a whole) ---------------------------------------------------

    def _project(
        self, doc: Document, value: Any, named: bool = False, trail: tuple[str, ...] = (), depth: int = 0
    ) -> Any:
        """A value with references inlined (a reference back into itself becomes a marker) and documentation
        dropped: two projections are equal when the values mean the same."""
        self.budget.step()
        if depth > MAX_COMPARE_DEPTH:
            raise MalformedOpenApi(f"the document nests more than {MAX_COMPARE_DEPTH} levels through $ref")
        if isinstance(value, dict):
            if "$ref" in value and not named:
                target, pointer = doc.resolve(value["$ref"])
                if pointer in trail:
                    return {"$recursive": pointer}
                rest = {k: v for k, v in value.items() if k != "$ref"}
                inlined = self._project(doc, target, False, (*trail, pointer), depth + 1)
                return (
                    inlined
                    if not rest
                    else {"$ref+": [inlined, self._project(doc, rest, False, trail, depth + 1)]}
                )
            out = {}
            for key, child in value.items():
                if not named and (key in ANNOTATIONS or key.startswith("x-")):
                    continue
                out[key] = (
                    child
                    if key in _DATA_KEYS and not named
                    else self._project(doc, child, key in _NAMED_MAPS and not named, trail, depth + 1)
                )
            return out
        if isinstance(value, list):
            return [self._project(doc, item, False, trail, depth + 1) for item in value]
        return value

    def _same(self, old: Any, new: Any) -> bool:
        return bool(self._project(self.old, old) == self._project(self.new, new))

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

    # ---- rule families of one schema comparison ----------------------------------------------------------

    def _compare_types(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """`type` (with `nullable` and type-only unions already folded into it)."""
        ot, nt = self._types(o), self._types(n)
        if ot != nt:
            effect = _set_effect(ot, nt, _type_covers)
            found.add("schema-type-changed", effect, f"type {_types_text(ot)} -> {_types_text(nt)}")

    def _compare_enums(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """`enum` and `const` (const is a one-value enum)."""
        oe, ne = _enum(o), _enum(n)
        if oe != ne:
            effect = _set_effect(oe, ne, lambda a, b: b <= a)
            found.add("schema-enum-changed", effect, _enum_text(oe, ne))

    def _compare_numeric_bounds(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """`minimum`/`maximum` with their exclusive forms (3.0 booleans or 3.1 numbers)."""
        for name, old_bound, new_bound, upper in (
            (
                "minimum",
                _bound(o, "minimum", "exclusiveMinimum"),
                _bound(n, "minimum", "exclusiveMinimum"),
                False,
            ),
            (
                "maximum",
                _bound(o, "maximum", "exclusiveMaximum"),
                _bound(n, "maximum", "exclusiveMaximum"),
                True,
            ),
        ):
            if old_bound != new_bound:
                found.add(*_bound_change(name, old_bound, new_bound, upper))

    def _compare_sizes(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """Length, item, property and contains counts: a larger minimum or a smaller maximum tightens."""
        for low_key, high_key, floor in (
            ("minLength", "maxLength", 0),
            ("minItems", "maxItems", 0),
            ("minProperties", "maxProperties", 0),
            ("minContains", "maxContains", 1),
        ):
            for key, is_min in ((low_key, True), (high_key, False)):
                change = _size_change(key, is_min, floor, o.get(key), n.get(key))
                if change is not None:
                    found.add(*change)

    def _compare_multiple_of(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        om, nm = o.get("multipleOf"), n.get("multipleOf")
        if om != nm:
            effect = _multiple_of_effect(om, nm)
            found.add(_constraint_kind(effect), effect, f"multipleOf {_render(om)} -> {_render(nm)}")

    def _compare_pattern_and_format(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """Present constrains, absent does not; one replaced by another cannot be compared."""
        for key in ("pattern", "format"):
            ov, nv = o.get(key), n.get(key)
            if ov != nv:
                effect = TIGHTENED if ov is None else LOOSENED if nv is None else BOTH
                found.add(_constraint_kind(effect), effect, f"{key} {_render(ov)} -> {_render(nv)}")

    def _compare_flags(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """`uniqueItems`, and `readOnly`/`writeOnly` (which move a value between requests and responses)."""
        if bool(o.get("uniqueItems")) != bool(n.get("uniqueItems")):
            effect = TIGHTENED if n.get("uniqueItems") else LOOSENED
            found.add(
                _constraint_kind(effect),
                effect,
                f"uniqueItems {_render(o.get('uniqueItems'))} -> {_render(n.get('uniqueItems'))}",
            )
        for key in ("readOnly", "writeOnly"):
            if bool(o.get(key)) != bool(n.get(key)):
                found.add(
                    "schema-keyword-changed", BOTH, f"{key} {_render(o.get(key))} -> {_render(n.get(key))}"
                )

    def _compare_default_and_deprecation(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """`default` (what the API assumes when a client leaves a value out) and `deprecated`."""
        if "default" in o or "default" in n:
            od, nd = o.get("default", _ABSENT), n.get("default", _ABSENT)
            if od != nd:
                breaking = found.direction == REQUEST and od is not _ABSENT
                found.out.append(
                    _Rec(
                        (),
                        "schema-default-changed",
                        breaking,
                        f"default {_render(None if od is _ABSENT else od)} -> "
                        f"{_render(None if nd is _ABSENT else nd)}",
                    )
                )
        if bool(o.get("deprecated")) != bool(n.get("deprecated")):
            found.out.append(
                _Rec(
                    (),
                    "schema-deprecated-changed",
                    False,
                    "deprecated" if n.get("deprecated") else "no longer deprecated",
                )
            )

    def _compare_required(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        o_req, n_req = _names(o.get("required")), _names(n.get("required"))
        for name in sorted(n_req - o_req):
            found.add("schema-required-added", TIGHTENED, f"{quote(name)} is now required")
        for name in sorted(o_req - n_req):
            found.add("schema-required-removed", LOOSENED, f"{quote(name)} is no longer required")

    def _compare_properties(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """`properties` (added, removed, each kept one compared) and `additionalProperties`."""
        o_props = self.old.mapping(o.get("properties"), "properties", deref=False)
        n_props = self.new.mapping(n.get("properties"), "properties", deref=False)
        for name in n_props:
            if name not in o_props:
                found.out.append(_Rec((name,), "schema-property-added", False, "property added"))
        for name, value in o_props.items():
            if name not in n_props:
                # The client may send or read it; removing either is what breaks integrations.
                found.out.append(_Rec((name,), "schema-property-removed", True, "property removed"))
            else:
                found.nested(value, n_props[name], found.direction, (name,))
        oa, na = o.get("additionalProperties", True), n.get("additionalProperties", True)
        oa, na = (True if v == {} else v for v in (oa, na))  # an empty schema allows anything, like true
        if oa is not True or na is not True:
            if isinstance(oa, dict) and isinstance(na, dict):
                found.nested(oa, na, found.direction, ("additionalProperties",))
            elif oa != na:
                effect = TIGHTENED if na is False or oa is True else LOOSENED
                found.add(
                    _constraint_kind(effect), effect, f"additionalProperties {_render(oa)} -> {_render(na)}"
                )

    def _compare_items(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """`items`: one schema for every item is compared as a schema, an array of them (tuples) whole."""
        oi, ni = o.get("items"), n.get("items")
        if isinstance(oi, list) or isinstance(ni, list):
            if not self._same(oi, ni):
                found.add("schema-keyword-changed", BOTH, "items (as an array) changed")
        elif oi is not None or ni is not None:
            found.nested(oi, ni, found.direction, ("[]",))

    def _compare_composition(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """`allOf`, `anyOf`, `oneOf`: branch by branch when their number is kept, else as one change."""
        for key in ("allOf", "anyOf", "oneOf"):
            ol = self.old.sequence(o.get(key), key)
            nl = self.new.sequence(n.get(key), key)
            if not ol and not nl:
                continue
            if len(ol) == len(nl):
                for index, (ob, nb) in enumerate(zip(ol, nl, strict=True)):
                    found.nested(ob, nb, found.direction, (f"{key}[{index}]",))
                continue
            effect = self._branch_count_effect(key, ol, nl)
            found.add("schema-composition-changed", effect, f"{key} has {len(ol)} -> {len(nl)} branches")

    def _branch_count_effect(self, key: str, ol: list[Any], nl: list[Any]) -> str:
        if key == "anyOf":
            old_set = [self._project(self.old, b) for b in ol]
            new_set = [self._project(self.new, b) for b in nl]
            gained = any(b not in old_set for b in new_set)
            lost = any(b not in new_set for b in old_set)
            return BOTH if gained == lost else LOOSENED if gained else TIGHTENED
        # allOf; oneOf: a new branch can make a value valid twice, so any change may reject it
        return BOTH

    def _compare_not(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """`not`, compared in the other direction: what it rejects is what the schema accepts."""
        if "not" in o or "not" in n:
            if "not" in o and "not" in n:
                found.nested(o["not"], n["not"], _FLIP[found.direction], ("not",))
            else:
                effect = TIGHTENED if "not" in n else LOOSENED
                found.add(_constraint_kind(effect), effect, "not " + ("added" if "not" in n else "removed"))

    def _compare_other_keywords(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """Everything else that constrains: compared whole, breaking when it differs."""
        for key in sorted((set(o) | set(n)) - _SCHEMA_KEYWORDS):
            if key in ANNOTATIONS or key.startswith("x-"):
                continue
            if not self._same(o.get(key), n.get(key)):
                found.add("schema-keyword-changed", BOTH, f"{key} changed")


class _Found:
    """The changes one schema comparison finds so far, and the lowest position on the comparison stack that
    a nested comparison assumed equal (see _SchemaDiffer._schema)."""

    def __init__(self, differ: _SchemaDiffer, direction: str) -> None:
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


def _size_change(key: str, is_min: bool, floor: int, ov: Any, nv: Any) -> tuple[str, str, str] | None:
    """The change of one size keyword as (kind, effect, detail), None when it accepts the same values."""
    if ov == nv:
        return None
    if (ov is not None and not _is_number(ov)) or (nv is not None and not _is_number(nv)):
        return "schema-keyword-changed", BOTH, f"{key} {_render(ov)} -> {_render(nv)}"
    old_v = floor if ov is None and is_min else (math.inf if ov is None else ov)
    new_v = floor if nv is None and is_min else (math.inf if nv is None else nv)
    if old_v == new_v:
        return None
    tighter = new_v > old_v if is_min else new_v < old_v
    effect = TIGHTENED if tighter else LOOSENED
    return f"schema-constraint-{effect}", effect, f"{key} {_render(ov)} -> {_render(nv)}"


def _multiple_of_effect(om: Any, nm: Any) -> str:
    """A multiple of the old factor accepts fewer values, a divisor of it more; anything else both."""
    if om is None:
        return TIGHTENED
    if nm is None:
        return LOOSENED
    if _is_number(om) and _is_number(nm) and om and nm and (nm / om).is_integer():
        return TIGHTENED
    if _is_number(om) and _is_number(nm) and om and nm and (om / nm).is_integer():
        return LOOSENED
    return BOTH


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


class _Absent:
    pass


_ABSENT = _Absent()


def _is_null_type(schema: Any) -> bool:
    return (
        isinstance(schema, dict)
        and _SchemaDiffer._type_only(schema)
        and _SchemaDiffer._types(schema) == {"null"}
    )


def _constraint_kind(effect: str) -> str:
    return "schema-constraint-changed" if effect == BOTH else f"schema-constraint-{effect}"


def _type_covers(wide: set[str], narrow: set[str]) -> bool:
    return all(t in wide or (t == "integer" and "number" in wide) for t in narrow)


def _set_effect(old: Any, new: Any, covers: Any) -> str:
    """How the set of accepted values moved; None is "anything"."""
    if old is None:
        return TIGHTENED
    if new is None:
        return LOOSENED
    if covers(new, old):
        return LOOSENED
    if covers(old, new):
        return TIGHTENED
    return BOTH


def _types_text(types: set[str] | None) -> str:
    return "any" if types is None else quote("|".join(sorted(types)))


def _enum(schema: dict[str, Any]) -> frozenset[str] | None:
    values = None
    if "enum" in schema:
        if not isinstance(schema["enum"], list):
            raise MalformedOpenApi("a schema's enum must be an array")
        values = frozenset(json.dumps(v, sort_keys=True) for v in schema["enum"])
    if "const" in schema:
        const = frozenset({json.dumps(schema["const"], sort_keys=True)})
        values = const if values is None else values & const
    return values


def _enum_text(old: frozenset[str] | None, new: frozenset[str] | None) -> str:
    if old is None or new is None:
        return "enum added" if old is None else "enum removed"
    added, removed = sorted(new - old), sorted(old - new)
    parts = []
    if added:
        parts.append("values added " + ", ".join(quote(json.loads(v), 60) for v in added[:10]))
    if removed:
        parts.append("values removed " + ", ".join(quote(json.loads(v), 60) for v in removed[:10]))
    return "; ".join(parts)


def _bound(schema: dict[str, Any], inclusive: str, exclusive: str) -> tuple[float, bool] | None:
    """A numeric bound as (value, strict). 3.0 writes exclusivity as a boolean beside the bound, 3.1 as the
    bound itself; both are read in either version, and the tighter one wins when both are given."""
    bound = None
    value = schema.get(inclusive)
    flag = schema.get(exclusive)
    if value is not None:
        if not _is_number(value):
            raise MalformedOpenApi(f"a schema's {inclusive} must be a number")
        bound = (value, flag is True)
    if _is_number(flag):
        candidate = (flag, True)
        if bound is None:
            bound = candidate
        elif inclusive == "minimum":
            bound = max(bound, candidate)
        else:
            bound = min(bound, candidate, key=lambda b: (b[0], not b[1]))
    elif flag is not None and not isinstance(flag, bool):
        raise MalformedOpenApi(f"a schema's {exclusive} must be a number or a boolean")
    return bound


def _bound_change(
    name: str, old: tuple[float, bool] | None, new: tuple[float, bool] | None, upper: bool
) -> tuple[str, str, str]:
    def text(bound: tuple[float, bool] | None) -> str:
        if bound is None:
            return "none"
        return ("<" if upper else ">") + ("" if bound[1] else "=") + " " + json.dumps(bound[0])

    if old is None:
        effect = TIGHTENED
    elif new is None:
        effect = LOOSENED
    else:
        # A larger minimum (or a smaller maximum), or the same one made strict, accepts fewer values.
        o_key = (old[0], old[1]) if not upper else (-old[0], old[1])
        n_key = (new[0], new[1]) if not upper else (-new[0], new[1])
        effect = TIGHTENED if n_key > o_key else LOOSENED
    return _constraint_kind(effect), effect, f"{name} {text(old)} -> {text(new)}"


def _names(value: Any) -> set[str]:
    if value is None:
        return set()
    if not isinstance(value, list):
        raise MalformedOpenApi("a schema's required must be an array of names")
    return {str(v) for v in value}
