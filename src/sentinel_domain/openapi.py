"""OpenAPI change ingestion: safe parsing under caps, internal `$ref` resolution, and a diff at the level of
operations, parameters, request bodies, responses, schemas and security, each change classified as breaking
or not (issue 3; DOMAIN.md, change context and obligations).

Pure: no I/O, no clock, no network. Imports only the standard library, and PyYAML's safe building blocks
when a document arrives as YAML text (lazily: every handler imports the core at cold start, few read YAML).

Three rules shape everything here:

* **Refuse rather than guess.** A document that cannot be parsed, is not OpenAPI 3.0/3.1, has the wrong shape
  where the diff needs a shape, refers outside itself (`$ref` to a file or URL: never fetched), or exceeds a cap
  (size, depth, nodes, `$ref` hops, diff work) raises `MalformedOpenApi`. It is never "no changes".
* **Breaking has the consumer's meaning.** A change is breaking when it can break an existing client.
  Values the client *sends* (parameters, request bodies) break it when the API accepts fewer of them
  (tightened); values the client *receives* (responses) break it when the API may produce more of them
  (loosened). For webhooks and callbacks the API is the sender, so the two directions swap. A change whose
  effect cannot be proved (a pattern replaced by another, an unmodelled keyword) is breaking.
* **Documentation is not the contract.** Descriptions, summaries, titles, examples, tags, `x-` extensions and
  `info` never make a change. Anything else that differs and is not modelled still makes a change (generic,
  breaking), so nothing semantic is silently dropped.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any
from urllib.parse import unquote

__all__ = [
    "MAX_DEPTH", "MAX_DOCUMENT_CHARS", "MAX_NODES", "MAX_REF_HOPS", "ApiChange", "Budget", "MalformedOpenApi",
    "OpenApiDiff", "OperationDiff", "diff_openapi", "load_document",
]

MAX_DOCUMENT_CHARS = 2 * 1024 * 1024
"""The largest document text read (the route's body limit is the same, so this only guards direct callers)."""
MAX_DEPTH = 100
"""The deepest nesting of objects and arrays in a document, YAML aliases expanded; the root is depth 1."""
MAX_NODES = 200_000
"""The most nodes (objects, arrays, keys and scalars; YAML aliases expanded) in one document."""
MAX_CHANGE_NODES = 500_000
"""The most nodes over all the documents of one change context."""
MAX_REF_HOPS = 32
"""The longest chain of `$ref` to `$ref` followed before the target must be reached."""
MAX_DIFF_STEPS = 1_000_000
"""The most schema comparisons and projections one change context may cost."""
MAX_COMPARE_DEPTH = 150
"""How deep a comparison may descend (schemas nest through `$ref`, so documents alone do not bound it)."""
MAX_TEMPLATE_CHARS = 512

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# RFC 3986 path characters plus the braces of templates: no spaces or controls, since the template becomes
# part of an obligation's scope, which reaches people and a model outside quotes.
_PATH_TEMPLATE = re.compile(r"/[A-Za-z0-9\-._~!$&'()*+,;=:@%/{}]*\Z")
_WEBHOOK_NAME = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@%]+\Z")
_TEMPLATE_PARAM = re.compile(r"\{([^{}/]*)\}")
_I_JSON_MAX = 2**53 - 1
# A JSON string, unrolled and possessive so that even an unterminated one is scanned once, linearly.
_JSON_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"')

# Keys that document and never constrain. Dropped everywhere before anything is compared.
ANNOTATIONS = frozenset({
    "description", "summary", "title", "example", "examples", "externalDocs", "$comment", "tags", "$id",
    "$schema", "$anchor", "$dynamicAnchor", "$defs", "definitions", "links", "servers", "info", "contact",
    "license", "termsOfService",
})
# Maps whose keys are names chosen by the author (a property may be called "description").
_NAMED_MAPS = frozenset({
    "properties", "patternProperties", "dependentSchemas", "dependentRequired", "content", "headers",
    "encoding", "callbacks", "responses", "schemas", "parameters", "requestBodies", "securitySchemes",
    "scopes", "mapping", "variables", "paths", "webhooks", "pathItems",
})
# Values that are data, not structure: a `$ref` inside an example is a string to show, never to follow.
_DATA_KEYS = frozenset({"example", "examples", "default", "enum", "const"})


class MalformedOpenApi(ValueError):
    """The document must be refused (422 MALFORMED_CHANGE_CONTEXT). The message says why, for a person."""


def quote(text: Any, limit: int = 200) -> str:
    """Spec text as quoted data: JSON string syntax, ASCII only, so no newline, control or bidi character
    survives and nothing can close the quotes. Everything a document's author wrote goes through here."""
    value = str(text)
    if len(value) > limit:
        value = value[:limit] + "..."
    return json.dumps(value, ensure_ascii=True)


# ---- budget ---------------------------------------------------------------------------------------------


class Budget:
    """Work and memory caps shared by every document of one change context."""

    def __init__(self, nodes: int | None = None, steps: int | None = None) -> None:
        self.nodes = MAX_CHANGE_NODES if nodes is None else nodes
        self.steps = MAX_DIFF_STEPS if steps is None else steps

    def take_nodes(self, count: int) -> None:
        self.nodes -= count
        if self.nodes < 0:
            raise MalformedOpenApi(
                f"the change context's OpenAPI documents hold more than {MAX_CHANGE_NODES} nodes in all"
            )

    def step(self) -> None:
        self.steps -= 1
        if self.steps < 0:
            raise MalformedOpenApi(
                f"comparing the documents needs more than {MAX_DIFF_STEPS} steps; refusing rather than "
                "comparing part of them"
            )


# ---- loading ---------------------------------------------------------------------------------------------


class _Counter:
    """Per-document node count, depth checked by the caller."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.nodes = 0

    def add(self, count: int) -> None:
        self.nodes += count
        if self.nodes > MAX_NODES:
            raise MalformedOpenApi(f"the document holds more than {MAX_NODES} nodes (YAML aliases expanded)")
        self.budget.take_nodes(count)


def _check_depth(depth: int) -> None:
    if depth > MAX_DEPTH:
        raise MalformedOpenApi(f"the document nests more than {MAX_DEPTH} levels deep")


def _json_key(key: Any) -> str:
    """Mapping keys as JSON would write them: YAML's `200:` and `'200':` are the same response code."""
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return json.dumps(key)
    if isinstance(key, date | datetime):
        return key.isoformat()
    raise MalformedOpenApi(f"a mapping key of type {type(key).__name__} cannot be a JSON key")


def _scalar(value: Any, inline: bool) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if inline and abs(value) > _I_JSON_MAX:
            # rfc8785 (which digests the change context) cannot carry it exactly.
            raise MalformedOpenApi(f"the integer {value} is outside the range JSON carries exactly; send the "
                                   "document as text instead of an inline object")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise MalformedOpenApi("the document holds a number that is not finite (NaN or infinity)")
        return value
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise MalformedOpenApi(f"the document holds a value of type {type(value).__name__}, which JSON cannot carry")


