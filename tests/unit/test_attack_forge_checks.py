"""Attacks on the forge check publisher (usecases.forge_checks): interleavings of publishers and writes that
must never leave `success` on GitHub for a candidate that is not ready."""

from typing import Any

from unit.test_forge_checks import GITHUB, ready

from sentinel_domain.forge import CheckRun, PublishedCheck
from sentinel_domain.models import ReportRequest
from sentinel_domain.usecases.forge_checks import ForgeChecks
from support.recording_forge import RecordingForge
from support.world import ADMIN, CONFIG, PROJECT, REQUESTER, REV, World


def report(world: World, cid: str, status: str) -> None:
    body: dict[str, Any] = world.gate.get_candidate(PROJECT, cid, ADMIN).as_json()
    digest = body["plan_digest"]
    checks = [{"check_id": "C1", "evidence_id": body["evidence"][-1]["evidence_id"]}]
    request = {"plan_digest": digest, "status": status, "checks": checks}
    world.gate.report(PROJECT, cid, "T1", REQUESTER, ReportRequest.model_validate(request), None)


class Interleaving(RecordingForge):
    """GitHub, slow to answer one publication: while it is in flight, `meanwhile` runs (a write, and another
    publisher's whole run)."""

    def __init__(self) -> None:
        super().__init__()
        self.meanwhile: list[Any] = []

    def publish_check(self, repository: str, check: CheckRun) -> PublishedCheck:
        while self.meanwhile:
            self.meanwhile.pop(0)()
        return super().publish_check(repository, check)


def test_a_publisher_whose_decision_was_overtaken_never_leaves_success_behind() -> None:
    world = World({**CONFIG, "github": GITHUB})
    forge = Interleaving()
    checks = ForgeChecks(world.gate.chain, forge, world.store)
    # Given a candidate whose task the requester reported failed: published as not success
    cid = ready(world)
    report(world, cid, "failed")
    first = checks.publish(PROJECT, cid)
    assert first.conclusion != "success"
    # And the task then reported completed: the decision is ready, and publisher A is publishing that
    report(world, cid, "completed")
    assert world.gate.evaluate(PROJECT, cid, ADMIN).decision == "ready"

    # While GitHub takes A's success, the task is reported failed again, and publisher B (that write's
    # outbox item) runs whole: it finds the decision equal to the record A has not yet replaced
    def failed_again_and_b_runs() -> None:
        report(world, cid, "failed")
        checks.publish(PROJECT, cid)

    forge.meanwhile.append(failed_again_and_b_runs)
    checks.publish(PROJECT, cid)
    # Then the decision holds, and what GitHub shows is not success
    assert world.gate.evaluate(PROJECT, cid, ADMIN).decision == "hold"
    assert forge.latest("sentinel/staging", REV).conclusion != "success"
