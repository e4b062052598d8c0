"""The forge check publisher (sentinel_domain.usecases.forge_checks) over the in-memory store and a recording
forge: every write to a GitHub-mapped candidate leaves a `forge_check` outbox item; the publisher turns the
decision at the service clock into the check run `sentinel/<environment>`, success only for ready; it skips
what did not change, updates the run it created, survives a forge outage without ever turning success, and
the sweep and revocations re-publish what time and revocation change with nothing written."""

from dataclasses import replace
from typing import Any

import pytest

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.forge import ForgeUnavailable
from sentinel_domain.forge_checks import FORGE_CHECK_KIND, FORGE_RECHECK_KIND, CheckRecord
from sentinel_domain.models import ChangeContextRequest, EvidenceRequest, Policy, ReportRequest, ReviewRequest
from sentinel_domain.usecases.chain import ANSWER_TAG
from sentinel_domain.usecases.forge_checks import ForgeChecks, PublishLater
from support.paths import REPO
from support.recording_forge import RecordingForge
from support.world import ADMIN, CI, CONFIG, PROJECT, REQUESTER, REV, REVIEWER, SEAL, UNIT_POLICY, World

REPOSITORY = "acme/payments"
GITHUB = {
    "app_id": 1,
    "installation_id": 2,
    "app_principal": "ci-bot",
    "repositories": [{"repository": REPOSITORY, "subject": "payments", "environments": ["staging"]}],
}
PASSING = (
    '<testsuite name="s"><testcase classname="a" name="t1"/><testcase classname="a" name="t2"/></testsuite>'
)
FAILING = (
    '<testsuite name="s"><testcase classname="payments.Refunds" name="test_refund_rounds_down">'
    '<failure>1 != 2</failure></testcase><testcase classname="a" name="t2"/></testsuite>'
)


@pytest.fixture
def world() -> World:
    return World({**CONFIG, "github": GITHUB})


@pytest.fixture
def forge() -> RecordingForge:
    return RecordingForge()


def publisher(world: World, forge: RecordingForge) -> ForgeChecks:
    return ForgeChecks(world.gate.chain, forge, world.store)


def items(world: World, kind: str = FORGE_CHECK_KIND) -> list[dict[str, Any]]:
    return [{k: v for k, v in i.items() if k != ANSWER_TAG} for i in world.store.outbox if i["kind"] == kind]


def drain(world: World, checks: ForgeChecks) -> None:
    """The relay: each forge item once, in order (what the outbox delivers)."""
    for item in items(world) + items(world, FORGE_RECHECK_KIND):
        checks.handle(item)
    world.store.outbox.clear()


def evidence(junit: str, url: str = "https://ci.example.com/runs/7", revision: str = REV) -> EvidenceRequest:
    return EvidenceRequest.model_validate(
        {
            "check_id": "C1",
            "subject": "payments",
            "revision": revision,
            "environment": "staging",
            "scope": ["payments-api"],
            "observed_at": "2026-11-29T11:59:00Z",
            "source": {"system": "ci", "run_id": "7", "url": url},
            "junit_xml": junit,
        }
    )


def ready(world: World, junit: str = PASSING, revision: str = REV) -> str:
    """A candidate attested and proved by ci-bot, its fallback plan approved and its task reported."""
    cid = world.candidate(revision=revision)["candidate_id"]
    context = ChangeContextRequest.model_validate({"change": {"files": ["services/payments/api.py"]}})
    world.gate.add_change_context(PROJECT, cid, CI, context, None)
    digest = world.gate.propose(PROJECT, cid, REQUESTER, None, None).as_json()["plan_digest"]
    world.gate.review(
        PROJECT, cid, REVIEWER, ReviewRequest(decision="approve", plan_digest=digest, revision=revision), None
    )
    posted = world.gate.post_evidence(PROJECT, cid, CI, evidence(junit, revision=revision), None).as_json()
    body = {
        "plan_digest": digest,
        "status": "completed",
        "checks": [{"check_id": "C1", "evidence_id": posted["evidence_id"]}],
    }
    world.gate.report(PROJECT, cid, "T1", REQUESTER, ReportRequest.model_validate(body), None)
    return cid