def _copy_tree(value: Any, counter: _Counter, inline: bool) -> Any:
    """A capped copy of a JSON-like value (an inline document, or one json.loads built)."""
    # Iterative, so a hostile depth fails on the cap and never on Python's recursion limit.
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(value, root, 0, 1)]
    while stack:
        item, parent, slot, depth = stack.pop()
        _check_depth(depth)
        counter.add(1)
        if isinstance(item, dict):
            counter.add(len(item))  # the keys, as the YAML reader counts them
            out: dict[str, Any] = {}
            parent[slot] = out
            for key, child in item.items():
                name = _json_key(key) if not isinstance(key, str) else key
                if name in out:
                    raise MalformedOpenApi(f"the key {quote(name)} appears twice in one mapping")
                out[name] = None
                stack.append((child, out, name, depth + 1))
        elif isinstance(item, list | tuple):
            items: list[Any] = [None] * len(item)
            parent[slot] = items
            for index, child in enumerate(item):
                stack.append((child, items, index, depth + 1))
        else:
            parent[slot] = _scalar(item, inline)
    return root[0]


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise MalformedOpenApi(f"the key {quote(key)} appears twice in one object")
        out[key] = value
    return out


def _refuse_constant(name: str) -> Any:
    raise MalformedOpenApi(f"the document holds {name}, which JSON does not allow")


_SCALAR_TAGS = frozenset({
    "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:str", "tag:yaml.org,2002:timestamp",
})
_MERGE_TAG = "tag:yaml.org,2002:merge"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"


@dataclass
class _Frame:
    kind: str  # "map" or "seq"
    anchor: str | None
    depth: int
    size: int = 1
    height: int = 1  # deepest level below and including this node
    items: list[Any] = field(default_factory=list)
    keys: list[Any] = field(default_factory=list)
    merges: list[Any] = field(default_factory=list)
    pending_key: Any = None
    has_key: bool = False


class _YamlBuilder:
    """Builds plain values from YAML events with every cap checked as the events arrive.

    PyYAML's own composer recurses (a deep document overflows the C stack in libyaml's binding) and its
    constructor expands aliases without limit (an alias bomb). This builder keeps an explicit stack, counts
    each alias as the full size of what it stands for, refuses an alias to a node still being built (a
    recursive alias), and uses PyYAML only to scan, parse and resolve the implicit type of each scalar."""

    def __init__(self, counter: _Counter) -> None:
        from yaml import events
        from yaml.constructor import SafeConstructor
        from yaml.nodes import ScalarNode
        from yaml.resolver import Resolver

        self.events = events
        self.scalar_node = ScalarNode
        self.counter = counter
        self.resolver = Resolver()
        self.constructor = SafeConstructor()
        self.anchors: dict[str, tuple[Any, int, int] | None] = {}  # value, size, height; None while building
        # Plain scalars repeat (type names, `true`, status codes): resolving each spelling once keeps a
        # document at the node cap to a fraction of a second.
        self.plain: dict[str, Any] = {}

    def scalar(self, event: Any) -> Any:
        tag = event.tag
        if tag is None:
            if not event.implicit[0]:
                return event.value  # quoted or block: always a string
            known = self.plain.get(event.value, _UNKNOWN)
            if known is _UNKNOWN:
                known = self.plain[event.value] = self._construct(
                    self.resolver.resolve(self.scalar_node, event.value, event.implicit), event)
            return known
        if tag == "!":
            return event.value
        return self._construct(tag, event)

    def _construct(self, tag: str, event: Any) -> Any:
        if tag == _MERGE_TAG:
            return _MERGE
        if tag not in _SCALAR_TAGS:
            raise MalformedOpenApi(f"the YAML tag {quote(tag)} is not allowed (only JSON-like values are)")
        node = self.scalar_node(tag, event.value, event.start_mark, event.end_mark)
        return _scalar(self.constructor.yaml_constructors[tag](self.constructor, node), inline=False)

    def build(self, stream: Iterator[Any]) -> Any:
        e = self.events
        scalar_event, alias_event = e.ScalarEvent, e.AliasEvent
        stack: list[_Frame] = []
        result: list[Any] = []
        plain = self.plain
        pending = 0  # nodes not yet counted: the caps are checked every 1,024 nodes, not at each one
        for event in stream:
            kind = type(event)
            if kind is scalar_event:
                # The hot path (most values are scalars in a mapping or a list), kept inline on purpose.
                if event.tag is None:
                    if event.implicit[0]:
                        value = plain.get(event.value, _UNKNOWN)
                        if value is _UNKNOWN:
                            value = self.scalar(event)
                    else:
                        value = event.value
                else:
                    value = self.scalar(event)
                if event.anchor is not None:
                    self.anchors[event.anchor] = (value, 1, 1)
                pending += 1
                if pending >= 1024:
                    self.counter.add(pending)
                    pending = 0
                if not stack:
                    result.append(value)
                    continue
                parent = stack[-1]
                if len(stack) >= MAX_DEPTH:
                    _check_depth(len(stack) + 1)
                parent.size += 1
                if parent.height < 2:
                    parent.height = 2
                if parent.kind == "seq":
                    parent.items.append(value)
                elif not parent.has_key:
                    parent.pending_key, parent.has_key = value, True
                else:
                    if parent.pending_key is _MERGE:
                        parent.merges.append(value)
                    else:
                        parent.keys.append(parent.pending_key)
                        parent.items.append(value)
                    parent.pending_key, parent.has_key = None, False
            elif kind is alias_event:
                if event.anchor not in self.anchors:
                    raise MalformedOpenApi(f"the YAML alias {quote(event.anchor)} has no anchor")
                known = self.anchors[event.anchor]
                if known is None:
                    raise MalformedOpenApi(f"the YAML alias {quote(event.anchor)} refers to itself")
                value, size, height = known
                _check_depth(len(stack) + height)
                self.counter.add(size)
                self._attach(stack, result, value, size, height)
            elif isinstance(event, e.MappingStartEvent | e.SequenceStartEvent):
                is_map = isinstance(event, e.MappingStartEvent)
                tag = event.tag
                if tag not in (None, "!", _MAP_TAG if is_map else _SEQ_TAG):
                    raise MalformedOpenApi(f"the YAML tag {quote(tag)} is not allowed (only JSON-like values are)")
                depth = len(stack) + 1
                _check_depth(depth)
                self.counter.add(1)
                if event.anchor is not None:
                    self.anchors[event.anchor] = None
                stack.append(_Frame("map" if is_map else "seq", event.anchor, depth))
            elif isinstance(event, e.MappingEndEvent | e.SequenceEndEvent):
                frame = stack.pop()
                value = self._finish(frame)
                if frame.anchor is not None:
                    self.anchors[frame.anchor] = (value, frame.size, frame.height)
                self._attach(stack, result, value, frame.size, frame.height, counted=True)
            elif isinstance(event, e.DocumentStartEvent) and result:
                raise MalformedOpenApi("the text holds more than one YAML document")
        self.counter.add(pending)
        return result[0] if result else None

    def _attach(self, stack: list[_Frame], result: list[Any], value: Any, size: int, height: int,
                counted: bool = False) -> None:
        if not stack:
            result.append(value)
            return
        parent = stack[-1]
        parent.size += size
        parent.height = max(parent.height, height + 1)
        if parent.kind == "seq":
            parent.items.append(value)
        elif not parent.has_key:
            if isinstance(value, dict | list):
                raise MalformedOpenApi("a YAML mapping key must be a scalar, not a mapping or a sequence")
            parent.pending_key, parent.has_key = value, True
        else:
            if parent.pending_key is _MERGE:
                parent.merges.append(value)
            else:
                parent.keys.append(parent.pending_key)
                parent.items.append(value)
            parent.pending_key, parent.has_key = None, False

    @staticmethod
    def _finish(frame: _Frame) -> Any:
        if frame.kind == "seq":
            return frame.items
        out: dict[str, Any] = {}
        # YAML merge keys: explicit keys win over merged ones, and earlier merged maps over later ones.
        for merged in frame.merges:
            sources = merged if isinstance(merged, list) else [merged]
            for source in sources:
                if not isinstance(source, dict):
                    raise MalformedOpenApi("a YAML merge key (<<) must name a mapping or a list of mappings")
        for merged in reversed(frame.merges):
            sources = merged if isinstance(merged, list) else [merged]
            for source in reversed(sources):
                out.update(source)
        explicit: set[str] = set()
        for key, value in zip(frame.keys, frame.items, strict=True):
            name = _json_key(key)
            if name in explicit:
                raise MalformedOpenApi(f"the key {quote(name)} appears twice in one mapping")
            explicit.add(name)
            out[name] = value
        return out


