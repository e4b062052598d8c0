"""The example ruleset in docs/examples/github/ruleset.json is a body GitHub's own REST description admits for
`POST /repos/{owner}/{repo}/rulesets`, and it requires the Sentinel check from the app alone, in the merge
queue too (docs/github.md, "The ruleset")."""

import json

from support.github_description import require_descriptions, rest_description
from support.paths import REPO

RULESET = REPO / "docs/examples/github/ruleset.json"


def test_the_example_ruleset_is_a_body_github_documents() -> None:
    # Given GitHub's published REST description
    require_descriptions()
    body = RULESET.read_bytes()
    # When the example is checked as the body of the create-ruleset call
    op, _values, violations = rest_description().check_request(
        "POST", "/repos/acme/payments/rulesets", {}, body
    )
    # Then GitHub documents the call and admits every field of the body
    assert op is not None and violations == []


def test_the_required_check_is_pinned_to_the_app_and_nothing_bypasses_it() -> None:
    ruleset = json.loads(RULESET.read_text())
    rules = {rule["type"]: rule.get("parameters", {}) for rule in ruleset["rules"]}
    # Then the Sentinel check counts only when the app (its integration id) posted it
    checks = rules["required_status_checks"]["required_status_checks"]
    assert checks and all(c["context"].startswith("sentinel/") and c["integration_id"] > 0 for c in checks)
    # And the queue builds the commit that lands (the judged commit is the deployed one), force pushes are
    # refused, and nobody bypasses the ruleset
    assert rules["merge_queue"]["merge_method"] == "MERGE" and "non_fast_forward" in rules
    assert ruleset["bypass_actors"] == [] and ruleset["enforcement"] == "active"
