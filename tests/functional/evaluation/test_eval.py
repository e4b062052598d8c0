"""The scenario harness (`sentinel eval`): the whole catalog runs twice, in process, through the real handlers
and passes every gate with the same report digest each time; and the harness can fail — a wrong expectation
and each kind of product fault (made here by patching the product for one test) turn a gate red."""

import dataclasses
import itertools
import json
import tempfile
from typing import Any

import pytest

from sentinel_domain.memory import MemoryStore, SequentialIds
from sentinel_evaluation.batch import COUNTERS, CRITICAL, MIN_SCENARIOS, run_batch
from sentinel_evaluation.catalog import (
    CatalogError,
    FinalExpectation,
    Scenario,
    load_catalog,
    scenario_from_data,
)
from sentinel_evaluation.cli import main, render
from sentinel_service.adapters.sqlite_store import SqliteStateStore


@pytest.fixture(scope="module")
def catalog() -> dict[str, Scenario]:
    return {s.name: s for s in load_catalog()}


@pytest.fixture(scope="module")
def batches() -> tuple[dict[str, Any], dict[str, Any]]:
    """Two consecutive batches of the whole catalog in one process."""
    return run_batch(), run_batch()


def failures(report: dict[str, Any]) -> list[str]:
    return [f"{s['name']}: {f}" for s in report["scenarios"] for f in s["failures"]]


# ---- the whole catalog --------------------------------------------------------------------------------


def test_the_catalog_passes_every_gate(batches) -> None:
    # Given the whole catalog, each scenario run twice from a fresh fixture
    report, _again = batches
    # Then the batch passes, with at least 40 scenarios and 80 runs
    assert report["passed"], failures(report) or report["gates"]
    assert report["catalog"]["scenarios"] >= MIN_SCENARIOS
    assert report["catalog"]["runs"] == 2 * report["catalog"]["scenarios"] >= 2 * MIN_SCENARIOS
    # And all five counters are zero
    assert {name: report["counters"][name] for name in COUNTERS} == dict.fromkeys(COUNTERS, 0)
    # And every gate held, none skipped
    assert all(g["passed"] and not g["skipped"] for g in report["gates"].values()), report["gates"]


def test_every_critical_scenario_is_present_marked_and_passing(batches) -> None:
    report, _again = batches
    by_name = {s["name"]: s for s in report["scenarios"]}
    missing = [name for name in CRITICAL if name not in by_name]
    assert not missing
    assert all(by_name[name]["critical"] and by_name[name]["passed"] for name in CRITICAL)


def test_two_consecutive_batches_give_the_same_report_digest(batches) -> None:
    first, second = batches
    assert len(first["report_digest"]) == 64
    assert first["report_digest"] == second["report_digest"]
    assert first == second


def test_the_catalog_on_sqlite_gives_the_report_it_gives_in_memory(batches) -> None:
    # Given the whole catalog's report in memory
    in_memory, _again = batches
    # When the catalog runs again with every run on the embedded SQLite store, each in a file of its own
    on_sqlite = run_batch(store="sqlite")
    # Then it passes, and its report (digest included) is the in-memory one: the store changed nothing
    assert on_sqlite["passed"], failures(on_sqlite) or on_sqlite["gates"]
    assert on_sqlite["report_digest"] == in_memory["report_digest"]
    assert on_sqlite == in_memory


def test_the_harness_catches_a_sqlite_store_that_drops_its_conditions(catalog, monkeypatch) -> None:
    # Given a SQLite store that (wrongly) drops the plan and approval conditions of an execution's write
    append = SqliteStateStore.append

    def lax(self: SqliteStateStore, change: Any) -> None:
        append(self, dataclasses.replace(change, require_plan_digest=None, require_approval_after=None))

    monkeypatch.setattr(SqliteStateStore, "append", lax)
    # When the expiry race runs on it, Then the side effect it lets through is counted
    report = run_batch([catalog["expiry_between_approval_and_execution"]], store="sqlite")
    assert not report["passed"]
    assert report["counters"]["unauthorized_side_effect_count"] >= 2