_UNKNOWN = object()


class _MergeKey:
    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return "<<"


_MERGE = _MergeKey()


def _yaml_events(text: str) -> Iterator[Any]:
    from yaml.events import StreamEndEvent, StreamStartEvent

    try:  # libyaml's event parser is ~20x faster; the pure-Python one gives the same events
        from yaml._yaml import CParser as parser_class
    except ImportError:  # pragma: no cover - depends on how PyYAML was built
        from yaml.loader import SafeLoader as parser_class
    parser = parser_class(text)
    try:
        while True:
            event = parser.get_event()
            if isinstance(event, StreamStartEvent):
                continue
            yield event
            if isinstance(event, StreamEndEvent):
                return
    finally:
        parser.dispose()


def _parse_text(text: str, counter: _Counter) -> Any:
    if len(text) > MAX_DOCUMENT_CHARS:
        raise MalformedOpenApi(f"the document is {len(text)} characters long; at most {MAX_DOCUMENT_CHARS} are read")
    if "\x00" in text:
        raise MalformedOpenApi("the document contains a NUL character")
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped:
        raise MalformedOpenApi("the document is empty")
    json_error = None
    if stripped.startswith("{"):
        # Every comma outside a string separates two nodes, so more commas than the cap is too many nodes,
        # known before json.loads builds them all (up to a million small objects fit in the body limit).
        commas = _JSON_STRING.sub("", stripped).count(",")
        if commas >= MAX_NODES:
            raise MalformedOpenApi(f"the document holds more than {MAX_NODES} nodes ({commas} commas)")
        # JSON is read as JSON: strict about duplicate keys and NaN, and much faster than YAML.
        try:
            value = json.loads(stripped, object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant)
        except RecursionError:
            raise MalformedOpenApi(f"the document nests more than {MAX_DEPTH} levels deep") from None
        except json.JSONDecodeError as error:
            # It may still be YAML written in flow style; if YAML cannot read it either, say what JSON saw.
            json_error = f"the document is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        else:
            return _copy_tree(value, counter, inline=False)
    import yaml

    try:
        return _YamlBuilder(counter).build(_yaml_events(text))
    except MalformedOpenApi:
        raise
    except yaml.MarkedYAMLError as error:
        if json_error:
            raise MalformedOpenApi(json_error) from None
        mark = error.problem_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise MalformedOpenApi(f"the document is not valid YAML: {error.problem or error.context}{where}") from None
    except (yaml.YAMLError, UnicodeError, ValueError, OverflowError) as error:
        raise MalformedOpenApi(json_error or f"the document is not valid YAML: {type(error).__name__}") from None


def load_document(value: Any, budget: Budget | None = None) -> dict[str, Any] | None:
    """One side of a change: None (the document is absent), a JSON object, or YAML or JSON text.

    Returns the document as plain JSON-like values, after checking caps, that it is OpenAPI 3.0 or 3.1 and
    that every `$ref` resolves inside the document. Raises MalformedOpenApi."""
    document = _load(value, budget or Budget())
    return None if document is None else document.root


def _load(value: Any, budget: Budget) -> Document | None:
    if value is None:
        return None
    counter = _Counter(budget)
    if isinstance(value, str):
        root = _parse_text(value, counter)
    elif isinstance(value, dict):
        root = _copy_tree(value, counter, inline=True)
    else:
        raise MalformedOpenApi(f"a document must be an object, YAML or JSON text, or null, not {type(value).__name__}")
    if not isinstance(root, dict):
        raise MalformedOpenApi("the document is not a mapping (an OpenAPI document is an object)")
    version = root.get("openapi")
    if isinstance(version, float):  # YAML reads `openapi: 3.1` as a number
        version = repr(version)
    if not isinstance(version, str) or not re.match(r"3\.[01](\.\d+)?(-[0-9A-Za-z.-]+)?\Z", version):
        if "swagger" in root:
            raise MalformedOpenApi("Swagger 2.0 documents are not read; convert the document to OpenAPI 3")
        raise MalformedOpenApi(f"the document's openapi field must name version 3.0 or 3.1, not {quote(version)}")
    root["openapi"] = version
    return Document(root)  # checks every reference now, so a bad one is refused whatever the diff reaches


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
            raise MalformedOpenApi(f"the $ref {quote(ref)} points outside the document; external references are "
                                   "never fetched: bundle the document into one file")
        seen = [ref]
        current = ref
        node = self._target(current)
        while isinstance(node, dict) and "$ref" in node:
            current = node["$ref"]
            if not isinstance(current, str):
                raise MalformedOpenApi("a $ref must be a string")
            if not current.startswith("#"):
                raise MalformedOpenApi(f"the $ref {quote(current)} points outside the document; external "
                                       "references are never fetched: bundle the document into one file")
            if current in seen:
                raise MalformedOpenApi(f"the $ref {quote(ref)} is circular: it leads back to {quote(current)}")
            seen.append(current)
            if len(seen) > MAX_REF_HOPS:
                raise MalformedOpenApi(f"the $ref {quote(ref)} chains more than {MAX_REF_HOPS} references")
            node = self._target(current)
        self._final[ref] = (node, current)
        return node, current

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


