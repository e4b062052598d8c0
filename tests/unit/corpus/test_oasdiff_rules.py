"""Every change id the OpenAPI differ reports, tried on oasdiff's own test data
(shared/corpus/openapi-oasdiff, see shared/corpus/SOURCES.md), with the level docs/ingestion.md gives it.

Each case names the oasdiff rule its files were written for (read from oasdiff's Go tests and rules table at
the corpus's commit; see the rules table in docs/ingestion.md). Its expected change id and level are read from
that table's row, so the documentation and the differ cannot drift apart: the row either agrees with oasdiff's
level or says why not. A case whose grading no row covers (an option, a softening, a change id oasdiff has no
rule for) states its level and the phrase in docs/ingestion.md that documents it. Like oasdiff's tests, some
cases change a loaded file before diffing (`mutate`); the files are read in place, never copied.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from sentinel_domain.derivation import derive
from sentinel_domain.models import Change, ProjectConfig
from sentinel_domain.openapi import INFO, DiffOptions, diff_openapi, load_document
from support.paths import CORPUS

DATA = CORPUS / "openapi-oasdiff" / "data"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "ingestion.md"

if not DATA.is_dir():
    _reason = f"oasdiff's test data not found at {DATA}; skipping the oasdiff rule tests"
    print(_reason)
    pytest.skip(_reason, allow_module_level=True)

TODAY = date(2026, 12, 1)  # the corpus's sunsets are 2022 (past) and 9999 (future): any date between works


def rules_table() -> dict[str, tuple[str, str, str, str]]:
    """oasdiff rule -> (oasdiff level, our change id, our level, agreement note), from docs/ingestion.md."""
    rows = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        m = re.match(
            r"\| `([a-z0-9-]+)` \| (breaking|warning|info) \| (`[a-z0-9-]+`|-) \| (\S+) \| (.*) \|$", line
        )
        if m:
            rows[m[1]] = (m[2], m[3].strip("`"), m[4], m[5])
    return rows


def change_ids() -> set[str]:
    """The change ids docs/ingestion.md lists as what the differ reports."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("### Change ids", 1)[1].split("\n### ", 1)[0]
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, re.M))


DOCS_TEXT = DOCS.read_text(encoding="utf-8") if DOCS.is_file() else ""
RULES = rules_table()


def read(name: str) -> dict[str, Any]:
    return load_document((DATA / name).read_bytes().decode("utf-8"))


def at(doc: dict[str, Any], *path: Any) -> Any:
    for part in path:
        doc = doc[part]
    return doc


@dataclass
class Case:
    rule: str  # the oasdiff rule id the files test, "-" when oasdiff has none for this change
    base: str
    revision: str
    kind: str
    operation: str = ""
    where: str = ""
    mutate: Callable[[dict[str, Any], dict[str, Any]], None] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    level: str = ""  # stated when no rules-table row covers this grading
    documented: str = ""  # the phrase of docs/ingestion.md that documents a stated level

    @property
    def label(self) -> str:
        return f"{self.kind}<-{self.rule}"


def _set(*path: Any, value: Any) -> Callable[[dict[str, Any], dict[str, Any]], None]:
    def mutate(_base: dict[str, Any], revision: dict[str, Any]) -> None:
        at(revision, *path[:-1])[path[-1]] = value

    return mutate


def _drop(*path: Any, side: str = "revision") -> Callable[[dict[str, Any], dict[str, Any]], None]:
    def mutate(base: dict[str, Any], revision: dict[str, Any]) -> None:
        del at(revision if side == "revision" else base, *path[:-1])[path[-1]]

    return mutate


def _many_properties_removed(base: dict[str, Any], _revision: dict[str, Any]) -> None:
    schema = at(base, "paths", "/api/v1.0/groups", "post", "responses", "200", "content", "application/json")
    schema["schema"] = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(60)}}


def _same_callback(base: dict[str, Any], revision: dict[str, Any]) -> None:
    revision["paths"]["/subscribe"]["post"]["callbacks"] = copy.deepcopy(
        base["paths"]["/subscribe"]["post"]["callbacks"]
    )


