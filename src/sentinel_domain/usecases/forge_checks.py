"""The forge check publisher: a candidate's decision, evaluated at the service clock, published as the check
run `sentinel/<environment>` on its revision (docs/github.md).

Entry points (one per trigger; each is what a Lambda handler or the local relay calls):

- `ForgeChecks.publish(project, candidate_id)`: a `forge_check` outbox item (every candidate write).
- `ForgeChecks.recheck_project(project)`: a `forge_recheck` item (a configuration or policy amendment, a
  revocation): every candidate of the project that has a check is published again.
- `ForgeChecks.sweep()`: the schedule. Every record due before the next sweep is published again.
- `ForgeChecks.handle(item)`: any of the two outbox items, by kind.

`success` only for `ready`, and only when it stays ready until the next sweep can look again (a ready whose
approval or evidence expires before then is published `action_required`, early rather than stale). A forge
fault raises ForgeUnavailable out of these methods, so the outbox retries with backoff; a fault can delay a
check, never turn one success. The record of the run (`forge_checks.CheckRecord`) is written with a
conditional version: a publisher that lost a race publishes again from a fresh evaluation, so the last
write to the forge is the freshest decision."""

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..errors import Refusal, StoreUnavailable
from ..forge import CheckRun, Forge, ForgeRefused, ForgeUnavailable
from ..forge_checks import (
    FORGE_CHECK_KIND,
    FORGE_RECHECK_KIND,
    CheckRecord,
    CheckRecords,
    check_name,
    earliest_expiry,
    forge_repository,
)
from ..forge_summary import check_text, conclusion_for
from ..models import Actor, GitHubForge
from ..state import parse_facts
from ..times import plus_seconds
from . import decisions
from .chain import Chain

# The publisher reads as any project member does (the GET decision route's evaluation); it writes no chain.
PUBLISHER = Actor(id="forge-publisher", kind="ci", roles=("reader",))
SWEEP_SECONDS = 300  # the schedule's period (AWS: EventBridge every 5 minutes; locally the relay thread)
SWEEP_MARGIN_SECONDS = 60  # a sweep may start late or take a while
CLAIM_SECONDS = 60  # how long a publisher creating a run holds the record before another may take over
RETRY_SECONDS = 60  # the least a publication the forge refused to take waits before the sweep tries again
ATTEMPTS = 3  # a lost race publishes again from a fresh evaluation, this many times in all

Status = Literal["published", "unchanged", "skipped"]


class PublishLater(ForgeUnavailable):
    """Another publisher is creating this candidate's run, or kept winning the race: retry later."""


@dataclass(frozen=True)
class Publication:
    project: str
    candidate_id: str
    status: Status
    conclusion: str = ""
    check_run_id: str | None = None
    reason: str = ""


@dataclass
class SweepReport:
    published: int = 0
    unchanged: int = 0
    skipped: int = 0
    deferred: list[str] = field(default_factory=list)  # candidates whose forge could not be reached


@dataclass(frozen=True)
class _Target:
    subject: str
    revision: str
    environment: str