# ---- what a diff reports -----------------------------------------------------------------------------------


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

    def describe(self) -> str:
        text = self.kind
        if self.where:
            text += f" at {quote(self.where)}"
        if self.detail:
            text += f" ({self.detail})"
        return text + (" [breaking]" if self.breaking else "")


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


# ---- the diff --------------------------------------------------------------------------------------------

REQUEST = "request"  # the client writes, the API reads: accepting fewer values breaks the client
RESPONSE = "response"  # the API writes, the client reads: producing more values breaks the client
_FLIP = {REQUEST: RESPONSE, RESPONSE: REQUEST}
LOOSENED, TIGHTENED, BOTH = "loosened", "tightened", "both"
_NEVER = 1 << 60


def _breaks(effect: str, direction: str) -> bool:
    if effect == BOTH:
        return True
    return effect == (TIGHTENED if direction == REQUEST else LOOSENED)


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
    rest = records[MAX_RECORDS - 1:]
    summary = _Rec((), "schema-changes-truncated", any(r.breaking for r in rest),
                   f"{len(rest)} more change(s) in this schema, {sum(r.breaking for r in rest)} breaking")
    return [*records[:MAX_RECORDS - 1], summary]


def _schema_path(path: tuple[str, ...]) -> str:
    """`category.tags[].name`: property names joined by dots, array items as []."""
    out = ""
    for part in path:
        out += part if part == "[]" or not out else "." + part
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _render(value: Any) -> str:
    if value is None:
        return "absent"
    if isinstance(value, str):
        return quote(value, 80)
    return quote(json.dumps(value, sort_keys=True), 80) if isinstance(value, dict | list) else json.dumps(value)