def latest(forge: RecordingForge):
    run = forge.latest("sentinel/staging", REV)
    assert run is not None, "no check run was published"
    return run


# ---- the outbox item ---------------------------------------------------------------------------------


def test_every_write_to_a_mapped_candidate_carries_a_forge_check_item(world: World) -> None:
    # Given a project whose GitHub App maps payments/staging to a repository
    # When a candidate is created, attested, planned, reviewed, proved and reported
    cid = ready(world)
    # Then each of those six writes left one forge_check item naming the candidate, tagged like every
    # side effect, and nothing reached a forge inside the requests
    assert items(world) == [{"kind": FORGE_CHECK_KIND, "project": PROJECT, "candidate_id": cid}] * 6
    assert all(ANSWER_TAG in i for i in world.store.outbox)


def test_a_candidate_no_repository_maps_carries_no_item() -> None:
    # Given the same project without a GitHub App, and one whose app maps only production
    for config in (
        CONFIG,
        {
            **CONFIG,
            "github": {
                **GITHUB,
                "repositories": [{**GITHUB["repositories"][0], "environments": ["production"]}],
            },
        },
    ):
        world = World(config)
        # When a staging candidate is created
        world.candidate()
        # Then no forge item was written
        assert items(world) == []


def test_a_recorded_decision_also_carries_the_item(world: World) -> None:
    cid = world.candidate()["candidate_id"]
    world.store.outbox.clear()
    # When a decision is recorded on the candidate's chain
    world.gate.record_decision(PROJECT, cid, REQUESTER, None)
    # Then that write carries the item too
    assert [i["candidate_id"] for i in items(world)] == [cid]


# ---- what is published -------------------------------------------------------------------------------


def test_ready_publishes_success_on_the_revision(world: World, forge: RecordingForge) -> None:
    cid = ready(world)
    drain(world, publisher(world, forge))
    run = latest(forge)
    assert (run.conclusion, run.head_sha, run.external_id) == ("success", REV, cid)
    assert forge.runs[run.check_run_id][0] == REPOSITORY
    assert run.title == "staging: ready"


def test_a_hold_with_failing_tests_is_failure_and_names_them(world: World, forge: RecordingForge) -> None:
    # Given a candidate whose CI run failed one test
    ready(world, junit=FAILING)
    drain(world, publisher(world, forge))
    run = latest(forge)
    # Then its check is a failure whose summary names the finding, its remediation, the failing test and
    # the run the publisher gave
    assert run.conclusion == "failure"
    assert "EVIDENCE_NEGATIVE" in run.summary
    assert "Run pytest \\-q locally and read the first failure" in run.summary
    assert "` payments.Refunds.test_refund_rounds_down `" in run.summary
    assert "[the run](<https://ci.example.com/runs/7>)" in run.summary


def test_a_hold_waiting_for_a_person_is_action_required(world: World, forge: RecordingForge) -> None:
    # Given a candidate with no plan and no review yet
    world.candidate()
    drain(world, publisher(world, forge))
    # Then its check asks for action, and is not success
    run = latest(forge)
    assert run.conclusion == "action_required"
    assert "PLAN_MISSING" in run.summary


def test_an_unchanged_decision_is_not_published_again(world: World, forge: RecordingForge) -> None:
    cid = ready(world)
    checks = publisher(world, forge)
    drain(world, checks)
    calls = len(forge.calls)
    # When the same candidate's item is delivered again (at least once) and nothing changed
    outcome = checks.publish(PROJECT, cid)
    # Then the forge hears nothing
    assert outcome.status == "unchanged"
    assert len(forge.calls) == calls


