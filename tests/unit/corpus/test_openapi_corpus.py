"""sentinel_domain.openapi and sentinel_domain.derivation against the real-world OpenAPI corpus
(shared/corpus/openapi, see shared/corpus/SOURCES.md): six before/after pairs in YAML and JSON, OpenAPI 3.0
and 3.1.

Every expected row below was decided by reading each pair side by side (`diff old new`, and for the JSON
pairs their `python -m json.tool` form), then checking the verdict against the rules in docs/ingestion.md;
never by copying the differ's output unread. The table in docs/ingestion.md summarises the same rows.
The corpus is read in place and never copied into the repository.
"""

from __future__ import annotations

import time

import pytest

from sentinel_domain.derivation import derive
from sentinel_domain.models import Change, ProjectConfig
from sentinel_domain.openapi import diff_openapi
from support.paths import CORPUS

OPENAPI = CORPUS / "openapi"

if not OPENAPI.is_dir():
    _reason = f"OpenAPI corpus not found at {OPENAPI}; skipping the corpus tests"
    print(_reason)
    pytest.skip(_reason, allow_module_level=True)

# pair -> operation ("" for the document as a whole) -> (status, [(kind, where, breaking, detail)]), in the
# order the diff reports them. operation-added/-removed, the one change of an added/removed operation, are
# implied by the status.
EXPECTED: dict[str, dict[str, tuple[str, list[tuple[str, str, bool, str]]]]] = {
    "01-petstore-mixed-breaking": {
        # openapi-diff's petstore pair (read side by side with `diff`): POST /pet/{petId} became GET;
        # POST /pet gained a required query param `tags`; PUT /pet's body lost its XML media type and
        # `required` (an inline body replaced the $ref); Pet gained `newField`, Category renamed `name` to
        # `newCatFeild`, User lost `phone` and gained `newUserFeild`: every operation reading or sending
        # them changed, each removal breaking. Login lost the required `password`, a response header was
        # renamed, another retyped (string/date-time -> integer). Only summaries changed in uploadImage;
        # inventory, order and DELETE /user/{username} did not change.
        "DELETE /pet/{petId}": (
            "changed",
            [
                ("parameter-added", "parameter header newHeaderParam", False, "optional"),
            ],
        ),
        "GET /pet/findByStatus": (
            "changed",
            [
                ("parameter-deprecated", "parameter query status", False, ""),
                (
                    "schema-property-added",
                    "response 200 application/xml: [].newField",
                    False,
                    "property added",
                ),
                (
                    "schema-property-added",
                    "response 200 application/xml: [].category.newCatFeild",
                    False,
                    "property added",
                ),
                (
                    "schema-property-removed",
                    "response 200 application/xml: [].category.name",
                    True,
                    "property removed",
                ),
                (
                    "schema-property-added",
                    "response 200 application/json: [].newField",
                    False,
                    "property added",
                ),
                (
                    "schema-property-added",
                    "response 200 application/json: [].category.newCatFeild",
                    False,
                    "property added",
                ),
                (
                    "schema-property-removed",
                    "response 200 application/json: [].category.name",
                    True,
                    "property removed",
                ),
            ],
        ),
        "GET /pet/findByTags": (
            "changed",
            [
                (
                    "schema-property-added",
                    "response 200 application/xml: [].newField",
                    False,
                    "property added",
                ),
                (
                    "schema-property-added",
                    "response 200 application/xml: [].category.newCatFeild",
                    False,
                    "property added",
                ),
                (
                    "schema-property-removed",
                    "response 200 application/xml: [].category.name",
                    True,
                    "property removed",
                ),
                (
                    "schema-property-added",
                    "response 200 application/json: [].newField",
                    False,
                    "property added",
                ),
                (
                    "schema-property-added",
                    "response 200 application/json: [].category.newCatFeild",
                    False,
                    "property added",
                ),
                (
                    "schema-property-removed",
                    "response 200 application/json: [].category.name",
                    True,
                    "property removed",
                ),
            ],
        ),
        "GET /pet/{petId}": ("added", []),
        "GET /user/login": (
            "changed",
            [
                ("parameter-removed", "parameter query password", True, ""),
                ("response-header-added", "response 200 header X-Rate-Limit-New", False, ""),
                ("response-header-removed", "response 200 header X-Rate-Limit", True, ""),
                (
                    "schema-type-changed",
                    "response 200 header X-Expires-After",
                    True,
                    'type "string" -> "integer"',
                ),
                (
                    "schema-constraint-loosened",
                    "response 200 header X-Expires-After",
                    True,
                    'format "date-time" -> absent',
                ),
            ],
        ),
        "GET /user/logout": (
            "changed",
            [
                ("operation-deprecated", "", False, ""),
            ],
        ),
        "GET /user/{username}": (
            "changed",
            [
                (
                    "schema-property-added",
                    "response 200 application/xml: newUserFeild",
                    False,
                    "property added",
                ),
                ("schema-property-removed", "response 200 application/xml: phone", True, "property removed"),
                (
                    "schema-property-added",
                    "response 200 application/json: newUserFeild",
                    False,
                    "property added",
                ),
                ("schema-property-removed", "response 200 application/json: phone", True, "property removed"),
            ],
        ),
        "POST /pet": (
            "changed",
            [
                ("parameter-added", "parameter query tags", True, "required"),
                ("schema-property-added", "request body application/json: newField", False, "property added"),
                (
                    "schema-property-added",
                    "request body application/json: category.newCatFeild",
                    False,
                    "property added",
                ),
                (
                    "schema-property-removed",
                    "request body application/json: category.name",
                    True,
                    "property removed",
                ),
                ("schema-property-added", "request body application/xml: newField", False, "property added"),
                (
                    "schema-property-added",
                    "request body application/xml: category.newCatFeild",
                    False,
                    "property added",
                ),
                (
                    "schema-property-removed",
                    "request body application/xml: category.name",
                    True,
                    "property removed",
                ),
            ],
        ),
        "POST /pet/{petId}": ("removed", []),
        "POST /user": (
            "changed",
            [
                (
                    "schema-property-added",
                    "request body application/json: newUserFeild",
                    False,
                    "property added",
                ),
                ("schema-property-removed", "request body application/json: phone", True, "property removed"),
            ],
        ),
        "POST /user/createWithArray": (
            "changed",
            [
                (
                    "schema-property-added",
                    "request body application/json: [].newUserFeild",
                    False,
                    "property added",
                ),
                (
                    "schema-property-removed",
                    "request body application/json: [].phone",
                    True,
                    "property removed",
                ),
            ],
        ),
        "POST /user/createWithList": (
            "changed",
            [
                (
                    "schema-property-added",
                    "request body application/json: [].newUserFeild",
                    False,
                    "property added",
                ),
                (
                    "schema-property-removed",
                    "request body application/json: [].phone",
                    True,
                    "property removed",
                ),
            ],
        ),
        "PUT /pet": (
            "changed",
            [
                ("request-body-became-optional", "request body", False, ""),
                ("schema-property-added", "request body application/json: newField", False, "property added"),
                (
                    "schema-property-added",
                    "request body application/json: category.newCatFeild",
                    False,
                    "property added",
                ),
                (
                    "schema-property-removed",
                    "request body application/json: category.name",
                    True,
                    "property removed",
                ),
                ("media-type-removed", "request body application/xml", True, ""),
            ],
        ),
        "PUT /user/{username}": (
            "changed",
            [
                (
                    "schema-property-added",
                    "request body application/json: newUserFeild",
                    False,
                    "property added",
                ),
                ("schema-property-removed", "request body application/json: phone", True, "property removed"),
            ],
        ),
    },
    "02-oasdiff-params-schemas-security": {
        # oasdiff's README pair. The root `security: [bearerAuth]` is gone, so every operation that inherited
        # it can now be called without credentials (weakened, not breaking a client). security-score lost
        # three params, `image` became `not: {...}` (type, pattern and format dropped: loosened; `not` added:
        # tightened), `token` maxLength 29 -> 30; responses 200/201/400 became `default` without content (200
        # had none: unchanged; 201 and 400 lost their bodies). The path-level `domain` moved into the
        # operation: no change. /register went from bearerAuth-or-OAuth to OAuth with scope write:pets, and
        # OAuth's token and authorization URLs changed. In /subscribe's callback the API sends `message` as a
        # string now (breaking the receiver), `encoding` changed, and `bye` no longer sends a body. The
        # document's servers lost "tufin.com" (every operation is served elsewhere: breaking);
        # install-command's path item and operation gained servers of their own (added: info). x- extensions
        # are not changes.
        "GET /api/{domain}/{project}/badges/security-score": (
            "changed",
            [
                ("operation-id-changed", "", False, '"GetSecurityScores" -> "GetSecurityScore"'),
                ("parameter-removed", "parameter query filter", True, ""),
                ("parameter-removed", "parameter header user", True, ""),
                ("parameter-removed", "parameter cookie test", True, ""),
                ("schema-type-changed", "parameter query image", False, 'type "string" -> any'),
                (
                    "schema-constraint-loosened",
                    "parameter query image",
                    False,
                    'pattern "^(?:[\\\\w-./:]+)$" -> absent',
                ),
                (
                    "schema-constraint-loosened",
                    "parameter query image",
                    False,
                    'format "general string" -> absent',
                ),
                ("schema-constraint-tightened", "parameter query image", True, "not added"),
                ("schema-constraint-loosened", "parameter query token", False, "maxLength 29 -> 30"),
                ("media-type-removed", "response 201 application/xml", True, ""),
                ("media-type-removed", "response 400 application/json", True, ""),
                ("response-added", "response default", False, ""),
                ("security-removed", "", False, "the operation can now be called without credentials"),
                ("servers-changed", "document servers", True, 'removed or changed "tufin.com"'),
            ],
        ),
        "GET /api/{domain}/{project}/install-command": (
            "changed",
            [
                ("parameter-added", "parameter header name", False, "optional"),
                ("schema-enum-changed", "parameter path project", False, 'values added "test1"'),
                ("parameter-removed", "parameter header network-policies", True, ""),
                ("security-removed", "", False, "the operation can now be called without credentials"),
                ("servers-changed", "document servers", True, 'removed or changed "tufin.com"'),
                ("servers-changed", "path servers", False, 'added "https://api.oasdiff.com"'),
                (
                    "servers-changed",
                    "servers",
                    False,
                    'added "https://api.oasdiff.com", "https://www.oasdiff.com"',
                ),
            ],
        ),
        "POST /register": (
            "changed",
            [
                ("security-requirement-removed", "", True, '"bearerAuth"'),
                ("security-scopes-added", "", True, '"OAuth"'),
                ("security-scheme-changed", "", True, '"OAuth": both'),
                ("callback-added", "callback myEvent", False, ""),
                ("servers-changed", "document servers", True, 'removed or changed "tufin.com"'),
            ],
        ),
        "POST /subscribe": (
            "changed",
            [
                ("security-removed", "", False, "the operation can now be called without credentials"),
                ("callback-added", "callback myEvent {$request.body#/callbackUrl}", False, ""),
                (
                    "schema-type-changed",
                    "callback myEvent hi POST request body application/json: message",
                    True,
                    'type "number" -> "string"',
                ),
                (
                    "media-type-definition-changed",
                    "callback myEvent hi POST request body application/json",
                    True,
                    "encoding changed",
                ),
                ("request-body-removed", "callback myEvent bye POST request body", True, ""),
                ("servers-changed", "document servers", True, 'removed or changed "tufin.com"'),
            ],
        ),
    },
    "03-endpoint-removed": {
        # GET /pet/{petId2} deleted; GET /pet/{petId} untouched. (The old file holds both, which the
        # specification forbids; the diff pairs operations by exact template first, so that is not refused.)
        "GET /pet/{petId2}": ("removed", []),
    },
    "04-oas31-webhooks-schema-changes": {
        # OAS 3.1. SOURCES.md says "no paths changes", but GET /test's response is TestSchema, which changes a
        # lot: const "active" -> "inactive" (breaking a reader), minContains 1 -> 2 (tightened: fine for a
        # reader), maxContains 5 -> 10 (loosened: breaking), items boolean -> string, and twelve keywords the
        # diff does not model (prefixItems, contains, patternProperties, ...), each breaking since its effect
        # is unproved. $id, $schema, $comment, $defs and examples are annotations. Webhook orderCreated was
        # replaced by paymentReceived; newUser's payload gained `email` (the client receives it: fine) and it
        # accepts a 201 back. jsonSchemaDialect gained a "#": a document change.
        "": (
            "changed",
            [
                (
                    "json-schema-dialect-changed",
                    "jsonSchemaDialect",
                    False,
                    '"https://json-schema.org/draft/2020-12/schema" -> "https://json-schema.org/draft/2020-12/schema#"',
                ),
            ],
        ),
        "GET /test": (
            "changed",
            [
                (
                    "schema-enum-changed",
                    "response 200 application/json: status",
                    True,
                    'values added "inactive"; values removed "active"',
                ),
                (
                    "schema-constraint-tightened",
                    "response 200 application/json: tags",
                    False,
                    "minContains 1 -> 2",
                ),
                (
                    "schema-constraint-loosened",
                    "response 200 application/json: tags",
                    True,
                    "maxContains 5 -> 10",
                ),
                (
                    "schema-type-changed",
                    "response 200 application/json: tags[]",
                    True,
                    'type "boolean" -> "string"',
                ),
                ("schema-keyword-changed", "response 200 application/json: tags", True, "contains changed"),
                (
                    "schema-keyword-changed",
                    "response 200 application/json: tags",
                    True,
                    "prefixItems changed",
                ),
                (
                    "schema-keyword-changed",
                    "response 200 application/json: metadata",
                    True,
                    "dependentRequired changed",
                ),
                (
                    "schema-keyword-changed",
                    "response 200 application/json: metadata",
                    True,
                    "dependentSchemas changed",
                ),
                (
                    "schema-keyword-changed",
                    "response 200 application/json: metadata",
                    True,
                    "patternProperties changed",
                ),
                (
                    "schema-keyword-changed",
                    "response 200 application/json: metadata",
                    True,
                    "propertyNames changed",
                ),
                (
                    "schema-keyword-changed",
                    "response 200 application/json: metadata",
                    True,
                    "unevaluatedProperties changed",
                ),
                (
                    "schema-keyword-changed",
                    "response 200 application/json: items",
                    True,
                    "unevaluatedItems changed",
                ),
                (
                    "schema-keyword-changed",
                    "response 200 application/json: conditional",
                    True,
                    "else changed",
                ),
                ("schema-keyword-changed", "response 200 application/json: conditional", True, "if changed"),
                (
                    "schema-keyword-changed",
                    "response 200 application/json: conditional",
                    True,
                    "then changed",
                ),
                (
                    "schema-keyword-changed",
                    "response 200 application/json: encoded",
                    True,
                    "contentEncoding changed",
                ),
                (
                    "schema-keyword-changed",
                    "response 200 application/json: encoded",
                    True,
                    "contentMediaType changed",
                ),
                (
                    "schema-keyword-changed",
                    "response 200 application/json: encoded",
                    True,
                    "contentSchema changed",
                ),
            ],
        ),
        "POST webhook:newUser": (
            "changed",
            [
                ("schema-property-added", "request body application/json: email", False, "property added"),
                ("response-added", "response 201", False, ""),
            ],
        ),
        "POST webhook:orderCreated": ("removed", []),
        "POST webhook:paymentReceived": ("added", []),
    },
    "05-real-cookbook-endpoints-added": {
        # Two PRs of a real project: three operations added, POST /api/orders untouched.
        "DELETE /api/orders/{order_id}": ("added", []),
        "GET /api/orders": ("added", []),
        "GET /api/orders/{order_id}": ("added", []),
    },
    "06-real-cookbook-response-schema-changed": {
        # PR #800. exclusiveMinimum 0 dropped from the request's order_item_count (loosened: fine for a
        # sender) and from the response's item_count (loosened: breaking a reader). (SOURCES.md has the two
        # names swapped.) In the 442 error body, `msg` went from string-or-null to string (narrower: fine),
        # gained a default, and is no longer required (breaking a reader).
        "POST /api/orders": (
            "changed",
            [
                (
                    "schema-constraint-loosened",
                    "request body application/json: order_item_count",
                    False,
                    "minimum > 0.0 -> none",
                ),
                (
                    "schema-constraint-loosened",
                    "response 200 application/json: item_count",
                    True,
                    "minimum > 0.0 -> none",
                ),
                (
                    "schema-required-removed",
                    "response 442 application/json: details[]",
                    True,
                    '"msg" is no longer required',
                ),
                (
                    "schema-type-changed",
                    "response 442 application/json: details[].msg",
                    False,
                    'type "null|string" -> "string"',
                ),
                (
                    "schema-default-changed",
                    "response 442 application/json: details[].msg",
                    False,
                    'default absent -> ""',
                ),
            ],
        ),
    },
}


