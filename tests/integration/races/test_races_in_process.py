"""Races in-process, on the DynamoDB store (moto): a competing writer lands just before every store call of a
step, so every interleaving of "read, judge, write" with another writer is tried once, deterministically.

The competitor goes through a second gate on the same table, as a concurrent Lambda would. Whatever the
point it lands at, the step's own conditional write must notice and re-judge: exactly one side effect per
allowed execution, none under a superseded digest or a rejected plan, attempts numbered without a repeat, and
chains without fork or gap (tests/support/moto_world.py's audit_table checks the raw table).

Atomicity under real DynamoDB concurrency is the store's guarantee; here it is exercised only through its
conditional-write contract (moto evaluates the same conditions). Budget: about 60 runs, 3-5 s."""

from collections.abc import Callable
from typing import Any

import pytest

from sentinel_domain.memory import SequentialIds
from sentinel_domain.models import ExecutionRequest, ProjectConfig, ReportRequest, ReviewRequest
from sentinel_domain.usecases import Gate
from sentinel_service.adapters.dynamodb_store import DynamoStateStore
from support.moto_world import DynamoWorld, Flow, Outcome, Tables, audit_table, outcome
from support.world import ADMIN, CONFIG, PROJECT, RECEIPT_SIGNER, REQUESTER, REV, REVIEWER_2, SEAL


@pytest.fixture(scope="module")
def frozen(moto: Any, tables: Tables) -> dict[str, Any]:
    """The ready flow on DynamoDB, frozen before each step, with the store calls each step makes."""
    world = DynamoWorld(moto, tables)
    points, calls = {}, {}
    for step in Flow.STEPS:
        points[step] = world.freeze()
        world.faulty.calls = []
        assert world.step(step).accepted, step
        calls[step] = list(world.faulty.calls)
    world.drop()
    return {"points": points, "calls": calls}


def rival(world: DynamoWorld) -> Gate:
    """A second gate on the same table: the concurrent writer. Its ids never collide with the first's."""
    ids = SequentialIds()
    ids.counter = 10_000
    return Gate(
        DynamoStateStore(world.raw, world.table),
        world.clock,
        ids,
        witness=world.witness,
        seal=SEAL,
        reads_witness=False,
        appends_witness=False,
        receipt_signer=RECEIPT_SIGNER,
    )


def execution(world: DynamoWorld, key: str) -> Callable[[Gate], Outcome]:
    params = world.flow.plan()["actions"][0]["params"]
    return lambda gate: outcome(
        lambda: gate.execute(
            PROJECT,
            world.flow.candidate_id,
            "A1",
            REQUESTER,
            ExecutionRequest(plan_digest=world.flow.digest, params=params),
            key,
        )
    )


def executions_in_force(audit: Any, cid: str) -> list[dict[str, Any]]:
    """Every audited execution, each checked against the facts before it in the chain: the plan it names is
    the current one there, and that digest was not rejected before it."""
    facts = audit.events[f"P#{PROJECT}#C#{cid}"]
    out = []
    for position, fact in enumerate(facts):
        if fact["type"] != "action.executed":
            continue
        earlier = facts[:position]
        plans = [f for f in earlier if f["type"] == "plan.stored"]
        assert plans and plans[-1]["plan_digest"] == fact["plan_digest"], "executed a superseded plan"
        assert not any(
            f["type"] == "review.recorded"
            and f["decision"] == "reject"
            and f["plan_digest"] == fact["plan_digest"]
            for f in earlier
        ), "executed a rejected plan"
        out.append(fact)
    return out


COMPETITORS = ["the same request", "another key", "a plan amendment", "a rejection"]


def competing(
    competitor: str, world: DynamoWorld, other: Gate, seen: dict[str, Outcome]
) -> Callable[[], None]:
    """The rival's whole request, run through the other gate; its answer is kept in `seen`."""
    cid, digest = world.flow.candidate_id, world.flow.digest

    def move() -> None:
        if competitor == "the same request":
            seen["rival"] = execution(world, "k-execute")(other)
        elif competitor == "another key":
            seen["rival"] = execution(world, "k-other")(other)
        elif competitor == "a plan amendment":
            plan = dict(world.flow.plan(), actions=[dict(world.flow.plan()["actions"][0], max_executions=2)])
            seen["rival"] = outcome(lambda: other.put_plan(PROJECT, cid, REQUESTER, plan, f'"{digest}"'))
        else:
            seen["rival"] = outcome(
                lambda: other.review(
                    PROJECT,
                    cid,
                    REVIEWER_2,
                    ReviewRequest(decision="reject", plan_digest=digest, revision=REV),
                    None,
                )
            )

    return move