def test_a_later_publication_updates_the_run_it_created(world: World, forge: RecordingForge) -> None:
    # Given a candidate published once (no plan yet), then planned
    cid = world.candidate()["candidate_id"]
    checks = publisher(world, forge)
    drain(world, checks)
    first = world.store.check_record(PROJECT, cid)
    assert first is not None and first.check_run_id is not None
    world.gate.propose(PROJECT, cid, REQUESTER, None, None)
    drain(world, checks)
    # Then the second publication named the stored run id: one run, updated
    assert forge.calls[-1][1].check_run_id == first.check_run_id
    assert len(forge.runs) == 1
    assert world.store.check_record(PROJECT, cid).version > first.version


def test_forge_unavailable_is_retried_and_never_success(world: World, forge: RecordingForge) -> None:
    # Given a candidate published as ready, then its evidence turning to a failure, while GitHub is down
    cid = ready(world)
    checks = publisher(world, forge)
    drain(world, checks)
    world.clock.advance(60)
    world.gate.post_evidence(PROJECT, cid, CI, evidence(FAILING), None)
    forge.unavailable = 2
    # When the item is delivered: the fault comes out of the publisher (the outbox keeps the item)
    for _ in range(2):
        with pytest.raises(ForgeUnavailable):
            checks.handle(items(world)[-1])
    # Then the record still says what the forge shows, and the retry once GitHub answers publishes failure
    assert world.store.check_record(PROJECT, cid).conclusion == "success"
    checks.handle(items(world)[-1])
    assert latest(forge).conclusion == "failure"
    assert all(c.conclusion != "success" for _r, c in forge.calls[-3:])


def test_a_run_the_forge_forgot_is_created_again(world: World, forge: RecordingForge) -> None:
    cid = world.candidate()["candidate_id"]
    checks = publisher(world, forge)
    drain(world, checks)
    forge.runs.clear()  # deleted on GitHub: an update answers 404
    world.gate.propose(PROJECT, cid, REQUESTER, None, None)
    drain(world, checks)
    assert latest(forge).check_run_id == world.store.check_record(PROJECT, cid).check_run_id


def test_another_publisher_creating_the_run_makes_this_one_wait(world: World, forge: RecordingForge) -> None:
    # Given a record claimed a moment ago by a publisher creating the run
    cid = world.candidate()["candidate_id"]
    claim = CheckRecord(
        PROJECT, cid, REPOSITORY, REV, "sentinel/staging", 1, claimed_at=world.gate.chain.now()
    )
    claim = replace(claim, tag=SEAL.tag("check_record", claim.fields()))  # as a publisher writes it
    assert world.store.put_check_record(claim)
    # Then this one creates no second run: it is retried later
    with pytest.raises(PublishLater):
        publisher(world, forge).publish(PROJECT, cid)
    assert forge.calls == []
    # And once the claim lapses (its publisher died), it takes over
    world.clock.advance(61)
    assert publisher(world, forge).publish(PROJECT, cid).status == "published"


def test_a_lost_race_publishes_again_from_a_fresh_evaluation(world: World, forge: RecordingForge) -> None:
    # Given a publisher whose record write loses once to another publisher
    cid = ready(world)
    checks = publisher(world, forge)
    drain(world, checks)
    real_put = world.store.put_check_record
    lost = []

    def put_once_stale(record: CheckRecord) -> bool:
        if not lost:
            lost.append(record)
            real_put(world.store.check_record(PROJECT, cid).next())  # the other publisher's write
            return False
        return real_put(record)

    world.store.put_check_record = put_once_stale  # type: ignore[method-assign]
    world.clock.advance(60)
    world.gate.post_evidence(PROJECT, cid, CI, evidence(FAILING), None)
    # When it publishes
    outcome = checks.publish(PROJECT, cid)
    # Then it published twice, the second time whatever the digest, and the record holds its last write
    assert outcome.status == "published"
    assert len(lost) == 1 and forge.calls[-1][1].conclusion == forge.calls[-2][1].conclusion == "failure"