def pair(name: str) -> tuple[str, str]:
    files = {path.stem: path for path in (OPENAPI / name).iterdir()}
    return files["old"].read_bytes().decode("utf-8"), files["new"].read_bytes().decode("utf-8")


def test_every_corpus_pair_has_an_expectation():
    # Given the corpus folders, Then each holds exactly old.* and new.* and has a row here
    folders = sorted(p.name for p in OPENAPI.iterdir() if p.is_dir())
    assert folders == sorted(EXPECTED)
    for name in folders:
        assert sorted(p.stem for p in (OPENAPI / name).iterdir()) == ["new", "old"], name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_pair_diff(name):
    # Given a real document before and after a change, as the text a client sends
    before, after = pair(name)
    # When it is diffed
    diff = diff_openapi(before, after)
    # Then the operations, their status and every change with its verdict are exactly those read from the
    # files
    found: dict[str, tuple[str, list[tuple[str, str, bool, str]]]] = {}
    if diff.document_changes:
        found[""] = ("changed", [(c.kind, c.where, c.breaking, c.detail) for c in diff.document_changes])
    for op in diff.operations:
        found[op.operation] = (
            op.status,
            [
                (c.kind, c.where, c.breaking, c.detail)
                for c in op.changes
                if c.kind not in ("operation-added", "operation-removed")
            ],
        )
    assert found == EXPECTED[name]


