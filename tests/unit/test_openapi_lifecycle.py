"""Unit tests for issue 18: change levels, lifecycle rules (x-stability-level, deprecation, x-sunset) read
from the base, x-extensible-enum, readOnly/writeOnly by direction, the response-pattern option, and the
derivation rules that select by level and change id.
oasdiff's own data is tried in corpus/test_oasdiff_rules.py."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sentinel_domain import openapi
from sentinel_domain.derivation import derive
from sentinel_domain.models import Change, DerivationRule, ProjectConfig
from sentinel_domain.openapi import ApiChange, DiffOptions, diff_openapi

OK = {"200": {"description": "ok"}}
TODAY = date(2026, 12, 1)
Q = {"name": "q", "in": "query", "schema": {"type": "string"}}


def document(operation: dict, extra: dict | None = None) -> dict:
    return {"openapi": "3.0.3", "paths": {"/a": {"get": {"responses": OK, **operation}}}, **(extra or {})}


def graded(before: dict, after: dict, **options) -> dict[str, str]:
    """kind -> level of every change (one change of each kind expected)."""
    found = diff_openapi(before, after, options=DiffOptions(**{"today": TODAY, **options})).changes
    assert len({c.kind for c in found}) == len(found), found
    return {c.kind: c.level for c in found}


# ---- levels ---------------------------------------------------------------------------------------------


def test_a_level_is_breaking_exactly_when_the_change_is():
    assert ApiChange("GET /a", "k", True, level="info").level == "breaking"
    assert ApiChange("GET /a", "k", False, level="breaking").level == "info"
    assert ApiChange("GET /a", "k", False, level="warning").level == "warning"
    assert ApiChange("GET /a", "k", False).level == "info"


def test_a_reason_names_levels_above_info():
    assert ApiChange("GET /a", "k", True).describe() == "k [breaking]"
    assert ApiChange("GET /a", "k", False, level="warning").describe() == "k [warning]"
    assert ApiChange("GET /a", "k", False).describe() == "k"


# ---- stability ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["draft", "alpha"])
def test_an_unstable_base_softens_the_operations_changes_and_keeps_reporting_them(level):
    # Given a draft/alpha operation losing its parameter
    before = document({"x-stability-level": level, "parameters": [Q]})
    after = document({"x-stability-level": level})
    # When diffed, Then the removal is reported, as a warning, saying why
    (change,) = diff_openapi(before, after).changes
    assert (change.kind, change.level) == ("parameter-removed", "warning")
    assert change.detail.endswith(f"softened: base stability {level}")


def test_beta_and_stable_soften_nothing():
    for level in ("beta", "stable"):
        before = document({"x-stability-level": level, "parameters": [Q]})
        after = document({"x-stability-level": level})
        assert graded(before, after) == {"parameter-removed": "breaking"}


def test_a_level_softens_only_from_the_base():
    # Given a stable operation made alpha by the change that removes its parameter
    before = document({"parameters": [Q]})
    after = document({"x-stability-level": "alpha"})
    # Then both the downgrade and the removal are breaking
    assert graded(before, after) == {
        "operation-stability-decreased": "breaking",
        "parameter-removed": "breaking",
    }


def test_a_security_weakening_in_an_alpha_operation_still_weakens_security():
    before = document({"x-stability-level": "alpha", "security": [{"key": []}]})
    after = document({"x-stability-level": "alpha", "security": []})
    (change,) = diff_openapi(before, after).changes
    assert change.weakens_security and change.kind == "security-removed"


@pytest.mark.parametrize("value", ["ga", 1, None, ["beta"], {"level": "beta"}, True, "Stable"])
def test_an_invalid_stability_level_is_its_own_breaking_change(value):
    assert graded(document({}), document({"x-stability-level": value})) == {
        "operation-stability-invalid": "breaking"
    }


def test_an_invalid_stability_level_on_a_new_operation_is_reported():
    before = {"openapi": "3.0.3", "paths": {}}
    diff = diff_openapi(before, document({"x-stability-level": "ga", "x-sunset": "soon"}))
    (operation,) = diff.operations
    assert [(c.kind, c.level) for c in operation.changes] == [
        ("operation-added", "info"),
        ("operation-stability-invalid", "breaking"),
        ("operation-sunset-invalid", "breaking"),
    ]


def test_an_invalid_base_level_softens_nothing():
    before = document({"x-stability-level": "experimental", "parameters": [Q]})
    after = document({"x-stability-level": "experimental"})
    assert graded(before, after) == {"parameter-removed": "breaking"}


# ---- deprecation and sunsets ------------------------------------------------------------------------------


def test_a_deprecation_without_a_sunset_is_information_unless_the_rule_asks_for_a_period():
    before, after = document({}), document({"deprecated": True})
    assert graded(before, after) == {"operation-deprecated": "info"}
    assert graded(before, after, min_sunset_days=30) == {
        "operation-deprecated": "info",
        "operation-sunset-missing": "breaking",
    }


def test_an_alpha_operation_owes_no_sunset_period():
    before = document({"x-stability-level": "alpha"})
    after = document({"x-stability-level": "alpha", "deprecated": True})
    assert graded(before, after, min_sunset_days=30) == {"operation-deprecated": "info"}


@pytest.mark.parametrize(
    ("sunset", "days", "expected"),
    [
        ("2026-12-31", 31, "breaking"),  # 30 days away, the rule asks for 31
        ("2026-12-31", 30, None),
        ("2026-12-01", 0, None),  # today is not yet past
        ("2026-11-30", 0, "breaking"),
        ("2027-06-01T00:00:00Z", 180, None),
    ],
)
def test_a_deprecation_with_a_sunset_sooner_than_the_rule_allows_is_breaking(sunset, days, expected):
    before, after = document({}), document({"deprecated": True, "x-sunset": sunset})
    found = graded(before, after, min_sunset_days=days)
    assert found.get("operation-sunset-too-soon") == expected


def test_a_sunset_cannot_be_checked_without_a_reference_date():
    before, after = document({}), document({"deprecated": True, "x-sunset": "9999-01-01"})
    changes = diff_openapi(before, after).changes  # no DiffOptions: no date
    too_soon = [c for c in changes if c.kind == "operation-sunset-too-soon"]
    assert too_soon and too_soon[0].breaking and "no reference date" in too_soon[0].detail


def test_a_sunset_moved_later_is_information_and_earlier_within_the_period_too():
    before = document({"deprecated": True, "x-sunset": "2027-06-01"})
    assert graded(before, document({"deprecated": True, "x-sunset": "2028-01-01"})) == {
        "operation-sunset-changed": "info"
    }
    assert graded(before, document({"deprecated": True, "x-sunset": "2027-01-01"}), min_sunset_days=10) == {
        "operation-sunset-changed": "info"
    }
    assert graded(before, document({"deprecated": True, "x-sunset": "2027-01-01"}), min_sunset_days=60) == {
        "operation-sunset-too-soon": "breaking"
    }


@pytest.mark.parametrize("value", ["next year", 20270101, "2027-02-30", "2027-1-1", None, ["2027-01-01"]])
def test_an_unreadable_sunset_is_its_own_breaking_change(value):
    found = graded(document({}), document({"deprecated": True, "x-sunset": value}))
    assert found == {"operation-deprecated": "info", "operation-sunset-invalid": "breaking"}


def test_an_unreadable_sunset_left_as_it_was_is_not_a_change():
    before = document({"deprecated": True, "x-sunset": "soon", "parameters": [Q]})
    after = document({"deprecated": True, "x-sunset": "soon"})
    assert graded(before, after) == {"parameter-removed": "breaking"}


def test_a_sunset_on_an_operation_nobody_deprecated_is_a_warning():
    assert graded(document({}), document({"x-sunset": "2027-01-01"})) == {
        "operation-sunset-changed": "warning"
    }


@pytest.mark.parametrize(
    ("base", "kind", "level"),
    [
        ({}, "operation-removed", "breaking"),
        ({"deprecated": True}, "operation-removed-without-sunset", "breaking"),
        ({"deprecated": True, "x-sunset": "2026-12-02"}, "operation-removed-before-sunset", "breaking"),
        ({"deprecated": True, "x-sunset": "2026-12-01"}, "operation-removed-after-sunset", "info"),
        ({"deprecated": True, "x-sunset": "bad"}, "operation-sunset-invalid", "breaking"),
        ({"x-stability-level": "draft"}, "operation-removed", "warning"),
        ({"x-sunset": "2020-01-01"}, "operation-removed", "breaking"),  # a sunset without deprecation
        ({"deprecated": "true", "x-sunset": "2020-01-01"}, "operation-removed", "breaking"),  # not a boolean
    ],
)
def test_removing_an_operation_is_graded_by_its_base_lifecycle(base, kind, level):
    diff = diff_openapi(document(base), {"openapi": "3.0.3", "paths": {}}, options=DiffOptions(today=TODAY))
    (operation,) = diff.operations
    assert operation.status == "removed"
    assert [(c.kind, c.level) for c in operation.changes] == [(kind, level)]


def test_an_unreadable_level_on_a_removed_operation_is_said_and_softens_nothing():
    (change,) = diff_openapi(document({"x-stability-level": "ga"}), {"openapi": "3.0.3", "paths": {}}).changes
    assert change.kind == "operation-removed" and change.breaking
    assert (
        change.detail
        == 'base x-stability-level: "ga" is not one of draft, alpha, beta, stable; read as stable'
    )


def test_a_removal_after_a_sunset_needs_the_reference_date():
    before = document({"deprecated": True, "x-sunset": "2000-01-01"})
    (change,) = diff_openapi(before, {"openapi": "3.0.3", "paths": {}}).changes
    assert change.kind == "operation-removed-before-sunset" and "no reference date" in change.detail


# ---- x-extensible-enum, readOnly/writeOnly, patterns ------------------------------------------------------


def body(schema: dict, where: str) -> dict:
    content = {"content": {"application/json": {"schema": schema}}}
    if where == "request":
        return document({"requestBody": content})
    return document({"responses": {"200": {"description": "ok", **content}}})


@pytest.mark.parametrize(
    ("old", "new", "in_request", "in_response"),
    [
        (["a", "b"], ["a"], {"schema-extensible-enum-value-removed": "breaking"},
         {"schema-extensible-enum-value-removed": "info"}),
        (["a"], ["a", "b"], {"schema-extensible-enum-value-added": "info"},
         {"schema-extensible-enum-value-added": "info"}),
        (["a"], "a", {"schema-extensible-enum-invalid": "breaking"},
         {"schema-extensible-enum-invalid": "breaking"}),
        (None, ["a"], {"schema-extensible-enum-changed": "info"}, {"schema-extensible-enum-changed": "info"}),
        ("a", ["a"], {"schema-extensible-enum-changed": "info"}, {"schema-extensible-enum-changed": "info"}),
    ],
)  # fmt: skip
def test_extensible_enum_values_removed_break_senders_only(old, new, in_request, in_response):
    def schema(values):
        return {"type": "string"} if values is None else {"type": "string", "x-extensible-enum": values}

    assert graded(body(schema(old), "request"), body(schema(new), "request")) == in_request
    assert graded(body(schema(old), "response"), body(schema(new), "response")) == in_response


def props(flag: str | None, required: bool = False, **extra) -> dict:
    prop = {"type": "string", **({flag: True} if flag else {}), **extra}
    return {"type": "object", "properties": {"p": prop}, **({"required": ["p"]} if required else {})}


def test_a_read_only_property_made_required_does_not_break_requests():
    assert graded(body(props("readOnly"), "request"), body(props("readOnly", True), "request")) == {
        "schema-required-added": "info"
    }
    assert graded(body(props(None), "request"), body(props(None, True), "request")) == {
        "schema-required-added": "breaking"
    }


def test_a_write_only_property_changed_or_removed_does_not_break_responses():
    before = body(props("writeOnly", maxLength=3), "response")
    after = body(props("writeOnly", maxLength=5), "response")
    assert graded(before, after) == {"schema-constraint-loosened": "info"}
    gone = body({"type": "object"}, "response")
    assert graded(before, gone) == {"schema-property-removed": "info"}
    # the same in a request is read by the API, so a narrower value still breaks a sender
    wide, narrow = props("writeOnly", maxLength=5), props("writeOnly", maxLength=3)
    assert graded(body(wide, "request"), body(narrow, "request")) == {
        "schema-constraint-tightened": "breaking"
    }


@pytest.mark.parametrize(
    ("flag", "where", "level_when_set"),
    [("readOnly", "request", "breaking"), ("readOnly", "response", "info"),
     ("writeOnly", "response", "breaking"), ("writeOnly", "request", "info")],
)  # fmt: skip
def test_a_flag_that_hides_a_value_from_its_reader_breaks_that_reader_only(flag, where, level_when_set):
    kind = "schema-read-only-changed" if flag == "readOnly" else "schema-write-only-changed"
    assert graded(body(props(None), where), body(props(flag), where)) == {kind: level_when_set}
    assert graded(body(props(flag), where), body(props(None), where)) == {kind: "info"}


@pytest.mark.parametrize(("old", "new"), [("^a+$", None), ("^a+$", "^[ab]+$"), ("^a+$", ".*")])
def test_a_looser_response_pattern_breaks_unless_the_rule_is_lenient(old, new):
    def schema(pattern):
        return {"type": "string", **({"pattern": pattern} if pattern else {})}

    before, after = body(schema(old), "response"), body(schema(new), "response")
    assert set(graded(before, after).values()) == {"breaking"}
    assert graded(before, after, response_patterns="lenient") == {"schema-response-pattern-relaxed": "info"}
    # a request is not output: the option changes nothing there
    request = graded(body(schema(old), "request"), body(schema(new), "request"), response_patterns="lenient")
    assert "schema-response-pattern-relaxed" not in request


def test_a_pattern_matching_everything_constrains_nothing():
    def schema(pattern):
        return {"type": "string", **({"pattern": pattern} if pattern else {})}

    assert graded(body(schema(".*"), "request"), body(schema(None), "request")) == {}
    assert graded(body(schema("^a"), "request"), body(schema("^.*$"), "request")) == {
        "schema-constraint-loosened": "info"
    }


# ---- malformed extension values: changes, never a crash (property) ----------------------------------------

VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.text(max_size=12)
    | st.sampled_from(["alpha", "2027-01-01"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALUES, VALUES, VALUES, st.booleans())
def test_any_lifecycle_or_extensible_enum_value_is_graded_and_never_crashes(
    stability, sunset, values, deprecated
):
    # Given any JSON values for the extensions, on the revision and (swapped) on the base
    schema = {"type": "string", "x-extensible-enum": values}
    operation = {
        "x-stability-level": stability,
        "x-sunset": sunset,
        "deprecated": deprecated,
        "requestBody": {"content": {"application/json": {"schema": schema}}},
    }
    plain = document({"requestBody": {"content": {"application/json": {"schema": {"type": "string"}}}}})
    for before, after in ((plain, document(operation)), (document(operation), plain)):
        # When diffed (with and without a reference date), Then every change has a level and nothing escapes
        for options in (DiffOptions(), DiffOptions(today=TODAY, min_sunset_days=7)):
            for change in diff_openapi(before, after, options=options).changes:
                assert change.level in ("breaking", "warning", "info")
                assert change.breaking is (change.level == "breaking")


# ---- derivation: when, changes, options -------------------------------------------------------------------


def config(*rules: dict) -> ProjectConfig:
    return ProjectConfig.model_validate(
        {"environments": ["staging"], "derivation_rules": list(rules), "unclassified_policy": "unit-tests"}
    )


def change(before: dict, after: dict) -> Change:
    return Change.model_validate({"openapi": [{"name": "api", "before": before, "after": after}]})


def test_when_warning_counts_warnings_and_breaking_changes_but_not_information():
    rule = {"openapi": "api", "policy_id": "heads-up", "when": "warning"}
    warning = change(document({}), document({"x-sunset": "2027-01-01"}))
    breaking = change(document({"parameters": [Q]}), document({}))
    info = change(document({}), document({"deprecated": True}))
    assert [o["scope"] for o in derive(warning, config(rule), TODAY)] == ["api"]
    assert [o["scope"] for o in derive(breaking, config(rule), TODAY)] == ["api"]
    assert derive(info, config(rule), TODAY) == []


def test_a_rule_may_select_changes_by_id():
    rule = {"openapi": "api", "policy_id": "lifecycle-review", "changes": ["operation-deprecated"]}
    deprecated = change(document({"parameters": [Q]}), document({"deprecated": True}))
    removed = change(document({"parameters": [Q]}), document({}))
    (obligation,) = derive(deprecated, config(rule), TODAY)
    assert "operation-deprecated" in obligation["reason"] and "parameter-removed" not in obligation["reason"]
    assert derive(removed, config(rule), TODAY) == []
    # with `when` too, both must hold
    both = dict(rule, when="breaking")
    assert derive(deprecated, config(both), TODAY) == []


def test_each_rule_grades_with_its_own_options_and_the_document_is_read_once(monkeypatch):
    # Given two rules on one document, strict and lenient about response patterns
    strict = {"openapi": "api", "policy_id": "strict-review", "when": "breaking"}
    lenient = dict(strict, policy_id="lenient-review", response_patterns="lenient")
    before = body({"type": "string", "pattern": "^a$"}, "response")
    after = body({"type": "string"}, "response")
    reads = []
    load = openapi.differ._load
    monkeypatch.setattr(openapi.differ, "_load", lambda value, budget: reads.append(1) or load(value, budget))
    # When derived, Then only the strict rule owes a review, and each side was read once
    found = derive(change(before, after), config(strict, lenient), TODAY)
    assert [o["policy_id"] for o in found] == ["strict-review"]
    assert len(reads) == 2


def test_min_sunset_days_is_a_rule_option():
    rule = {"openapi": "api", "policy_id": "review", "when": "breaking", "min_sunset_days": 90}
    soon = change(document({}), document({"deprecated": True, "x-sunset": "2027-01-01"}))
    assert len(derive(soon, config(rule), TODAY)) == 1
    assert derive(soon, config(dict(rule, min_sunset_days=30)), TODAY) == []


@pytest.mark.parametrize(
    "extra",
    [{"changes": ["operation-removed"]}, {"min_sunset_days": 1}, {"response_patterns": "lenient"}],
)
def test_document_options_belong_to_document_rules_only(extra):
    with pytest.raises(ValidationError, match="only to a rule that names an openapi document"):
        DerivationRule.model_validate({"files": ["src/**"], "policy_id": "unit-tests", **extra})


@pytest.mark.parametrize(
    "extra",
    [{"changes": []}, {"changes": ["Not An Id"]}, {"min_sunset_days": -1}, {"response_patterns": "loose"}],
)
def test_malformed_rule_options_are_refused(extra):
    with pytest.raises(ValidationError):
        DerivationRule.model_validate({"openapi": "api", "policy_id": "unit-tests", **extra})
