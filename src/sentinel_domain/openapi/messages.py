"""What an operation's messages carry: parameters, request bodies, content by media type, responses and
their headers. Each value they hold is compared as a schema (schemas.py) in the direction it travels."""

from __future__ import annotations

from typing import Any

from .changes import _render
from .document import _TEMPLATE_PARAM, ANNOTATIONS, Document
from .errors import MalformedOpenApi
from .schemas import _SchemaDiffer


class _MessageDiffer(_SchemaDiffer):
    """Parameters, request bodies, content, responses and headers of one operation pair."""

    # -- parameters

    def _parameter_map(
        self, doc: Document, operation: dict[str, Any], item: dict[str, Any], template: str
    ) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
        positions = {name: index for index, name in enumerate(_TEMPLATE_PARAM.findall(template))}
        found: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        for source in (item.get("parameters"), operation.get("parameters")):  # the operation's win
            for raw in doc.sequence(source, "parameters"):
                param = doc.mapping(raw, "a parameter")
                name, where = param.get("name"), param.get("in")
                if not isinstance(name, str) or where not in ("query", "header", "path", "cookie"):
                    raise MalformedOpenApi(
                        "a parameter needs a string name and in: query, header, path or cookie"
                    )
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

    def _parameters(
        self,
        o: dict[str, Any],
        n: dict[str, Any],
        o_item: dict[str, Any],
        n_item: dict[str, Any],
        o_template: str,
        n_template: str,
        flipped: bool,
        direction: str,
        add: Any,
        records: Any,
        prefix: str,
    ) -> None:
        old = self._parameter_map(self.old, o, o_item, o_template)
        new = self._parameter_map(self.new, n, n_item, n_template)
        for key, (label, param) in new.items():
            if key not in old:
                required = key[0] == "path" or param.get("required") is True
                add(
                    "parameter-added",
                    required and not flipped,
                    prefix + label,
                    "required" if required else "optional",
                )
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
                add(
                    "parameter-deprecated" if n_param.get("deprecated") else "parameter-undeprecated",
                    False,
                    where,
                )
            self._value_definition(o_param, n_param, direction, where, add, records, "parameter", key[0])

    def _value_definition(
        self,
        o: dict[str, Any],
        n: dict[str, Any],
        direction: str,
        where: str,
        add: Any,
        records: Any,
        what: str,
        location: str,
    ) -> None:
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
            add(
                f"{what}-definition-changed",
                True,
                where,
                f"serialisation {_render(o_style)} -> {_render(n_style)}",
            )
        done = {
            "name",
            "in",
            "required",
            "deprecated",
            "schema",
            "content",
            "style",
            "explode",
            "allowReserved",
            "allowEmptyValue",
        }
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

    def _request_body(
        self, o: Any, n: Any, flipped: bool, direction: str, add: Any, records: Any, prefix: str
    ) -> None:
        where = prefix + "request body"
        ob = self.old.mapping(o, where) if o is not None else None
        nb = self.new.mapping(n, where) if n is not None else None
        if nb is None:
            if ob is not None:
                add("request-body-removed", True, where)
            return
        if ob is None:
            required = nb.get("required") is True
            add("request-body-added", required and not flipped, where, "required" if required else "optional")
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

    def _responses(
        self, o: Any, n: Any, flipped: bool, direction: str, add: Any, records: Any, prefix: str
    ) -> None:
        old = {
            str(k).upper(): v
            for k, v in self.old.mapping(o, "responses", deref=False).items()
            if not str(k).startswith("x-")
        }
        new = {
            str(k).upper(): v
            for k, v in self.new.mapping(n, "responses", deref=False).items()
            if not str(k).startswith("x-")
        }

        def effective(responses: dict[str, Any], code: str) -> Any:
            # A code no response names is answered by its range (2XX), then by default.
            for candidate in (
                code,
                f"{code[0]}XX" if len(code) == 3 and code[0].isdigit() else None,
                "DEFAULT",
            ):
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
                add("response-removed", flipped or success, where, "a success response" if success else "")
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

    def _headers(
        self, o: Any, n: Any, flipped: bool, direction: str, where: str, add: Any, records: Any
    ) -> None:
        def by_name(doc: Document, value: Any) -> dict[str, tuple[str, Any]]:
            return {
                k.lower(): (k, v)
                for k, v in doc.mapping(value, f"{where} headers", deref=False).items()
                if k.lower() != "content-type"
            }

        old, new = by_name(self.old, o), by_name(self.new, n)
        for key, (name, value) in new.items():
            if key not in old:
                header = self.new.mapping(value, f"{where} header")
                add(
                    "response-header-added",
                    flipped and header.get("required") is True,
                    f"{where} header {name}",
                )
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


def _serialisation(param: dict[str, Any], location: str) -> tuple[Any, ...]:
    # Defaults written out, so `style: form` on a query parameter equals leaving it out.
    style = param.get("style", "form" if location in ("query", "cookie") else "simple")
    explode = param.get("explode", style == "form")
    return style, explode, param.get("allowReserved", False), param.get("allowEmptyValue", False)