DEP = "deprecation/"
C = "checker/"
RP = "required-properties/"
PD = "param-deprecation/"
G = "/api/v1.0/groups"
GROUPS = f"POST {G}"
CASES = [
    # ---- lifecycle (deprecation/, param-deprecation/: oasdiff's check_api_*_test.go) ----
    Case("api-stability-decreased", DEP + "base-beta-stability.yaml", DEP + "base-alpha-stability.yaml",
         "operation-stability-decreased", "GET /api/test"),
    Case("api-stability-increased", DEP + "base-alpha-stability.yaml", DEP + "base-beta-stability.yaml",
         "operation-stability-increased", "GET /api/test"),
    Case("api-invalid-stability-level", DEP + "base.yaml", DEP + "base-invalid-stability.yaml",
         "operation-stability-invalid", "GET /api/test"),
    Case("api-invalid-stability-level", DEP + "base.yaml", DEP + "base-invalid-stability-2.yaml",
         "operation-stability-invalid", "GET /api/test"),
    Case("api-invalid-stability-level", DEP + "base-invalid-stability.yaml", DEP + "base.yaml",
         "operation-stability-invalid", "GET /api/test", level=INFO,
         documented="an invalid base level is reported at info and read as stable"),
    Case("api-deprecated-sunset-parse", DEP + "base.yaml", DEP + "deprecated-with-invalid-sunset.yaml",
         "operation-sunset-invalid", "GET /api/test"),
    Case("api-deprecated-sunset-missing", DEP + "base.yaml", DEP + "deprecated-no-sunset.yaml",
         "operation-sunset-missing", "GET /api/test", options={"min_sunset_days": 30}),
    Case("api-sunset-date-too-small", DEP + "base.yaml", DEP + "deprecated-past.yaml",
         "operation-sunset-too-soon", "GET /api/test"),
    Case("api-sunset-date-changed-too-small", DEP + "deprecated-future.yaml", DEP + "deprecated-past.yaml",
         "operation-sunset-too-soon", "GET /api/test"),
    Case("sunset-deleted", DEP + "deprecated-with-sunset.yaml", DEP + "deprecated-no-sunset.yaml",
         "operation-sunset-deleted", "GET /api/test"),
    Case("endpoint-deprecated", DEP + "base.yaml", DEP + "deprecated-no-sunset.yaml",
         "operation-deprecated", "GET /api/test"),
    Case("endpoint-deprecated-with-sunset", DEP + "base.yaml", DEP + "deprecated-future.yaml",
         "operation-deprecated", "GET /api/test"),
    Case("endpoint-reactivated", DEP + "deprecated-no-sunset.yaml", DEP + "base.yaml",
         "operation-undeprecated", "GET /api/test"),
    Case("api-removed-before-sunset", DEP + "deprecated-future.yaml", DEP + "sunset.yaml",
         "operation-removed-before-sunset", "GET /api/test"),
    Case("api-removed-with-deprecation", DEP + "deprecated-no-sunset.yaml", DEP + "sunset.yaml",
         "operation-removed-without-sunset", "GET /api/test"),
    Case("api-path-removed-without-deprecation", DEP + "base-alpha-stability.yaml", DEP + "sunset-path.yaml",
         "operation-removed", "POST /api/test"),
    Case("api-path-sunset-parse", DEP + "deprecated-invalid.yaml", DEP + "sunset.yaml",
         "operation-sunset-invalid", "GET /api/test"),
    # oasdiff reports nothing for these (TestBreaking_DeprecationPast, TestBreaking_RemovedPathForAlpha...).
    Case("-", DEP + "deprecated-past.yaml", DEP + "sunset.yaml", "operation-removed-after-sunset",
         "GET /api/test", level=INFO, documented="`operation-removed-after-sunset`"),
    Case("-", DEP + "base-alpha-stability.yaml", DEP + "sunset-path.yaml", "operation-removed",
         "GET /api/test", level="warning", documented="softened: base stability"),
    Case("-", PD + "base-alpha-stability.yaml", PD + "sunset-alpha-stability.yaml",
         "parameter-removed", "GET /api/test", level="warning", documented="softened: base stability"),
    Case("-", DEP + "deprecated-past.yaml", DEP + "deprecated-future.yaml", "operation-sunset-changed",
         "GET /api/test", level=INFO, documented="| `operation-sunset-changed` |"),
    # ---- x-extensible-enum ----
    Case("request-parameter-x-extensible-enum-value-removed",
         C + "request_parameter_extensible_enum_base.yaml",
         C + "request_parameter_extensible_enum_revision.yaml", "schema-extensible-enum-value-removed"),
    Case("request-property-x-extensible-enum-value-removed", C + "request_property_extensible_enum_base.yaml",
         C + "request_property_extensible_enum_revision.yaml", "schema-extensible-enum-value-removed"),
    Case("-", C + "request_property_extensible_enum_revision.yaml",
         C + "request_property_extensible_enum_base.yaml", "schema-extensible-enum-value-added",
         level=INFO, documented="| `schema-extensible-enum-value-added` |"),
    Case("-", C + "request_property_extensible_enum_base.yaml",
         C + "request_property_extensible_enum_base.yaml", "schema-extensible-enum-invalid",
         mutate=_set("paths", "/pets", "post", "requestBody", "content", "application/json", "schema",
                     "properties", "name", "x-extensible-enum", value="available"),
         level="breaking", documented="| `schema-extensible-enum-invalid` |"),
    Case("-", C + "request_property_extensible_enum_base.yaml",
         C + "request_property_extensible_enum_base.yaml", "schema-extensible-enum-changed",
         mutate=_drop("paths", "/pets", "post", "requestBody", "content", "application/json", "schema",
                      "properties", "name", "x-extensible-enum"),
         level=INFO, documented="| `schema-extensible-enum-changed` |"),
    # ---- readOnly / writeOnly by direction (required-properties/: check_breaking_property_test.go) ----
    Case("response-required-property-became-write-only", RP + "write-only-changed-base.yaml",
         RP + "write-only-changed-revision.yaml", "schema-write-only-changed",
         "GET /api/atlas/v1.0/groups/{groupId}"),
    Case("request-required-property-became-not-write-only", RP + "write-only-changed-revision.yaml",
         RP + "write-only-changed-base.yaml", "schema-write-only-changed",
         "POST /api/atlas/v1.0/groups", "request body"),
    Case("response-required-write-only-property-removed", RP + "write-only-delete-base.yaml",
         RP + "write-only-delete-revision.yaml", "schema-property-removed",
         "GET /api/atlas/v1.0/groups/{groupId}"),
    Case("request-optional-property-became-read-only",
         C + "request_optional_property_write_only_read_only_base.yaml",
         C + "request_optional_property_write_only_read_only_base.yaml", "schema-read-only-changed",
         mutate=_set("paths", G, "post", "requestBody", "content", "application/json", "schema", "properties",
                     "name", "readOnly", value=True)),
    Case("-", RP + "read-only-base.yaml", RP + "read-only-revision.yaml",
         "schema-required-added", "POST /api/atlas/v1.0/groups", "request body", level=INFO,
         documented="readOnly: not in this direction"),
    # ---- patterns, and the response_patterns option ----
    Case("response-property-pattern-changed", C + "response_pattern_added_or_changed_base.yaml",
         C + "response_pattern_added_or_changed_revision.yaml", "schema-constraint-changed"),
    Case("-", C + "response_pattern_added_or_changed_base.yaml",
         C + "response_pattern_added_or_changed_revision.yaml", "schema-response-pattern-relaxed",
         options={"response_patterns": "lenient"}, level=INFO, documented="`response_patterns: lenient`"),
    Case("request-parameter-pattern-removed", C + "request_parameter_pattern_added_or_changed_base.yaml",
         C + "request_parameter_pattern_added_or_changed_revision.yaml", "schema-constraint-loosened"),
    Case("request-parameter-max-length-set", C + "request_parameter_max_length_set_base.yaml",
         C + "request_parameter_max_length_set_revision.yaml", "schema-constraint-tightened"),
    # ---- the rest of the schema rules ----
    Case("request-property-type-changed", C + "request_property_type_changed_base.yaml",
         C + "request_property_type_changed_revision.yaml", "schema-type-changed"),
    Case("request-parameter-became-enum", C + "request_parameter_became_enum_base.yaml",
         C + "request_parameter_became_enum_revision.yaml", "schema-enum-changed"),
    Case("request-parameter-default-value-changed", C + "request_parameter_default_value_changed_base.yaml",
         C + "request_parameter_default_value_changed_revision.yaml", "schema-default-changed"),
    Case("new-required-request-property", C + "request_property_added_base.yaml",
         C + "request_property_added_revision.yaml", "schema-required-added"),
    Case("new-optional-request-property", C + "request_property_added_base.yaml",
         C + "request_property_added_revision.yaml", "schema-property-added"),
    Case("response-optional-property-removed", C + "response_optional_property_removed_base.yaml",
         C + "response_optional_property_removed_revision.yaml", "schema-property-removed"),
    Case("response-property-became-optional", C + "response_property_became_optional_base.yaml",
         C + "response_property_became_optional_revision.yaml", "schema-required-removed"),
    Case("request-property-all-of-added", C + "request_property_all_of_added_base.yaml",
         C + "request_property_all_of_added_revision.yaml", "schema-composition-changed"),
    Case("request-property-discriminator-added", C + "request_property_discriminator_added_base.yaml",
         C + "request_property_discriminator_added_revision.yaml", "schema-keyword-changed"),
    Case("response-property-deprecated", "deprecation/response_property_deprecation_base.yaml",
         "deprecation/response_property_deprecation_spec.yaml", "schema-deprecated-changed"),
    Case("-", C + "response_optional_property_removed_base.yaml",
         C + "response_optional_property_removed_base.yaml", "schema-changes-truncated",
         mutate=_many_properties_removed, level="breaking",
         documented="| `schema-changes-truncated` |"),
    # ---- operations, parameters, bodies, media types, responses ----
    Case("endpoint-added", DEP + "base-alpha-stability.yaml", DEP + "sunset-path.yaml", "operation-added",
         "GET /api/placeholder"),
    Case("webhook-removed", C + "webhook_base.yaml", C + "webhook_revision.yaml", "operation-removed"),
    Case("api-operation-id-removed", C + "operation_id_removed_base.yaml",
         C + "operation_id_removed_base.yaml", "operation-id-changed",
         mutate=_drop("paths", G, "post", "operationId")),
    Case("-", DEP + "base.yaml", DEP + "base.yaml", "operation-definition-changed", "GET /api/test",
         mutate=_set("paths", "/api/test", "get", "unknownKeyword", value=True), level="breaking",
         documented="| `operation-definition-changed` |"),
    Case("new-required-request-parameter", "request_params/base.yaml",
         "request_params/required-request-params.yaml",
         "parameter-added", where="version"),
    Case("request-parameter-removed", PD + "base.yaml", PD + "sunset.yaml",
         "parameter-removed"),
    Case("request-parameter-became-optional", PD + "base.yaml", PD + "base.yaml",
         "parameter-became-optional",
         mutate=_set("components", "parameters", "id", "required", value=False)),
    Case("request-parameter-became-required", PD + "base.yaml", PD + "base.yaml",
         "parameter-became-required",
         mutate=lambda b, r: at(b, "components", "parameters", "id").update(required=False)),
    Case("request-parameter-deprecated", PD + "base.yaml", PD + "deprecated-future.yaml",
         "parameter-deprecated"),
    Case("request-parameter-reactivated", PD + "deprecated-future.yaml", PD + "base.yaml",
         "parameter-undeprecated"),
    Case("-", PD + "base.yaml", PD + "base.yaml", "parameter-definition-changed",
         mutate=_set("components", "parameters", "id", "explode", value=False), level="breaking",
         documented="| `parameter-definition-changed` |"),
    Case("request-body-removed", C + "request_body_removed_base.yaml",
         C + "request_body_removed_revision.yaml", "request-body-removed"),
    Case("request-body-became-optional", C + "request_body_became_optional_base.yaml",
         C + "request_body_became_required_base.yaml", "request-body-became-optional"),
    Case("request-body-became-required", C + "request_body_became_required_base.yaml",
         C + "request_body_became_optional_base.yaml", "request-body-became-required"),
    Case("request-body-added-optional", C + "request_body_removed_revision.yaml",
         C + "request_body_removed_base.yaml", "request-body-added",
         mutate=_set("paths", "/api/v1.0/test", "post", "requestBody", "required", value=False)),
    Case("-", C + "request_body_became_optional_base.yaml", C + "request_body_became_optional_base.yaml",
         "request-body-definition-changed", mutate=_set("paths", G, "post", "requestBody", "unknownKeyword",
                                                        value=1),
         level="breaking", documented="| `request-body-definition-changed` |"),
    Case("request-body-media-type-added", C + "request_body_media_type_updated_base.yaml",
         C + "request_body_media_type_updated_revision.yaml", "media-type-added"),
    Case("response-media-type-removed", "response-media-type-base.yaml", "response-media-type-revision.yaml",
         "media-type-removed"),
    Case("-", "response-media-type-base.yaml", "response-media-type-base.yaml",
         "media-type-definition-changed",
         mutate=_set("paths", "/products", "get", "responses", "200", "content", "application/json",
                     "encoding",
                     value={"a": {"contentType": "text/plain"}}),
         level="breaking", documented="| `media-type-definition-changed` |"),
    Case("response-success-status-removed", DEP + "deprecated-future.yaml", DEP + "deprecated-future-2.yaml",
         "response-removed"),
    Case("response-success-status-added", DEP + "deprecated-future.yaml", DEP + "deprecated-future-2.yaml",
         "response-added"),
    Case("-", "response-media-type-base.yaml", "response-media-type-base.yaml", "response-definition-changed",
         mutate=_set("paths", "/products", "get", "responses", "200", "unknownKeyword", value=1),
         level="breaking", documented="| `response-definition-changed` |"),
    # ---- response headers (header-case/, mutated as check_breaking_test.go does) ----
    Case("response-header-added", "header-case/base.yaml", "header-case/base.yaml", "response-header-added",
         mutate=_set("paths", "/test", "get", "responses", "200", "headers", "X-New",
                     value={"schema": {"type": "string"}})),
    Case("optional-response-header-removed", "header-case/base.yaml", "header-case/base.yaml",
         "response-header-removed",
         mutate=_drop("paths", "/test", "get", "responses", "200", "headers", "X-RateLimit-Limit")),
    Case("response-header-became-optional", "header-case/base.yaml", "header-case/base.yaml",
         "response-header-became-optional",
         mutate=lambda b, r: at(b, "paths", "/test", "get", "responses", "200", "headers",
                                "X-RateLimit-Limit").update(required=True)),
    Case("-", "header-case/base.yaml", "header-case/base.yaml", "response-header-became-required",
         mutate=lambda b, r: at(r, "paths", "/test", "get", "responses", "200", "headers",
                                "X-RateLimit-Limit").update(required=True),
         level=INFO, documented="| `response-header-became-required` |"),
    Case("-", "header-case/base.yaml", "header-case/base.yaml", "response-header-deprecated",
         mutate=lambda b, r: at(r, "paths", "/test", "get", "responses", "200", "headers",
                                "X-RateLimit-Limit").update(deprecated=True),
         level=INFO, documented="| `response-header-deprecated` |"),
    Case("-", "header-case/base.yaml", "header-case/base.yaml", "response-header-definition-changed",
         mutate=lambda b, r: at(r, "paths", "/test", "get", "responses", "200", "headers",
                                "X-RateLimit-Limit").update(style="form"),
         level="breaking", documented="| `response-header-definition-changed` |"),
    # ---- security ----
    Case("api-security-added", C + "api_security_added_base.yaml", C + "api_security_added_revision.yaml",
         "security-added"),
    Case("api-security-removed", C + "api_security_added_revision.yaml", C + "api_security_added_base.yaml",
         "security-removed"),
    Case("api-security-scope-removed", C + "api_security_updated_base.yaml",
         C + "api_security_updated_revision.yaml", "security-scopes-removed"),
    Case("api-security-scope-added", C + "api_security_updated_revision.yaml",
         C + "api_security_updated_base.yaml", "security-scopes-added"),
    Case("api-global-security-added", C + "api_security_global_added_revision.yaml",
         C + "api_security_global_added_revision.yaml", "security-requirement-added",
         mutate=lambda b, r: r["security"].append({"bearerAuth": []})),
    Case("api-global-security-removed", C + "api_security_global_added_revision.yaml",
         C + "api_security_global_added_revision.yaml", "security-requirement-removed",
         mutate=lambda b, r: b["security"].append({"bearerAuth": []})),
    Case("api-security-component-type-changed", C + "api_security_global_added_revision.yaml",
         C + "api_security_global_added_revision.yaml", "security-scheme-changed",
         mutate=lambda b, r: r["components"]["securitySchemes"]["petstore_auth"].update(type="apiKey")),
    # ---- callbacks and the document ----
    Case("-", "openapi-test1.yaml", "openapi-test1.yaml", "callback-removed", mutate=_drop(
        "paths", "/subscribe", "post", "callbacks", "myEvent"), level="breaking",
         documented="| `callback-removed` |"),
    Case("-", "openapi-test1.yaml", "openapi-test1.yaml", "callback-added", mutate=_drop(
        "paths", "/subscribe", "post", "callbacks", "myEvent", side="base"), level=INFO,
         documented="| `callback-added` |"),
    Case("-", "openapi31/base.yaml", "openapi31/revision.yaml", "json-schema-dialect-changed", level=INFO,
         documented="| `json-schema-dialect-changed` |"),
    Case("-", "upgrade/simple-30.yaml", "upgrade/equivalent-31.yaml", "openapi-version-changed", level=INFO,
         documented="| `openapi-version-changed` |"),
]  # fmt: skip


