"""The facts a reviewer needs are kept and shown: the changed files of every change context (at most 1,000 per
fact, with the count past the bound), and each piece of evidence's source and failing test names."""

from __future__ import annotations

import json
from datetime import timedelta

from sentinel_domain import changed_files
from sentinel_domain.junit import FAILING_NAMES
from sentinel_domain.models import ChangeContextRequest, EvidenceRequest
from sentinel_domain.ports import StreamRef
from sentinel_domain.usecases.candidates import evidence_extras
from support.world import CI, PROJECT, REQUESTER, REV, START, World


def facts(world: World, cid: str) -> list[dict]:
    stream = world.gate.store.load(StreamRef(PROJECT, cid))
    return [json.loads(text) for _seq, text in sorted(stream.facts.items())]


def add_context(world: World, cid: str, files: list[str], by=REQUESTER) -> None:
    request = ChangeContextRequest.model_validate({"change": {"files": files}})
    world.gate.add_change_context(PROJECT, cid, by, request, None)


def view(world: World, cid: str) -> dict:
    return world.gate.get_candidate(PROJECT, cid, REQUESTER).as_json()


# ---- changed files -----------------------------------------------------------------------------------------


def test_the_changed_files_of_every_context_are_shown_sorted_and_counted() -> None:
    # Given a candidate created from two files, then a context adding one more and repeating one
    world = World()
    cid = world.candidate(files=("services/payments/b.py", "services/payments/a.py"))["candidate_id"]
    add_context(world, cid, ["docs/guide.md", "services/payments/a.py"])
    # When the candidate is read
    shown = view(world, cid)["changed_files"]
    # Then the files are the union of both contexts, sorted, each once, and nothing is left out
    assert shown == {
        "files": ["docs/guide.md", "services/payments/a.py", "services/payments/b.py"],
        "count": 3,
        "truncated": False,
    }


def test_a_context_within_the_bound_is_stored_exactly_as_before() -> None:
    # Given a candidate created from files within the bound (duplicates included, as a caller may send)
    world = World()
    cid = world.candidate(
        files=("services/payments/b.py", "services/payments/a.py", "services/payments/a.py")
    )["candidate_id"]
    # Then its fact keeps the list as facts always did (sorted, as sent) and nothing else: earlier facts and
    # new ones of the same change are the same bytes, so chains and digests replay unchanged
    created = facts(world, cid)[0]
    assert created["change"] == {
        "files": ["services/payments/a.py", "services/payments/a.py", "services/payments/b.py"],
        "openapi": [],
    }


def test_past_the_bound_a_fact_keeps_the_first_thousand_and_the_count() -> None:
    # Given a change of 1,500 files
    world = World()
    files = [f"services/payments/f{i:04d}.py" for i in range(1500)]
    cid = world.candidate(files=tuple(reversed(files)))["candidate_id"]
    # Then the fact keeps the first 1,000 in sorted order and how many were sent
    created = facts(world, cid)[0]
    assert created["change"]["files"] == files[: changed_files.KEPT_PER_FACT]
    assert created["change"]["files_count"] == 1500
    # And the view shows those 1,000, the full count, and that the list is not whole
    shown = view(world, cid)["changed_files"]
    assert (shown["files"], shown["count"], shown["truncated"]) == (files[:1000], 1500, True)
    # And when the trusted publisher attests the same 1,500 files, the count is still 1,500
    add_context(world, cid, files, by=CI)
    assert view(world, cid)["changed_files"]["count"] == 1500


def test_obligations_are_derived_from_the_whole_change_not_what_is_kept() -> None:
    # Given 1,200 unclassified files (each owes its own obligation), sorted so the last ones are not kept
    world = World()
    files = [f"zz/f{i:04d}.txt" for i in range(1200)]
    created = world.candidate(files=tuple(files))
    # Then every file owes its obligation, the ones past the bound included
    scopes = {o["scope"] for o in created["obligations"]}
    assert {"zz/f0000.txt", "zz/f1199.txt"} <= scopes