def test_a_chain_that_fails_verification_is_failure(world: World, forge: RecordingForge) -> None:
    cid = ready(world)
    checks = publisher(world, forge)
    drain(world, checks)
    # When a fact on the candidate's chain is edited in the table
    stream = world.store.streams[next(r for r in world.store.streams if r.candidate_id == cid)]
    seq = max(stream.facts)
    stream.facts[seq] = stream.facts[seq].replace('"completed"', '"blocked"')
    checks.publish(PROJECT, cid)
    # Then the check turns failure, naming the tampering
    run = latest(forge)
    assert run.conclusion == "failure"
    assert "STATE_TAMPERED" in run.summary


# ---- time and revocation -----------------------------------------------------------------------------


def test_the_sweep_republishes_an_approval_expired_candidate_as_not_success(forge: RecordingForge) -> None:
    # Given approvals valid for an hour (evidence for a day), and a ready candidate published success
    world = World({**CONFIG, "github": GITHUB, "approval_ttl_seconds": 3600})
    cid = ready(world)
    checks = publisher(world, forge)
    drain(world, checks)
    assert latest(forge).conclusion == "success"
    record = world.store.check_record(PROJECT, cid)
    assert record.due_at == "2026-11-29T13:00:00.000000Z"  # the approval's expiry, the earliest
    # When the clock passes to within one sweep of that expiry, with nothing written
    world.clock.advance(3600 - 200)
    report = checks.sweep()
    # Then the sweep published it again, not success, before the expiry itself
    assert report.published == 1
    run = latest(forge)
    assert run.conclusion == "action_required"
    assert "expires at 2026-11-29T13:00:00.000000Z" in run.title
    # And after the expiry, the next sweep publishes the hold the expiry caused
    world.clock.advance(400)
    checks.sweep()
    assert latest(forge).conclusion == "action_required"
    assert "REVIEW_EXPIRED" in latest(forge).summary
    # And the evidence's freshness is the next expiry: the candidate stays in the sweep until then
    assert world.store.check_record(PROJECT, cid).due_at == "2026-11-30T11:59:00.000000Z"


def test_a_candidate_nothing_can_expire_leaves_the_sweep(world: World, forge: RecordingForge) -> None:
    # Given a candidate with no approval and no evidence (nothing in it expires)
    cid = world.candidate()["candidate_id"]
    checks = publisher(world, forge)
    drain(world, checks)
    # Then its record is not due, and no sweep publishes it
    assert world.store.check_record(PROJECT, cid).due_at == ""
    world.clock.advance(86400 * 30)
    assert checks.sweep().published == 0


def test_a_sweep_with_github_down_defers_and_publishes_next_time(world: World, forge: RecordingForge) -> None:
    ready(world)
    checks = publisher(world, forge)
    drain(world, checks)
    world.clock.advance(86400 - 200)
    forge.unavailable = 1
    assert len(checks.sweep().deferred) == 1
    assert latest(forge).conclusion == "success"  # the old run stays until GitHub answers...
    assert checks.sweep().published == 1  # ...and the next sweep publishes it
    assert latest(forge).conclusion == "action_required"


def test_a_compromised_revocation_republishes_every_candidate_it_affects(
    world: World, forge: RecordingForge
) -> None:
    # Given a ready candidate whose approval was given by a reviewer later revoked as compromised
    ready(world)
    checks = publisher(world, forge)
    drain(world, checks)
    assert latest(forge).conclusion == "success"
    # When the operator revokes the reviewer (a write to the project chain only)
    world.clock.advance(1)
    world.gate.record_project_event(
        PROJECT, "principal.revoked", {"principal_id": REVIEWER.id, "compromised": True}
    )
    # Then the write carried a project-wide re-check, and delivering it republishes the candidate
    assert items(world, FORGE_RECHECK_KIND) == [
        {"kind": FORGE_RECHECK_KIND, "project": PROJECT, "reason": "principal.revoked"}
    ]
    drain(world, checks)
    run = latest(forge)
    assert run.conclusion == "action_required"
    assert "APPROVAL_REVOKED" in run.summary


