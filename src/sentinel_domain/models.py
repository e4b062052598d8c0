"""The typed shapes of what callers send and what the gate stores (pydantic v2, unknown fields refused)."""

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from .identity import IDENT, PROJECT_ID, ROLES_BY_KIND  # noqa: F401 - re-exported for callers of models

REVISION = re.compile(r"^(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})$")
DIGEST = r"^[0-9a-f]{64}$"

Kind = Literal["human", "agent", "ci"]
Role = Literal["requester", "reviewer", "auditor", "admin", "publisher"]
ActionType = Literal["dispatch_checks", "notify", "promote"]

ACTION_TYPES: tuple[str, ...] = ("dispatch_checks", "notify", "promote")


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


def _storable_time(value: Any) -> Any:
    from .times import format_time

    format_time(value)  # raises ValueError outside the years 1970..9999
    return value


Ident = Annotated[str, StringConstraints(pattern=IDENT)]
Text = Annotated[str, StringConstraints(max_length=4000)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(_not_blank)]
Path = Annotated[str, StringConstraints(min_length=1, max_length=1024), AfterValidator(_not_blank)]
Digest = Annotated[str, StringConstraints(pattern=DIGEST)]


class Strict(BaseModel):
    # strict: a JSON string is never coerced into a number or a boolean ("0" is not an exit code).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Actor(Strict):
    """Who made a request: taken from the credential, never from a body."""

    id: str
    kind: Kind
    sponsor: str | None = None
    roles: tuple[str, ...] = ()

    def fact(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "sponsor": self.sponsor}


class DerivationRule(Strict):
    """`files` globs, or an `openapi` document name. For a document, `per` says whether one obligation covers
    the document or each affected operation owes its own (scoped `<document>/<METHOD> <path>`), and `when`
    which changes count: `any` semantic change (the default), only `breaking` ones, `warning` (at least a
    warning), or only `security` ones (to an operation's security requirements or the schemes they use);
    `changes` narrows them to those change ids. `min_sunset_days` and `response_patterns` grade lifecycle and
    output-pattern changes (docs/ingestion.md, "Rule options"). `scope` is the document's scope (default:
    its name)."""

    files: list[Annotated[str, StringConstraints(min_length=1, max_length=512)]] | None = None
    openapi: Name | None = None
    policy_id: Ident
    scope: Path | None = None
    per: Literal["document", "operation"] | None = None
    when: Literal["any", "breaking", "warning", "security"] | None = None
    changes: list[Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,80}$")]] | None = Field(
        default=None, min_length=1, max_length=200
    )
    min_sunset_days: int | None = Field(default=None, ge=0, le=3650)
    response_patterns: Literal["strict", "lenient"] | None = None

    @model_validator(mode="after")
    def _document_options_need_a_document(self) -> "DerivationRule":
        options = (self.per, self.when, self.changes, self.min_sunset_days, self.response_patterns)
        if self.openapi is None and any(o is not None for o in options):
            raise ValueError(
                "per, when, changes, min_sunset_days and response_patterns apply only to a rule that names "
                "an openapi document"
            )
        return self


GITHUB_REPOSITORY = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$"
GITHUB_LOGIN = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$"


class GitHubRepository(Strict):
    """One repository the project's GitHub App watches: candidates for its pull requests and merge queue are
    created for `subject` in each of `environments`, and `openapi` says where each document the derivation
    rules name lives in the repository (read at both commits)."""

    repository: Annotated[str, StringConstraints(pattern=GITHUB_REPOSITORY)]
    subject: Name
    environments: list[Ident] = Field(min_length=1, max_length=10)
    openapi: dict[Name, Path] = Field(default_factory=dict, max_length=100)


class GitHubForge(Strict):
    """The project's GitHub App (its private key is a deployment secret, never configuration). The app acts
    as `app_principal`, a `ci` principal listed in `change_context_publishers`; `logins` maps GitHub logins
    to principals, so a pull request's author is the requester of record."""

    app_id: int = Field(ge=1)
    installation_id: int = Field(ge=1)
    app_principal: Ident
    repositories: list[GitHubRepository] = Field(min_length=1, max_length=20)
    logins: dict[Annotated[str, StringConstraints(pattern=GITHUB_LOGIN)], Ident] = Field(
        default_factory=dict, max_length=1000
    )


