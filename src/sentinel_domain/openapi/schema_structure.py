"""Schema rule families on a schema's structure: required names, properties and additionalProperties,
items, composition (allOf, anyOf, oneOf) and not, each nested schema compared through the differ.

A property marked `readOnly` is never sent and one marked `writeOnly` never read (OpenAPI 3.0 and 3.1 say
so), so changes to a property hidden from the direction compared do not break that direction: read-only in
requests, write-only in responses, on both sides (a property that only now became hidden is the flag's own
change, schema_values._compare_flags)."""

from __future__ import annotations

from typing import Any

from .changes import _FLIP, BOTH, LOOSENED, REQUEST, TIGHTENED, _render
from .errors import MalformedOpenApi, quote
from .schema_records import _constraint_kind, _Found, _Rec
from .schema_views import _SchemaViews


class _StructureRules(_SchemaViews):
    """The structure rule families of one schema comparison (called in order from
    _SchemaDiffer._schema_body)."""

    def _compare_required(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        o_req, n_req = _names(o.get("required")), _names(n.get("required"))
        for name in sorted(n_req - o_req):
            hidden = self._hidden(self.new, n, name, found.direction)
            text = f"{quote(name)} is now required"
            self._hidden_add(found, "schema-required-added", TIGHTENED, text, hidden)
        for name in sorted(o_req - n_req):
            hidden = self._hidden(self.old, o, name, found.direction)
            text = f"{quote(name)} is no longer required"
            self._hidden_add(found, "schema-required-removed", LOOSENED, text, hidden)

    def _hidden(self, doc: Any, schema: dict[str, Any], name: str, direction: str) -> str | None:
        """The flag (readOnly, writeOnly) that keeps property `name` out of this direction, if any."""
        props = schema.get("properties")
        prop = doc.deref(props.get(name)) if isinstance(props, dict) else None
        flag = "readOnly" if direction == REQUEST else "writeOnly"
        return flag if isinstance(prop, dict) and prop.get(flag) is True else None

    @staticmethod
    def _hidden_add(found: _Found, kind: str, effect: str, detail: str, hidden: str | None) -> None:
        if hidden:
            found.out.append(_Rec((), kind, False, f"{detail}; {hidden}: not in this direction"))
        else:
            found.add(kind, effect, detail)

    def _compare_properties(self, o: dict[str, Any], n: dict[str, Any], found: _Found) -> None:
        """`properties` (added, removed, each kept one compared) and `additionalProperties`."""
        o_props = self.old.mapping(o.get("properties"), "properties", deref=False)
        n_props = self.new.mapping(n.get("properties"), "properties", deref=False)
        for name in n_props:
            if name not in o_props:
                found.out.append(_Rec((name,), "schema-property-added", False, "property added"))
        for name, value in o_props.items():
            o_hidden = self._hidden(self.old, o, name, found.direction)
            if name not in n_props:
                # The client may send or read it; removing either is what breaks integrations.
                detail = "property removed" + (f"; {o_hidden}: not in this direction" if o_hidden else "")
                found.out.append(_Rec((name,), "schema-property-removed", not o_hidden, detail))
            elif o_hidden and self._hidden(self.new, n, name, found.direction):
                mark = len(found.out)
                found.nested(value, n_props[name], found.direction, (name,))
                found.out[mark:] = [
                    _Rec(r.path, r.kind, False, f"{r.detail}; {o_hidden}: not in this direction")
                    if r.breaking
                    else r
                    for r in found.out[mark:]
                ]
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


def _names(value: Any) -> set[str]:
    if value is None:
        return set()
    if not isinstance(value, list):
        raise MalformedOpenApi("a schema's required must be an array of names")
    return {str(v) for v in value}
