"""What the use cases answer: one typed outcome per use case, as JSON-ready pydantic models.

An outcome says what happened, never how it is answered: the HTTP edge chooses the status, the ETag and the
replay header from the route and the outcome's data. Each outcome serialises (`model_dump(mode="json")`) to
exactly the JSON body the route answers, and that same JSON is what an idempotency record stores, so a replay
is the stored body validated back into its outcome, with `replayed` set.

Fields mirror stored facts where a view shows them (the audit events, the candidate's reviews and evidence):
those stay `dict[str, Any]`, as the facts themselves do (a tampered chain is shown as it is)."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .audit import Verification
from .decision import Decision, Finding
from .models import Policy, ProjectConfig

ChangeContext = Literal["attested", "declared"]


class Outcome(BaseModel):
    # Every field is in every body (null where nothing applies), so the schema says so.
    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_serialization_defaults_required=True)

    def as_json(self) -> dict[str, Any]:
        """The outcome as JSON values: the body the route answers, and what a replay answers again."""
        return self.model_dump(mode="json")


class Replayable(Outcome):
    """An outcome of a POST that takes an Idempotency-Key: a replay answers the first success again."""

    replayed: bool = Field(
        default=False,
        exclude=True,
        description="this is the stored answer to an earlier request with the same key",
    )


class ActorRef(Outcome):
    """A principal as facts record it."""

    id: str
    kind: str
    sponsor: str | None


class Obligation(Outcome):
    """Something a candidate owes proof of: a policy over a scope, and why it was derived."""

    obligation_id: str
    policy_id: str
    scope: str
    reason: str


# ---- the project chain -------------------------------------------------------------------------------


class ProjectEventRecorded(Outcome):
    """An operator's act on the project chain (a project created, a principal added, rotated or revoked)."""

    project: str
    seq: int


class ConfigVersion(Outcome):
    version: int
    config: ProjectConfig


class ConfigVersionStored(ConfigVersion):
    seq: int


class PolicyVersion(Outcome):
    policy_id: str
    version: int
    policy: Policy


class PolicyVersionStored(PolicyVersion):
    seq: int


class PolicyList(Outcome):
    policies: list[PolicyVersion]


class BundleChanges(Outcome):
    config: bool  # whether the configuration got a new version
    policies: list[str]  # the policies that got a new version, sorted


class BundleApplied(Outcome):
    """A bundle applied: the configuration's version and every named policy's, after the write (the current
    ones when nothing differed: then nothing was written and `seq` is the chain's head as it was)."""

    config_version: int
    policies: dict[str, int]
    changed: BundleChanges
    seq: int

    @property
    def wrote(self) -> bool:
        return self.changed.config or bool(self.changed.policies)


class AuditPage(Outcome):
    """One page of a chain's events (as stored: a tampered event is shown as it is), each with the fact it
    recorded as `payload`, and the whole chain's verification."""

    events: list[dict[str, Any]]
    next_cursor: str | None
    verification: Verification


# ---- candidates ----------------------------------------------------------------------------------------


class CandidateCreated(Replayable):
    candidate_id: str
    scope: list[str]
    obligations: list[Obligation]
    change_context: ChangeContext
    seq: int


class ChangeContextAdded(Replayable):
    added_obligations: list[Obligation]
    obligations: list[Obligation]
    scope: list[str]
    change_context: ChangeContext
    seq: int


class CandidateMatch(Outcome):
    """A candidate found by its exact (subject, revision, environment)."""

    candidate_id: str
    subject: str
    revision: str
    environment: str


class CandidateListed(CandidateMatch):
    """A candidate in the project's listing."""

    created_at: str


class CandidatePage(Outcome):
    candidates: list[CandidateListed | CandidateMatch]
    next_cursor: str | None


class PlanVersionSummary(Outcome):
    plan_version: int
    plan_digest: str
    mode: str
    author: ActorRef
    recorded_at: str


class PlanVersionRead(Outcome):
    """One stored plan version, read back whole (`GET .../plans/{version}`): every version stays readable,
    so a reviewer can diff the one approved against the current one."""

    plan_version: int
    plan_digest: str
    plan: dict[str, Any] = Field(description="the normalised plan, exactly what reviewers approve")
    stored_at: str
    stored_by: ActorRef
    mode: Literal["model", "fallback", "submitted"] | None = Field(
        description="how the version came about: drafted by the model, the deterministic fallback, or "
        "submitted by a requester; null when its fact does not say"
    )


class ChangedFiles(Outcome):
    """The changed paths the candidate's change contexts declared or attested."""

    files: list[str] = Field(description="the union of the stored paths, sorted, at most 1,000")
    count: int = Field(description="how many distinct paths were declared or attested")
    truncated: bool = Field(description="`files` does not list every path `count` counts")


class TaskProgress(Outcome):
    task_id: str
    attempts: list[dict[str, Any]]
    passes: bool
    settled: bool


class ReliedOn(Outcome):
    """The principals a recorded decision relied on (DOMAIN.md rule 26), as they stood at its instant."""

    approvers: list[str] = Field(description="reviewers whose approval of the current plan was valid")
    attesters: list[str] = Field(description="ci publishers whose change context was attested")
    publishers: list[str] = Field(description="publishers of the evidence that decided each check")


