"""The gate: one method per route (and the operator's project-chain writes), each the use case of its concern
run on the gate's chain. Callers (the endpoints, the operator, the evaluation harness, tests) hold this one
object; the rules live in the concern modules beside it."""

from collections.abc import Callable
from typing import Any

from .. import audit as chains
from ..decision import Decision
from ..integrity import ChainSeal, SealSource
from ..models import (
    Actor,
    CandidateRequest,
    ChangeContextRequest,
    EvidenceRequest,
    ExecutionRequest,
    Policy,
    ProjectBundle,
    ProjectConfig,
    ReportRequest,
    ReviewRequest,
    SettlementRequest,
)
from ..outcomes import (
    ActionExecuted,
    AuditPage,
    BundleApplied,
    CandidateCreated,
    CandidatePage,
    CandidateView,
    ChangeContextAdded,
    ConfigVersion,
    ConfigVersionStored,
    DecisionNotRecorded,
    DecisionRecorded,
    DecisionView,
    EvidenceRecorded,
    PlanProposed,
    PlanStored,
    PlanVersionRead,
    PolicyList,
    PolicyVersion,
    PolicyVersionStored,
    ProjectEventRecorded,
    ReportAttempt,
    ReviewRecorded,
    TaskSettled,
)
from ..ports import Clock, Ids, Proposer, StateStore, Stream, StreamRef, Witness
from ..receipts import DEFAULT_MAX_SECONDS, ReceiptSigner
from . import actions, audit, candidates, decisions, evidence, forge, plans, projects, reviews
from .chain import Chain
from .project_reads import ChainCache


