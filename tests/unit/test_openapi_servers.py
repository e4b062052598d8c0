"""A change of `servers` is a change of where operations are served (sentinel_domain.openapi.servers): the
document's servers touch every operation, a path item's the operations of that path, an operation's that
operation; a server gone is breaking, servers added are not, descriptions are no change at all; and the
changes derive obligations like any other."""

from __future__ import annotations

import copy

from sentinel_domain.derivation import derive
from sentinel_domain.models import Change, ProjectConfig
from sentinel_domain.openapi import diff_openapi

INFO = {"title": "t", "version": "1"}
OK = {"200": {"description": "ok"}}
OLD = {"url": "https://api.example.com/v1", "description": "production"}
NEW = {"url": "https://api.example.net/v1", "description": "production"}


def document(servers: list | None = None) -> dict:
    doc: dict = {
        "openapi": "3.0.3",
        "info": INFO,
        "paths": {
            "/pets": {"get": {"responses": OK}, "post": {"responses": OK}},
            "/stores": {"get": {"responses": OK}},
        },
    }
    if servers is not None:
        doc["servers"] = servers
    return doc


def server_changes(before: dict, after: dict) -> dict[str, tuple[str, bool, str]]:
    """operation -> (where, breaking, level) of its servers-changed change (one per operation here)."""
    out = {}
    for change in diff_openapi(before, after).changes:
        if change.kind == "servers-changed":
            assert change.operation not in out, change
            out[change.operation] = (change.where, change.breaking, change.level)
    return out


EVERY = {"GET /pets", "POST /pets", "GET /stores"}


def test_a_document_servers_change_touches_every_operation() -> None:
    # Given a document served at one URL, When its servers move to another
    found = server_changes(document([OLD]), document([NEW]))
    # Then every operation reports it, at the document's level, breaking (a client of the old URL fails)
    assert set(found) == EVERY
    assert set(found.values()) == {("document servers", True, "breaking")}


def test_a_path_items_servers_change_touches_that_paths_operations() -> None:
    # Given a path item that declares its own servers
    before = document([OLD])
    after = copy.deepcopy(before)
    before["paths"]["/pets"]["servers"] = [OLD]
    after["paths"]["/pets"]["servers"] = [NEW]
    # When they change, Then exactly the operations of that path report it
    found = server_changes(before, after)
    assert set(found) == {"GET /pets", "POST /pets"}
    assert found["GET /pets"] == ("path servers", True, "breaking")


def test_an_operations_servers_change_touches_that_operation() -> None:
    before = document()
    after = copy.deepcopy(before)
    before["paths"]["/pets"]["post"]["servers"] = [OLD]
    after["paths"]["/pets"]["post"]["servers"] = [OLD, NEW]
    # When an operation gains a server, Then it alone reports it, and adding breaks no client (info)
    assert server_changes(before, after) == {"POST /pets": ("servers", False, "info")}


def test_documentation_of_a_server_is_not_a_change_but_its_variables_are() -> None:
    templated = {
        "url": "https://{region}.example.com",
        "variables": {"region": {"default": "eu", "enum": ["eu", "us"], "description": "where"}},
    }
    redescribed = copy.deepcopy(templated)
    redescribed["description"] = "another description"
    redescribed["variables"]["region"]["description"] = "another"
    # Given servers whose descriptions only changed, Then nothing changed
    assert server_changes(document([templated]), document([redescribed])) == {}
    assert not diff_openapi(document([templated]), document([redescribed])).changes
    # Given a variable's default changed (clients that take defaults call another host), Then it is breaking
    moved = copy.deepcopy(templated)
    moved["variables"]["region"]["default"] = "us"
    assert set(server_changes(document([templated]), document([moved])).values()) == {
        ("document servers", True, "breaking")
    }


def test_servers_reordered_are_a_warning_and_servers_removed_entirely_break() -> None:
    # Given two servers swapped: many clients call the first one, so a person may want to see it
    assert set(server_changes(document([OLD, NEW]), document([NEW, OLD])).values()) == {
        ("document servers", False, "warning")
    }
    # Given the servers removed altogether (operations are then served relative to the document)
    assert set(server_changes(document([OLD]), document()).values()) == {
        ("document servers", True, "breaking")
    }


def test_a_servers_change_derives_obligations_per_operation() -> None:
    # Given a project whose contract rule owes a check per changed operation
    config = ProjectConfig.model_validate(
        {
            "environments": ["staging"],
            "unclassified_policy": "unit-tests",
            "derivation_rules": [{"openapi": "pets-api", "policy_id": "contract", "per": "operation"}],
        }
    )
    change = Change.model_validate(
        {"openapi": [{"name": "pets-api", "before": document([OLD]), "after": document([NEW])}]}
    )
    # When only the document's servers changed
    obligations = derive(change, config)
    # Then every operation owes the contract check, and the reason says where it is now served
    assert {o["scope"] for o in obligations} == {f"pets-api/{op}" for op in EVERY}
    assert all("servers-changed" in o["reason"] and "example.com" in o["reason"] for o in obligations)
    # And a rule taking breaking changes only takes a move, but not a server merely added
    breaking = config.model_copy(
        update={
            "derivation_rules": [
                config.derivation_rules[0].model_copy(update={"when": "breaking"}),
            ]
        }
    )
    added = Change.model_validate(
        {"openapi": [{"name": "pets-api", "before": document([OLD]), "after": document([OLD, NEW])}]}
    )
    assert len(derive(change, breaking)) == 3
    assert derive(added, breaking) == []
