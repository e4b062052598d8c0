"""What a decision walks, derived once per candidate state: its evidence as compact rows per (check,
obligation), and its current plan as flat arrays in the order a decision judges it.

A decision is judged at an instant, under the policy versions in force then, and with the principals revoked
as compromised by then; everything else it needs depends on the candidate's facts alone, which never change
once folded. Worked out here once, per state, it leaves each decision one pass over a few contiguous arrays
(`PlanWalk.to_judge`) that names the (check, obligation) pairs it must judge in full: at ten thousand
obligations the pass reads machine integers in sequence instead of five dictionaries scattered over the
heap per pair. Whatever the pass cannot show satisfied is judged by `decision.Judge` exactly as before; the
pass only ever passes over a pair whose newest eligible evidence is a fresh, passing report under the
version in force, with enough tests, and no compromised principal anywhere."""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .evidence import WRONG_KIND, scope_covers
from .state import CandidateState
from .times import utc_naive

# One evidence fact as a (check, obligation) pair judges it: (policy id, policy version, eligible, publisher
# id, order key, the fact, the instant its age counts from or None, its outcome, and the tests it ran when it
# is a JUnit report, else None). Eligible: verified, bound to the candidate's subject, revision and
# environment, its scope covering the obligation's; still to check per decision: the policy version in force
# and the publisher's revocation. The order key is rule 10's: observed, recorded, arrival.
Row = tuple[str, int, bool, str, tuple[str, str, int], dict[str, Any], datetime | None, str, int | None]
Pair = tuple[dict[str, Any], str, str, list[Row]]  # (check, obligation id, task id, rows)

_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)
_SLOW = -1  # a pair the pass cannot show satisfied: judged in full


def epoch_us(instant: datetime) -> int:
    """A naive UTC instant as whole microseconds since 1970: exact, so ages compare as timedeltas do."""
    return (instant - _EPOCH) // _MICROSECOND


def _since(e: dict[str, Any]) -> datetime | None:
    """The instant a passing fact's age counts from; None where it is not read here (the judgement reads it
    again, and refuses it as it always did)."""
    try:
        return utc_naive(min(e["observed_at"], e["recorded_at"]))
    except (ValueError, TypeError, OverflowError):
        return None


def evidence_rows(state: CandidateState) -> dict[tuple[str, str], list[Row]]:
    """The candidate's evidence per (check, obligation), as rows."""
    candidate = state.candidate
    binds = (candidate["subject"], candidate["revision"], candidate["environment"])
    out: dict[tuple[str, str], list[Row]] = {}
    for key, entries in state.evidence_index().items():
        obligation = state.obligations.get(key[1])
        rows: list[Row] = []
        for e in entries:
            binding = e["binding"]
            eligible = (
                e["trust"] == "verified"
                and (e["subject"], e["revision"], e["environment"]) == binds
                and obligation is not None
                and scope_covers(e["scope"], obligation["scope"])
                # Evidence of a kind its policy does not take was marked so when it was written.
                and WRONG_KIND not in binding["mismatches"]
            )
            rows.append(
                (
                    binding["policy_id"],
                    binding["policy_version"],
                    eligible,
                    e["publisher"]["id"],
                    (e["observed_at"], e["recorded_at"], e["_seq"]),
                    e,
                    _since(e),
                    e["outcome"],
                    e["counts"]["tests"] if e["kind"] == "junit" else None,
                )
            )
        out[key] = rows
    return out


@dataclass(frozen=True)
class PolicyGroup:
    """The pairs whose check names one policy, and bounds over them: the one version every pair's newest
    eligible evidence was bound to (None when they differ, or any pair is judged in full), the earliest and
    latest age origins, and the fewest tests. When the bounds satisfy the policy in force, every pair does."""

    indexes: list[int]
    version: int | None
    min_since: int
    max_since: int
    min_tests: int

    @staticmethod
    def of(indexes: list[int], versions: array[int], since_us: array[int], tests: array[int]) -> PolicyGroup:
        found = {versions[i] for i in indexes}
        version = found.pop() if len(found) == 1 else None
        if version == _SLOW:
            version = None
        return PolicyGroup(
            indexes,
            version,
            min(since_us[i] for i in indexes),
            max(since_us[i] for i in indexes),
            min(tests[i] for i in indexes),
        )

    def satisfied(self, limit: tuple[int, int, int], at_us: int) -> bool:
        """Every pair of the group is a fresh, passing report under the version in force, with enough tests:
        0 <= at - since < the age limit for the earliest and the latest origin, so for all."""
        version, max_age_us, min_tests = limit
        return (
            self.version == version
            and self.min_since > at_us - max_age_us
            and self.max_since <= at_us
            and (min_tests < 1 or self.min_tests >= min_tests)
        )