class Gate:
    def __init__(
        self,
        store: StateStore,
        clock: Clock,
        ids: Ids,
        proposer: Proposer | None = None,
        witness: Witness | None = None,
        chain_cache: ChainCache | None = None,
        seal: ChainSeal | SealSource | None = None,
        *,
        reads_witness: bool = True,
        appends_witness: bool = False,
        receipt_signer: ReceiptSigner | None = None,
        receipt_max_seconds: int = DEFAULT_MAX_SECONDS,
        notify: bool = True,
    ) -> None:
        """`seal`, `witness`, `reads_witness` and `appends_witness`: see `Chain` (the composition root sets
        them for the local runner and for AWS). `receipt_signer` signs the receipt of every recorded `ready`
        decision; without one, no `ready` decision is recorded (see `decisions.record_decision`)."""
        self.chain = Chain(
            store,
            clock,
            ids,
            witness,
            seal,
            reads_witness=reads_witness,
            appends_witness=appends_witness,
            notify=notify,
        )
        self.proposer = proposer
        self.receipt_signer = receipt_signer
        self.receipt_max_seconds = receipt_max_seconds
        # The verified project chains this process holds for decision reads (none: every read is in full).
        self.chain_cache = chain_cache

    # The chain's collaborators, as callers (and tests that swap a failing store or a witness in) name them.
    @property
    def store(self) -> StateStore:
        return self.chain.store

    @store.setter
    def store(self, store: StateStore) -> None:
        self.chain.store = store

    @property
    def clock(self) -> Clock:
        return self.chain.clock

    @property
    def ids(self) -> Ids:
        return self.chain.ids

    @property
    def witness(self) -> Witness | None:
        return self.chain.witness

    @witness.setter
    def witness(self, witness: Witness | None) -> None:
        self.chain.witness = witness

    def verify(self, stream: Stream) -> chains.Verification:
        return self.chain.verify(stream)

    # ---- the operator's project chain (CLI only, never over the API) -----------------------------------

    def create_project(self, project: str, *, synthetic: bool = False) -> ProjectEventRecorded:
        return projects.create_project(self.chain, project, synthetic=synthetic)

    def record_project_event(self, project: str, type_: str, payload: dict[str, Any]) -> ProjectEventRecorded:
        return projects.record_project_event(self.chain, project, type_, payload)

    # ---- configuration, policies, audit --------------------------------------------------------------

    def put_config(
        self, project: str, actor: Actor, config: ProjectConfig, if_match: str | None
    ) -> ConfigVersionStored:
        return projects.put_config(self.chain, project, actor, config, if_match)

    def put_bundle(
        self, project: str, actor: Actor, bundle: ProjectBundle, if_match: str | None
    ) -> BundleApplied:
        return projects.put_bundle(self.chain, project, actor, bundle, if_match)

    def get_config(self, project: str, actor: Actor) -> ConfigVersion:
        return projects.get_config(self.chain, project, actor)

    def put_policy(self, project: str, policy_id: str, actor: Actor, policy: Policy) -> PolicyVersionStored:
        return projects.put_policy(self.chain, project, policy_id, actor, policy)

    def list_policies(self, project: str, actor: Actor) -> PolicyList:
        return projects.list_policies(self.chain, project, actor)

    def get_policy(self, project: str, policy_id: str, actor: Actor, version: int | None) -> PolicyVersion:
        return projects.get_policy(self.chain, project, policy_id, actor, version)

    def audit(self, ref: StreamRef, actor: Actor, limit: int, cursor: str | None) -> AuditPage:
        return audit.audit(self.chain, ref, actor, limit, cursor)

    # ---- candidates ----------------------------------------------------------------------------------

    def create_candidate(
        self, project: str, actor: Actor, request: CandidateRequest, key: str | None
    ) -> CandidateCreated:
        return candidates.create_candidate(self.chain, project, actor, request, key)

    def receive_webhook(
        self,
        secret: Callable[[], bytes],
        event: str | None,
        delivery_id: str | None,
        signature: str | None,
        body: bytes,
    ) -> forge.WebhookReceived:
        return forge.receive_webhook(self.chain, secret, event, delivery_id, signature, body)

    def add_change_context(
        self, project: str, candidate_id: str, actor: Actor, request: ChangeContextRequest, key: str | None
    ) -> ChangeContextAdded:
        return candidates.add_change_context(self.chain, project, candidate_id, actor, request, key)

    def find_candidates(
        self,
        project: str,
        actor: Actor,
        subject: str | None,
        revision: str | None,
        environment: str | None,
        limit: int,
        cursor: str | None,
    ) -> CandidatePage:
        return candidates.find_candidates(
            self.chain, project, actor, subject, revision, environment, limit, cursor, self.chain_cache
        )

    def get_candidate(self, project: str, candidate_id: str, actor: Actor) -> CandidateView:
        return candidates.get_candidate(self.chain, project, candidate_id, actor)

    # ---- plans, reviews, settlement, actions ---------------------------------------------------------

    def put_plan(
        self, project: str, candidate_id: str, actor: Actor, raw_plan: Any, if_match: str | None
    ) -> PlanStored:
        return plans.put_plan(self.chain, project, candidate_id, actor, raw_plan, if_match)

    def get_plan_version(
        self, project: str, candidate_id: str, actor: Actor, version: int
    ) -> PlanVersionRead:
        return plans.get_plan_version(self.chain, project, candidate_id, actor, version)

    def propose(
        self, project: str, candidate_id: str, actor: Actor, if_match: str | None, key: str | None
    ) -> PlanProposed:
        return plans.propose(self.chain, self.proposer, project, candidate_id, actor, if_match, key)

    def review(
        self, project: str, candidate_id: str, actor: Actor, request: ReviewRequest, key: str | None
    ) -> ReviewRecorded:
        return reviews.review(self.chain, project, candidate_id, actor, request, key)

    def settle(
        self,
        project: str,
        candidate_id: str,
        task_id: str,
        actor: Actor,
        request: SettlementRequest,
        key: str | None,
    ) -> TaskSettled:
        return reviews.settle(self.chain, project, candidate_id, task_id, actor, request, key)

    def execute(
        self,
        project: str,
        candidate_id: str,
        action_id: str,
        actor: Actor,
        request: ExecutionRequest,
        key: str | None,
    ) -> ActionExecuted:
        return actions.execute(self.chain, project, candidate_id, action_id, actor, request, key)

    # ---- evidence, reports, decisions ----------------------------------------------------------------

    def post_evidence(
        self, project: str, candidate_id: str, actor: Actor, request: EvidenceRequest, key: str | None
    ) -> EvidenceRecorded:
        return evidence.post_evidence(self.chain, project, candidate_id, actor, request, key)

    def report(
        self,
        project: str,
        candidate_id: str,
        task_id: str,
        actor: Actor,
        request: ReportRequest,
        key: str | None,
    ) -> ReportAttempt:
        return evidence.report(self.chain, project, candidate_id, task_id, actor, request, key)

    def evaluate(self, project: str, candidate_id: str, actor: Actor, as_of: str | None = None) -> Decision:
        return decisions.evaluate(self.chain, project, candidate_id, actor, as_of)

    def decision(self, project: str, candidate_id: str, actor: Actor, as_of: str | None) -> DecisionView:
        return decisions.decision(self.chain, project, candidate_id, actor, as_of, self.chain_cache)

    def record_decision(
        self, project: str, candidate_id: str, actor: Actor, key: str | None
    ) -> DecisionRecorded | DecisionNotRecorded:
        return decisions.record_decision(
            self.chain, project, candidate_id, actor, key, self.receipt_signer, self.receipt_max_seconds
        )
