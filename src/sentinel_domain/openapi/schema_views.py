"""Schema views and projections, what every schema rule family reads: a schema as compared (references
followed, `nullable` and type-only unions folded into a `type` list) and a value as compared whole
(references inlined, documentation dropped)."""

from __future__ import annotations

from typing import Any

from .document import _DATA_KEYS, _NAMED_MAPS, ANNOTATIONS, Document
from .errors import MalformedOpenApi
from .lifecycle import DiffOptions, Lifecycle
from .limits import MAX_COMPARE_DEPTH, Budget
from .schema_records import _Rec


class _SchemaViews:
    """The two documents being compared, their views and projections, and the comparison's state (its memo
    and stack, used by schemas._SchemaDiffer). One instance per document pair; `budget` is shared."""

    def __init__(self, old: Document, new: Document, budget: Budget, options: DiffOptions) -> None:
        self.old = old
        self.new = new
        self.budget = budget
        self.options = options
        self.lifecycle = Lifecycle(options)
        self.memo: dict[tuple[Any, Any, str], list[_Rec]] = {}
        # Schemas being folded right now: a self-referencing Optional[...] is compared as written instead.
        self._folding: set[int] = set()
        self.active: dict[tuple[Any, Any, str], int] = {}
        self.depth = 0

    # ---- schema views ------------------------------------------------------------------------------------

    def _view(self, doc: Document, node: Any) -> tuple[dict[str, Any] | None, Any, bool]:
        """A schema ready to compare: references followed, `nullable` and type-only `anyOf`/`oneOf` folded
        into a `type` list. Returns (view, identity for cycle detection and memo, whether a $ref was
        followed)."""
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


def _is_null_type(schema: Any) -> bool:
    return (
        isinstance(schema, dict)
        and _SchemaViews._type_only(schema)
        and _SchemaViews._types(schema) == {"null"}
    )