@dataclass(frozen=True)
class PlanWalk:
    """The current plan's (check, obligation) pairs and tasks, in plan order, with what the pass needs of
    each pair in parallel arrays: the policy version its newest eligible evidence was bound to (`_SLOW` when
    the pass cannot decide it), that evidence's age origin in microseconds, and its tests (-1: not JUnit)."""

    pairs: list[Pair]
    policy_refs: list[str]
    policy_ids: list[str]  # the distinct ones
    groups: dict[str, PolicyGroup]
    versions: array[int]
    since_us: array[int]
    tests: array[int]
    tasks: list[tuple[str, list[dict[str, Any]] | None]]
    task_problems: list[int]  # the tasks whose newest report under the plan is missing, blocked or failed
    uncovered: list[str]  # the candidate's obligations no check of the plan covers, sorted

    def to_judge(
        self, limits: dict[str, tuple[int, int, int] | None], at_us: int, any_compromised: bool
    ) -> list[int]:
        """The indexes of the pairs the pass cannot show satisfied at `at_us` under `limits` (per policy:
        version in force, age limit in microseconds, minimum tests; None: no version in force). With any
        principal revoked as compromised, every pair is judged in full."""
        if any_compromised:
            return list(range(len(self.pairs)))
        out: list[int] = []
        versions, since_us, tests = self.versions, self.since_us, self.tests
        for policy_id, group in self.groups.items():
            limit = limits[policy_id]
            if limit is None:
                out += group.indexes
                continue
            if group.satisfied(limit, at_us):
                continue
            version, max_age_us, min_tests = limit
            for i in group.indexes:
                if versions[i] == version:
                    age = at_us - since_us[i]
                    if 0 <= age < max_age_us and (min_tests < 1 or tests[i] >= min_tests):
                        continue
                out.append(i)
        return out


def _fast(check: dict[str, Any], known: bool, rows: list[Row]) -> tuple[int, int, int]:
    """(version, age origin, tests) of a pair the pass may decide: the obligation known, every row bound to
    the check's own policy at one version, and the newest eligible row (none compromised) a passing report
    with a readable age origin; else (_SLOW, 0, 0)."""
    if not known or not rows:
        return _SLOW, 0, 0
    policy_id, version = rows[0][0], rows[0][1]
    if policy_id != check["policy_ref"] or type(version) is not int or version < 0:
        return _SLOW, 0, 0
    newest: Row | None = None
    for row in rows:
        if row[0] != policy_id or row[1] != version:
            return _SLOW, 0, 0
        if row[2] and (newest is None or row[4] > newest[4]):
            newest = row
    if newest is None or newest[7] != "pass" or newest[6] is None:
        return _SLOW, 0, 0
    return version, epoch_us(newest[6]), -1 if newest[8] is None else newest[8]


def plan_walk(state: CandidateState, rows: dict[tuple[str, str], list[Row]]) -> PlanWalk:
    plan = state.plan
    assert plan is not None
    digest_now = plan["plan_digest"]
    reports = state.reports_index()
    pairs: list[Pair] = []
    policy_refs: list[str] = []
    versions, since_us, tests = array("q"), array("q"), array("q")
    problems: list[int] = []
    tasks: list[tuple[str, list[dict[str, Any]] | None]] = []
    covered: set[str] = set()
    for task in plan["plan"]["tasks"]:
        task_id = task["task_id"]
        for check in task["checks"]:
            for obligation_id in check["covers"]:
                covered.add(obligation_id)
                pair_rows = rows.get((check["check_id"], obligation_id), [])
                pairs.append((check, obligation_id, task_id, pair_rows))
                policy_refs.append(check["policy_ref"])
                version, since, count = _fast(check, obligation_id in state.obligations, pair_rows)
                versions.append(version)
                since_us.append(since)
                tests.append(count)
        task_reports = reports.get((digest_now, task_id))
        newest = task_reports[-1] if task_reports else None
        if newest is None or newest["recorded_status"] == "blocked" or not newest["passes"]:
            problems.append(len(tasks))
        tasks.append((task_id, task_reports))
    by_policy: dict[str, list[int]] = {}
    for i, policy_id in enumerate(policy_refs):
        by_policy.setdefault(policy_id, []).append(i)
    return PlanWalk(
        pairs,
        policy_refs,
        sorted(by_policy),
        {p: PolicyGroup.of(indexes, versions, since_us, tests) for p, indexes in by_policy.items()},
        versions,
        since_us,
        tests,
        tasks,
        problems,
        sorted(set(state.obligations) - covered),
    )
