"""GitHub's published descriptions of its REST API and its webhooks, as the fake GitHub checks them.

The descriptions are the npm packages `@octokit/openapi` (generated/api.github.com.json, OpenAPI 3.0.3) and
`@octokit/openapi-webhooks` (generated/api.github.com.json, OpenAPI 3.1), pinned in package.json and
installed by `make test` into node_modules/. Each is loaded once per test session (13 MB and 5 MB of JSON):
`rest_description()` and `webhook_description()` are cached.

What a request must satisfy to be admitted (`RestDescription.check_request`):
- its path matches a documented path template and its method is documented there;
- its path and query parameters are documented ones, the required ones are present, and each value fits
  the parameter's schema (query strings are read as the schema's type: "1" is an integer);
- its JSON body validates against the operation's request body schema, with every `$ref` resolved in the
  document, and names no property the schema does not declare (GitHub ignores such a property, so a typo
  in Sentinel would silently not do what it meant: we call it a violation).
The fake's answers are held to the documented response schema of their status (`check_response`).

OpenAPI 3.0's `nullable: true` is not JSON Schema: it is rewritten once, at load, into a type list or an
`anyOf` with null, and the document is then read as JSON Schema draft 7 (where `$ref` hides its siblings,
as in OpenAPI 3.0). The webhook document is OpenAPI 3.1, that is JSON Schema 2020-12 already.

`instance(schema)` builds the smallest document a schema admits (required properties only, the first enum
value, the first `oneOf` branch that validates): the fake fills the fields no test cares about with it and
sets the meaningful ones itself, and what it answers is still validated whole."""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry
from referencing.jsonschema import DRAFT7, DRAFT202012

REPO = Path(__file__).resolve().parents[2]
NODE_MODULES = REPO / "node_modules"
REST_FILE = NODE_MODULES / "@octokit" / "openapi" / "generated" / "api.github.com.json"
WEBHOOKS_FILE = NODE_MODULES / "@octokit" / "openapi-webhooks" / "generated" / "api.github.com.json"
REST_URI = "urn:github:rest"
WEBHOOKS_URI = "urn:github:webhooks"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def require_descriptions() -> None:
    """Skip (saying why) when GitHub's descriptions are not installed, except on CI (CI=true), where a test
    that cannot check what it claims to check must fail instead."""
    missing = [str(p) for p in (REST_FILE, WEBHOOKS_FILE) if not p.exists()]
    if not missing:
        return
    reason = (
        f"GitHub's REST and webhook descriptions are not installed ({', '.join(missing)}): run `make test`"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " (CI=true: the fake GitHub must check every request, so this fails)")
    pytest.skip(reason)


