"""Attack on the check publisher's memory: its check records live beside the chains in the state table,
outside every chain. Someone who can write the table edits the record of a candidate whose check shows
`success` so that it claims the failure was already published; the publisher then finds the new failure
"unchanged" and never tells GitHub, and the required check stays green on a candidate that holds."""

from dataclasses import replace

from unit.test_forge_checks import FAILING, GITHUB, drain, evidence, latest, publisher, ready

from sentinel_domain.forge_checks import CheckRecord
from support.recording_forge import RecordingForge
from support.world import CI, CONFIG, PROJECT, World


def test_attack_a_check_record_rewritten_in_the_table_never_keeps_success_on_a_hold() -> None:
    world, forge = World({**CONFIG, "github": GITHUB}), RecordingForge()
    checks = publisher(world, forge)
    # Given a ready candidate whose check GitHub shows as success
    cid = ready(world)
    drain(world, checks)
    assert latest(forge).conclusion == "success"
    green = world.store.check_record(PROJECT, cid)
    assert green is not None
    # And the digest the publisher would give the failure it is about to see (learnt on a twin world)
    twin, twin_forge = World({**CONFIG, "github": GITHUB}), RecordingForge()
    twin_cid = ready(twin)
    twin.gate.post_evidence(PROJECT, twin_cid, CI, evidence(FAILING), None)
    drain(twin, publisher(twin, twin_forge))
    red = twin.store.check_record(PROJECT, twin_cid)
    assert red is not None and red.conclusion == "failure"
    # When CI proves the check failing, and the table writer, before the publisher runs, rewrites the
    # record to say that failure was published already (a valid next version, the run id kept)
    world.gate.post_evidence(PROJECT, cid, CI, evidence(FAILING), None)
    forged: CheckRecord = replace(
        green, version=green.version + 1, conclusion=red.conclusion, digest=red.digest
    )
    assert world.store.put_check_record(forged)
    drain(world, checks)
    # Then GitHub is told: the check is no longer success
    assert latest(forge).conclusion == "failure"