class ProjectConfig(Strict):
    environments: list[Ident] = Field(min_length=1, max_length=50)
    derivation_rules: list[DerivationRule] = Field(default_factory=list, max_length=500)
    unclassified_policy: Ident
    change_context_publishers: list[Ident] = Field(default_factory=list)
    allowed_action_types: list[ActionType] = Field(default_factory=list)
    notify_channels: list[Ident] = Field(default_factory=list)
    approvals_required: int = Field(default=1, ge=1, le=10)
    approval_ttl_seconds: int = Field(default=86400, ge=60, le=30 * 86400)
    settlement_required: bool = False
    github: GitHubForge | None = None

    @model_validator(mode="after")
    def _forge_names_what_the_project_has(self) -> "ProjectConfig":
        if self.github is None:
            return self
        if self.github.app_principal not in self.change_context_publishers:
            raise ValueError("github.app_principal must be one of change_context_publishers")
        for repo in self.github.repositories:
            unknown = sorted(set(repo.environments) - set(self.environments))
            if unknown:
                raise ValueError(f"github repository {repo.repository} names unknown environments {unknown}")
        names = [r.repository.lower() for r in self.github.repositories]
        if len(names) != len(set(names)):
            raise ValueError("github.repositories lists a repository twice")
        return self

    def stored(self) -> dict[str, Any]:
        """The configuration as a fact stores it: without `github` when it has none, so configurations
        recorded before the forge existed replay to the same digests."""
        body = self.model_dump(mode="json")
        if body.get("github") is None:
            body.pop("github", None)
        return body


CheckType = Literal["junit", "exit_code"]
CHECK_TYPES: tuple[str, ...] = ("junit", "exit_code")


def stored_check_type(policy: dict[str, Any]) -> str:
    """The evidence a stored policy takes: the kind its `min_tests` demands, `junit` when it needs at least
    one executed test, `exit_code` otherwise. A policy accepted since `check_type` became an enumeration
    names exactly that (the model refuses anything else); one stored before it named free text ("unit",
    "lint"), or even a kind its minimum contradicts, and reads as what its minimum already made it. Only the
    reading changes: the stored fact (and so its digest and its chain) stays as it was written."""
    min_tests = policy.get("min_tests")
    return "junit" if isinstance(min_tests, int) and min_tests >= 1 else "exit_code"


class Policy(Strict):
    """A reusable verification rule. `check_type` says which evidence it takes: a JUnit report (`junit`,
    which needs `min_tests` >= 1) or an exit code with artifact digests (`exit_code`, `min_tests` 0)."""

    check_type: CheckType
    command: Annotated[str, StringConstraints(min_length=1, max_length=2000)]
    expected_exit_code: int = Field(default=0, ge=0, le=255)
    expected_artifacts: list[Annotated[str, StringConstraints(min_length=1, max_length=512)]] = Field(
        default_factory=list
    )
    fail_message: Text = ""
    remediation_hint: Text = ""
    max_evidence_age_seconds: int = Field(gt=0, le=365 * 86400)
    trusted_publishers: list[Ident] = Field(default_factory=list)
    min_tests: int = Field(ge=0, le=1_000_000)

    @model_validator(mode="after")
    def _check_type_agrees_with_min_tests(self) -> "Policy":
        # A policy must not contradict itself: a JUnit policy that asks for no test, or exit-code evidence
        # that must run tests it cannot report, would leave the evidence it takes undecided.
        if self.check_type == "junit" and self.min_tests < 1:
            raise ValueError("check_type junit needs min_tests of at least 1 (tests a JUnit report ran)")
        if self.check_type == "exit_code" and self.min_tests != 0:
            raise ValueError("check_type exit_code takes no test report: min_tests must be 0")
        return self

    @classmethod
    def stored(cls, policy: dict[str, Any]) -> "Policy":
        """A policy as a `policy.set` fact stored it, read with today's enumeration (`stored_check_type`)."""
        return cls.model_validate({**policy, "check_type": stored_check_type(policy)})


