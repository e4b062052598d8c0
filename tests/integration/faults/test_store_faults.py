"""Faults: every store call of the ready flow, failing every way a DynamoDB call can fail.

The flow of API.md runs once on the DynamoDB store (moto, in-process) and is frozen before each step. Then,
for every step and every store call N that step makes, the step runs again from its frozen point with call N
failing: throttled, timed out, a 5xx, its response lost after it took effect, or (for a conditional write)
losing its race once or every time. Every case must end in

- a refusal with a retryable code (503 STATE_UNAVAILABLE with Retry-After, or 409 IDEMPOTENCY_IN_PROGRESS with
  Retry-After when the key's own claim keeps losing) or a `hold` (the decision routes),
  never `ready` unless the failure was a lost race the gate re-judged;
- never a half-written change: the table holds whole changes only (every chain verifies, events without gaps,
  no fact part, outbox item, claim or kept answer without its event), and exactly the change the step makes
  when the failed call was its write and took effect;
- never an unaudited side effect: every outbox item is one audited execution;

and where the failure left something behind (a change that landed, a claim still held, a recorded hold), a
client retrying the same request (same Idempotency-Key; a re-read for the plan's If-Match) must then succeed
without a second change. For the most dangerous failure (a lost response on the step's write) the rest
of the flow then runs to `ready` with exactly one side effect.

Reads are all the same to the gate (the adapter turns every failure of a read into StoreUnavailable), so each
read fails one way, the ways taking turns over the calls; conditional writes fail every way.
Budget: 108 injected failures and 10 recovered flows, about 20 s."""

from typing import Any

import pytest

from sentinel_domain.ports import StreamRef
from support.moto_world import (
    MODES,
    WRITES,
    DynamoWorld,
    Flow,
    Frozen,
    Outcome,
    Tables,
    audit_table,
    decision_of,
)
from support.world import PROJECT

NOTHING_DONE = ("throttle", "timeout", "server_error")  # the call failed before it took effect
READ_MODES = (*NOTHING_DONE, "lost_response")
DECISIONS = ("decide", "read decision")


@pytest.fixture(scope="module")
def flow(moto: Any, tables: Tables) -> tuple[dict[str, Frozen], dict[str, list[str]], dict[str, Outcome]]:
    """The clean flow, frozen before each step, with the store calls each step made and its answer."""
    world = DynamoWorld(moto, tables)
    frozen, calls, answers = {}, {}, {}
    for step in Flow.STEPS:
        frozen[step] = world.freeze()
        world.faulty.calls = []
        answers[step] = world.step(step)
        assert answers[step].accepted, (step, answers[step])
        calls[step] = list(world.faulty.calls)
        answers[step].headers["ready-after"] = decision_of(world)
    assert answers["decide"].body["decision"] == "ready"
    frozen["end"] = world.freeze()
    world.drop()
    return frozen, calls, answers


def cases(calls: list[str]) -> list[tuple[int, str, str]]:
    """Every call of the step: a read fails one way, a write every way; the ways of failing before taking
    effect (all one StoreUnavailable to the gate) take turns."""
    out = []
    for n, operation in enumerate(calls, 1):
        if operation in WRITES:
            modes = [NOTHING_DONE[n % len(NOTHING_DONE)], *(m for m in MODES if m not in NOTHING_DONE)]
        else:
            modes = [READ_MODES[n % len(READ_MODES)]]
        out += [(n, operation, mode) for mode in modes]
    return out


def is_retryable_refusal(out: Outcome) -> bool:
    """503 STATE_UNAVAILABLE, or 409 IDEMPOTENCY_IN_PROGRESS when the key's claim itself kept losing: both say
    retry, and when (Retry-After)."""
    return (out.status, out.code) in ((503, "STATE_UNAVAILABLE"), (409, "IDEMPOTENCY_IN_PROGRESS")) and bool(
        out.headers.get("Retry-After")
    )


def is_unavailable_hold(out: Outcome) -> bool:
    codes = {f["code"] for f in out.body.get("findings", [])}
    return out.status in (200, 201) and out.body.get("decision") == "hold" and "STATE_UNAVAILABLE" in codes


def length(audit: Any, world: DynamoWorld) -> int:
    return (
        audit.chains.get(f"P#{PROJECT}#C#{world.flow.candidate_id}", 0)
        if world.flow.candidate_id
        else sum(n for pk, n in audit.chains.items() if "#C#" in pk)
    )


def retry(world: DynamoWorld, step: str) -> Outcome:
    """The client's retry: the same request; after IDEMPOTENCY_IN_PROGRESS, again once the lease has
    lapsed."""
    out = world.step(step)
    if out.code == "IDEMPOTENCY_IN_PROGRESS":
        assert out.headers.get("Retry-After"), out
        world.release_leases()
        out = world.step(step)
    return out


