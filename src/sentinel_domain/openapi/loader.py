"""Reading one side of a change safely: an inline object, JSON text or YAML text, copied or built under the
caps (size, depth, nodes, aliases expanded), then checked to be OpenAPI 3.0 or 3.1 with every `$ref` internal.

PyYAML is imported lazily, and only its safe building blocks: every handler imports the core at cold start,
few read YAML."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from .document import Document
from .errors import MalformedOpenApi, quote
from .limits import MAX_DEPTH, MAX_DOCUMENT_CHARS, MAX_NODES, Budget

_I_JSON_MAX = 2**53 - 1
# A JSON string, unrolled and possessive so that even an unterminated one is scanned once, linearly.
_JSON_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"')


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
            raise MalformedOpenApi(
                f"the integer {value} is outside the range JSON carries exactly; send the "
                "document as text instead of an inline object"
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise MalformedOpenApi("the document holds a number that is not finite (NaN or infinity)")
        return value
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise MalformedOpenApi(
        f"the document holds a value of type {type(value).__name__}, which JSON cannot carry"
    )


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


_SCALAR_TAGS = frozenset(
    {
        "tag:yaml.org,2002:null",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:str",
        "tag:yaml.org,2002:timestamp",
    }
)
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
        self.resolver: Any = Resolver()  # its stubs leave resolve() untyped
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
                    self.resolver.resolve(self.scalar_node, event.value, event.implicit), event
                )
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
                self._add_scalar(stack, value)
            elif kind is alias_event:
                self._add_alias(stack, result, event)
            elif isinstance(event, e.MappingStartEvent | e.SequenceStartEvent):
                self._open_collection(stack, event)
            elif isinstance(event, e.MappingEndEvent | e.SequenceEndEvent):
                self._close_collection(stack, result)
            elif isinstance(event, e.DocumentStartEvent) and result:
                raise MalformedOpenApi("the text holds more than one YAML document")
        self.counter.add(pending)
        return result[0] if result else None

    @staticmethod
    def _add_scalar(stack: list[_Frame], value: Any) -> None:
        """A scalar (counted already) into the mapping or list being built."""
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

    def _add_alias(self, stack: list[_Frame], result: list[Any], event: Any) -> None:
        """An alias counts as the full size (and height) of the anchored value it stands for."""
        if event.anchor not in self.anchors:
            raise MalformedOpenApi(f"the YAML alias {quote(event.anchor)} has no anchor")
        known = self.anchors[event.anchor]
        if known is None:
            raise MalformedOpenApi(f"the YAML alias {quote(event.anchor)} refers to itself")
        value, size, height = known
        _check_depth(len(stack) + height)
        self.counter.add(size)
        self._attach(stack, result, value, size, height)

    def _open_collection(self, stack: list[_Frame], event: Any) -> None:
        """A mapping or a sequence starts: its tag must be a plain one, its depth within the cap; an anchor on
        it is marked as being built until it ends."""
        is_map = isinstance(event, self.events.MappingStartEvent)
        tag = event.tag
        if tag not in (None, "!", _MAP_TAG if is_map else _SEQ_TAG):
            raise MalformedOpenApi(f"the YAML tag {quote(tag)} is not allowed (only JSON-like values are)")
        depth = len(stack) + 1
        _check_depth(depth)
        self.counter.add(1)
        if event.anchor is not None:
            self.anchors[event.anchor] = None
        stack.append(_Frame("map" if is_map else "seq", event.anchor, depth))

    def _close_collection(self, stack: list[_Frame], result: list[Any]) -> None:
        frame = stack.pop()
        value = self._finish(frame)
        if frame.anchor is not None:
            self.anchors[frame.anchor] = (value, frame.size, frame.height)
        self._attach(stack, result, value, frame.size, frame.height, counted=True)

    def _attach(
        self,
        stack: list[_Frame],
        result: list[Any],
        value: Any,
        size: int,
        height: int,
        counted: bool = False,
    ) -> None:
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


def _event_parser(text: str) -> Any:
    try:  # libyaml's event parser is ~20x faster; the pure-Python one gives the same events
        from yaml._yaml import CParser

        return CParser(text)
    except ImportError:  # pragma: no cover - depends on how PyYAML was built
        from yaml.loader import SafeLoader

        return SafeLoader(text)


def _yaml_events(text: str) -> Iterator[Any]:
    from yaml.events import StreamEndEvent, StreamStartEvent

    parser = _event_parser(text)
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
        raise MalformedOpenApi(
            f"the document is {len(text)} characters long; at most {MAX_DOCUMENT_CHARS} are read"
        )
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
            json_error = (
                f"the document is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
            )
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
        raise MalformedOpenApi(
            f"the document is not valid YAML: {error.problem or error.context}{where}"
        ) from None
    except (yaml.YAMLError, UnicodeError, ValueError, OverflowError) as error:
        raise MalformedOpenApi(
            json_error or f"the document is not valid YAML: {type(error).__name__}"
        ) from None


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
        raise MalformedOpenApi(
            f"a document must be an object, YAML or JSON text, or null, not {type(value).__name__}"
        )
    if not isinstance(root, dict):
        raise MalformedOpenApi("the document is not a mapping (an OpenAPI document is an object)")
    version = root.get("openapi")
    if isinstance(version, float):  # YAML reads `openapi: 3.1` as a number
        version = repr(version)
    if not isinstance(version, str) or not re.match(r"3\.[01](\.\d+)?(-[0-9A-Za-z.-]+)?\Z", version):
        if "swagger" in root:
            raise MalformedOpenApi("Swagger 2.0 documents are not read; convert the document to OpenAPI 3")
        raise MalformedOpenApi(
            f"the document's openapi field must name version 3.0 or 3.1, not {quote(version)}"
        )
    root["openapi"] = version
    return Document(root)  # checks every reference now, so a bad one is refused whatever the diff reaches


def read_text(text: str) -> Any:
    """YAML or JSON text as plain JSON values, read under a document's caps (size, depth, nodes with YAML
    aliases expanded, duplicate keys refused), for other files people write in YAML (`sentinel apply`'s).
    Not checked to be OpenAPI. Raises MalformedOpenApi."""
    return _parse_text(text, _Counter(Budget()))