class _Differ:
    """Compares two loaded documents. One instance per document pair; `budget` is shared."""

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
            extras = {k: v for k, v in node.items()
                      if k != "$ref" and k not in ANNOTATIONS and not k.startswith("x-")}
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
                merged = {**inner, **{k: v for k, v in view.items() if k not in (combiner, "type", "nullable")}}
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
        return "type" in schema and all(k in ("type", "nullable") or k in ANNOTATIONS or k.startswith("x-")
                                        for k in schema)

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

    def _project(self, doc: Document, value: Any, named: bool = False, trail: tuple[str, ...] = (),
                 depth: int = 0) -> Any:
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
                return inlined if not rest else {"$ref+": [inlined, self._project(doc, rest, False, trail, depth + 1)]}
            out = {}
            for key, child in value.items():
                if not named and (key in ANNOTATIONS or key.startswith("x-")):
                    continue
                out[key] = child if key in _DATA_KEYS and not named else self._project(
                    doc, child, key in _NAMED_MAPS and not named, trail, depth + 1)
            return out
        if isinstance(value, list):
            return [self._project(doc, item, False, trail, depth + 1) for item in value]
        return value

    def _same(self, old: Any, new: Any) -> bool:
        return self._project(self.old, old) == self._project(self.new, new)

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
        out: list[_Rec] = []
        low = _NEVER

        def add(kind: str, effect: str, detail: str, path: tuple[str, ...] = ()) -> None:
            out.append(_Rec(path, kind, _breaks(effect, d), detail))

        def nested(old: Any, new: Any, direction: str, prefix: tuple[str, ...]) -> None:
            nonlocal low
            records, child_low = self._schema(old, new, direction)
            low = min(low, child_low)
            for _ in records:
                self.budget.step()
            out.extend(_Rec(prefix + r.path, r.kind, r.breaking, r.detail) for r in records)

        handled = set(_SCHEMA_KEYWORDS)
        # type
        ot, nt = self._types(o), self._types(n)
        if ot != nt:
            effect = _set_effect(ot, nt, _type_covers)
            add("schema-type-changed", effect, f"type {_types_text(ot)} -> {_types_text(nt)}")
        # enum and const (const is a one-value enum)
        oe, ne = _enum(o), _enum(n)
        if oe != ne:
            effect = _set_effect(oe, ne, lambda a, b: b <= a)
            add("schema-enum-changed", effect, _enum_text(oe, ne))
        # numeric bounds
        for name, old_bound, new_bound, upper in (
                ("minimum", _bound(o, "minimum", "exclusiveMinimum"), _bound(n, "minimum", "exclusiveMinimum"), False),
                ("maximum", _bound(o, "maximum", "exclusiveMaximum"), _bound(n, "maximum", "exclusiveMaximum"), True)):
            if old_bound != new_bound:
                add(*_bound_change(name, old_bound, new_bound, upper))
        # sizes
        for low_key, high_key, floor in (("minLength", "maxLength", 0), ("minItems", "maxItems", 0),
                                         ("minProperties", "maxProperties", 0), ("minContains", "maxContains", 1)):
            for key, is_min in ((low_key, True), (high_key, False)):
                ov, nv = o.get(key), n.get(key)
                if ov == nv:
                    continue
                if (ov is not None and not _is_number(ov)) or (nv is not None and not _is_number(nv)):
                    add("schema-keyword-changed", BOTH, f"{key} {_render(ov)} -> {_render(nv)}")
                    continue
                old_v = floor if ov is None and is_min else (math.inf if ov is None else ov)
                new_v = floor if nv is None and is_min else (math.inf if nv is None else nv)
                if old_v == new_v:
                    continue
                tighter = new_v > old_v if is_min else new_v < old_v
                effect = TIGHTENED if tighter else LOOSENED
                add(f"schema-constraint-{effect}", effect, f"{key} {_render(ov)} -> {_render(nv)}")
        # multipleOf
        om, nm = o.get("multipleOf"), n.get("multipleOf")
        if om != nm:
            if om is None:
                effect = TIGHTENED
            elif nm is None:
                effect = LOOSENED
            elif _is_number(om) and _is_number(nm) and om and nm and (nm / om).is_integer():
                effect = TIGHTENED
            elif _is_number(om) and _is_number(nm) and om and nm and (om / nm).is_integer():
                effect = LOOSENED
            else:
                effect = BOTH
            add(_constraint_kind(effect), effect, f"multipleOf {_render(om)} -> {_render(nm)}")
        # pattern, format: present constrains, absent does not; one replaced by another cannot be compared
        for key in ("pattern", "format"):
            ov, nv = o.get(key), n.get(key)
            if ov != nv:
                effect = TIGHTENED if ov is None else LOOSENED if nv is None else BOTH
                add(_constraint_kind(effect), effect, f"{key} {_render(ov)} -> {_render(nv)}")
        if bool(o.get("uniqueItems")) != bool(n.get("uniqueItems")):
            effect = TIGHTENED if n.get("uniqueItems") else LOOSENED
            add(_constraint_kind(effect), effect, f"uniqueItems {_render(o.get('uniqueItems'))} -> "
                f"{_render(n.get('uniqueItems'))}")
        for key in ("readOnly", "writeOnly"):
            if bool(o.get(key)) != bool(n.get(key)):
                add("schema-keyword-changed", BOTH, f"{key} {_render(o.get(key))} -> {_render(n.get(key))}")
        # default: what the API assumes when a client leaves a value out
        if "default" in o or "default" in n:
            od, nd = o.get("default", _ABSENT), n.get("default", _ABSENT)
            if od != nd:
                breaking = d == REQUEST and od is not _ABSENT
                out.append(_Rec((), "schema-default-changed", breaking,
                                f"default {_render(None if od is _ABSENT else od)} -> "
                                f"{_render(None if nd is _ABSENT else nd)}"))
        if bool(o.get("deprecated")) != bool(n.get("deprecated")):
            out.append(_Rec((), "schema-deprecated-changed", False,
                            "deprecated" if n.get("deprecated") else "no longer deprecated"))
        # objects
        o_req, n_req = _names(o.get("required")), _names(n.get("required"))
        for name in sorted(n_req - o_req):
            add("schema-required-added", TIGHTENED, f"{quote(name)} is now required")
        for name in sorted(o_req - n_req):
            add("schema-required-removed", LOOSENED, f"{quote(name)} is no longer required")
        o_props = self.old.mapping(o.get("properties"), "properties", deref=False)
        n_props = self.new.mapping(n.get("properties"), "properties", deref=False)
        for name in n_props:
            if name not in o_props:
                out.append(_Rec((name,), "schema-property-added", False, "property added"))
        for name, value in o_props.items():
            if name not in n_props:
                # The client may send or read it; removing either is what breaks integrations.
                out.append(_Rec((name,), "schema-property-removed", True, "property removed"))
            else:
                nested(value, n_props[name], d, (name,))
        oa, na = o.get("additionalProperties", True), n.get("additionalProperties", True)
        oa, na = (True if v == {} else v for v in (oa, na))  # an empty schema allows anything, like true
        if oa is not True or na is not True:
            if isinstance(oa, dict) and isinstance(na, dict):
                nested(oa, na, d, ("additionalProperties",))
            elif oa != na:
                effect = TIGHTENED if na is False or oa is True else LOOSENED
                add(_constraint_kind(effect), effect, f"additionalProperties {_render(oa)} -> {_render(na)}")
        # arrays
        oi, ni = o.get("items"), n.get("items")
        if isinstance(oi, list) or isinstance(ni, list):
            if not self._same(oi, ni):
                add("schema-keyword-changed", BOTH, "items (as an array) changed")
        elif oi is not None or ni is not None:
            nested(oi, ni, d, ("[]",))
        # composition
        for key in ("allOf", "anyOf", "oneOf"):
            ol = self.old.sequence(o.get(key), key)
            nl = self.new.sequence(n.get(key), key)
            if not ol and not nl:
                continue
            if len(ol) == len(nl):
                for index, (ob, nb) in enumerate(zip(ol, nl, strict=True)):
                    nested(ob, nb, d, (f"{key}[{index}]",))
                continue
            if key == "allOf":
                effect = BOTH
            elif key == "anyOf":
                old_set = [self._project(self.old, b) for b in ol]
                new_set = [self._project(self.new, b) for b in nl]
                gained = any(b not in old_set for b in new_set)
                lost = any(b not in new_set for b in old_set)
                effect = BOTH if gained == lost else LOOSENED if gained else TIGHTENED
            else:  # oneOf: a new branch can make a value valid twice, so any change may reject it
                effect = BOTH
            add("schema-composition-changed", effect, f"{key} has {len(ol)} -> {len(nl)} branches")
        if "not" in o or "not" in n:
            if "not" in o and "not" in n:
                nested(o["not"], n["not"], _FLIP[d], ("not",))
            else:
                effect = TIGHTENED if "not" in n else LOOSENED
                add(_constraint_kind(effect), effect, "not " + ("added" if "not" in n else "removed"))
        # everything else that constrains: compared whole, breaking when it differs
        for key in sorted((set(o) | set(n)) - handled):
            if key in ANNOTATIONS or key.startswith("x-"):
                continue
            if not self._same(o.get(key), n.get(key)):
                add("schema-keyword-changed", BOTH, f"{key} changed")
        return _capped(out), low

    # ---- operations --------------------------------------------------------------------------------------

    def operations(self, doc: Document) -> dict[str, tuple[str, dict[str, Any], dict[str, Any], str]]:
        """Every operation: key -> (matching key, operation, path item, path template or webhook name)."""
        found: dict[str, tuple[str, dict[str, Any], dict[str, Any], str]] = {}
        sources = (("paths", False), ("webhooks", True))
        for section, is_webhook in sources:
            items = doc.mapping(doc.root.get(section), section, deref=False)
            for template, raw_item in items.items():
                if is_webhook:
                    if not _WEBHOOK_NAME.match(template) or len(template) > MAX_TEMPLATE_CHARS:
                        raise MalformedOpenApi(f"the webhook name {quote(template)} is not a plain name")
                elif not _PATH_TEMPLATE.match(template) or len(template) > MAX_TEMPLATE_CHARS:
                    raise MalformedOpenApi(f"the path {quote(template)} must start with / and use only URL path "
                                           f"characters (at most {MAX_TEMPLATE_CHARS})")
                item = doc.mapping(raw_item, f"{section} {quote(template)}")
                for method in METHODS:
                    if method not in item:
                        continue
                    operation = doc.mapping(item[method], f"{method.upper()} {quote(template)}")
                    label = f"webhook:{template}" if is_webhook else template
                    key = f"{method.upper()} {label}"
                    # Templates that differ only in parameter names are the same endpoint.
                    match = f"{method.upper()} " + (label if is_webhook else _TEMPLATE_PARAM.sub("{}", template))
                    found[key] = (match, operation, item, template)
        return found

    def diff(self) -> OpenApiDiff:
        old_ops = self.operations(self.old)
        new_ops = self.operations(self.new)
        pairs = {key: key for key in new_ops if key in old_ops}
        # A template whose variables were only renamed is the same endpoint, when that pairing is unambiguous
        # (a document may, against the specification, hold /pet/{id} and /pet/{petId} side by side).
        unpaired_old: dict[str, list[str]] = {}
        for key, value in old_ops.items():
            if key not in pairs:
                unpaired_old.setdefault(value[0], []).append(key)
        unpaired_new: dict[str, list[str]] = {}
        for key, value in new_ops.items():
            if key not in pairs:
                unpaired_new.setdefault(value[0], []).append(key)
        for match, keys in unpaired_new.items():
            if len(keys) == 1 and len(unpaired_old.get(match, [])) == 1:
                pairs[keys[0]] = unpaired_old[match][0]
        results: list[OperationDiff] = []
        for key, (_match, operation, item, template) in new_ops.items():
            old_key = pairs.get(key)
            if old_key is None:
                results.append(OperationDiff(key, "added", (ApiChange(key, "operation-added", False),)))
                continue
            webhook = key.split(" ", 1)[1].startswith("webhook:")
            _m, o_operation, o_item, o_template = old_ops[old_key]
            changes = self.operation(key, o_operation, operation, o_item, item, o_template, template, webhook)
            if changes:
                results.append(OperationDiff(key, "changed", tuple(changes)))
        paired_old = set(pairs.values())
        for key in old_ops:
            if key not in paired_old:
                results.append(OperationDiff(key, "removed", (ApiChange(key, "operation-removed", True),)))
        document = []
        # How every schema is read: not an operation's change, but one that owes the whole document's checks.
        if self.old.root.get("jsonSchemaDialect") != self.new.root.get("jsonSchemaDialect"):
            document.append(ApiChange("", "json-schema-dialect-changed", False, "jsonSchemaDialect",
                                      f"{quote(self.old.root.get('jsonSchemaDialect'))} -> "
                                      f"{quote(self.new.root.get('jsonSchemaDialect'))}"))
        if self.old.version != self.new.version:
            document.append(ApiChange("", "openapi-version-changed", False, "openapi",
                                      f"{self.old.root['openapi']} -> {self.new.root['openapi']}"))
        results.sort(key=lambda r: r.operation)
        return OpenApiDiff(tuple(results), tuple(document), self.old.root != self.new.root)

    def operation(self, key: str, o: dict[str, Any], n: dict[str, Any], o_item: dict[str, Any],
                  n_item: dict[str, Any], o_template: str, n_template: str, flipped: bool) -> list[ApiChange]:
        out: list[ApiChange] = []

        def add(kind: str, breaking: bool, where: str = "", detail: str = "", weakens: bool = False) -> None:
            out.append(ApiChange(key, kind, breaking, where, detail, weakens))

        def records(records: list[_Rec], where: str) -> None:
            for r in records:
                path = _schema_path(r.path)
                add(r.kind, r.breaking, f"{where}: {path}" if path else where, r.detail)

        self._operation_body(o, n, o_item, n_item, o_template, n_template, flipped, add, records, "")
        return out

    def _operation_body(self, o: dict[str, Any], n: dict[str, Any], o_item: dict[str, Any], n_item: dict[str, Any],
                        o_template: str, n_template: str, flipped: bool, add: Any, records: Any,
                        prefix: str) -> None:
        request = RESPONSE if flipped else REQUEST
        response = _FLIP[request]
        here = prefix.rstrip()
        if bool(o.get("deprecated")) != bool(n.get("deprecated")):
            add("operation-deprecated" if n.get("deprecated") else "operation-undeprecated", False, here)
        if o.get("operationId") != n.get("operationId"):
            add("operation-id-changed", False, here,
                f"{quote(o.get('operationId'))} -> {quote(n.get('operationId'))}")
        self._parameters(o, n, o_item, n_item, o_template, n_template, flipped, request, add, records, prefix)
        self._request_body(o.get("requestBody"), n.get("requestBody"), flipped, request, add, records, prefix)
        self._responses(o.get("responses"), n.get("responses"), flipped, response, add, records, prefix)
        # The document's security covers the requests the API receives, not the ones it sends.
        self._security(o, n, add, here, inherit=not flipped)
        self._callbacks(o.get("callbacks"), n.get("callbacks"), flipped, add, records, prefix)
        done = {"parameters", "requestBody", "responses", "security", "callbacks", "deprecated", "operationId"}
        for name in sorted((set(o) | set(n)) - done):
            if name in ANNOTATIONS or name.startswith("x-"):
                continue
            if not self._same(o.get(name), n.get(name)):
                add("operation-definition-changed", True, (prefix + name).strip(), f"{name} changed")

    # -- parameters

    def _parameter_map(self, doc: Document, operation: dict[str, Any], item: dict[str, Any],
                       template: str) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
        positions = {name: index for index, name in enumerate(_TEMPLATE_PARAM.findall(template))}
        found: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        for source in (item.get("parameters"), operation.get("parameters")):  # the operation's win
            for raw in doc.sequence(source, "parameters"):
                param = doc.mapping(raw, "a parameter")
                name, where = param.get("name"), param.get("in")
                if not isinstance(name, str) or where not in ("query", "header", "path", "cookie"):
                    raise MalformedOpenApi("a parameter needs a string name and in: query, header, path or cookie")
                if where == "header" and name.lower() in ("accept", "content-type", "authorization"):
                    continue  # the specification says these are ignored
                if where == "path" and name in positions:
                    key = ("path", f"#{positions[name]}")  # renaming a template variable changes nothing
                elif where == "header":
                    key = ("header", name.lower())
                else:
                    key = (where, name)
                found[key] = (f"parameter {where} {name}", param)
        return found

    def _parameters(self, o: dict[str, Any], n: dict[str, Any], o_item: dict[str, Any], n_item: dict[str, Any],
                    o_template: str, n_template: str, flipped: bool, direction: str, add: Any, records: Any,
                    prefix: str) -> None:
        old = self._parameter_map(self.old, o, o_item, o_template)
        new = self._parameter_map(self.new, n, n_item, n_template)
        for key, (label, param) in new.items():
            if key not in old:
                required = key[0] == "path" or param.get("required") is True
                add("parameter-added", required and not flipped, prefix + label,
                    "required" if required else "optional")
        for key, (label, o_param) in old.items():
            if key not in new:
                # Clients send it and rely on what it does; callback receivers read it.
                add("parameter-removed", True, prefix + label)
                continue
            n_label, n_param = new[key]
            where = prefix + n_label
            o_required = key[0] == "path" or o_param.get("required") is True
            n_required = key[0] == "path" or n_param.get("required") is True
            if n_required and not o_required:
                add("parameter-became-required", not flipped, where)
            elif o_required and not n_required:
                add("parameter-became-optional", flipped, where)
            if bool(o_param.get("deprecated")) != bool(n_param.get("deprecated")):
                add("parameter-deprecated" if n_param.get("deprecated") else "parameter-undeprecated", False, where)
            self._value_definition(o_param, n_param, direction, where, add, records, "parameter", key[0])

    def _value_definition(self, o: dict[str, Any], n: dict[str, Any], direction: str, where: str, add: Any,
                          records: Any, what: str, location: str) -> None:
        """What a parameter or a header carries: a schema or a content map, and how it is serialised."""
        if ("schema" in o) != ("schema" in n) or ("content" in o) != ("content" in n):
            add(f"{what}-definition-changed", True, where, "switched between schema and content")
        else:
            if "schema" in o:
                records(self.schema(o["schema"], n["schema"], direction), where)
            if "content" in o:
                self._content(o["content"], n["content"], direction, where, add, records)
        o_style, n_style = _serialisation(o, location), _serialisation(n, location)
        if o_style != n_style:
            add(f"{what}-definition-changed", True, where, f"serialisation {_render(o_style)} -> {_render(n_style)}")
        done = {"name", "in", "required", "deprecated", "schema", "content", "style", "explode", "allowReserved",
                "allowEmptyValue"}
        for name in sorted((set(o) | set(n)) - done):
            if name in ANNOTATIONS or name.startswith("x-"):
                continue
            if not self._same(o.get(name), n.get(name)):
                add(f"{what}-definition-changed", True, where, f"{name} changed")

    # -- bodies and content

    def _content(self, o: Any, n: Any, direction: str, where: str, add: Any, records: Any) -> None:
        old = {k.lower(): v for k, v in self.old.mapping(o, f"{where} content", deref=False).items()}
        new = {k.lower(): v for k, v in self.new.mapping(n, f"{where} content", deref=False).items()}
        for media in new:
            if media not in old:
                add("media-type-added", False, f"{where} {media}")
        for media, o_media in old.items():
            if media not in new:
                # A client sending it is refused (415), a client expecting it gets something else.
                add("media-type-removed", True, f"{where} {media}")
                continue
            om = self.old.mapping(o_media, f"{where} {media}")
            nm = self.new.mapping(new[media], f"{where} {media}")
            records(self.schema(om.get("schema"), nm.get("schema"), direction), f"{where} {media}")
            for name in sorted((set(om) | set(nm)) - {"schema"}):
                if name in ANNOTATIONS or name.startswith("x-"):
                    continue
                if not self._same(om.get(name), nm.get(name)):
                    add("media-type-definition-changed", True, f"{where} {media}", f"{name} changed")

    def _request_body(self, o: Any, n: Any, flipped: bool, direction: str, add: Any, records: Any,
                      prefix: str) -> None:
        where = prefix + "request body"
        ob = self.old.mapping(o, where) if o is not None else None
        nb = self.new.mapping(n, where) if n is not None else None
        if ob is None and nb is None:
            return
        if ob is None:
            required = nb.get("required") is True  # type: ignore[union-attr]
            add("request-body-added", required and not flipped, where, "required" if required else "optional")
            return
        if nb is None:
            add("request-body-removed", True, where)
            return
        o_required, n_required = ob.get("required") is True, nb.get("required") is True
        if n_required and not o_required:
            add("request-body-became-required", not flipped, where)
        elif o_required and not n_required:
            add("request-body-became-optional", flipped, where)
        self._content(ob.get("content"), nb.get("content"), direction, where, add, records)
        for name in sorted((set(ob) | set(nb)) - {"required", "content"}):
            if name in ANNOTATIONS or name.startswith("x-"):
                continue
            if not self._same(ob.get(name), nb.get(name)):
                add("request-body-definition-changed", True, where, f"{name} changed")

    # -- responses

    def _responses(self, o: Any, n: Any, flipped: bool, direction: str, add: Any, records: Any,
                   prefix: str) -> None:
        old = {str(k).upper(): v for k, v in self.old.mapping(o, "responses", deref=False).items()
               if not str(k).startswith("x-")}
        new = {str(k).upper(): v for k, v in self.new.mapping(n, "responses", deref=False).items()
               if not str(k).startswith("x-")}

        def effective(responses: dict[str, Any], code: str) -> Any:
            # A code no response names is answered by its range (2XX), then by default.
            for candidate in (code, f"{code[0]}XX" if len(code) == 3 and code[0].isdigit() else None, "DEFAULT"):
                if candidate in responses:
                    return responses[candidate]
            return None

        for code in sorted(set(old) | set(new)):
            label = "default" if code == "DEFAULT" else code
            where = f"{prefix}response {label}"
            o_response, n_response = effective(old, code), effective(new, code)
            if o_response is None:
                add("response-added", False, where)
                continue
            if n_response is None:
                success = code.startswith("2")
                add("response-removed", flipped or success, where,
                    "a success response" if success else "")
                continue
            orr = self.old.mapping(o_response, where)
            nrr = self.new.mapping(n_response, where)
            self._content(orr.get("content"), nrr.get("content"), direction, where, add, records)
            self._headers(orr.get("headers"), nrr.get("headers"), flipped, direction, where, add, records)
            for name in sorted((set(orr) | set(nrr)) - {"content", "headers"}):
                if name in ANNOTATIONS or name.startswith("x-"):
                    continue
                if not self._same(orr.get(name), nrr.get(name)):
                    add("response-definition-changed", True, where, f"{name} changed")

    def _headers(self, o: Any, n: Any, flipped: bool, direction: str, where: str, add: Any, records: Any) -> None:
        def by_name(doc: Document, value: Any) -> dict[str, tuple[str, Any]]:
            return {k.lower(): (k, v) for k, v in doc.mapping(value, f"{where} headers", deref=False).items()
                    if k.lower() != "content-type"}

        old, new = by_name(self.old, o), by_name(self.new, n)
        for key, (name, value) in new.items():
            if key not in old:
                header = self.new.mapping(value, f"{where} header")
                add("response-header-added", flipped and header.get("required") is True, f"{where} header {name}")
        for key, (name, value) in old.items():
            label = f"{where} header {name}"
            if key not in new:
                add("response-header-removed", True, label)
                continue
            oh = self.old.mapping(value, label)
            nh = self.new.mapping(new[key][1], label)
            o_required, n_required = oh.get("required") is True, nh.get("required") is True
            if o_required and not n_required:
                add("response-header-became-optional", not flipped, label)
            elif n_required and not o_required:
                add("response-header-became-required", flipped, label)
            if bool(oh.get("deprecated")) != bool(nh.get("deprecated")):
                add("response-header-deprecated", False, label)
            self._value_definition(oh, nh, direction, label, add, records, "response-header", "header")

    # -- security

    def _requirements(self, doc: Document, operation: dict[str, Any], inherit: bool
                      ) -> list[dict[str, frozenset[str]]] | None:
        raw = operation["security"] if "security" in operation else doc.root.get("security") if inherit else None
        if raw is None:
            return None
        out = []
        for alternative in doc.sequence(raw, "security"):
            alt = doc.mapping(alternative, "a security requirement", deref=False)
            out.append({name: frozenset(str(s) for s in doc.sequence(scopes, "security scopes"))
                        for name, scopes in alt.items()})
        return out

    def _scheme(self, doc: Document, name: str) -> Any:
        schemes = doc.mapping(doc.mapping(doc.root.get("components"), "components", deref=False)
                              .get("securitySchemes"), "securitySchemes", deref=False)
        return doc.deref(schemes.get(name))

    def _security(self, o: dict[str, Any], n: dict[str, Any], add: Any, where: str, inherit: bool) -> None:
        old, new = self._requirements(self.old, o, inherit), self._requirements(self.new, n, inherit)
        old_open = not old or any(not alt for alt in old)
        new_open = not new or any(not alt for alt in new)
        if old_open and not new_open:
            add("security-added", True, where, "credentials are now required")
        elif new_open and not old_open:
            add("security-removed", False, where, "the operation can now be called without credentials",
                weakens=True)
        elif not old_open and not new_open:
            assert old is not None and new is not None

            def satisfies(demanded: dict[str, frozenset[str]], offered: dict[str, frozenset[str]]) -> bool:
                # Credentials meeting `offered` also meet `demanded` when it asks no more schemes or scopes.
                return all(s in offered and scopes <= offered[s] for s, scopes in demanded.items())

            for alt in old:
                if not any(satisfies(new_alt, alt) for new_alt in new):
                    same_schemes = [a for a in new if set(a) == set(alt)]
                    kind = "security-scopes-added" if same_schemes else "security-requirement-removed"
                    add(kind, True, where, _requirement_text(alt))
            for alt in new:
                if not any(satisfies(old_alt, alt) for old_alt in old):
                    same_schemes = [a for a in old if set(a) == set(alt)]
                    kind = "security-scopes-removed" if same_schemes else "security-requirement-added"
                    add(kind, False, where, _requirement_text(alt), weakens=True)
        used = {s for alt in (old or []) for s in alt} & {s for alt in (new or []) for s in alt}
        for scheme in sorted(used):
            effect = _scheme_effect(self._scheme(self.old, scheme), self._scheme(self.new, scheme))
            if effect:
                add("security-scheme-changed", effect == BOTH, where, f"{quote(scheme)}: {effect}")

    # -- callbacks

    def _callbacks(self, o: Any, n: Any, flipped: bool, add: Any, records: Any, prefix: str) -> None:
        old = self.old.mapping(o, "callbacks", deref=False)
        new = self.new.mapping(n, "callbacks", deref=False)
        for name in new:
            if name not in old:
                add("callback-added", False, f"{prefix}callback {name}")
        for name, o_callback in old.items():
            where = f"{prefix}callback {name}"
            if name not in new:
                add("callback-removed", True, where)
                continue
            oc = self.old.mapping(o_callback, where)
            nc = self.new.mapping(new[name], where)
            for expression in nc:
                if expression not in oc and not expression.startswith("x-"):
                    add("callback-added", False, f"{where} {expression}")
            for expression, o_item in oc.items():
                if expression.startswith("x-"):
                    continue
                label = f"{where} {expression}"
                if expression not in nc:
                    add("callback-removed", True, label)
                    continue
                oi = self.old.mapping(o_item, label)
                ni = self.new.mapping(nc[expression], label)
                for method in METHODS:
                    if method not in oi and method not in ni:
                        continue
                    op_label = f"{label} {method.upper()}"
                    if method not in oi:
                        add("callback-added", False, op_label)
                    elif method not in ni:
                        add("callback-removed", True, op_label)
                    else:
                        # The API calls the client here: what it sends and accepts swap roles.
                        self._operation_body(self.old.mapping(oi[method], op_label),
                                             self.new.mapping(ni[method], op_label), oi, ni, "", "",
                                             not flipped, add, records, op_label + " ")