def test_a_first_publication_the_outbox_gave_up_on_is_published_by_the_sweep(
    world: World, forge: RecordingForge
) -> None:
    # Given GitHub down through every retry of a new candidate's item (the item is then dead-lettered)
    cid = world.candidate()["candidate_id"]
    checks = publisher(world, forge)
    forge.unavailable = 3
    for _ in range(3):
        with pytest.raises(ForgeUnavailable):
            checks.handle(items(world)[-1])
    # Then no run exists yet, but the record fell due: a minute later, the sweep publishes the check
    assert forge.runs == {}
    assert world.store.check_record(PROJECT, cid).due_at
    world.clock.advance(61)
    assert checks.sweep().published == 1
    assert latest(forge).conclusion == "action_required"
    assert len(forge.runs) == 1


def test_the_example_summary_in_the_docs_is_what_the_publisher_publishes(
    world: World, forge: RecordingForge
) -> None:
    # Given the docs' example: a candidate whose CI run failed one test
    ready(world, junit=FAILING)
    drain(world, publisher(world, forge))
    # Then docs/github.md shows exactly the summary the publisher published for it
    text = (REPO / "docs" / "github.md").read_text(encoding="utf-8")
    example = text.split("<!-- example-summary", 1)[1].split("```markdown\n", 1)[1].split("\n```", 1)[0]
    assert example == latest(forge).summary


def test_the_candidates_evidence_summaries_carry_the_failing_test_names(world: World) -> None:
    cid = ready(world, junit=FAILING)
    view = world.gate.get_candidate(PROJECT, cid, REQUESTER).as_json()
    (evidence,) = view["evidence"]
    assert evidence["failing_tests"] == ["payments.Refunds.test_refund_rounds_down"]
    assert evidence["failing_tests_count"] == 1
    assert evidence["source"]["url"] == "https://ci.example.com/runs/7"


def test_a_store_fault_turns_a_published_check_to_failure(world: World, forge: RecordingForge) -> None:
    # Given a ready candidate published success
    cid = ready(world)
    checks = publisher(world, forge)
    drain(world, checks)
    # When its chain cannot be read at all (the store fails on every chain read)
    real_load = world.store.load

    def failing_load(ref):  # type: ignore[no-untyped-def]
        if ref.candidate_id == cid:
            raise StoreUnavailable("DynamoDB answered 500")
        return real_load(ref)

    world.store.load = failing_load  # type: ignore[method-assign]
    checks.publish(PROJECT, cid)
    # Then the same run turns failure, saying the state is unavailable
    run = latest(forge)
    assert run.conclusion == "failure" and "STATE_UNAVAILABLE" in run.summary
    assert len(forge.runs) == 1


def test_a_recheck_tries_every_candidate_before_raising_a_forge_fault(
    world: World, forge: RecordingForge
) -> None:
    # Given two checked candidates (staging at two revisions), both ready and published success
    first = ready(world)
    checks = publisher(world, forge)
    second = ready(world, revision="c" * 40)
    drain(world, checks)
    # When a policy amendment re-checks the project while GitHub fails once
    world.clock.advance(1)
    world.gate.put_policy(
        PROJECT, "unit-tests", ADMIN, Policy.model_validate({**UNIT_POLICY, "min_tests": 5})
    )
    (recheck,) = items(world, FORGE_RECHECK_KIND)
    forge.unavailable = 1
    before = len(forge.calls)
    # Then the item raises (to be retried), but only once both candidates were tried
    with pytest.raises(ForgeUnavailable):
        checks.handle(recheck)
    assert {c.external_id for _r, c in forge.calls[before:]} == {first, second}
    # And the retry publishes the one GitHub missed: both hold now (the amendment retired their evidence)
    outcomes = {p.candidate_id: p.status for p in checks.handle(recheck)}
    assert sorted(outcomes.values()) == ["published", "unchanged"]
    for revision in (REV, "c" * 40):
        run = forge.latest("sentinel/staging", revision)
        assert run is not None and run.conclusion == "action_required"
