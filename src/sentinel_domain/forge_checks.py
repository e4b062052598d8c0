"""Forge checks: which writes owe a re-publication of a candidate's check, where its check run is remembered,
and when its decision next changes with time alone (docs/github.md, "Why the check cannot go stale").

- Every write to a candidate chain of a project whose configuration names a GitHub repository for the
  candidate's subject and environment carries a `forge_check` outbox item in the same transaction
  (`forge_outbox`); a project-chain write that can change every candidate's decision (a configuration or
  policy amendment, a principal's revocation) carries one `forge_recheck` item for the project. The publisher
  (`usecases.forge_checks`) consumes both; nothing calls a forge inside a request.
- The check run's id lives in a record of its own beside the chains (`CheckRecord`, the `CheckRecords` port),
  written with a conditional version: not on the chain (a publication is not a fact about the release, and a
  forge outage must never block or fork a chain), and not read back from the forge (the forge would have to
  be asked which of possibly several runs of that name is ours, and a run another app posted could answer).
- `due_at` is the earliest instant the decision can change with nothing written (an approval's expiry,
  evidence's freshness limit): the scheduled sweep re-publishes a record before it. A record with no such
  instant is not open for the sweep (only a write or a revocation can change its decision)."""

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Protocol

from .models import GitHubRepository, ProjectConfig
from .state import CandidateState, ProjectState
from .times import format_time, parse_time

FORGE_CHECK_KIND = "forge_check"  # outbox kind: re-publish one candidate's check
FORGE_RECHECK_KIND = "forge_recheck"  # outbox kind: re-publish every checked candidate of a project
# Project-chain facts after which any candidate's decision may differ with nothing written on its own chain.
RECHECK_FACTS = frozenset({"config.set", "policy.set", "bundle.set", "principal.revoked"})


def check_name(environment: str) -> str:
    return f"sentinel/{environment}"


def forge_repository(config: ProjectConfig | None, subject: str, environment: str) -> GitHubRepository | None:
    """The configured repository whose candidates these are, or None (no GitHub App, or not mapped)."""
    if config is None or config.github is None:
        return None
    for repository in config.github.repositories:
        if repository.subject == subject and environment in repository.environments:
            return repository
    return None


def forge_outbox(
    config: ProjectConfig | None, project: str, candidate: dict[str, Any]
) -> list[dict[str, Any]]:
    """The outbox entry a write to this candidate's chain carries (none when it has no forge check)."""
    if forge_repository(config, candidate["subject"], candidate["environment"]) is None:
        return []
    return [
        {
            "kind": FORGE_CHECK_KIND,
            "project": project,
            "candidate_id": candidate["candidate_id"],
        }
    ]


def recheck_outbox(config: ProjectConfig | None, project: str, fact_type: str) -> list[dict[str, Any]]:
    """The outbox entry a project-chain write carries when it may change its candidates' decisions."""
    if fact_type not in RECHECK_FACTS or config is None or config.github is None:
        return []
    return [{"kind": FORGE_RECHECK_KIND, "project": project, "reason": fact_type}]


@dataclass(frozen=True)
class CheckRecord:
    """What was last published for one candidate. `version` increases by one with every write; a write holds
    only over the version it read (`CheckRecords.put_check_record`). `check_run_id` None with `claimed_at`
    set: a publisher is creating the run (others wait for it, or for the claim to lapse)."""

    project: str
    candidate_id: str
    repository: str
    head_sha: str
    name: str
    version: int = 0
    check_run_id: str | None = None
    conclusion: str = ""
    digest: str = ""
    due_at: str = ""  # "" when nothing expires: not open for the sweep
    published_at: str = ""
    claimed_at: str = ""
    # The chain key's tag over every other field: the record lives in the table outside every chain, so
    # whoever can write the table could otherwise make a new conclusion look published already.
    tag: str = ""

    def fields(self) -> dict[str, Any]:
        """What the tag covers: everything but the tag."""
        return {k: v for k, v in self.as_item().items() if k != "tag"}

    def as_item(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "candidate_id": self.candidate_id,
            "repository": self.repository,
            "head_sha": self.head_sha,
            "name": self.name,
            "version": self.version,
            "check_run_id": self.check_run_id,
            "conclusion": self.conclusion,
            "digest": self.digest,
            "due_at": self.due_at,
            "published_at": self.published_at,
            "claimed_at": self.claimed_at,
            "tag": self.tag,
        }

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "CheckRecord":
        return cls(
            project=str(item["project"]),
            candidate_id=str(item["candidate_id"]),
            repository=str(item.get("repository", "")),
            head_sha=str(item.get("head_sha", "")),
            name=str(item.get("name", "")),
            version=int(item.get("version", 0)),
            check_run_id=str(item["check_run_id"]) if item.get("check_run_id") else None,
            conclusion=str(item.get("conclusion", "")),
            digest=str(item.get("digest", "")),
            due_at=str(item.get("due_at", "")),
            published_at=str(item.get("published_at", "")),
            claimed_at=str(item.get("claimed_at", "")),
            tag=str(item.get("tag", "")),
        )

    def next(self, **changes: Any) -> "CheckRecord":
        return replace(self, version=self.version + 1, **changes)


class CheckRecords(Protocol):
    """Where each candidate's published check is remembered (the memory, SQLite and DynamoDB state stores
    implement it beside their chains; a record is never part of a chain). Reads are strongly consistent;
    failures raise StoreUnavailable."""

    def check_record(self, project: str, candidate_id: str) -> CheckRecord | None: ...

    def put_check_record(self, record: CheckRecord) -> bool:
        """Write `record` only over version `record.version - 1` (absent for version 1); False when another
        publisher wrote first (nothing written)."""

    def check_records_due(
        self, before: str, limit: int, cursor: str | None
    ) -> tuple[list[CheckRecord], str | None]:
        """Records whose `due_at` is set and at or before `before`, across projects, paged."""


def earliest_expiry(state: CandidateState, project: ProjectState, as_of: str) -> str | None:
    """The first instant after `as_of` at which something feeding the decision expires with nothing written:
    an approval of the current plan, or a piece of verified evidence's freshness limit (DOMAIN.md rules 7
    and 14). None when nothing does."""
    instants: list[str] = []
    for review in state.reviews:
        if review["decision"] == "approve" and review["plan_digest"] == state.plan_digest:
            if review["expires_at"] > as_of:
                instants.append(review["expires_at"])
    for evidence in state.evidence:
        binding = evidence.get("binding") or {}
        if evidence.get("trust") != "verified" or binding.get("mismatches") or not binding.get("policy_id"):
            continue
        found = project.policy(binding["policy_id"], as_of, binding.get("policy_version"))
        if found is None:
            continue
        start = min(parse_time(evidence["observed_at"]), parse_time(evidence["recorded_at"]))
        limit = format_time(start + timedelta(seconds=found[1].max_evidence_age_seconds))
        if limit > as_of:
            instants.append(limit)
    return min(instants) if instants else None