class RecordedDecision(Outcome):
    """A decision recorded on the candidate's chain, read back. Its fact keeps digests, not findings: the
    findings are recomputed from the facts as of the position it was decided at (`findings_recomputed`) and
    their digest checked against the recorded one (`findings_digest_matches`; on a mismatch a STATE_TAMPERED
    finding is added). A decision recorded before facts were bounded shows its stored findings."""

    seq: int = Field(description="the chain position of the decision.recorded fact")
    decision: Literal["ready", "hold"]
    as_of: str
    decided_at_seq: int = Field(description="the candidate chain's position it was judged at")
    project_seq: int | None = Field(description="the project chain's position it was judged with")
    plan_digest: str | None
    revision: str
    facts_digest: str
    findings: list[Finding]
    findings_recomputed: bool = Field(description="findings recomputed from the facts, not stored")
    findings_digest: str
    findings_digest_matches: bool | None = Field(
        description="the recomputed findings (and facts digest) equal the recorded digests; null when not "
        "recomputed"
    )
    finding_counts: dict[str, int]
    relied_on: ReliedOn | None
    actor: ActorRef
    recorded_at: str


class CandidateView(Outcome):
    """The candidate's whole state; `plan_digest` is what an amendment's If-Match must name."""

    candidate_id: str
    subject: str
    base_revision: str
    revision: str
    environment: str
    created_by: ActorRef
    created_at: str
    scope: list[str]
    obligations: list[Obligation]
    change_context: ChangeContext
    changed_files: ChangedFiles
    plan_versions: list[PlanVersionSummary]
    plan: dict[str, Any] | None
    plan_digest: str | None
    reviews: list[dict[str, Any]]
    evidence: list[dict[str, Any]]
    tasks: list[TaskProgress]
    executions: list[dict[str, Any]]
    last_decision: RecordedDecision | None
    seq: int


# ---- plans, reviews, settlement, actions ---------------------------------------------------------------


class PlanStored(Outcome):
    """A plan version as submitted (normalised by preflight: exactly what reviewers approve)."""

    plan_version: int
    plan_digest: str
    plan: dict[str, Any]
    seq: int


class PlanProposed(PlanStored, Replayable):
    """A plan version the service drafted: the model's, or the deterministic fallback and why."""

    mode: Literal["model", "fallback"]
    fallback_reason: str | None


class ReviewRecorded(Replayable):
    review_id: str
    decision: Literal["approve", "reject"]
    plan_digest: str
    revision: str
    expires_at: str
    seq: int


class TaskSettled(Replayable):
    task_id: str
    plan_digest: str
    settled: bool
    seq: int


class SideEffect(Outcome):
    """What an execution released: always through the outbox, written with the execution's fact."""

    type: str
    params: dict[str, Any]
    delivery: Literal["outbox"]
    outbox_id: str


class ActionExecuted(Replayable):
    execution_id: str
    action_id: str
    plan_digest: str
    side_effect: SideEffect
    seq: int


# ---- evidence, reports, decisions ----------------------------------------------------------------------


class EvidenceBinding(Outcome):
    obligation_ids: list[str]
    policy_id: str | None
    policy_version: int | None
    plan_digest: str | None
    mismatches: list[str]


class EvidenceCounts(Outcome):
    tests: int
    failures: int
    errors: int
    skipped: int


class EvidenceRecorded(Replayable):
    evidence_id: str
    outcome: Literal["pass", "fail", "unknown"]
    trust: Literal["verified", "unverified", "untrusted"]
    binding: EvidenceBinding
    counts: EvidenceCounts
    raw_sha256: str
    seq: int


class ReportAttempt(Replayable):
    """One attempt at a task, as the report writer judged it (it alone sets `passes`)."""

    attempt: int
    recorded_status: Literal["completed", "failed", "blocked"]
    passes: bool
    findings: list[Finding]
    seq: int


class DecisionView(Outcome):
    """A decision, and whose clock chose its instant (a caller's `as_of` is a what-if read)."""

    decision: Literal["ready", "hold"]
    findings: list[Finding]
    plan_digest: str | None
    revision: str
    as_of: str
    facts_digest: str
    as_of_source: Literal["caller", "service"]


class DecisionRecorded(DecisionView, Replayable):
    """A decision at the service clock, recorded on the candidate's chain (its `seq`)."""

    as_of_source: Literal["service"]
    seq: int
    receipt: dict[str, Any] | None = Field(
        default=None,
        description="a ready decision's signed receipt: a DSSE envelope of an in-toto Statement v1 "
        "(docs/receipts.md); null for any other decision",
    )

    @property
    def recorded(self) -> bool:
        return True


class DecisionNotRecorded(DecisionView):
    """The hold answered when the decision could not be recorded (the store could not be read or written once
    the caller's role and the candidate were established). Nothing was appended."""

    decision: Literal["hold"]
    as_of_source: Literal["service"]
    recorded: Literal[False] = False
    receipt: None = Field(default=None, description="never a receipt: nothing was recorded")


def decision_view(verdict: Decision, as_of_source: Literal["caller", "service"]) -> DecisionView:
    return DecisionView(**dict(verdict), as_of_source=as_of_source)