_SCHEMA_KEYWORDS = frozenset({
    "type", "nullable", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minLength", "maxLength", "pattern", "format", "minItems", "maxItems", "uniqueItems",
    "minProperties", "maxProperties", "minContains", "maxContains", "required", "properties",
    "additionalProperties", "items", "allOf", "anyOf", "oneOf", "not", "default", "deprecated", "readOnly",
    "writeOnly",
})


class _Absent:
    pass


_ABSENT = _Absent()


def _is_null_type(schema: Any) -> bool:
    return isinstance(schema, dict) and _Differ._type_only(schema) and _Differ._types(schema) == {"null"}


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


def _bound_change(name: str, old: tuple[float, bool] | None, new: tuple[float, bool] | None,
                  upper: bool) -> tuple[str, str, str]:
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


def _serialisation(param: dict[str, Any], location: str) -> tuple[Any, ...]:
    # Defaults written out, so `style: form` on a query parameter equals leaving it out.
    style = param.get("style", "form" if location in ("query", "cookie") else "simple")
    explode = param.get("explode", style == "form")
    return style, explode, param.get("allowReserved", False), param.get("allowEmptyValue", False)


def _requirement_text(requirement: dict[str, frozenset[str]]) -> str:
    parts = [quote(name) + (f" [{', '.join(quote(s) for s in sorted(scopes))}]" if scopes else "")
             for name, scopes in sorted(requirement.items())]
    return " and ".join(parts) or "anonymous"