# pair -> whether any change breaks a client
BREAKING = {
    "01-petstore-mixed-breaking": True,
    "02-oasdiff-params-schemas-security": True,
    "03-endpoint-removed": True,
    "04-oas31-webhooks-schema-changes": True,
    "05-real-cookbook-endpoints-added": False,
    "06-real-cookbook-response-schema-changed": True,
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_pair_breaking_verdict_and_operation_verdicts(name):
    diff = diff_openapi(*pair(name))
    assert diff.breaking is BREAKING[name]
    for op in diff.operations:
        status, changes = EXPECTED[name][op.operation]
        expected = status == "removed" or any(breaking for _k, _w, breaking, _d in changes)
        assert op.breaking is expected, op.operation


RULES = ProjectConfig.model_validate(
    {
        "environments": ["staging"],
        "unclassified_policy": "unit-tests",
        "derivation_rules": [
            {"openapi": "api", "policy_id": "api-contract-tests", "per": "operation"},
            {"openapi": "api", "policy_id": "breaking-change-review", "per": "document", "when": "breaking"},
        ],
    }
)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_pair_obligations(name):
    # Given API.md's per-operation contract rule and a breaking-change review rule for the document
    before, after = pair(name)
    change = Change.model_validate({"openapi": [{"name": "api", "before": before, "after": after}]})
    # When obligations are derived
    found = derive(change, RULES)
    # Then every added or changed operation owes the contract tests on api/<METHOD> <path>; removed operations
    # and document changes owe them on the document; any breaking change owes one review on the document
    operations = EXPECTED[name]
    contract = sorted(
        {
            "api" if op == "" or status == "removed" else f"api/{op}"
            for op, (status, _changes) in operations.items()
        }
    )
    review = ["api"] if BREAKING[name] else []
    assert sorted(o["scope"] for o in found if o["policy_id"] == "api-contract-tests") == contract
    assert [o["scope"] for o in found if o["policy_id"] == "breaking-change-review"] == review
    assert {o["policy_id"] for o in found} <= {"api-contract-tests", "breaking-change-review"}


def test_the_corpus_diffs_in_well_under_a_second():
    started = time.perf_counter()
    for name in EXPECTED:
        diff_openapi(*pair(name))
    assert time.perf_counter() - started < 1.0
