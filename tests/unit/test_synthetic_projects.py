"""A synthetic project (the acceptance suite's, created so by the operator only) marks every side effect its
writes carry `synthetic: true`, in one place (Chain.commit), from its verified project chain; no other
project's side effects carry the key, whatever a use case or a request put there. Checkpoints are not side
effects and are never marked."""

import json
from typing import Any

from sentinel_domain.integrity import CHECKPOINT_KIND
from sentinel_domain.memory import MemoryStore
from sentinel_domain.models import (
    CandidateRequest,
    ChangeContextRequest,
    ExecutionRequest,
    Policy,
    ProjectConfig,
    ReviewRequest,
)
from sentinel_domain.ports import StreamRef
from sentinel_domain.usecases.chain import SYNTHETIC, CommitRequest
from support.world import (
    ADMIN,
    BASE,
    CI,
    CONFIG,
    LINT_POLICY,
    PROJECT,
    REQUESTER,
    REV,
    REVIEWER,
    UNIT_POLICY,
    World,
)

SYNTH = "acceptance"
PARAMS = {"checks": ["C1"]}


class Recording(MemoryStore):
    """The in-memory store, keeping every outbox entry each committed append carried, by project."""

    def __init__(self) -> None:
        super().__init__()
        self.carried: list[tuple[str, dict[str, Any]]] = []

    def append(self, a: Any) -> None:
        super().append(a)
        self.carried += [(a.ref.project, dict(entry)) for entry in a.outbox]


def side_effects(store: Recording, project: str) -> list[dict[str, Any]]:
    return [e for p, e in store.carried if p == project and e.get("kind") != CHECKPOINT_KIND]


def checkpoints(store: Recording, project: str) -> list[dict[str, Any]]:
    return [e for p, e in store.carried if p == project and e.get("kind") == CHECKPOINT_KIND]


def provision(world: World, project: str, *, synthetic: bool) -> None:
    world.gate.create_project(project, synthetic=synthetic)
    world.gate.put_policy(project, "unit-tests", ADMIN, Policy.model_validate(UNIT_POLICY))
    world.gate.put_policy(project, "lint", ADMIN, Policy.model_validate(LINT_POLICY))
    world.gate.put_config(project, ADMIN, ProjectConfig.model_validate(CONFIG), None)


def flow_to_an_action(world: World, project: str) -> None:
    """Candidate, attestation, plan with a dispatch_checks action, approval, execution: a side effect and
    notifications (review requested, decision changes)."""
    gate = world.gate
    body = {
        "subject": "payments",
        "base_revision": BASE,
        "revision": REV,
        "environment": "staging",
        "change": {"files": ["services/payments/api.py"]},
    }
    cid = gate.create_candidate(project, REQUESTER, CandidateRequest.model_validate(body), None).as_json()[
        "candidate_id"
    ]
    files = ChangeContextRequest.model_validate({"change": {"files": ["services/payments/api.py"]}})
    gate.add_change_context(project, cid, CI, files, None)
    proposal = gate.propose(project, cid, REQUESTER, None, None).as_json()
    plan = dict(
        proposal["plan"],
        actions=[{"action_id": "A1", "type": "dispatch_checks", "params": PARAMS}],
    )
    digest = gate.put_plan(project, cid, REQUESTER, plan, f'"{proposal["plan_digest"]}"').as_json()[
        "plan_digest"
    ]
    gate.review(
        project, cid, REVIEWER, ReviewRequest(decision="approve", plan_digest=digest, revision=REV), None
    )
    request = ExecutionRequest(plan_digest=digest, params=PARAMS)
    gate.execute(project, cid, "A1", REQUESTER, request, "key-1")
    gate.record_decision(project, cid, REQUESTER, None)


def test_every_side_effect_of_a_synthetic_project_is_marked_and_no_other_projects_is() -> None:
    # Given the demo project (a plain one) and a synthetic acceptance project, on one gate
    store = Recording()
    world = World(store=store)
    provision(world, SYNTH, synthetic=True)
    # When the same flow runs in both, up to an executed action and a recorded decision
    flow_to_an_action(world, PROJECT)
    flow_to_an_action(world, SYNTH)
    # Then every side effect of the synthetic project says so: the action's and each notification
    marked = side_effects(store, SYNTH)
    assert {e["kind"] for e in marked} >= {"action", "notification"}
    assert all(e.get(SYNTHETIC) is True for e in marked), marked
    # And no side effect of the plain project carries the key at all
    plain = side_effects(store, PROJECT)
    assert {e["kind"] for e in plain} >= {"action", "notification"}
    assert not any(SYNTHETIC in e for e in plain), plain
    # And checkpoints, which are not side effects, are never marked
    assert checkpoints(store, SYNTH) and not any(SYNTHETIC in c for c in checkpoints(store, SYNTH))


def test_the_mark_comes_from_the_project_chain_never_from_what_a_write_carries() -> None:
    # Given a plain and a synthetic project
    store = Recording()
    world = World(store=store)
    provision(world, SYNTH, synthetic=True)
    chain = world.gate.chain
    for project, claimed in ((PROJECT, True), (SYNTH, False)):
        # When a write on each carries an outbox entry claiming the opposite of what its project is
        stream, _state = chain.project(project)
        fact = {"type": "config.note", "recorded_at": chain.now()}
        entry = {"kind": "dispatch_checks", "outbox_id": f"{project}/x", SYNTHETIC: claimed}
        chain.commit(CommitRequest(stream, "operator", fact, outbox=[entry]), lambda seq: seq)
    # Then the plain project's entry is stored unmarked and the synthetic project's marked
    by_id = {e["outbox_id"]: e for _p, e in store.carried if "outbox_id" in e}
    assert SYNTHETIC not in by_id[f"{PROJECT}/x"]
    assert by_id[f"{SYNTH}/x"][SYNTHETIC] is True


def test_a_later_project_created_fact_does_not_turn_a_project_synthetic() -> None:
    # Given a plain project whose chain later records a second `project.created` claiming synthetic
    store = Recording()
    world = World(store=store)
    world.gate.record_project_event(PROJECT, "project.created", {"project": PROJECT, SYNTHETIC: True})
    # When the flow runs there
    flow_to_an_action(world, PROJECT)
    # Then its side effects are still unmarked: only the chain's first fact decides
    assert side_effects(store, PROJECT) and not any(SYNTHETIC in e for e in side_effects(store, PROJECT))


def test_a_plain_projects_first_fact_is_stored_as_before_without_the_key() -> None:
    # Given a plain and a synthetic project
    store = Recording()
    world = World(store=store)
    provision(world, SYNTH, synthetic=True)
    # When their first facts are read back
    plain = json.loads(store.load(StreamRef(PROJECT)).facts[1])
    synthetic = json.loads(store.load(StreamRef(SYNTH)).facts[1])
    # Then the plain one has no `synthetic` key (chains written before it replay to the same digests)
    assert plain["type"] == "project.created" and SYNTHETIC not in plain
    assert synthetic[SYNTHETIC] is True