def _scheme_effect(old: Any, new: Any) -> str | None:
    """How a security scheme the operation relies on changed: None, LOOSENED (only flows or scopes added) or
    BOTH (anything a configured client depends on: its type, where the credential goes, a token URL...)."""
    if old == new:
        return None
    if not isinstance(old, dict) or not isinstance(new, dict):
        return BOTH

    def plain(value: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in value.items() if k not in ANNOTATIONS and not k.startswith("x-") and k != "flows"}

    if plain(old) != plain(new):
        return BOTH
    old_flows = old.get("flows") if isinstance(old.get("flows"), dict) else {}
    new_flows = new.get("flows") if isinstance(new.get("flows"), dict) else {}
    effect = None
    for flow, o_flow in old_flows.items():
        n_flow = new_flows.get(flow)
        if not isinstance(o_flow, dict) or not isinstance(n_flow, dict):
            return BOTH
        o_scopes = o_flow.get("scopes") if isinstance(o_flow.get("scopes"), dict) else {}
        n_scopes = n_flow.get("scopes") if isinstance(n_flow.get("scopes"), dict) else {}
        if plain({k: v for k, v in o_flow.items() if k != "scopes"}) != \
                plain({k: v for k, v in n_flow.items() if k != "scopes"}):
            return BOTH
        if set(o_scopes) - set(n_scopes):
            return BOTH
        if set(n_scopes) - set(o_scopes):
            effect = LOOSENED
    if set(new_flows) - set(old_flows):
        effect = LOOSENED
    return effect


def diff_openapi(before: Any, after: Any, budget: Budget | None = None) -> OpenApiDiff:
    """Diff two sides of a change (each None, an object, or YAML/JSON text). Raises MalformedOpenApi, naming
    the side, for anything that must be refused."""
    budget = budget or Budget()
    documents: list[Document | None] = []
    for side, value in (("before", before), ("after", after)):
        try:
            documents.append(_load(value, budget))
        except MalformedOpenApi as error:
            raise MalformedOpenApi(f"{side}: {error}") from None
    old, new = documents
    if old is None and new is None:
        return OpenApiDiff((), (), False)
    # An added (or removed) document is compared with an empty one: every operation in it is added (removed).
    present = new or old
    assert present is not None
    empty = Document({"openapi": present.root["openapi"]})
    differ = _Differ(old or empty, new or empty, budget)
    try:
        return differ.diff()
    except RecursionError:  # pragma: no cover - the depth caps above are meant to make this unreachable
        raise MalformedOpenApi("the documents nest too deeply to compare") from None