def test_the_command_runs_on_sqlite_and_leaves_no_file_behind(tmp_path, monkeypatch, capsys) -> None:
    # Given temporary files kept under this test's directory
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # When the tampering scenarios run on SQLite from the command line
    scenarios = [
        "fact_edited_behind_the_chain",
        "event_removed_from_the_chain",
        "project_policy_edited_in_place",
    ]
    code = main(["--json", "--store", "sqlite", *(arg for name in scenarios for arg in ("--scenario", name))])
    # Then they pass, the store is named outside the report, and every database file is gone
    printed = capsys.readouterr()
    assert code == 0, failures(json.loads(printed.out))
    assert "store: sqlite" in printed.err
    assert list(tmp_path.iterdir()) == []


def test_the_catalog_covers_both_outcomes_and_side_effects(batches) -> None:
    # The catalog is not all holds: positive controls reach ready, and side effects do leave
    report, _again = batches
    decisions = {s["decision"] for s in report["scenarios"]}
    assert {"ready", "hold"} <= decisions
    assert any(s["side_effects"] for s in report["scenarios"])
    assert "batch: PASS" in render(report)


# ---- the harness can fail -----------------------------------------------------------------------------


def _expecting(scenario: Scenario, decision: str | None, findings: list[str]) -> Scenario:
    expect = FinalExpectation.model_validate(
        {**scenario.expect.model_dump(), "decision": decision, "findings": findings}
    )
    return scenario.model_copy(update={"expect": expect})


def test_expecting_ready_where_hold_comes_fails_the_batch(catalog) -> None:
    # Given approval_missing, deliberately expected to be ready
    broken = _expecting(catalog["approval_missing"], "ready", [])
    # When it runs
    report = run_batch([broken])
    # Then the scenario fails on its expectation, and the batch with it
    assert not report["passed"]
    assert report["gates"]["every expectation exact"]["passed"] is False
    assert any("expected decision ready, got hold" in f for f in failures(report))


def test_expecting_hold_where_ready_comes_counts_a_false_ready(catalog) -> None:
    # Given the ready flow, deliberately expected to hold
    broken = _expecting(catalog["ready_flow_end_to_end"], "hold", ["REVIEW_MISSING"])
    report = run_batch([broken])
    # Then each run counts the ready the scenario did not expect
    assert not report["passed"]
    assert report["counters"]["false_ready_count"] == 2


def test_a_wrong_expected_refusal_code_is_caught() -> None:
    # Given a scenario written as data whose step expects the wrong refusal code
    scenario = scenario_from_data(
        {
            "name": "wrong_refusal_code",
            "category": "reviews",
            "description": "expects the wrong code on purpose",
            "steps": [{"use": "planned"}, {"do": "approve", "as": "requester", "expect": "FORBIDDEN_ROLE"}],
            "expect": {
                "decision": "hold",
                "findings": ["EVIDENCE_MISSING", "REVIEW_MISSING", "TASK_NOT_REPORTED"],
            },
        }
    )
    report = run_batch([scenario])
    assert not report["passed"]
    assert any(
        "expected refusal FORBIDDEN_ROLE (403), got 403 AGENT_CANNOT_REVIEW" in f for f in failures(report)
    )


def test_an_agent_certifying_its_own_evidence_is_caught(catalog, monkeypatch) -> None:
    # Given a gate that (wrongly) trusts every publisher
    monkeypatch.setattr("sentinel_domain.evidence.trust_of", lambda _actor, _policy: "verified")
    report = run_batch([catalog["evidence_unverified_from_the_agent"]])
    # Then the agent's own evidence makes the candidate ready: a false ready, across an identity boundary
    assert not report["passed"]
    assert report["counters"]["false_ready_count"] >= 2
    assert report["counters"]["identity_boundary_failure_count"] >= 2


def test_self_approval_through_a_sponsor_is_caught(catalog, monkeypatch) -> None:
    # Given a gate that (wrongly) excludes nobody from approving
    monkeypatch.setattr("sentinel_domain.usecases.reviews.excluded_approvers", lambda _state, _digest: set())
    report = run_batch([catalog["self_approval_through_a_sponsor"]])
    assert not report["passed"]
    assert report["counters"]["identity_boundary_failure_count"] >= 2


