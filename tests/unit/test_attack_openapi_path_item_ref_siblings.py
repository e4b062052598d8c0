"""Red team: a path item may be a `$ref` with fields of its own beside it (OpenAPI: a field in both is
undefined behaviour, a field in one of them is simply the path item's). The differ read only the referenced
item, so an operation, parameters or servers written beside the `$ref` changed nothing: a new DELETE endpoint
owed no per-operation obligation. Beside-fields are now read with the referenced ones, and a field both give
is refused (which one a client reads is undefined)."""

import json

import pytest

from sentinel_domain.openapi.differ import diff_openapi
from sentinel_domain.openapi.errors import MalformedOpenApi

OK = {"responses": {"200": {"description": "ok"}}}


def doc(beside: dict, where: str = "paths") -> str:
    item = {"$ref": "#/components/pathItems/A", **beside}
    document = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {},
        "components": {"pathItems": {"A": {"get": OK}}},
    }
    document[where] = {"/a" if where == "paths" else "hook": item}
    return json.dumps(document)


def kinds(before: str, after: str) -> dict[str, list[str]]:
    return {o.operation: [c.kind for c in o.changes] for o in diff_openapi(before, after).operations}


def test_attack_an_operation_added_beside_a_path_items_ref_is_an_added_operation() -> None:
    assert kinds(doc({}), doc({"delete": OK})) == {"DELETE /a": ["operation-added"]}


def test_attack_parameters_and_servers_beside_a_ref_are_compared() -> None:
    optional = {"name": "x", "in": "query", "required": False, "schema": {"type": "string"}}
    changed = kinds(doc({"parameters": [optional]}), doc({"parameters": [{**optional, "required": True}]}))
    assert list(changed) == ["GET /a"] and changed["GET /a"]
    moved = kinds(
        doc({"servers": [{"url": "https://a.example"}]}), doc({"servers": [{"url": "https://b.example"}]})
    )
    assert moved == {"GET /a": ["servers-changed"]}


def test_attack_a_webhook_operation_beside_a_ref_is_seen_too() -> None:
    assert "POST webhook:hook" in kinds(doc({}, "webhooks"), doc({"post": OK}, "webhooks"))


def test_attack_a_field_both_beside_and_behind_the_ref_is_refused() -> None:
    with pytest.raises(MalformedOpenApi):
        diff_openapi(doc({}), doc({"get": OK}))


def test_documentation_beside_a_ref_changes_nothing() -> None:
    assert kinds(doc({"summary": "one"}), doc({"summary": "two", "description": "d"})) == {}
