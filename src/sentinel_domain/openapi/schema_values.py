"""Schema rule families on the values a schema accepts: type, enum and const, `x-extensible-enum`, numeric
bounds, sizes, multipleOf, pattern and format, flags (uniqueItems, readOnly, writeOnly), default and
deprecation."""

from __future__ import annotations

import json
import math
from typing import Any

from .changes import BOTH, LOOSENED, REQUEST, RESPONSE, TIGHTENED, _render
from .errors import MalformedOpenApi, quote
from .schema_records import _constraint_kind, _Found, _Rec
from .schema_views import _SchemaViews


class _ValueRules(_SchemaViews):
    """The value rule families of one schema comparison (called in order from _SchemaDiffer._schema_body)."""

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

    def _compare_extensible_enum(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """`x-extensible-enum`: the values a client may send today, more may be added. A reader must already
        accept values it does not know, so only a value removed matters, and only to a sender."""
        key = "x-extensible-enum"
        ov, nv = o.get(key), n.get(key)
        if ov == nv:
            return
        if nv is not None and not isinstance(nv, list):
            found.out.append(
                _Rec((), "schema-extensible-enum-invalid", True, f"{key} {_render(nv)} is not an array")
            )
            return
        if ov is None or nv is None or not isinstance(ov, list):
            # A list appearing or going away says nothing about which values are accepted.
            found.out.append(
                _Rec((), "schema-extensible-enum-changed", False, f"{key} {_render(ov)} -> {_render(nv)}")
            )
            return
        old, new = _values(ov), _values(nv)
        removed, added = sorted(old - new), sorted(new - old)
        if removed:
            found.add(
                "schema-extensible-enum-value-removed",
                TIGHTENED,
                "values removed " + ", ".join(quote(json.loads(v), 60) for v in removed[:10]),
            )
        if added:
            found.out.append(
                _Rec(
                    (),
                    "schema-extensible-enum-value-added",
                    False,
                    "values added " + ", ".join(quote(json.loads(v), 60) for v in added[:10]),
                )
            )

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
                # A pattern matching every string (".*") constrains nothing: widening to it is a removal.
                oc = None if key == "pattern" and ov in _MATCH_ALL else ov
                nc = None if key == "pattern" and nv in _MATCH_ALL else nv
                if oc == nc:
                    continue
                effect = TIGHTENED if oc is None else LOOSENED if nc is None else BOTH
                text = f"{key} {_render(ov)} -> {_render(nv)}"
                lenient = self.options.response_patterns == "lenient"
                if key == "pattern" and effect != TIGHTENED and found.direction == RESPONSE and lenient:
                    # The rule's choice (DiffOptions): looser output is safe for readers, as oasdiff says.
                    found.out.append(_Rec((), "schema-response-pattern-relaxed", False, text))
                    continue
                found.add(_constraint_kind(effect), effect, text)

    def _compare_flags(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """`uniqueItems`, and `readOnly`/`writeOnly` (which move a value between requests and responses)."""
        if bool(o.get("uniqueItems")) != bool(n.get("uniqueItems")):
            effect = TIGHTENED if n.get("uniqueItems") else LOOSENED
            found.add(
                _constraint_kind(effect),
                effect,
                f"uniqueItems {_render(o.get('uniqueItems'))} -> {_render(n.get('uniqueItems'))}",
            )
        for key, kind, hides in (
            ("readOnly", "schema-read-only-changed", REQUEST),
            ("writeOnly", "schema-write-only-changed", RESPONSE),
        ):
            # readOnly takes a value out of requests, writeOnly out of responses; on the other side the flag
            # changes nothing. Hiding a value from the side that uses it breaks that side.
            if bool(o.get(key)) != bool(n.get(key)):
                set_now = bool(n.get(key))
                breaking = set_now and found.direction == hides
                found.out.append(
                    _Rec((), kind, breaking, f"{key} {_render(o.get(key))} -> {_render(n.get(key))}")
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


_MATCH_ALL = frozenset({".*", "^.*$", "^.*", ".*$", "(.*)", "^(.*)$"})


def _values(values: list[Any]) -> frozenset[str]:
    return frozenset(json.dumps(v, sort_keys=True) for v in values)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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


class _Absent:
    pass


_ABSENT = _Absent()


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