def test_evidence_bound_to_another_subject_that_decides_is_caught(catalog, monkeypatch) -> None:
    # Given a gate that (wrongly) ignores what evidence is bound to when it decides
    monkeypatch.setattr("sentinel_domain.decision._binding_problems", lambda *_args: [])
    report = run_batch([catalog["evidence_wrong_subject"]])
    assert not report["passed"]
    assert report["counters"]["wrong_binding_failure_count"] >= 2
    assert report["counters"]["false_ready_count"] >= 2


def test_an_execution_without_approval_is_an_unauthorized_side_effect(catalog, monkeypatch) -> None:
    # Given a gate whose executions (wrongly) see every plan as approved
    monkeypatch.setattr(
        "sentinel_domain.usecases.actions.approval_status",
        lambda *_args: (None, "9999-12-31T00:00:00.000000Z"),
    )
    report = run_batch([catalog["approval_missing"]])
    assert not report["passed"]
    assert report["counters"]["unauthorized_side_effect_count"] >= 2


def test_an_expiry_the_write_does_not_recheck_is_an_unauthorized_side_effect(catalog, monkeypatch) -> None:
    # Given a store that (wrongly) drops the plan and approval conditions of an execution's write
    append = MemoryStore.append

    def lax(self: MemoryStore, change: Any) -> None:
        append(self, dataclasses.replace(change, require_plan_digest=None, require_approval_after=None))

    monkeypatch.setattr(MemoryStore, "append", lax)
    report = run_batch([catalog["expiry_between_approval_and_execution"]])
    assert not report["passed"]
    assert report["counters"]["unauthorized_side_effect_count"] >= 2


def test_ids_that_differ_between_runs_are_a_nondeterministic_replay(catalog, monkeypatch) -> None:
    # Given ids drawn from a counter that outlives the fixture (as a random id would)
    counter = itertools.count(1)
    monkeypatch.setattr(SequentialIds, "new_id", lambda _self, prefix: f"{prefix}_{next(counter):08d}")
    report = run_batch([catalog["evidence_missing"]])
    assert not report["passed"]
    assert report["counters"]["nondeterministic_replay_count"] == 1


# ---- the catalog is data, checked before anything runs ------------------------------------------------


@pytest.mark.parametrize(
    "step",
    [
        {"do": "approve", "as": "reviewer", "digets": "current"},
        {"do": "teleport"},
        {"do": "evidence", "expect": {"outcom": "pass"}},
        {"do": "race", "kind": "sometimes"},
    ],
)
def test_a_typo_in_a_scenario_is_refused_at_load_time(step: dict[str, Any]) -> None:
    with pytest.raises(CatalogError):
        scenario_from_data(
            {
                "name": "typo",
                "category": "reviews",
                "description": "a typo on purpose",
                "steps": [{"use": "candidate"}, step],
                "expect": {"decision": "hold", "findings": ["PLAN_MISSING"]},
            }
        )


# ---- the command ----------------------------------------------------------------------------------------


def test_the_command_prints_json_and_writes_the_same_report(tmp_path, capsys) -> None:
    path = tmp_path / "report.json"
    code = main(
        [
            "--json",
            "--scenario",
            "ready_flow_end_to_end",
            "--scenario",
            "action_past_its_limit",
            "--report",
            str(path),
        ]
    )
    printed = json.loads(capsys.readouterr().out)
    assert code == 0
    assert printed == json.loads(path.read_text())
    assert [s["name"] for s in printed["scenarios"]] == ["ready_flow_end_to_end", "action_past_its_limit"]
    assert printed["catalog"]["subset"] is True and printed["gates"]["catalog size"]["skipped"] is True


def test_the_command_refuses_an_unknown_scenario(capsys) -> None:
    assert main(["--scenario", "no_such_scenario"]) == 2
    assert "no_such_scenario" in capsys.readouterr().err
