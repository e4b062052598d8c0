"""An attack on the decision's plan walk (sentinel_domain.plan_walk), as a property: whatever evidence a
candidate collects (passing, failing, skipped, from an untrusted publisher, with few tests, observed at any
time), whatever policy amendment follows, and at whatever instant the decision is asked, the walk that passes
over pairs its bounds show satisfied gives exactly the decision of judging every pair in full. A pair the walk
passed over that the Judge would hold on is a false `ready`."""

from datetime import timedelta
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_decision_findings import JUNIT_FAIL, JUNIT_PASS, JUNIT_SKIPPED, approved, post_evidence, report

from sentinel_domain.models import Policy
from sentinel_domain.plan_walk import PlanWalk
from sentinel_domain.times import format_time
from support.world import ADMIN, CI, PROJECT, REQUESTER, START, UNIT_POLICY, UNTRUSTED_CI, World

EVIDENCE = st.tuples(
    st.sampled_from([JUNIT_PASS, JUNIT_FAIL, JUNIT_SKIPPED]),
    # seconds before the world's clock it was observed: recent, or around the policy's one-day age limit
    st.one_of(
        st.integers(min_value=1, max_value=3600), st.integers(min_value=22 * 3600, max_value=25 * 3600)
    ),
    st.sampled_from([True, True, False]),  # from the trusted publisher
)


def judged_in_full(self: PlanWalk, *_: object) -> list[int]:
    return list(range(len(self.pairs)))


def unit_tests(min_tests: int) -> Policy:
    """The unit-tests policy with another minimum: none makes it an exit-code policy (a JUnit report is then
    evidence of the wrong kind, and both paths must say so alike)."""
    check_type = "junit" if min_tests else "exit_code"
    return Policy.model_validate({**UNIT_POLICY, "min_tests": min_tests, "check_type": check_type})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    evidence=st.lists(EVIDENCE, min_size=0, max_size=3),
    first=st.sampled_from([None, 0, 2, 3, 3]),  # min_tests of a policy amendment before the evidence, if any
    amend=st.sampled_from(
        [None, None, None, 0, 1, 3]
    ),  # min_tests of a policy amendment after the evidence, if any
    reported=st.booleans(),
    # the decision's instant, from the clock: now, soon, around the age limit, or before the facts
    later=st.one_of(
        st.just(0),
        st.integers(min_value=1, max_value=3 * 3600),
        st.integers(min_value=20 * 3600, max_value=26 * 3600),
        st.integers(min_value=-3600, max_value=-1),
    ),
)
def test_the_walk_decides_exactly_as_judging_every_pair(evidence, first, amend, reported, later) -> None:
    # Given an approved candidate that collected this evidence (under the policy as it then stood), maybe
    # reported, maybe under a policy amended since
    world = World()
    cand = approved(world)
    if first is not None:
        policy = unit_tests(first)
        world.gate.put_policy(PROJECT, "unit-tests", ADMIN, policy)
    ids = []
    for xml, ago, trusted in evidence:
        observed = format_time(START - timedelta(seconds=ago))
        posted = post_evidence(
            world, cand.cid, by=CI if trusted else UNTRUSTED_CI, junit_xml=xml, observed_at=observed
        )
        ids.append(posted["evidence_id"])
    if reported:
        report(world, cand.cid, cand.digest, evidence_ids=tuple(ids[-1:]))
    if amend is not None:
        world.gate.put_policy(PROJECT, "unit-tests", ADMIN, unit_tests(amend))
    as_of = format_time(START + timedelta(seconds=later)) if later else None
    # When the decision is asked with the walk, and with every pair judged in full
    walked = world.gate.decision(PROJECT, cand.cid, REQUESTER, as_of).as_json()
    with mock.patch.object(PlanWalk, "to_judge", judged_in_full):
        full = world.gate.decision(PROJECT, cand.cid, REQUESTER, as_of).as_json()
    # Then the two are the same decision, findings and digest included
    assert walked == full