def found(case: Case) -> list[Any]:
    base, revision = read(case.base), read(case.revision)
    if case.mutate:
        case.mutate(base, revision)
    diff = diff_openapi(base, revision, options=DiffOptions(today=TODAY, **case.options))
    return [
        c
        for c in diff.changes
        if c.kind == case.kind
        and (not case.operation or c.operation == case.operation)
        and case.where in c.where
    ]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_each_change_id_is_graded_on_oasdiffs_data_as_the_rules_table_says(case):
    # Given a pair of oasdiff's test specs (changed as its Go test changes them, where it does)
    # When Sentinel diffs them
    changes = found(case)
    # Then it reports the change id, at the level the rules table gives oasdiff's rule (agreeing with
    # oasdiff's level or saying why not), or at a level docs/ingestion.md states for this case
    assert changes, f"no {case.kind} found"
    if case.level:
        assert case.documented and case.documented in DOCS_TEXT, case.documented
        expected = case.level
    else:
        oasdiff_level, ours, expected, note = RULES[case.rule]
        assert ours == case.kind
        assert oasdiff_level == expected or note.startswith("differs: "), (case.rule, note)
    assert {c.level for c in changes} == {expected}, [c.describe() for c in changes]
    assert all(c.breaking is (expected == "breaking") for c in changes)