def test_facts_without_files_show_an_empty_list_and_older_unbounded_ones_are_capped() -> None:
    # Given contexts as earlier versions could have stored them: without files, and with more than the bound
    without = {"type": "candidate.created", "change": {"openapi": []}}
    unbounded = {"type": "change_context.added", "change": {"files": [f"p{i:05d}" for i in range(1200)]}}
    # Then the first shows nothing, counted as nothing
    assert changed_files.view([without]) == {"files": [], "count": 0, "truncated": False}
    # And the second is shown capped at 1,000 with its whole count
    both = changed_files.view([without, unbounded])
    assert (len(both["files"]), both["count"], both["truncated"]) == (1000, 1200, True)
    assert both["files"] == sorted(both["files"])


def test_two_truncated_contexts_count_at_least_the_larger() -> None:
    # Given two contexts each past the bound, whose unkept paths are unknown
    one = {"change": {"files": [f"a{i:04d}" for i in range(1000)], "files_count": 1800}}
    two = {"change": {"files": [f"b{i:04d}" for i in range(1000)], "files_count": 1300}}
    shown = changed_files.view([one, two])
    # Then the count is the larger of the union of what was kept and each context's own count
    assert shown["count"] == 2000 and shown["truncated"] is True and len(shown["files"]) == 1000


# ---- evidence: the run and the failing tests ---------------------------------------------------------------


def _failing_report(failed: int, passed: int = 1) -> str:
    cases = [
        f'<testcase classname="pay.Refunds" name="t{i:03d}"><failure/></testcase>' for i in range(failed)
    ]
    cases += [f'<testcase classname="pay.Ok" name="p{i}"/>' for i in range(passed)]
    return "<testsuite>" + "".join(cases) + "</testsuite>"


def _post(world: World, cid: str, check_id: str, xml: str) -> dict:
    body = {
        "check_id": check_id,
        "subject": "payments",
        "revision": REV,
        "environment": "staging",
        "scope": ["payments-api"],
        "observed_at": (START + timedelta(seconds=1)).isoformat(),
        "source": {"system": "github-actions", "run_id": "4711", "url": "https://ci.example.com/runs/4711"},
        "junit_xml": xml,
    }
    return world.gate.post_evidence(PROJECT, cid, CI, EvidenceRequest.model_validate(body), None).as_json()


def test_an_evidence_summary_carries_its_source_and_up_to_fifty_failing_tests() -> None:
    # Given a planned candidate and a report in which 60 tests failed
    world = World()
    cid = world.candidate(by=CI)["candidate_id"]
    plan = world.gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()["plan"]
    check_id = plan["tasks"][0]["checks"][0]["check_id"]
    _post(world, cid, check_id, _failing_report(60))
    # When the candidate is read
    (evidence,) = view(world, cid)["evidence"]
    # Then the summary names the first 50 failing tests, in report order, and counts all 60
    assert FAILING_NAMES == 50
    assert evidence["failing_tests"] == [f"pay.Refunds.t{i:03d}" for i in range(50)]
    assert evidence["failing_tests_count"] == 60
    # And the source as published (never fetched)
    assert evidence["source"] == {
        "system": "github-actions",
        "run_id": "4711",
        "url": "https://ci.example.com/runs/4711",
    }


def test_evidence_stored_before_failing_names_were_kept_shows_none() -> None:
    # Given a passing report, and an evidence fact of the earlier shape (no failing_tests at all)
    world = World()
    cid = world.candidate(by=CI)["candidate_id"]
    plan = world.gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()["plan"]
    _post(world, cid, plan["tasks"][0]["checks"][0]["check_id"], _failing_report(0, passed=2))
    # Then both show an empty list and a count of 0
    (evidence,) = view(world, cid)["evidence"]
    assert (evidence["failing_tests"], evidence["failing_tests_count"]) == ([], 0)
    assert evidence_extras({"source": None}) == {
        "source": None,
        "failing_tests": [],
        "failing_tests_count": 0,
    }
