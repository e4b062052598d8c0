"""Property-based tests of sentinel_domain.openapi (hypothesis): any text is read or refused with
MalformedOpenApi (nothing else escapes); a document compared with itself has no change; YAML, JSON text and an
object are read alike; and the direction rule is symmetric: a schema change breaks a client that sends it
exactly when the reverse change breaks a client that reads it."""

from __future__ import annotations

import json

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sentinel_domain.openapi import MalformedOpenApi, diff_openapi, load_document

SETTINGS = settings(
    max_examples=120,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Constraints whose effect is a pure narrowing or widening of the accepted values (no special cases such as
# a property removed, which breaks either side, or a default, which only matters to senders).
TYPES = st.sampled_from(["string", "integer", "number", "boolean"])
CONSTRAINTS = st.fixed_dictionaries(
    {},
    optional={
        "type": TYPES,
        "nullable": st.booleans(),
        "enum": st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True),
        "minimum": st.integers(-2, 2),
        "maximum": st.integers(-2, 2),
        "exclusiveMinimum": st.booleans(),
        "maxLength": st.integers(0, 3),
        "minLength": st.integers(0, 3),
        "pattern": st.sampled_from(["^a", "^b"]),
        "format": st.sampled_from(["uuid", "date"]),
        "uniqueItems": st.booleans(),
    },
)


def with_schema(schema: dict, where: str) -> dict:
    body = {"content": {"application/json": {"schema": schema}}}
    operation = (
        {"requestBody": body, "responses": {"200": {"description": "ok"}}}
        if where == "request"
        else {"responses": {"200": {"description": "ok", **body}}}
    )
    return {"openapi": "3.0.3", "paths": {"/a": {"post": operation}}}


def breaking(old: dict, new: dict, where: str) -> bool:
    return diff_openapi(with_schema(old, where), with_schema(new, where)).breaking


@SETTINGS
@given(CONSTRAINTS, CONSTRAINTS)
def test_a_change_breaks_senders_exactly_when_its_reverse_breaks_readers(first, second):
    # Given two schemas built from narrowing/widening constraints
    # When one replaces the other in a request body, and the other way round in a response body
    # Then both verdicts agree: tightening what is accepted mirrors loosening what is produced
    assert breaking(first, second, "request") == breaking(second, first, "response")


@SETTINGS
@given(CONSTRAINTS)
def test_a_schema_compared_with_itself_has_no_change(schema):
    for where in ("request", "response"):
        assert diff_openapi(with_schema(schema, where), with_schema(dict(schema), where)).changes == ()


# Printable text: PyYAML's *emitter* folds some line separators (U+0085) into spaces when dumping, which
# would test the dumper, not the reader.
PRINTABLE = st.text(alphabet=st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=6)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | PRINTABLE,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(PRINTABLE, children, max_size=4),
    max_leaves=20,
)


@SETTINGS
@given(st.dictionaries(st.sampled_from(["x-a", "x-b", "x-c"]), JSON_VALUES, max_size=3))
def test_yaml_json_text_and_an_object_read_alike(extensions):
    # Given one document as an object, as JSON text and as YAML text
    document = {"openapi": "3.1.0", "paths": {}, **extensions}
    as_yaml = yaml.safe_dump(document, allow_unicode=True)
    # When each is read, Then all three are the same values
    assert load_document(document) == load_document(json.dumps(document)) == load_document(as_yaml)


@SETTINGS
@given(st.text(max_size=300) | st.text(alphabet="{}[]:,-&*!|>'\"#%@` \n\tabc0123<=", max_size=300))
def test_any_text_is_read_or_refused_and_nothing_else_escapes(text):
    try:
        document = load_document("openapi: 3.0.0\n" + text)
    except MalformedOpenApi:
        return
    assert isinstance(document, dict) and document["openapi"] == "3.0.0"
    assert diff_openapi(document, document).changes == ()