class ForgeChecks:
    def __init__(
        self,
        chain: Chain,
        forge: Forge | Callable[[GitHubForge], Forge],
        records: CheckRecords,
        *,
        details_url: str = "",
        horizon_seconds: int = SWEEP_SECONDS + SWEEP_MARGIN_SECONDS,
    ) -> None:
        """`forge`: one forge for every project (tests), or the forge of a project's GitHub App, given its
        configuration (the composition root's `Services.forge`). `details_url`: a template with `{project}`
        and `{candidate_id}` for the check's details link (the candidate's page), or "" for none.
        `horizon_seconds`: how long a published success must stay true (until the next sweep looks again)."""
        self.chain = chain
        self.forge = forge
        self.records = records
        self.details_url = details_url
        self.horizon = horizon_seconds

    # ---- triggers --------------------------------------------------------------------------------------

    def handle(self, item: dict[str, Any]) -> list[Publication]:
        """One outbox item (its kind says which). An item of another kind is not this publisher's."""
        project = str(item.get("project", ""))
        if item.get("kind") == FORGE_CHECK_KIND:
            return [self.publish(project, str(item.get("candidate_id", "")))]
        if item.get("kind") == FORGE_RECHECK_KIND:
            return self.recheck_project(project)
        return []

    def recheck_project(self, project: str) -> list[Publication]:
        """Every candidate of the project that has a published check, evaluated again (those whose decision
        did not change are skipped by digest, so the forge hears only of real changes). A forge fault on one
        raises once the others were tried: the item is retried whole (the done ones are then unchanged)."""
        done: list[Publication] = []
        failed: ForgeUnavailable | None = None
        cursor: str | None = None
        while True:
            claims, cursor = self.chain.store.list_claims(project, 500, cursor)
            for claim in claims:
                if self._record(project, claim["candidate_id"]) is None:
                    continue
                try:
                    done.append(self.publish(project, claim["candidate_id"]))
                except ForgeUnavailable as error:
                    failed = error
            if cursor is None:
                break
        if failed is not None:
            raise failed
        return done

    def sweep(self) -> SweepReport:
        """Publish again every record due before the next sweep (an approval or evidence expiring)."""
        before = plus_seconds(self.chain.now(), self.horizon)
        report = SweepReport()
        cursor: str | None = None
        while True:
            due, cursor = self.records.check_records_due(before, 100, cursor)
            for record in due:
                try:
                    outcome = self.publish(record.project, record.candidate_id)
                except ForgeUnavailable:
                    report.deferred.append(f"{record.project}/{record.candidate_id}")  # next sweep retries
                    continue
                setattr(report, outcome.status, getattr(report, outcome.status) + 1)
            if cursor is None:
                return report

    # ---- one publication ---------------------------------------------------------------------------------

    def publish(self, project: str, candidate_id: str) -> Publication:
        force = False
        for _ in range(ATTEMPTS):
            outcome = self._attempt(project, candidate_id, force)
            if outcome is not None:
                return outcome
            force = True  # lost a race: what the forge shows may be the loser's, so publish whatever it says
        raise PublishLater(f"the check record of {candidate_id} kept changing under this publisher")

    def _attempt(self, project: str, candidate_id: str, force: bool) -> Publication | None:
        record = self._record(project, candidate_id)
        try:
            # A required check lets a change merge: it reads as a release path, against the witness, so a
            # chain put back to an earlier genuine head is seen here too (never an advisory read).
            verdict, stream, basis = decisions.judged(
                self.chain, project, candidate_id, PUBLISHER, release=True
            )
        except Refusal as refusal:
            if refusal.code == "NOT_FOUND":
                return Publication(project, candidate_id, "skipped", reason="no such candidate")
            if record is None:
                raise  # nothing says where its check lives: the outbox retries once the store answers
            # The candidate's chain cannot be read: its check says so (failure), on the run it already has.
            verdict, stream, basis = decisions.hold_unreadable(refusal.detail, self.chain.now()), None, None
        config = basis.project.config(verdict.as_of) if basis is not None else None
        target = self._target(basis, stream, record)
        if target is None:
            return Publication(project, candidate_id, "skipped", reason="the candidate cannot be read")
        repository = forge_repository(config, target.subject, target.environment)
        if config is None and record is None and basis is not None and basis.read_findings:
            # The project's configuration could not be read: whether the candidate has a check is unknown.
            raise PublishLater("the project's configuration cannot be read now")
        if repository is None and record is None:
            return Publication(project, candidate_id, "skipped", reason="no repository is configured for it")
        state = basis.state if basis is not None else None
        expiry = earliest_expiry(state, basis.project, verdict.as_of) if state and basis else None
        soon = expiry if expiry and expiry <= plus_seconds(verdict.as_of, self.horizon) else None
        ready_soon_expiring = soon if verdict.decision == "ready" else None
        text = check_text(
            verdict,
            state,
            basis.project if basis else None,
            target.environment,
            expires_soon=ready_soon_expiring,
        )
        conclusion = conclusion_for(verdict, expires_soon=ready_soon_expiring is not None)
        name = check_name(target.environment)
        repo_name = repository.repository if repository is not None else record.repository  # type: ignore[union-attr]
        # A candidate's revision and environment never change: its record names the one run it has.
        base = record or CheckRecord(project, candidate_id, repo_name, target.revision, name)
        due = expiry or ""
        unchanged = (base.conclusion, base.digest) == (conclusion, text.digest)
        if unchanged and base.check_run_id and not force:
            # Written even when nothing changed: a publisher that read this record before a newer write and
            # is still publishing the older decision (a ready overtaken by a write back to this very hold)
            # then loses its conditional write and judges again, so the forge ends on the fresher decision.
            if not self._put(base.next(due_at=due)):
                return None
            return Publication(project, candidate_id, "unchanged", conclusion, base.check_run_id)
        forge = self._forge_of(config.github if config is not None else None)
        if base.check_run_id is None:
            claimed = self._claim(base)
            if claimed is None:
                return None
            base = claimed
        check = CheckRun(
            name=name,
            head_sha=target.revision,
            conclusion=conclusion,  # type: ignore[arg-type]
            title=text.title,
            summary=text.summary,
            external_id=candidate_id,
            details_url=self._details(project, candidate_id),
            check_run_id=base.check_run_id,
        )
        try:
            published = self._send(forge, repo_name, check)
        except ForgeUnavailable as error:
            self._defer(base, error)
            raise
        except BaseException:
            if base.check_run_id is None:
                self._defer(base, None)
            raise
        kept = base.next(
            check_run_id=published,
            conclusion=conclusion,
            digest=text.digest,
            due_at=due,
            published_at=self.chain.now(),
            claimed_at="",
        )
        if not self._put(kept):
            return None
        return Publication(project, candidate_id, "published", conclusion, published)

    # ---- pieces ------------------------------------------------------------------------------------------

    def _forge_of(self, github: GitHubForge | None) -> Forge:
        """The forge to publish through: the one given, or the project's GitHub App's."""
        if hasattr(self.forge, "publish_check"):
            return self.forge  # type: ignore[return-value]
        if github is None:
            # A check exists but the configuration naming its app cannot be read (or was removed): later.
            raise PublishLater("the project's GitHub App configuration cannot be read now")
        return self.forge(github)

    @staticmethod
    def _send(forge: Forge, repository: str, check: CheckRun) -> str:
        """Update the run we have (a run the forge no longer knows is created again)."""
        try:
            return forge.publish_check(repository, check).check_run_id
        except ForgeRefused:
            if check.check_run_id is None:
                raise
        return forge.publish_check(repository, replace(check, check_run_id=None)).check_run_id

    def _record(self, project: str, candidate_id: str) -> CheckRecord | None:
        """The candidate's check record, believed only when its tag verifies under the chain key. One that
        does not (written by someone who can write the table, not by a publisher) keeps only its version, for
        the conditional write over it: its run id, conclusion and digest are forgotten, so the check is
        published again, on a new run, from the decision."""
        record = self.records.check_record(project, candidate_id)
        seal = self.chain.sealer()
        if record is None or seal is None or seal.verify("check_record", record.fields(), record.tag):
            return record
        return replace(record, check_run_id=None, conclusion="", digest="", claimed_at="", tag="")

    def _put(self, record: CheckRecord) -> bool:
        """Write the record over its previous version, tagged under the chain key."""
        seal = self.chain.sealer()
        if seal is not None:
            record = replace(record, tag="")
            record = replace(record, tag=seal.tag("check_record", record.fields()))
        return self.records.put_check_record(record)

    def _claim(self, record: CheckRecord) -> CheckRecord | None:
        """Hold the record while the run is created, so two publishers never create two runs of one name
        (GitHub would show the newer, whichever decision it carried)."""
        now = self.chain.now()
        if record.claimed_at and plus_seconds(record.claimed_at, CLAIM_SECONDS) > now:
            raise PublishLater(f"another publisher is creating the check run of {record.candidate_id}")
        # Due once the claim lapses: a publisher that dies while creating the run leaves it to the sweep.
        claimed = record.next(check_run_id=None, claimed_at=now, due_at=plus_seconds(now, CLAIM_SECONDS))
        return claimed if self._put(claimed) else None

    def _defer(self, stored: CheckRecord, error: ForgeUnavailable | None) -> None:
        """The forge did not take the publication: the record keeps what the forge still shows (its old
        conclusion and digest), drops a claim this publisher held, and falls due again after a backoff, so
        the sweep retries it even when the outbox's own retries run out. Best effort: the outbox retries."""
        delay = max(RETRY_SECONDS, (error.retry_after_seconds or 0) if error is not None else 0)
        due = plus_seconds(self.chain.now(), delay)
        try:
            self._put(stored.next(claimed_at="", due_at=min(due, stored.due_at) if stored.due_at else due))
        except StoreUnavailable:
            pass  # a claim lapses by itself after CLAIM_SECONDS

    def _details(self, project: str, candidate_id: str) -> str | None:
        if not self.details_url:
            return None
        return self.details_url.format(project=project, candidate_id=candidate_id)

    @staticmethod
    def _target(basis: decisions.Basis | None, stream: Any, record: CheckRecord | None) -> _Target | None:
        """Which commit and environment the check is for: from the folded state, else from the chain's
        first fact, else from the record of the run already published."""
        if basis is not None and basis.state is not None:
            c = basis.state.candidate
            return _Target(c["subject"], c["revision"], c["environment"])
        if stream is not None and stream.facts:
            try:
                c = parse_facts({min(stream.facts): stream.facts[min(stream.facts)]})[0]
                return _Target(c["subject"], c["revision"], c["environment"])
            except (ValueError, KeyError, TypeError, IndexError):
                pass
        if record is not None:
            return _Target("", record.head_sha, record.name.removeprefix("sentinel/"))
        return None
