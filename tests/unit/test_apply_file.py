"""`sentinel apply`'s file, before any request: read under caps, validated with the domain's models, refused
with `<file>:<path>: message`; the diff it shows against the gate's current versions; and the published JSON
Schema, which must be what the models generate now."""

import io
import json
from pathlib import Path
from typing import Any

import pytest

from sentinel_client.cli_output import CommandRefused
from sentinel_domain.models import Policy, ProjectConfig
from sentinel_runner.apply_cli import (
    SCHEMA_PATH,
    SentinelFile,
    differs,
    file_schema,
    plan_changes,
    read_file,
    render,
    schema_text,
)
from support.paths import REPO
from support.world import CONFIG, LINT_POLICY, UNIT_POLICY

EXAMPLE = REPO / "docs" / "examples" / "sentinel.yaml"
GOOD = {"version": 1, "project": "shop", "config": CONFIG, "policies": {"unit-tests": UNIT_POLICY}}


def written(tmp_path: Path, text: str, name: str = "sentinel.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def refusal(name: str, **kw: Any) -> CommandRefused:
    with pytest.raises(CommandRefused) as refused:
        read_file(name, **kw)
    return refused.value


# ---- reading and validating -------------------------------------------------------------------------------


def test_the_example_file_is_valid() -> None:
    wanted = read_file(str(EXAMPLE))
    assert wanted.project == "shop"
    assert set(wanted.policies) == {"unit-tests", "lint", "api-contract-tests"}
    assert wanted.config.unclassified_policy == "unit-tests"


def test_json_and_yaml_read_the_same(tmp_path: Path) -> None:
    import yaml

    from_json = read_file(written(tmp_path, json.dumps(GOOD), "s.json"))
    from_yaml = read_file(written(tmp_path, yaml.safe_dump(GOOD)))
    assert from_json == from_yaml == SentinelFile.model_validate(GOOD)


def test_standard_input_is_read_for_a_dash() -> None:
    class Stdin:
        buffer = io.BytesIO(json.dumps(GOOD).encode())

    assert read_file("-", stdin=Stdin()).project == "shop"


@pytest.mark.parametrize(
    ("change", "where", "words"),
    [
        ({"version": 2}, ":version:", "Input should be 1"),
        ({"surprise": 1}, ":surprise:", "unknown field"),
        ({"project": "Not A Project"}, ":project:", "should match pattern"),
        ({"config": dict(CONFIG, approvals_required="1")}, ":config.approvals_required:", "valid integer"),
        (
            {"config": dict(CONFIG, derivation_rules=[{"files": ["a"], "policy_id": "x", "bad": 1}])},
            ":config.derivation_rules[0].bad:",
            "unknown field",
        ),
        (
            {"policies": {"unit-tests": dict(UNIT_POLICY, min_tests=-1)}},
            ":policies.unit-tests.min_tests:",
            "greater than or equal to 0",
        ),
        ({"policies": {"no spaces": UNIT_POLICY}}, ":policies.no spaces.[key]:", "should match pattern"),
    ],
)
def test_a_problem_names_the_file_and_the_path(tmp_path: Path, change, where: str, words: str) -> None:
    name = written(tmp_path, json.dumps({**GOOD, **change}), "s.json")
    refused = refusal(name)
    assert refused.code == "VALIDATION_FAILED"
    assert refused.message.startswith(name + where), refused.message
    assert words in refused.message
    assert SCHEMA_PATH in (refused.next_step or "")


def test_several_problems_say_how_many_more(tmp_path: Path) -> None:
    refused = refusal(written(tmp_path, json.dumps({"version": 3, "config": {}, "x": 1}), "s.json"))
    assert refused.message.endswith("more)") and "(and " in refused.message


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("version: 1\nversion: 1\n", 'the key "version" appears twice'),
        ("version: [1\n", "not valid YAML"),
        ("- 1\n- 2\n", "must be a mapping"),
        ("", "empty"),
        ('version: !!python/object/apply:os.system ["true"]\n', "is not allowed"),
        (
            "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
                f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
                f"*{chr(97 + i)}, *{chr(97 + i)}]\n"
                for i in range(8)
            ),
            "nodes",
        ),
    ],
    ids=["duplicate-key", "broken-yaml", "not-a-mapping", "empty", "object-tag", "alias-bomb"],
)
def test_unreadable_text_is_refused_before_validation(tmp_path: Path, text: str, words: str) -> None:
    refused = refusal(written(tmp_path, text))
    assert refused.code == "VALIDATION_FAILED" and words in refused.message, refused.message