# A bundle's policies all ride in one fact (one store item, at most 400 KB): the route's 256 KiB body limit
# bounds its size, this bounds how many versions one write may create.
MAX_BUNDLE_POLICIES = 200


class ProjectBundle(Strict):
    """A project's configuration and policies, applied together as one fact (`PUT .../bundle`): policies
    absent from the bundle are left as they are; a policy equal to its current version gets no new one."""

    config: ProjectConfig
    policies: dict[Ident, Policy] = Field(default_factory=dict, max_length=MAX_BUNDLE_POLICIES)
    # The version of each policy the sender read (0: it had none). If-Match guards the configuration only; a
    # policy named here that moved since is refused (412), so an apply never reverts a change it did not see.
    expected_policy_versions: dict[Ident, Annotated[int, Field(ge=0)]] = Field(
        default_factory=dict, max_length=MAX_BUNDLE_POLICIES
    )


class OpenApiChange(Strict):
    """One OpenAPI document before and after the change. Each side is a JSON object, YAML or JSON text, or
    null (the document was added or removed). Parsed and checked by sentinel_domain.openapi during
    derivation."""

    name: Name
    before: dict[str, Any] | str | None = None
    after: dict[str, Any] | str | None = None


class Change(Strict):
    files: list[Path] = Field(default_factory=list, max_length=20000)
    openapi: list[OpenApiChange] = Field(default_factory=list, max_length=100)


class CandidateRequest(Strict):
    subject: Name
    base_revision: str
    revision: str
    environment: Ident
    change: Change


class ChangeContextRequest(Strict):
    change: Change


class Check(Strict):
    check_id: Ident
    policy_ref: Ident
    command: Annotated[str, StringConstraints(min_length=1, max_length=2000)]
    expected_exit_code: int
    covers: list[str] = Field(default_factory=list)
    assertions: list[Annotated[str, StringConstraints(max_length=500)]] = Field(default_factory=list)


class Task(Strict):
    task_id: Ident
    title: Annotated[str, StringConstraints(min_length=1, max_length=300)]
    files: list[Annotated[str, StringConstraints(min_length=1, max_length=512)]] = Field(default_factory=list)
    depends_on: list[str] = Field(default_factory=list)
    checks: list[Check] = Field(min_length=1)


class Action(Strict):
    action_id: Ident
    type: str
    params: dict[str, Any]
    max_executions: int = Field(default=1, ge=1, le=100)


class Plan(Strict):
    tasks: list[Task] = Field(min_length=1, max_length=2000)
    actions: list[Action] = Field(default_factory=list, max_length=100)


class ReviewRequest(Strict):
    decision: Literal["approve", "reject"]
    plan_digest: str
    revision: str
    comment: Text = ""


class ExecutionRequest(Strict):
    plan_digest: str
    params: dict[str, Any]


class Source(Strict):
    system: Name
    run_id: Annotated[str, StringConstraints(max_length=200)] = ""
    url: Annotated[str, StringConstraints(max_length=2000)] = ""


class Artifact(Strict):
    name: Annotated[str, StringConstraints(min_length=1, max_length=512)]
    sha256: Digest


class ExitResult(Strict):
    exit_code: int = Field(ge=0, le=255)
    artifacts: list[Artifact] = Field(default_factory=list, max_length=1000)


class EvidenceRequest(Strict):
    check_id: Ident
    subject: Name
    revision: str
    environment: Ident
    scope: list[Path] = Field(max_length=2000)
    observed_at: Annotated[AwareDatetime, Field(strict=False), AfterValidator(_storable_time)]  # RFC 3339
    source: Source
    junit_xml: str | None = None
    result: ExitResult | None = None


class CheckClaim(Strict):
    check_id: str
    evidence_id: str


class ReportRequest(Strict):
    plan_digest: str
    status: Literal["completed", "failed", "blocked"]
    checks: list[CheckClaim] = Field(default_factory=list, max_length=1000)
    summary: Text = ""
    blocked_reason: Text | None = None


class SettlementRequest(Strict):
    plan_digest: str
    note: Text = ""