@pytest.mark.parametrize("competitor", COMPETITORS)
def test_a_competing_writer_at_every_store_call_of_an_execution(
    moto: Any, tables: Tables, frozen: dict[str, Any], competitor: str
) -> None:
    calls = frozen["calls"]["execute"]
    for n in range(1, len(calls) + 1):
        # Given an approved plan, and a competitor that lands just before the execution's Nth store call
        world = DynamoWorld(moto, tables, frozen["points"]["execute"])
        other = rival(world)
        seen: dict[str, Outcome] = {}
        cid = world.flow.candidate_id
        move = competing(competitor, world, other, seen)
        world.faulty.before(n, move)
        # When the execution runs
        mine = execution(world, "k-execute")(world.gate)
        theirs = seen["rival"]
        case = f"{competitor} before call {n} ({calls[n - 1]}): mine {mine}, theirs {theirs}"
        # Then the table holds whole changes only, every side effect an audited execution of the plan in force
        audit = audit_table(world)
        done = executions_in_force(audit, cid)
        assert len(audit.outbox) == len(done), case
        if competitor == "the same request":
            # One execution; each answer is it (first or replayed) or a retryable "in progress"
            answers = [a for a in (mine, theirs) if a.status == 201]
            assert len(done) == 1 and answers, case
            assert all(
                a.status == 201 or (a.code == "IDEMPOTENCY_IN_PROGRESS" and a.headers.get("Retry-After"))
                for a in (mine, theirs)
            ), case
            assert all(a.body == answers[0].body for a in answers), case
        elif competitor == "another key":
            # One execution (max_executions 1); the other is exhausted
            assert len(done) == 1, case
            assert sorted(a.code or "ok" for a in (mine, theirs)) == ["ACTION_EXHAUSTED", "ok"], case
        elif competitor == "a plan amendment":
            # The amendment lands; the execution either came first or is refused for the superseded digest
            assert theirs.accepted, case
            assert (mine.accepted and len(done) == 1) or (mine.code == "DIGEST_MISMATCH" and not done), case
        else:
            # The rejection lands; the execution either came first or is refused as no longer approved
            assert theirs.accepted, case
            assert (mine.accepted and len(done) == 1) or (mine.code == "PLAN_NOT_APPROVED" and not done), case
        world.drop()


@pytest.mark.parametrize("step", ["evidence 1", "report 1"])
def test_a_competing_write_of_the_same_kind_at_every_store_call(
    moto: Any, tables: Tables, frozen: dict[str, Any], step: str
) -> None:
    calls = frozen["calls"][step]
    for n in range(1, len(calls) + 1):
        # Given the flow before the step, and the same kind of write (another evidence, another report of the
        # same task) landing from a rival just before the step's Nth store call
        world = DynamoWorld(moto, tables, frozen["points"][step])
        other = rival(world)
        before = audit_table(world).chains[f"P#{PROJECT}#C#{world.flow.candidate_id}"]
        twin = Flow(**{k: v for k, v in vars(world.flow).items()})
        seen: dict[str, Outcome] = {}

        def move(twin: Flow = twin, seen: dict[str, Outcome] = seen, other: Gate = other) -> None:
            if step.startswith("report"):
                task = twin.tasks()[0]["task_id"]
                seen["rival"] = outcome(
                    lambda: other.report(
                        PROJECT,
                        twin.candidate_id,
                        task,
                        REQUESTER,
                        ReportRequest.model_validate({"plan_digest": twin.digest, "status": "failed"}),
                        None,
                    )
                )
            else:
                seen["rival"] = twin.run(other, step.replace(" 1", " 2"))

        world.faulty.before(n, move)
        # When the step runs
        mine = world.step(step)
        theirs = seen["rival"]
        case = f"{step}, a rival before call {n} ({calls[n - 1]}): mine {mine}, theirs {theirs}"
        # Then both are recorded, each exactly one event, in one chain without fork or gap
        assert mine.accepted and theirs.accepted, case
        audit = audit_table(world)
        cid_chain = f"P#{PROJECT}#C#{world.flow.candidate_id}"
        assert audit.chains[cid_chain] == before + 2, case
        assert sorted((mine.body["seq"], theirs.body["seq"])) == [before + 1, before + 2], case
        if step.startswith("report"):
            # And the two attempts of the task are numbered 1 and 2, in chain order (rule 21)
            reports = [f for f in audit.events[cid_chain] if f["type"] == "task.reported"]
            assert [r["attempt"] for r in reports] == [1, 2], case
        world.drop()


def test_an_execution_allowed_after_approvals_required_is_lowered_goes_through(
    moto: Any, tables: Tables, frozen: dict[str, Any]
) -> None:
    # Given a project that needs two approvals, and a plan with one (so the chain head records no approval)
    world = DynamoWorld(moto, tables, frozen["points"]["approve"])
    assert (
        world.gate.put_config(
            PROJECT, ADMIN, ProjectConfig.model_validate(dict(CONFIG, approvals_required=2)), '"1"'
        ).version
        == 2
    )
    assert world.step("approve").accepted
    # When the admin lowers approvals_required to 1, which that one approval satisfies
    world.gate.put_config(PROJECT, ADMIN, ProjectConfig.model_validate(CONFIG), '"2"')
    assert "REVIEW_MISSING" not in {
        f.code for f in world.gate.evaluate(PROJECT, world.flow.candidate_id, REQUESTER).findings
    }
    # Then the declared action executes
    first = world.step("execute")
    world.drop()
    assert first.accepted, first
