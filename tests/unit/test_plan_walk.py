"""The plan walk's bounds (sentinel_domain.plan_walk.PolicyGroup): a group of pairs is passed over only when
its earliest and latest evidence are both fresh and passing under the version in force, with enough tests.
Every boundary is the Judge's: an age of exactly the limit is stale, an age of zero is fresh, evidence from
the future is not fresh."""

from array import array
from datetime import datetime

import pytest

from sentinel_domain.plan_walk import PolicyGroup, epoch_us

AT = 1_000_000_000
HOUR = 3_600_000_000


def group(since: list[int], versions: list[int] | None = None, tests: list[int] | None = None) -> PolicyGroup:
    n = len(since)
    return PolicyGroup.of(
        list(range(n)),
        array("q", versions or [1] * n),
        array("q", since),
        array("q", tests or [5] * n),
    )


@pytest.mark.parametrize(
    ("since", "satisfied"),
    [
        ([AT - HOUR + 1, AT], True),  # ages just under the limit and zero
        ([AT - HOUR, AT], False),  # one age exactly at the limit: stale
        ([AT - 10, AT + 1], False),  # one origin in the future
        ([AT - 10], True),
    ],
)
def test_a_group_is_satisfied_only_when_every_age_is_in_range(since: list[int], satisfied: bool) -> None:
    # Given a group of pairs under version 1 with five tests each
    # When the policy in force is version 1, one hour, at least five tests
    # Then the bounds agree with judging each pair's age
    assert group(since).satisfied((1, HOUR, 5), AT) is satisfied


def test_another_version_mixed_versions_or_too_few_tests_are_never_passed_over() -> None:
    fresh = [AT - 10, AT - 20]
    assert not group(fresh).satisfied((2, HOUR, 5), AT)  # another version in force
    assert not group(fresh, versions=[1, 2]).satisfied((1, HOUR, 5), AT)  # versions differ
    assert not group(fresh, versions=[-1, -1]).satisfied((-1, HOUR, 0), AT)  # judged in full, always
    assert not group(fresh, tests=[5, 4]).satisfied((1, HOUR, 5), AT)  # one too few
    assert not group(fresh, tests=[-1, 5]).satisfied((1, HOUR, 1), AT)  # one not a JUnit report
    assert group(fresh, tests=[-1, 0]).satisfied((1, HOUR, 0), AT)  # no minimum


def test_instants_are_whole_microseconds_since_1970() -> None:
    assert epoch_us(datetime(1970, 1, 1)) == 0
    assert epoch_us(datetime(2026, 11, 29, 12, 0, 0, 1)) - epoch_us(datetime(2026, 11, 29, 12)) == 1