def test_a_file_larger_than_the_route_takes_is_refused(tmp_path: Path) -> None:
    refused = refusal(written(tmp_path, "# " + "x" * 300_000 + "\n"))
    assert "larger than" in refused.message


def test_a_missing_file_is_unreadable(tmp_path: Path) -> None:
    refused = refusal(str(tmp_path / "nope.yaml"))
    assert refused.code == "FILE_UNREADABLE" and "nope.yaml" in refused.message


# ---- the diff ---------------------------------------------------------------------------------------------


def current(config: dict[str, Any] | None = CONFIG, **policies: dict[str, Any]) -> dict[str, Any]:
    """The gate's versions as `read_current` gives them: normalised by the models."""
    return {
        "config": ProjectConfig.model_validate(config).stored() if config else None,
        "config_version": 1 if config else 0,
        "policies": {
            k.replace("_", "-"): Policy.model_validate(v).model_dump(mode="json") for k, v in policies.items()
        },
        "versions": {k.replace("_", "-"): 1 for k in policies},
    }


def test_nothing_differs_when_the_file_is_what_the_gate_holds() -> None:
    wanted = SentinelFile.model_validate({**GOOD, "policies": {"unit-tests": UNIT_POLICY}})
    changes = plan_changes(wanted, current(unit_tests=UNIT_POLICY, lint=LINT_POLICY))
    assert not differs(changes)
    assert changes["policies"]["unchanged"] == ["unit-tests"]
    assert changes["policies"]["untouched"] == ["lint"]
    text = render("shop", changes)
    assert "config: unchanged (version 1)" in text and "policies unchanged: 1" in text
    assert "not in the file (left as they are): lint" in text


def test_the_diff_shows_each_changed_key_with_old_and_new_values() -> None:
    # Given a file that raises approvals, adds a rule, changes one policy and adds another
    rules = [*CONFIG["derivation_rules"], {"files": ["api/**"], "policy_id": "lint"}]
    wanted = SentinelFile.model_validate(
        {
            **GOOD,
            "config": dict(CONFIG, approvals_required=2, derivation_rules=rules),
            "policies": {"unit-tests": dict(UNIT_POLICY, min_tests=5), "lint": LINT_POLICY},
        }
    )
    # When it is compared with a gate holding the demo configuration and the unit-tests policy
    changes = plan_changes(wanted, current(unit_tests=UNIT_POLICY))
    text = render("shop", changes)
    # Then the configuration moves to version 2 with each key's old and new value
    assert differs(changes)
    assert "config: version 1 → 2" in text
    assert "~ approvals_required: 1 → 2" in text
    assert '+ {"files": ["api/**"], "policy_id": "lint"' in text
    # And the changed policy shows its one key, the new one every key
    assert "policy unit-tests: changed\n    ~ min_tests: 1 → 5" in text
    assert "policy lint: new" in text and '+ command: "ruff check {scope}"' in text
    assert changes["policies"]["changed"] == {"unit-tests": [{"key": "min_tests", "old": 1, "new": 5}]}


def test_a_first_configuration_is_new() -> None:
    changes = plan_changes(SentinelFile.model_validate(GOOD), current(None))
    assert changes["config"]["status"] == "added"
    assert "config: new (version 1)" in render("shop", changes)


def test_a_long_value_is_cut_in_the_human_diff_but_kept_whole_in_json() -> None:
    long = dict(UNIT_POLICY, remediation_hint="r" * 1000)
    changes = plan_changes(
        SentinelFile.model_validate({**GOOD, "policies": {"unit-tests": long}}),
        current(unit_tests=UNIT_POLICY),
    )
    assert "…" in render("shop", changes)
    assert changes["policies"]["changed"]["unit-tests"][0]["new"] == "r" * 1000


# ---- the published schema ---------------------------------------------------------------------------------


def test_the_published_schema_is_what_the_models_generate() -> None:
    published = (REPO / SCHEMA_PATH).read_text()
    assert published == schema_text(), "run `make schemas` and commit docs/schemas/sentinel-file.v1.json"


def test_the_schema_accepts_the_example_and_refuses_an_unknown_field() -> None:
    import jsonschema
    import yaml

    schema = file_schema()
    example = yaml.safe_load(EXAMPLE.read_text())
    jsonschema.validate(example, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**example, "surprise": 1}, schema)