def _pointer(*parts: str) -> str:
    return "#/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def _nullable_to_json_schema(node: Any) -> None:
    """Rewrite OpenAPI 3.0's `nullable: true` in place, everywhere in `node`."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, list):
            stack.extend(current)
            continue
        if not isinstance(current, dict):
            continue
        if current.pop("nullable", None) is True:
            if "type" in current and "$ref" not in current:
                current["type"] = [current["type"], "null"]
                if "enum" in current and None not in current["enum"]:
                    current["enum"] = [*current["enum"], None]
            else:
                inner = dict(current)
                current.clear()
                current["anyOf"] = [inner, {"type": "null"}]
        stack.extend(current.values())


@dataclass(frozen=True)
class Operation:
    method: str
    template: str
    pattern: re.Pattern[str]
    literal: int  # literal characters in the template: the most specific match wins
    spec: dict[str, Any]
    parameters: tuple[dict[str, Any], ...]

    @property
    def operation_id(self) -> str:
        return str(self.spec.get("operationId", ""))


class Description:
    """A description loaded as one JSON Schema resource, validators built against it by pointer."""

    def __init__(self, document: dict[str, Any], uri: str, draft: Any, validator: Any) -> None:
        self.document = document
        self.uri = uri
        self._validator = validator
        self.registry: Registry[Any] = Registry().with_resource(uri, draft.create_resource(document))
        self._validators: dict[str, Any] = {}

    def at(self, pointer: str) -> Any:
        node: Any = self.document
        for part in pointer.lstrip("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def resolve(self, schema: Any) -> Any:
        while isinstance(schema, dict) and "$ref" in schema:
            schema = self.at(schema["$ref"])
        return schema

    def checker(self, schema: Any) -> Any:
        """A validator for a schema taken out of the document: its `#/...` references resolve in it."""
        return self._validator(schema, registry=self.registry, _resolver=self.registry.resolver(self.uri))

    def validator(self, pointer: str) -> Any:
        if pointer not in self._validators:
            self._validators[pointer] = self._validator({"$ref": self.uri + pointer}, registry=self.registry)
        return self._validators[pointer]

    def errors(self, pointer: str, value: Any) -> list[str]:
        found = sorted(self.validator(pointer).iter_errors(value), key=lambda e: list(e.absolute_path))
        return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:300]}" for e in found[:5]]

    def undeclared(self, schema: Any, value: Any, where: str = "") -> Iterator[str]:
        """Properties of `value` that `schema` does not declare (followed through properties and items)."""
        schema = self.resolve(schema)
        if not isinstance(schema, dict):
            return
        if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
            declared = schema["properties"]
            for key, item in value.items():
                if key not in declared:
                    yield f"{where or '(root)'}: property {key!r} is not in GitHub's description"
                else:
                    yield from self.undeclared(declared[key], item, f"{where}/{key}")
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for index, item in enumerate(value):
                yield from self.undeclared(schema["items"], item, f"{where}/{index}")

    # ---- the smallest admitted instance --------------------------------------------------------------------

    def instance(self, schema: Any) -> Any:
        schema = self.resolve(schema)
        if not isinstance(schema, dict):
            return None
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return next((v for v in schema["enum"] if v is not None), schema["enum"][0])
        if "allOf" in schema:
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                built = self.instance(part)
                if isinstance(built, dict):
                    merged.update(built)
            return merged
        for combinator in ("oneOf", "anyOf"):
            if combinator in schema:
                return self._first_fitting(schema, schema[combinator])
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            kind = kinds[0] if kinds else "null"
        return self._of_type(kind, schema)

    def _first_fitting(self, schema: dict[str, Any], branches: list[Any]) -> Any:
        checker = self.checker(schema)
        candidates = [self.instance(b) for b in branches if self.resolve(b) != {"type": "null"}]
        for candidate in candidates:
            if checker.is_valid(candidate):
                return candidate
        return candidates[0] if candidates else None

    def _of_type(self, kind: Any, schema: dict[str, Any]) -> Any:
        if kind == "object" or (kind is None and "properties" in schema):
            properties = schema.get("properties", {})
            return {name: self.instance(properties.get(name, {})) for name in schema.get("required", [])}
        if kind == "array":
            return [self.instance(schema.get("items", {})) for _ in range(schema.get("minItems", 0))]
        if kind == "string":
            return _string(schema)
        if kind == "integer":
            return int(schema.get("minimum", 1))
        if kind == "number":
            return float(schema.get("minimum", 1))
        if kind == "boolean":
            return False
        return None


def _string(schema: Mapping[str, Any]) -> str:
    fmt = schema.get("format")
    if fmt == "date-time":
        return "2026-01-01T00:00:00Z"
    if fmt in {"uri", "uri-template", "url"}:
        return "https://github.invalid/fake"
    if fmt == "email":
        return "fake@github.invalid"
    return "x" * max(1, int(schema.get("minLength", 1)))


class RestDescription(Description):
    def __init__(self, document: dict[str, Any]) -> None:
        super().__init__(document, REST_URI, DRAFT7, jsonschema.Draft7Validator)
        self.operations = self._index()

    def _index(self) -> list[Operation]:
        operations = []
        for template, item in self.document["paths"].items():
            shared = item.get("parameters", [])
            for method in METHODS:
                if method not in item:
                    continue
                spec = item[method]
                parameters = tuple(self.resolve(p) for p in [*shared, *spec.get("parameters", [])])
                multi = {p["name"] for p in parameters if p.get("in") == "path" and p.get("x-multi-segment")}

                def group(match: re.Match[str], multi: set[str] = multi) -> str:
                    name = match.group(1)
                    return f"(?P<{_group(name)}>{'.+' if name in multi else '[^/]+'})"

                regex = re.sub(
                    r"\{([^}]+)\}", group, re.escape(template).replace(r"\{", "{").replace(r"\}", "}")
                )
                literal = len(re.sub(r"\{[^}]+\}", "", template))
                operations.append(
                    Operation(method.upper(), template, re.compile(f"^{regex}$"), literal, spec, parameters)
                )
        return operations

    def match(self, method: str, path: str) -> tuple[Operation | None, dict[str, str], list[str]]:
        """The documented operation for `method path`, its path parameters (decoded), and the violations
        when there is none."""
        found = [(op, m) for op in self.operations if (m := op.pattern.match(path))]
        if not found:
            return None, {}, [f"{method} {path}: no path in GitHub's REST description matches"]
        same_method = [(op, m) for op, m in found if op.method == method]
        if not same_method:
            templates = sorted({op.template for op, _ in found})
            return None, {}, [f"{method} {path}: GitHub documents no {method} on {templates}"]
        op, m = max(same_method, key=lambda pair: pair[0].literal)
        names = {_group(p["name"]): p["name"] for p in op.parameters if p.get("in") == "path"}
        values = {names[k]: urllib.parse.unquote(v) for k, v in m.groupdict().items()}
        return op, values, []

    def check_request(
        self, method: str, path: str, query: Mapping[str, list[str]], body: bytes | None
    ) -> tuple[Operation | None, dict[str, str], list[str]]:
        op, path_values, violations = self.match(method, path)
        if op is None:
            return None, {}, violations
        where = f"{method} {op.template}"
        declared = {(p["in"], p["name"]): p for p in op.parameters}
        for name, values in query.items():
            parameter = declared.get(("query", name))
            if parameter is None:
                violations.append(f"{where}: query parameter {name!r} is not documented")
                continue
            violations += self._parameter_errors(where, parameter, values[-1])
        for (place, name), parameter in declared.items():
            if place == "path":
                violations += self._parameter_errors(where, parameter, path_values.get(name))
            elif place == "query" and parameter.get("required") and name not in query:
                violations.append(f"{where}: required query parameter {name!r} is missing")
        violations += self._body_errors(where, op, body)
        return op, path_values, violations

    def _parameter_errors(self, where: str, parameter: dict[str, Any], raw: str | None) -> list[str]:
        if raw is None:
            return [f"{where}: required parameter {parameter['name']!r} is missing"]
        schema = self.resolve(parameter.get("schema", {}))
        value: Any = raw
        kinds = schema.get("type") if isinstance(schema, dict) else None
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if "integer" in kinds and re.fullmatch(r"-?\d+", raw):
            value = int(raw)
        elif "boolean" in kinds and raw in {"true", "false"}:
            value = raw == "true"
        checker = self.checker(schema)
        return [
            f"{where}: parameter {parameter['name']!r}={raw!r}: {e.message}"
            for e in checker.iter_errors(value)
        ]

    def _body_errors(self, where: str, op: Operation, body: bytes | None) -> list[str]:
        request_body = self.resolve(op.spec.get("requestBody"))
        if not request_body:
            return [f"{where}: GitHub documents no request body, one was sent"] if body else []
        if not body:
            return [f"{where}: the request body is required"] if request_body.get("required") else []
        try:
            value = json.loads(body)
        except ValueError:
            return [f"{where}: the request body is not JSON"]
        if "application/json" not in request_body.get("content", {}):
            return [f"{where}: GitHub documents no JSON request body here"]
        pointer = _pointer(
            "paths", op.template, op.method.lower(), "requestBody", "content", "application/json"
        )
        if "$ref" in op.spec["requestBody"]:
            pointer = op.spec["requestBody"]["$ref"] + "/content/application~1json"
        errors = [f"{where}: body {e}" for e in self.errors(pointer + "/schema", value)]
        schema = request_body["content"]["application/json"]["schema"]
        return errors + [f"{where}: body {e}" for e in self.undeclared(schema, value)]

    def check_response(self, op: Operation, status: int, value: Any) -> list[str]:
        """The fake's own answer, held to the schema GitHub documents for that status."""
        responses = op.spec.get("responses", {})
        key = str(status) if str(status) in responses else "default" if "default" in responses else None
        where = f"{op.method} {op.template} answered {status}"
        if key is None and status >= 400:
            # GitHub documents few error statuses per operation, yet answers 401 (bad credentials), 404 and
            # 422 anywhere, always in its basic error shape: the fake's error bodies are held to that.
            return [f"{where}: {e}" for e in self.errors("#/components/schemas/basic-error", value)]
        if key is None:
            return [f"{where}: GitHub documents no such status for this operation"]
        response = self.resolve(responses[key])
        content = response.get("content", {}).get("application/json")
        if content is None or "schema" not in content or value is None:
            return []
        base = responses[key].get("$ref") or _pointer(
            "paths", op.template, op.method.lower(), "responses", key
        )
        return [f"{where}: {e}" for e in self.errors(base + "/content/application~1json/schema", value)]

    def response_instance(self, op: Operation, status: int) -> Any:
        response = self.resolve(op.spec["responses"][str(status)])
        return self.instance(response["content"]["application/json"]["schema"])


class WebhookDescription(Description):
    def __init__(self, document: dict[str, Any]) -> None:
        super().__init__(document, WEBHOOKS_URI, DRAFT202012, jsonschema.Draft202012Validator)

    def pointer(self, event: str, action: str) -> str:
        name = f"{event}-{action}".replace("_", "-")
        if name not in self.document["webhooks"]:
            raise KeyError(f"GitHub's webhook description has no {name}")
        return _pointer("webhooks", name, "post", "requestBody", "content", "application/json", "schema")

    def payload_instance(self, event: str, action: str) -> Any:
        return self.instance(self.at(self.pointer(event, action)))

    def check_payload(self, event: str, action: str, payload: Any) -> list[str]:
        return [f"{event}.{action} payload {e}" for e in self.errors(self.pointer(event, action), payload)]


def _group(name: str) -> str:
    return "p_" + re.sub(r"\W", "_", name)


@cache
def rest_description() -> RestDescription:
    require_descriptions()
    document = json.loads(REST_FILE.read_bytes())
    _nullable_to_json_schema(document)
    return RestDescription(document)


@cache
def webhook_description() -> WebhookDescription:
    require_descriptions()
    return WebhookDescription(json.loads(WEBHOOKS_FILE.read_bytes()))