@pytest.mark.parametrize("step", Flow.STEPS)
def test_every_failing_store_call_of_the_step_fails_closed(
    moto: Any, tables: Tables, flow: Any, step: str
) -> None:
    frozen, calls, clean = flow
    world = DynamoWorld(moto, tables, frozen[step])
    before = audit_table(world)
    world.drop()
    for n, operation, mode in cases(calls[step]):
        # Given the flow frozen before this step, and the step's Nth store call armed to fail this way
        world = DynamoWorld(moto, tables, frozen[step])
        world.faulty.arm(n, mode)
        # When the step runs
        out = world.step(step)
        world.faulty.disarm()
        case = f"{step}: call {n} ({operation}) {mode} -> {out}"
        assert world.faulty.fired and world.faulty.fired[0][:2] == (n, operation), case
        took_effect = mode == "lost_response" and operation == "transact_write_items"
        left_claim = mode == "cancelled_always" or (mode == "lost_response" and operation == "put_item")
        after = audit_table(world, allow_in_progress=left_claim)  # Then: whole changes only (see audit_table)
        grown = length(after, world) - length(before, world)
        recorded_hold = step == "decide" and out.status == 201 and is_unavailable_hold(out)
        succeeded = out.accepted and not is_unavailable_hold(out)
        if mode == "cancelled":
            # A lost race is re-read and re-judged: the step succeeds, once
            assert out.accepted and out.body.get("decision") == clean[step].body.get("decision"), case
            assert grown == (0 if step == "read decision" else 1), case
        else:
            # Then a retryable refusal, or a hold naming the unavailable store; never ready
            assert is_retryable_refusal(out) or (step in DECISIONS and is_unavailable_hold(out)), case
            assert out.body.get("decision") != "ready", case
            # And the table changed only by what the failed call itself did (a lost answer to a write that
            # landed), or by a recorded hold
            assert grown == (1 if took_effect or recorded_hold else 0), case
        assert len(after.outbox) == len(before.outbox) + (
            1 if step == "execute" and (took_effect or mode == "cancelled") else 0
        ), case
        if world.flow.candidate_id:
            # And the candidate's decision is the one before the step, or after it where the change landed
            steps = Flow.STEPS
            before_step = (
                clean[steps[steps.index(step) - 1]].headers["ready-after"] if step != "create" else "hold"
            )
            assert after.decision(world.flow.candidate_id, world.clock.now()) == (
                clean[step].headers["ready-after"] if grown and not recorded_hold else before_step
            ), case
        # When the client retries what failed where the failure left something behind (a change that landed,
        # a claim still held, a recorded hold); after a failure that left nothing (the audit above shows it),
        # a retry is the clean step again, which the flow fixture already ran from this very point
        if not succeeded and (mode in ("lost_response", "cancelled_always") or grown):
            again = retry(world, step)
            if step == "amend" and took_effect:
                # A PUT is not replayed: the plan it sent is the current one, so its If-Match is now stale
                state = world.clean_store().load(StreamRef(PROJECT, world.flow.candidate_id))
                assert again.code == "VERSION_CONFLICT" and again.status == 412, case
                assert state is not None and state.head["plan_digest"] == frozen["approve"].flow.digest, case
            elif recorded_hold:
                # The recorded hold is this key's answer for the life of the candidate (rule 17)
                assert again.replayed and again.body["decision"] == "hold", case
            else:
                # Then it succeeds, as a replay when the first attempt had landed, and the step's change is
                # the one event after the frozen chain: never a second one
                assert again.accepted and again.replayed == took_effect, (case, again)
                if step != "read decision":
                    assert again.body["seq"] == length(before, world) + 1, (case, again)
                if step == "decide":
                    assert again.body["decision"] == "ready", (case, again)
            if step == "execute":
                assert len(audit_table(world).outbox) == 1, case
        world.drop()


@pytest.mark.parametrize("step", [s for s in Flow.STEPS if s not in DECISIONS])
def test_after_a_lost_answer_to_its_write_the_flow_still_ends_ready_with_one_side_effect(
    moto: Any, tables: Tables, flow: Any, step: str
) -> None:
    frozen, calls, _clean = flow
    # Given the step's write landed but its answer was lost
    world = DynamoWorld(moto, tables, frozen[step])
    world.faulty.arm(calls[step].index("transact_write_items") + 1, "lost_response")
    first = world.step(step)
    world.faulty.disarm()
    assert is_retryable_refusal(first), first
    # When the client retries it (re-reading the plan for the PUT), then goes on with the flow
    if step == "amend":
        world.flow.digest = (
            world.clean_store().load(StreamRef(PROJECT, world.flow.candidate_id)).head["plan_digest"]
        )
    else:
        assert retry(world, step).accepted
    for rest in Flow.STEPS[Flow.STEPS.index(step) + 1 :]:
        assert world.step(rest).accepted, rest
    # Then the recorded decision is ready, the chain verifies with one event per change, one side effect left
    audit = audit_table(world)
    assert decision_of(world) == "ready"
    assert audit.chains == audit_table_of(frozen["end"], moto, tables).chains
    assert len(audit.outbox) == 1
    world.drop()


def audit_table_of(frozen: Frozen, moto: Any, tables: Tables) -> Any:
    world = DynamoWorld(moto, tables, frozen)
    try:
        return audit_table(world)
    finally:
        world.drop()