def test_there_is_a_case_for_every_change_id_the_documentation_lists():
    assert change_ids() == {case.kind for case in CASES}


def test_the_rules_table_covers_every_oasdiff_rule_once_with_a_verdict():
    # 509 rules at the corpus's commit (checker/rules.go); each row agrees, differs with a reason, or says
    # why the rule does not apply
    assert len(RULES) == 509
    for rule, (oasdiff_level, ours, level, note) in RULES.items():
        if ours == "-":
            assert note.startswith("n/a: "), rule
        elif oasdiff_level == level:
            assert note.startswith("agrees"), rule
        else:
            assert re.match(r"differs: \S", note), rule
        assert ours == "-" or ours in change_ids(), rule


def test_a_lifecycle_softening_never_removes_a_per_operation_obligation():
    # Given a parameter removed from an alpha operation (not breaking) and a per-operation rule counting
    # every change, beside a breaking-only review
    before = (DATA / PD / "base-alpha-stability.yaml").read_text(encoding="utf-8")
    after = (DATA / PD / "sunset-alpha-stability.yaml").read_text(encoding="utf-8")
    config = ProjectConfig.model_validate(
        {
            "environments": ["staging"],
            "unclassified_policy": "unit-tests",
            "derivation_rules": [
                {"openapi": "api", "policy_id": "contract", "per": "operation"},
                {"openapi": "api", "policy_id": "review", "when": "breaking"},
                {"openapi": "api", "policy_id": "heads-up", "when": "warning"},
            ],
        }
    )
    change = Change.model_validate({"openapi": [{"name": "api", "before": before, "after": after}]})
    # When obligations are derived
    found_ = derive(change, config, today=TODAY)
    # Then the operation still owes its contract tests, a warning rule its heads-up, and nothing owes a
    # breaking-change review
    assert [(o["policy_id"], o["scope"]) for o in found_] == [
        ("heads-up", "api"),
        ("contract", "api/GET /api/test"),
    ]


def test_a_stability_downgrade_in_the_same_change_softens_nothing():
    # Given the base's stable operation made alpha in the change that also removes its parameter
    base = read(PD + "base.yaml")
    revision = read(PD + "sunset.yaml")
    revision["paths"]["/api/test"]["get"]["x-stability-level"] = "alpha"
    # When diffed
    diff = diff_openapi(base, revision, options=DiffOptions(today=TODAY))
    # Then both the downgrade and the removal are breaking
    verdicts = {c.kind: c.level for c in diff.changes}
    assert verdicts == {"operation-stability-decreased": "breaking", "parameter-removed": "breaking"}
