"""The document model: what its keys mean (documentation, author-chosen names, data), the operations and
paths it may hold, and a loaded document whose internal `$ref`s are checked and resolved."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from .errors import MalformedOpenApi, quote
from .limits import MAX_REF_HOPS

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# RFC 3986 path characters plus the braces of templates: no spaces or controls, since the template becomes
# part of an obligation's scope, which reaches people and a model outside quotes.
_PATH_TEMPLATE = re.compile(r"/[A-Za-z0-9\-._~!$&'()*+,;=:@%/{}]*\Z")
_WEBHOOK_NAME = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@%]+\Z")
_TEMPLATE_PARAM = re.compile(r"\{([^{}/]*)\}")

# Keys that document and never constrain. Dropped everywhere before anything is compared, but for `servers`:
# where operations are served is compared on its own, once per operation (servers.py), and dropped from
# everything else (a schema or a link may not move an operation).
ANNOTATIONS = frozenset(
    {
        "description",
        "summary",
        "title",
        "example",
        "examples",
        "externalDocs",
        "$comment",
        "tags",
        "$id",
        "$schema",
        "$anchor",
        "$dynamicAnchor",
        "$defs",
        "definitions",
        "links",
        "servers",
        "info",
        "contact",
        "license",
        "termsOfService",
    }
)
# Maps whose keys are names chosen by the author (a property may be called "description").
_NAMED_MAPS = frozenset(
    {
        "properties",
        "patternProperties",
        "dependentSchemas",
        "dependentRequired",
        "content",
        "headers",
        "encoding",
        "callbacks",
        "responses",
        "schemas",
        "parameters",
        "requestBodies",
        "securitySchemes",
        "scopes",
        "mapping",
        "variables",
        "paths",
        "webhooks",
        "pathItems",
    }
)
# Values that are data, not structure: a `$ref` inside an example is a string to show, never to follow.
_DATA_KEYS = frozenset({"example", "examples", "default", "enum", "const"})


# ---- the document and its references ---------------------------------------------------------------------


def _pointer_parts(ref: str) -> list[str]:
    fragment = unquote(ref[1:])
    if fragment == "":
        return []
    if not fragment.startswith("/"):
        raise MalformedOpenApi(f"the $ref {quote(ref)} is not a JSON pointer (anchors are not resolved)")
    return [part.replace("~1", "/").replace("~0", "~") for part in fragment[1:].split("/")]


class Document:
    """A loaded document with its internal references checked and resolvable."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.version = "3.1" if root["openapi"].startswith("3.1") else "3.0"
        self._final: dict[str, tuple[Any, str]] = {}
        self._check_references()

    def _target(self, ref: str) -> Any:
        node: Any = self.root
        for part in _pointer_parts(ref):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise MalformedOpenApi(f"the $ref {quote(ref)} points at nothing in the document")
        return node

    def resolve(self, ref: Any) -> tuple[Any, str]:
        """The node a `$ref` finally names, following chains of references, and the pointer it ends at."""
        if not isinstance(ref, str):
            raise MalformedOpenApi("a $ref must be a string")
        if ref in self._final:
            return self._final[ref]
        if not ref.startswith("#"):
            raise MalformedOpenApi(
                f"the $ref {quote(ref)} points outside the document; external references are "
                "never fetched: bundle the document into one file"
            )
        seen = [ref]
        current = ref
        node = self._target(current)
        while isinstance(node, dict) and "$ref" in node:
            current = node["$ref"]
            if not isinstance(current, str):
                raise MalformedOpenApi("a $ref must be a string")
            if not current.startswith("#"):
                raise MalformedOpenApi(
                    f"the $ref {quote(current)} points outside the document; external "
                    "references are never fetched: bundle the document into one file"
                )
            if current in seen:
                raise MalformedOpenApi(
                    f"the $ref {quote(ref)} is circular: it leads back to {quote(current)}"
                )
            seen.append(current)
            if len(seen) > MAX_REF_HOPS:
                raise MalformedOpenApi(f"the $ref {quote(ref)} chains more than {MAX_REF_HOPS} references")
            node = self._target(current)
        self._final[ref] = (node, current)
        return node, current

    def path_item(self, value: Any, where: str) -> dict[str, Any]:
        """A path item, whose `$ref` may have fields of the path item's own beside it (unlike a Reference
        Object's, which are ignored): they are read with the referenced item's, documentation aside, so an
        operation, parameters or servers written beside the `$ref` are never invisible. A field both give is
        refused: which one a client reads is undefined."""
        if not (isinstance(value, dict) and "$ref" in value):
            return self.mapping(value, where)
        target = self.mapping(value, where)
        beside = {k: v for k, v in value.items() if k != "$ref" and (k == "servers" or k not in ANNOTATIONS)}
        both = sorted(k for k in beside if k in target)
        if both:
            raise MalformedOpenApi(
                f"{where} gives {', '.join(quote(k) for k in both)} both beside its $ref and in the item it "
                "references: which one applies is undefined"
            )
        return {**target, **beside}

    def deref(self, node: Any) -> Any:
        if isinstance(node, dict) and "$ref" in node:
            return self.resolve(node["$ref"])[0]
        return node

    def _check_references(self) -> None:
        stack: list[tuple[Any, bool]] = [(self.root, False)]  # (value, is it a map of author-chosen names)
        while stack:
            node, named = stack.pop()
            if isinstance(node, dict):
                if "$ref" in node and not named:
                    self.resolve(node["$ref"])
                for key, child in node.items():
                    if not isinstance(child, dict | list):
                        continue
                    if named:
                        stack.append((child, False))
                    elif key not in _DATA_KEYS and not key.startswith("x-"):
                        stack.append((child, key in _NAMED_MAPS))
            elif isinstance(node, list):
                stack.extend((child, False) for child in node if isinstance(child, dict | list))

    # The shapes the diff relies on. Anything else is refused with where it was found.

    def mapping(self, value: Any, where: str, deref: bool = True) -> dict[str, Any]:
        if deref:
            value = self.deref(value)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise MalformedOpenApi(f"{where} must be an object")
        return value

    def sequence(self, value: Any, where: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise MalformedOpenApi(f"{where} must be an array")
        return value
