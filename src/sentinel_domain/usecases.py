"""The use cases behind every route: each loads a chain, applies the rules, and appends one fact with its
audit event in one write (or refuses and changes nothing)."""

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import audit
from .canonical import canonical_text, digest
from .decision import Decision, decide, finding, sort_findings
from .derivation import MAX_OBLIGATIONS, derive
from .errors import Refusal, StoreConflict, StoreUnavailable
from .evidence import EvidenceRefused, bind_evidence, evidence_response
from .models import (
    REVISION,
    Actor,
    CandidateRequest,
    ChangeContextRequest,
    EvidenceRequest,
    ExecutionRequest,
    Policy,
    ProjectConfig,
    ReportRequest,
    ReviewRequest,
    SettlementRequest,
)
from .plans import fallback_plan, plan_digest, preflight
from .ports import (
    Append,
    Checkpoints,
    ClaimTaken,
    Clock,
    IdempotencyRecord,
    Ids,
    Proposer,
    StateStore,
    Stream,
    StreamRef,
)
from .reports import ReportWriter, find_task
from .reviews import approval_status, excluded_approvers, reviewer_refusal
from .state import CandidateState, ProjectState, parse_facts, public
from .times import format_time, parse_time, plus_seconds

RETRIES = 4
LEASE_SECONDS = 30
OPERATOR = "operator"


@dataclass
class Result:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    replayed: bool = False


def full_revision(value: str, field_name: str = "revision") -> str:
    if not isinstance(value, str) or not REVISION.match(value):
        raise Refusal("MUTABLE_REVISION", f"{field_name} must be a full commit id (40 or 64 hex characters), "
                      f"not {str(value)[:80]!r}")
    return value.lower()


def if_match_value(header: str | None) -> str | None:
    if header is None:
        return None
    value = header.strip()
    if value.startswith("W/"):
        value = value[2:]
    return value.strip('"')


def claim_key(subject: str, revision: str, environment: str) -> str:
    return digest([subject, revision, environment])


def encode_cursor(position: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": position}).encode()).decode()


def decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor.encode()))["after"]
        if not isinstance(value, int) or value < 0:
            raise ValueError
        return value
    except Exception as error:  # any undecodable cursor is the caller's mistake
        raise Refusal("VALIDATION_FAILED", "cursor is not one this service issued") from error


def _unavailable(detail: str) -> Refusal:
    return Refusal("STATE_UNAVAILABLE", detail, headers={"Retry-After": "1"})


class Gate:
    """The application service: one method per route (and the operator's project-chain writes)."""

    def __init__(self, store: StateStore, clock: Clock, ids: Ids, proposer: Proposer | None = None,
                 checkpoints: Checkpoints | None = None) -> None:
        self.store = store
        self.clock = clock
        self.ids = ids
        self.proposer = proposer
        self.checkpoints = checkpoints

    def verify(self, stream: Stream) -> audit.Verification:
        """The whole chain, its facts and head, and (where the archive is reachable) its newest checkpoint."""
        checkpoint = None
        if self.checkpoints is not None:
            try:
                checkpoint = self.checkpoints.newest(stream.ref)
            except Exception:  # an unreachable archive leaves the chain's own checks standing
                checkpoint = None
        return audit.AuditChain.verify(stream.ref.project, stream.ref.candidate_id, stream.events, stream.facts,
                                       stream.head, checkpoint)

    # ---- plumbing -------------------------------------------------------------------------------------

    def now(self) -> str:
        return format_time(self.clock.now())

    @staticmethod
    def need(actor: Actor, *roles: str) -> None:
        """No role in the project: it does not exist for you. A role, but the wrong one: 403."""
        if not actor.roles:
            raise Refusal("NOT_FOUND", "no such project")
        if roles and not set(roles) & set(actor.roles):
            raise Refusal("FORBIDDEN_ROLE", f"this needs one of the roles {', '.join(roles)} in the project")

    def _load(self, ref: StreamRef) -> Stream | None:
        try:
            return self.store.load(ref)
        except StoreUnavailable as error:
            raise _unavailable("the state store could not be read; retry shortly") from error

    def project(self, project: str) -> tuple[Stream, ProjectState]:
        stream = self._load(StreamRef(project))
        if stream is None or not stream.facts:
            raise Refusal("NOT_FOUND", "no such project")
        if not stream.complete:
            raise _unavailable("the project's chain is larger than one read may page through; nothing was changed")
        self._require_intact(stream)
        try:
            return stream, ProjectState.from_facts(project, stream.facts)
        except (ValueError, KeyError, TypeError) as error:
            raise _unavailable("a stored fact of the project cannot be read; nothing was changed") from error

    def candidate(self, project: str, candidate_id: str, as_of: str | None = None
                  ) -> tuple[Stream, CandidateState]:
        stream = self._load(StreamRef(project, candidate_id))
        if stream is None or not stream.facts:
            raise Refusal("NOT_FOUND", "no such candidate")
        if not stream.complete:
            raise _unavailable("the candidate's chain is larger than one read may page through; nothing was changed")
        self._require_intact(stream)
        try:
            return stream, CandidateState.from_facts(parse_facts(stream.facts), as_of)
        except (ValueError, KeyError, TypeError, LookupError) as error:
            raise _unavailable("a stored fact of the candidate cannot be read; nothing was changed") from error

    def _require_intact(self, stream: Stream) -> None:
        """Nothing is judged from facts the chain no longer vouches for: a tampered chain refuses every write
        (and every read that would act on it) until an operator restores it; decisions hold with STATE_TAMPERED."""
        verification = self.verify(stream)
        if not verification.valid:
            raise _unavailable(f"the audit chain fails verification at seq {verification.first_bad_seq} "
                               f"({verification.reason}); nothing was changed: an operator must restore it")

    def config(self, project_state: ProjectState, as_of: str | None = None) -> ProjectConfig:
        config = project_state.config(as_of)
        if config is None:
            raise Refusal("VALIDATION_FAILED", "the project has no configuration yet: an admin must PUT .../config")
        return config

    def commit(self, stream: Stream, ref: StreamRef, type_: str, actor_id: str, fact: dict[str, Any],
               body: Callable[[int], dict[str, Any]], *, status: int = 201, idem: IdempotencyRecord | None = None,
               outbox: list[dict[str, Any]] | None = None, head: dict[str, Any] | None = None,
               claim: tuple[str, str] | None = None, require_plan_digest: str | None = None,
               require_approval_after: str | None = None, require_project_seq: int | None = None) -> Result:
        fact_text = canonical_text(fact)
        event = audit.next_event(ref.project, ref.candidate_id, stream.seq, stream.head_hash, type_, actor_id,
                                 fact["recorded_at"], fact_text)
        result_body = body(event["seq"])
        if idem is not None:
            idem.status, idem.response_status, idem.response_body = "completed", status, result_body
        new_head = {"seq": event["seq"], "hash": event["hash"], **(head or {})}
        try:
            self.store.append(Append(ref, stream.seq, event, fact_text, new_head, outbox or [], idem, claim,
                                     require_plan_digest, require_approval_after, require_project_seq))
        except StoreUnavailable as error:
            raise _unavailable("the change could not be written; nothing was changed, retry shortly") from error
        return Result(status, result_body)

    def retrying(self, attempt: Callable[[], Result]) -> Result:
        """A lost race re-reads and re-judges; nothing is written from stale reads."""
        for _ in range(RETRIES):
            try:
                return attempt()
            except StoreConflict:
                continue
        raise _unavailable("the candidate changed concurrently too often; retry shortly")

    def idempotent(self, ref: StreamRef, scope: str, key: str | None, actor: Actor, request: Any,
                   run: Callable[[IdempotencyRecord | None], Result]) -> Result:
        """Rule 17: the same key, caller and request replays the first success and appends nothing."""
        if key is None:
            return self.retrying(lambda: run(None))
        if not 1 <= len(key) <= 255:
            raise Refusal("VALIDATION_FAILED", "Idempotency-Key must be 1 to 255 characters")
        try:
            request_hash = digest(request)
        except (ValueError, TypeError, OverflowError) as error:  # e.g. an integer JSON cannot carry exactly
            raise Refusal("VALIDATION_FAILED", f"the request cannot be canonicalised: {error}") from error
        now = self.now()
        record = IdempotencyRecord(ref, scope, key, actor.id, request_hash, claimed_at=now,
                                   lease_until=plus_seconds(now, LEASE_SECONDS))
        for _ in range(RETRIES):
            try:
                existing = self.store.idempotency_get(ref, scope, key)
                if existing is None or (existing.status == "in_progress" and existing.lease_until <= now):
                    if self.store.idempotency_begin(record):
                        break
                    continue
            except StoreUnavailable as error:
                raise _unavailable("the idempotency record could not be read; retry shortly") from error
            if existing.caller != actor.id or existing.request_hash != request_hash:
                raise Refusal("IDEMPOTENCY_CONFLICT", "this Idempotency-Key was used by another caller or with "
                              "another request; use a new key")
            if existing.status == "completed" and existing.response_body is not None:
                return Result(existing.response_status, existing.response_body, replayed=True)
            raise Refusal("IDEMPOTENCY_IN_PROGRESS", "a request with this Idempotency-Key is still in progress",
                          headers={"Retry-After": "1"})
        else:
            raise Refusal("IDEMPOTENCY_IN_PROGRESS", "the key is contended; retry shortly", headers={"Retry-After": "1"})
        try:
            return self.retrying(lambda: run(record))
        except BaseException:
            try:
                self.store.idempotency_release(record)
            except StoreUnavailable:
                pass  # the lease lapses by itself
            raise

    def _candidate_head(self, state: CandidateState, config: ProjectConfig) -> dict[str, Any]:
        """What executions re-check inside their transaction: the plan digest and how long it is approved."""
        _code, until = approval_status(state, config, "")
        return {"plan_digest": state.plan_digest or "", "approval_valid_until": until or ""}

    def _append_fact(self, state: CandidateState, fact: dict[str, Any], seq: int) -> CandidateState:
        facts = [*state_facts(state), dict(fact, _seq=seq, _digest="")]
        return CandidateState.from_facts(facts)

    # ---- the operator's project chain (CLI only, never over the API) -----------------------------------

    def create_project(self, project: str) -> Result:
        def attempt() -> Result:
            stream = self._load(StreamRef(project)) or Stream(StreamRef(project), [], {}, None)
            if stream.facts:
                raise Refusal("VALIDATION_FAILED", f"project {project} exists already")
            fact = {"type": "project.created", "project": project, "recorded_at": self.now()}
            return self.commit(stream, StreamRef(project), "project.created", OPERATOR, fact,
                               lambda seq: {"project": project, "seq": seq})
        return self.retrying(attempt)

    def record_project_event(self, project: str, type_: str, payload: dict[str, Any]) -> Result:
        def attempt() -> Result:
            stream, _state = self.project(project)
            fact = {"type": type_, **payload, "recorded_at": self.now()}
            return self.commit(stream, StreamRef(project), type_, OPERATOR, fact,
                               lambda seq: {"project": project, "seq": seq})
        return self.retrying(attempt)

    # ---- configuration and policies ------------------------------------------------------------------

    def put_config(self, project: str, actor: Actor, config: ProjectConfig, if_match: str | None) -> Result:
        self.need(actor, "admin")

        def attempt() -> Result:
            stream, state = self.project(project)
            version = state.config_version()
            wanted = if_match_value(if_match)
            if version and wanted is None:
                raise Refusal("VERSION_CONFLICT", "replacing the configuration needs If-Match with its ETag",
                              status=428)
            if wanted is not None and wanted != str(version):
                raise Refusal("VERSION_CONFLICT", f"If-Match names version {wanted}; the current one is {version}")
            policies = state.policies()
            named = {config.unclassified_policy, *(r.policy_id for r in config.derivation_rules)}
            missing = sorted(named - set(policies))
            if missing:
                raise Refusal("VALIDATION_FAILED", f"unknown policies {', '.join(missing)}: create them first")
            for rule in config.derivation_rules:
                if bool(rule.files) == bool(rule.openapi):
                    raise Refusal("VALIDATION_FAILED", "each derivation rule names either files or openapi")
            fact = {"type": "config.set", "version": version + 1, "config": config.model_dump(mode="json"),
                    "actor": actor.fact(), "recorded_at": self.now()}
            result = self.commit(stream, StreamRef(project), "config.set", actor.id, fact,
                                 lambda seq: {"version": version + 1, "config": fact["config"], "seq": seq},
                                 status=201)
            result.headers["ETag"] = f'"{version + 1}"'
            return result
        return self.retrying(attempt)

    def get_config(self, project: str, actor: Actor) -> Result:
        self.need(actor)
        _stream, state = self.project(project)
        entry = state.config_entry()
        if entry is None:
            raise Refusal("NOT_FOUND", "the project has no configuration yet")
        return Result(200, {"version": entry["version"], "config": entry["config"]},
                      headers={"ETag": f'"{entry["version"]}"'})

    def put_policy(self, project: str, policy_id: str, actor: Actor, policy: Policy) -> Result:
        self.need(actor, "admin")

        def attempt() -> Result:
            stream, state = self.project(project)
            version = len(state.policy_versions(policy_id)) + 1
            fact = {"type": "policy.set", "policy_id": policy_id, "version": version,
                    "policy": policy.model_dump(mode="json"), "actor": actor.fact(), "recorded_at": self.now()}
            return self.commit(stream, StreamRef(project), "policy.set", actor.id, fact,
                               lambda seq: {"policy_id": policy_id, "version": version, "policy": fact["policy"],
                                            "seq": seq})
        return self.retrying(attempt)

    def list_policies(self, project: str, actor: Actor) -> Result:
        self.need(actor)
        _stream, state = self.project(project)
        return Result(200, {"policies": [{"policy_id": pid, "version": v, "policy": p.model_dump(mode="json")}
                                         for pid, (v, p) in sorted(state.policies().items())]})

    def get_policy(self, project: str, policy_id: str, actor: Actor, version: int | None) -> Result:
        self.need(actor)
        _stream, state = self.project(project)
        found = state.policy(policy_id, version=version)
        if found is None:
            raise Refusal("NOT_FOUND", f"no policy {policy_id}" + (f" version {version}" if version else ""))
        return Result(200, {"policy_id": policy_id, "version": found[0], "policy": found[1].model_dump(mode="json")})

    # ---- audit ---------------------------------------------------------------------------------------

    def audit(self, ref: StreamRef, actor: Actor, limit: int, cursor: str | None) -> Result:
        self.need(actor, *(("admin", "auditor") if ref.candidate_id is None else ()))
        stream = self._load(ref)
        if stream is None or not stream.facts:
            raise Refusal("NOT_FOUND", "no such " + ("project" if ref.candidate_id is None else "candidate"))
        after = decode_cursor(cursor)
        verification = self.verify(stream)
        page = [e for e in stream.events if e["seq"] > after][:limit]
        more = bool(page) and page[-1]["seq"] < len(stream.events)
        return Result(200, {"events": page, "next_cursor": encode_cursor(page[-1]["seq"]) if more else None,
                            "verification": verification.as_dict()})

    # ---- candidates and change context --------------------------------------------------------------

    def _attests(self, actor: Actor, config: ProjectConfig) -> bool:
        return actor.kind == "ci" and "publisher" in actor.roles and actor.id in config.change_context_publishers

    def create_candidate(self, project: str, actor: Actor, request: CandidateRequest, key: str | None) -> Result:
        self.need(actor, "requester", "publisher")
        base = full_revision(request.base_revision, "base_revision")
        revision = full_revision(request.revision)

        def run(idem: IdempotencyRecord | None) -> Result:
            _pstream, pstate = self.project(project)
            config = self.config(pstate)
            if request.environment not in config.environments:
                raise Refusal("UNKNOWN_ENVIRONMENT", f"environment {request.environment} is not one of the "
                              f"project's: {', '.join(config.environments)}")
            obligations = derive(request.change, config)
            if len(obligations) > MAX_OBLIGATIONS:
                raise Refusal("TOO_MANY_OBLIGATIONS", f"the change derives {len(obligations)} obligations; a "
                              f"candidate holds at most {MAX_OBLIGATIONS}: split the change")
            key_ = claim_key(request.subject, revision, request.environment)
            existing = self._find(project, key_)
            if existing:
                raise Refusal("CANDIDATE_EXISTS", "a candidate for this subject, revision and environment exists",
                              extra={"candidate_id": existing})
            candidate_id = self.ids.new_id("cand")
            ref = StreamRef(project, candidate_id)
            attested = self._attests(actor, config)
            fact = {"type": "candidate.created", "candidate_id": candidate_id, "subject": request.subject,
                    "base_revision": base, "revision": revision, "environment": request.environment,
                    "created_by": actor.fact(), "attested": attested,
                    "change": _change_summary(request.change), "obligations_added": obligations,
                    "recorded_at": self.now()}
            scope = sorted({o["scope"] for o in obligations})
            try:
                return self.commit(
                    Stream(ref, [], {}, None), ref, "candidate.created", actor.id, fact,
                    lambda seq: {"candidate_id": candidate_id, "scope": scope, "obligations": obligations,
                                 "change_context": "attested" if attested else "declared", "seq": seq},
                    idem=idem, claim=(key_, candidate_id),
                    head={"plan_digest": "", "approval_valid_until": ""})
            except ClaimTaken as taken:
                raise Refusal("CANDIDATE_EXISTS", "a candidate for this subject, revision and environment "
                              "exists", extra={"candidate_id": taken.existing_id}) from taken
        return self.idempotent(StreamRef(project), "/candidates", key, actor, request.model_dump(mode="json"), run)

    def _find(self, project: str, key: str) -> str | None:
        try:
            return self.store.find_claim(project, key)
        except StoreUnavailable as error:
            raise _unavailable("the state store could not be read; retry shortly") from error

    def add_change_context(self, project: str, candidate_id: str, actor: Actor, request: ChangeContextRequest,
                           key: str | None) -> Result:
        self.need(actor, "requester", "publisher")
        ref = StreamRef(project, candidate_id)

        def run(idem: IdempotencyRecord | None) -> Result:
            _pstream, pstate = self.project(project)
            config = self.config(pstate)
            stream, state = self.candidate(project, candidate_id)
            derived = derive(request.change, config)
            added = [o for o in derived if o["obligation_id"] not in state.obligations]
            if len(state.obligations) + len(added) > MAX_OBLIGATIONS:
                raise Refusal("TOO_MANY_OBLIGATIONS", f"the candidate would hold "
                              f"{len(state.obligations) + len(added)} obligations; at most {MAX_OBLIGATIONS}")
            attested = self._attests(actor, config)
            fact = {"type": "change_context.added", "actor": actor.fact(), "attested": attested,
                    "change": _change_summary(request.change), "obligations_added": added,
                    "recorded_at": self.now()}
            after = self._append_fact(state, fact, stream.seq + 1)
            return self.commit(
                stream, ref, "change_context.added", actor.id, fact,
                lambda seq: {"added_obligations": added, "obligations": list(after.obligations.values()),
                             "scope": after.scope(),
                             "change_context": "attested" if after.attested else "declared", "seq": seq},
                idem=idem, head=self._candidate_head(after, config))
        return self.idempotent(ref, f"/candidates/{candidate_id}/change-context", key, actor,
                               request.model_dump(mode="json"), run)

    def find_candidates(self, project: str, actor: Actor, subject: str | None, revision: str | None,
                        environment: str | None, limit: int, cursor: str | None) -> Result:
        self.need(actor)
        self.project(project)
        if subject and revision and environment:
            found = self._find(project, claim_key(subject, revision.lower(), environment))
            items = [{"candidate_id": found, "subject": subject, "revision": revision.lower(),
                      "environment": environment}] if found else []
            return Result(200, {"candidates": items, "next_cursor": None})
        try:
            claims, next_cursor = self.store.list_claims(project, limit, cursor)
        except StoreUnavailable as error:
            raise _unavailable("the state store could not be read; retry shortly") from error
        rows = [c for c in claims if (not subject or c["subject"] == subject)
                and (not revision or c["revision"] == revision.lower())
                and (not environment or c["environment"] == environment)]
        return Result(200, {"candidates": rows, "next_cursor": next_cursor})

    def get_candidate(self, project: str, candidate_id: str, actor: Actor) -> Result:
        self.need(actor)
        stream, state = self.candidate(project, candidate_id)
        body = candidate_view(state, stream.seq)
        headers = {"ETag": f'"{state.plan_digest}"'} if state.plan_digest else {}
        return Result(200, body, headers=headers)

    # ---- plans ---------------------------------------------------------------------------------------

    def _check_if_match(self, state: CandidateState, if_match: str | None) -> None:
        wanted = if_match_value(if_match)
        current = state.plan_digest
        if current is None:
            if wanted is not None:
                raise Refusal("VERSION_CONFLICT", "no plan exists yet: the first submission carries no If-Match")
            return
        if wanted is None:
            raise Refusal("VERSION_CONFLICT", "amending the plan needs If-Match with the current plan digest",
                          status=428)
        if wanted != current:
            raise Refusal("VERSION_CONFLICT", "If-Match names a plan digest that is not the current one")

    def _store_plan(self, project: str, candidate_id: str, actor: Actor, if_match: str | None,
                    draft: Callable[[CandidateState, ProjectState, ProjectConfig],
                                    tuple[dict[str, Any], str, str | None]],
                    idem: IdempotencyRecord | None) -> Result:
        _pstream, pstate = self.project(project)
        config = self.config(pstate)
        stream, state = self.candidate(project, candidate_id)
        self._check_if_match(state, if_match)
        plan, mode, reason = draft(state, pstate, config)
        normalised, findings = preflight(plan, state.obligations, pstate.policies(), config)
        if normalised is None:
            raise Refusal("PLAN_PREFLIGHT_FAILED", f"the plan failed preflight with {len(findings)} finding(s); "
                          "nothing was stored", findings=findings)
        version = len(state.plans) + 1
        digest_ = plan_digest(project, candidate_id, state.candidate["revision"], normalised)
        fact = {"type": "plan.stored", "plan_version": version, "plan_digest": digest_, "plan": normalised,
                "author": actor.fact(), "mode": mode, "fallback_reason": reason, "recorded_at": self.now()}
        after = self._append_fact(state, fact, stream.seq + 1)

        def body(seq: int) -> dict[str, Any]:
            out = {"plan_version": version, "plan_digest": digest_, "plan": normalised, "seq": seq}
            if mode != "submitted":
                out.update(mode=mode, fallback_reason=reason)
            return out
        result = self.commit(stream, StreamRef(project, candidate_id), "plan.stored", actor.id, fact, body,
                             idem=idem, head=self._candidate_head(after, config))
        result.headers["ETag"] = f'"{digest_}"'
        return result

    def put_plan(self, project: str, candidate_id: str, actor: Actor, raw_plan: Any, if_match: str | None) -> Result:
        self.need(actor, "requester")
        return self.retrying(lambda: self._store_plan(project, candidate_id, actor, if_match,
                                                      lambda *_: (raw_plan, "submitted", None), None))

    def propose(self, project: str, candidate_id: str, actor: Actor, if_match: str | None, key: str | None) -> Result:
        """Rule 23: the model drafts, preflight and scope judge, and any failure stores the fallback instead."""
        from . import proposals  # a local import: the module's shared import block stays untouched

        self.need(actor, "requester")
        # The model is asked at most once per request: a lost race re-judges the same answer against the fresh
        # state rather than spending a second model call (and the gateway's 30 s) on it.
        asked: list[tuple[Any, str | None]] = []

        def draft(state: CandidateState, pstate: ProjectState, config: ProjectConfig
                  ) -> tuple[dict[str, Any], str, str | None]:
            policies = pstate.policies()
            known = {k: v for k, v in state.obligations.items() if v["policy_id"] in policies}
            fallback = fallback_plan(known, policies)
            if not known:  # nothing to plan: the fallback's own preflight refuses it, no model call needed
                return fallback, "fallback", "MODEL_NOT_CONFIGURED"
            if not asked:
                asked.append(proposals.ask(self.proposer, proposals.proposal_request(
                    project, state.candidate, state.contexts, state.obligations, policies, config)))
            raw, failure = asked[0]
            if failure is not None:
                return fallback, "fallback", failure
            plan, reason, _findings = proposals.judge_proposal(raw, state.obligations, policies, config)
            if plan is None:
                return fallback, "fallback", reason
            return plan, "model", None

        return self.idempotent(StreamRef(project, candidate_id), f"/candidates/{candidate_id}/proposals", key,
                               actor, {"if_match": if_match},
                               lambda idem: self._store_plan(project, candidate_id, actor, if_match, draft, idem))

    # ---- reviews and settlement ----------------------------------------------------------------------

    def review(self, project: str, candidate_id: str, actor: Actor, request: ReviewRequest, key: str | None) -> Result:
        if not actor.roles:
            raise Refusal("NOT_FOUND", "no such project")
        refusal = reviewer_refusal(actor)
        if refusal:
            raise Refusal(refusal, {"AGENT_CANNOT_REVIEW": "agents never review; a human reviewer must",
                                    "REVIEWER_NOT_HUMAN": "ci principals never review; a human reviewer must",
                                    "FORBIDDEN_ROLE": "reviewing needs the reviewer role in this project"}[refusal])
        ref = StreamRef(project, candidate_id)

        def run(idem: IdempotencyRecord | None) -> Result:
            _pstream, pstate = self.project(project)
            config = self.config(pstate)
            stream, state = self.candidate(project, candidate_id)
            named_exists = any(p["plan_digest"] == request.plan_digest for p in state.plans)
            if request.decision == "approve" and actor.id in excluded_approvers(
                    state, request.plan_digest if named_exists else None):
                raise Refusal("SELF_APPROVAL", "you created this candidate, authored a plan version, or sponsor "
                              "someone who did: ask another reviewer")
            if state.plan_digest is None or request.plan_digest != state.plan_digest:
                raise Refusal("DIGEST_MISMATCH", "the review names a plan digest that is not the current plan's"
                              if state.plan_digest else "no plan exists to review")
            if full_revision(request.revision) != state.candidate["revision"]:
                raise Refusal("REVISION_MISMATCH", "the review names a revision that is not the candidate's")
            now = self.now()
            review_id = self.ids.new_id("rev")
            fact = {"type": "review.recorded", "review_id": review_id, "reviewer": actor.fact(),
                    "decision": request.decision, "plan_digest": request.plan_digest,
                    "revision": state.candidate["revision"], "comment": request.comment,
                    "expires_at": plus_seconds(now, config.approval_ttl_seconds), "recorded_at": now}
            after = self._append_fact(state, fact, stream.seq + 1)
            return self.commit(stream, ref, "review.recorded", actor.id, fact,
                               lambda seq: {"review_id": review_id, "decision": request.decision,
                                            "plan_digest": request.plan_digest, "revision": fact["revision"],
                                            "expires_at": fact["expires_at"], "seq": seq},
                               idem=idem, head=self._candidate_head(after, config))
        return self.idempotent(ref, f"/candidates/{candidate_id}/reviews", key, actor,
                               request.model_dump(mode="json"), run)

    def settle(self, project: str, candidate_id: str, task_id: str, actor: Actor, request: SettlementRequest,
               key: str | None) -> Result:
        if not actor.roles:
            raise Refusal("NOT_FOUND", "no such project")
        refusal = reviewer_refusal(actor)
        if refusal:
            raise Refusal(refusal, "settlement is a human reviewer's act")
        ref = StreamRef(project, candidate_id)

        def run(idem: IdempotencyRecord | None) -> Result:
            _pstream, pstate = self.project(project)
            config = self.config(pstate)
            stream, state = self.candidate(project, candidate_id)
            if state.plan_digest is None or request.plan_digest != state.plan_digest:
                raise Refusal("DIGEST_MISMATCH", "the settlement names a plan digest that is not the current one")
            if find_task(state, task_id) is None:
                raise Refusal("NOT_FOUND", f"the current plan has no task {task_id}")
            if not state.task_passes(state.plan_digest, task_id):
                raise Refusal("TASK_NOT_ELIGIBLE", f"task {task_id} does not pass under this plan digest")
            fact = {"type": "task.settled", "task_id": task_id, "plan_digest": state.plan_digest,
                    "settled_by": actor.fact(), "note": request.note, "recorded_at": self.now()}
            after = self._append_fact(state, fact, stream.seq + 1)
            return self.commit(stream, ref, "task.settled", actor.id, fact,
                               lambda seq: {"task_id": task_id, "plan_digest": fact["plan_digest"], "settled": True,
                                            "seq": seq},
                               idem=idem, head=self._candidate_head(after, config))
        return self.idempotent(ref, f"/candidates/{candidate_id}/tasks/{task_id}/settlement", key, actor,
                               request.model_dump(mode="json"), run)

    # ---- actions -------------------------------------------------------------------------------------

    def execute(self, project: str, candidate_id: str, action_id: str, actor: Actor, request: ExecutionRequest,
                key: str | None) -> Result:
        self.need(actor, "requester")
        if not key:
            raise Refusal("IDEMPOTENCY_KEY_REQUIRED", "executions need an Idempotency-Key header")
        ref = StreamRef(project, candidate_id)

        def run(idem: IdempotencyRecord | None) -> Result:
            pstream, pstate = self.project(project)
            config = self.config(pstate)
            stream, state = self.candidate(project, candidate_id)
            now = self.now()
            digest_ = state.plan_digest
            if digest_ is None or request.plan_digest != digest_:
                raise Refusal("DIGEST_MISMATCH", "the execution names a plan digest that is not the current one")
            code, valid_until = approval_status(state, config, now)
            if code:
                raise Refusal("PLAN_NOT_APPROVED", f"the current plan is not approved ({code})")
            declared = next((a for a in state.plan["plan"]["actions"] if a["action_id"] == action_id), None)
            if declared is None:
                raise Refusal("ACTION_UNDECLARED", f"the current plan declares no action {action_id}")
            if declared["type"] not in config.allowed_action_types:
                raise Refusal("ACTION_NOT_ALLOWED", f"action type {declared['type']} is not allow-listed")
            if request.params != declared["params"]:
                raise Refusal("ACTION_PARAMS_MISMATCH", "params must equal the declared ones exactly")
            done = [e for e in state.executions if e["plan_digest"] == digest_ and e["action_id"] == action_id]
            if len(done) >= declared["max_executions"]:
                raise Refusal("ACTION_EXHAUSTED", f"action {action_id} ran {len(done)} of "
                              f"{declared['max_executions']} time(s) under this plan digest")
            stored_until = str((stream.head or {}).get("approval_valid_until", ""))
            execution_id = self.ids.new_id("exe")
            side_effect = {"type": declared["type"], "params": declared["params"], "delivery": "outbox",
                           "outbox_id": f"{candidate_id}/{execution_id}"}
            fact = {"type": "action.executed", "execution_id": execution_id, "action_id": action_id,
                    "action_type": declared["type"], "plan_digest": digest_, "params": declared["params"],
                    "executor": actor.fact(), "idempotency_key_sha256": digest(key), "side_effect": side_effect,
                    "recorded_at": now}
            outbox = [{"outbox_id": side_effect["outbox_id"], "kind": "action", "project": project,
                       "candidate_id": candidate_id, "execution_id": execution_id, "action_id": action_id,
                       "action_type": declared["type"], "params": declared["params"], "plan_digest": digest_,
                       "recorded_at": now}]
            if stored_until == (valid_until or ""):
                approval_check: str | None = self.now()  # the write's condition re-checks the expiry
            else:
                # The head predates a configuration change (approvals_required lowered): its stored validity is
                # stale, so the approval is judged here, on a fresh clock reading, and the write refreshes it.
                if not valid_until or valid_until <= self.now():
                    raise Refusal("PLAN_NOT_APPROVED", "the approval of the current plan has expired")
                approval_check = None
            return self.commit(stream, ref, "action.executed", actor.id, fact,
                               lambda seq: {"execution_id": execution_id, "action_id": action_id,
                                            "plan_digest": digest_, "side_effect": side_effect, "seq": seq},
                               idem=idem, outbox=outbox, head={"plan_digest": digest_,
                                                               "approval_valid_until": valid_until or ""},
                               require_plan_digest=digest_, require_approval_after=approval_check,
                               require_project_seq=pstream.seq)
        return self.idempotent(ref, f"action:{action_id}", key, actor, request.model_dump(mode="json"), run)

    # ---- evidence and reports ------------------------------------------------------------------------

    def post_evidence(self, project: str, candidate_id: str, actor: Actor, request: EvidenceRequest,
                      key: str | None) -> Result:
        self.need(actor, "publisher", "requester")
        full_revision(request.revision)
        ref = StreamRef(project, candidate_id)

        def run(idem: IdempotencyRecord | None) -> Result:
            _pstream, pstate = self.project(project)
            config = self.config(pstate)
            stream, state = self.candidate(project, candidate_id)
            try:
                fact = bind_evidence(state, pstate, request, actor, self.ids.new_id("ev"), self.now())
            except EvidenceRefused as error:
                raise Refusal(error.code, error.detail) from error
            after = self._append_fact(state, fact, stream.seq + 1)
            return self.commit(stream, ref, "evidence.recorded", actor.id, fact,
                               lambda seq: {**evidence_response(fact), "seq": seq},
                               idem=idem, head=self._candidate_head(after, config))
        return self.idempotent(ref, f"/candidates/{candidate_id}/evidence", key, actor,
                               request.model_dump(mode="json"), run)

    def report(self, project: str, candidate_id: str, task_id: str, actor: Actor, request: ReportRequest,
               key: str | None) -> Result:
        self.need(actor, "requester")
        ref = StreamRef(project, candidate_id)

        def run(idem: IdempotencyRecord | None) -> Result:
            _pstream, pstate = self.project(project)
            config = self.config(pstate)
            stream, state = self.candidate(project, candidate_id)
            fact = ReportWriter.write(state, pstate, task_id, request, actor, self.now())
            after = self._append_fact(state, fact, stream.seq + 1)
            return self.commit(stream, ref, "task.reported", actor.id, fact,
                               lambda seq: {"attempt": fact["attempt"], "recorded_status": fact["recorded_status"],
                                            "passes": fact["passes"], "findings": fact["findings"], "seq": seq},
                               idem=idem, head=self._candidate_head(after, config))
        return self.idempotent(ref, f"/candidates/{candidate_id}/tasks/{task_id}/reports", key, actor,
                               request.model_dump(mode="json"), run)

    # ---- decisions -----------------------------------------------------------------------------------

    def evaluate(self, project: str, candidate_id: str, actor: Actor, as_of: str | None = None) -> Decision:
        return self._evaluate(project, candidate_id, actor, as_of)[0]

    def _evaluate(self, project: str, candidate_id: str, actor: Actor, as_of: str | None,
                  stream: Stream | None = None) -> tuple[Decision, Stream]:
        """Never raises once the caller's role and the candidate are established: anything the gate
        cannot establish is a finding, and the decision holds. One read of the candidate's partition and
        one of the project's feed it."""
        self.need(actor)
        if stream is None:
            stream = self._load(StreamRef(project, candidate_id))
        if stream is None or not stream.facts:
            raise Refusal("NOT_FOUND", "no such candidate")
        when = as_of or self.now()
        extra: list[dict[str, Any]] = []
        if not stream.complete:
            extra.append(finding("EVIDENCE_QUERY_INCOMPLETE", f"the candidate's state took more than "
                                 f"{stream.pages} pages to read; nothing unread may count"))
        verification = self.verify(stream)
        if not verification.valid:
            extra.append(finding("STATE_TAMPERED", f"the candidate's audit chain fails at seq "
                                 f"{verification.first_bad_seq}: {verification.reason}"))
        try:
            pstream = self.store.load(StreamRef(project))
        except StoreUnavailable:
            pstream = None
        if pstream is None or not pstream.facts:
            extra.append(finding("STATE_UNAVAILABLE", "the project's configuration could not be read"))
            pstate = ProjectState(project, [])
        else:
            pstate = ProjectState.from_facts(project, pstream.facts)
            if not pstream.complete:
                extra.append(finding("EVIDENCE_QUERY_INCOMPLETE", "the project's configuration and policies took "
                                     "more pages to read than the budget allows; nothing unread may count"))
            project_check = self.verify(pstream)
            if not project_check.valid:
                extra.append(finding("STATE_TAMPERED", f"the project's audit chain fails at seq "
                                     f"{project_check.first_bad_seq}: {project_check.reason}"))
        try:
            state = CandidateState.from_facts(parse_facts(stream.facts), when)
            return decide(state, pstate, when, extra), stream
        except Exception as error:  # an unreadable fact is tampering or corruption; never a pass
            extra.append(finding("STATE_TAMPERED", f"a stored fact cannot be read: {type(error).__name__}"))
            return Decision("hold", sort_findings(extra), None, "", when, digest(extra)), stream

    def decision(self, project: str, candidate_id: str, actor: Actor, as_of: str | None) -> Result:
        if as_of is not None:
            try:
                as_of = format_time(parse_time(as_of))
            except (ValueError, OverflowError) as error:
                raise Refusal("VALIDATION_FAILED", "as_of must be an RFC 3339 time with an offset, "
                              "between the years 1970 and 9999") from error
        verdict = self.evaluate(project, candidate_id, actor, as_of)
        return Result(200, {**verdict.as_dict(), "as_of_source": "caller" if as_of else "service"})

    def record_decision(self, project: str, candidate_id: str, actor: Actor, key: str | None) -> Result:
        self.need(actor)
        ref = StreamRef(project, candidate_id)
        # Until the candidate is established a store failure is a 503, not a decision.
        established = self._load(ref)
        if established is None or not established.facts:
            raise Refusal("NOT_FOUND", "no such candidate")
        fresh = [established]

        def run(idem: IdempotencyRecord | None) -> Result:
            # The read that established the candidate serves the first attempt; a retry reads afresh.
            verdict, stream = self._evaluate(project, candidate_id, actor, None, fresh.pop() if fresh else None)
            if not stream.complete:
                raise _unavailable("the candidate's chain is larger than one read may page through")
            fact = {"type": "decision.recorded", **verdict.as_dict(), "actor": actor.fact(),
                    "recorded_at": verdict.as_of}
            if stream.seq and stream.events and stream.events[-1]["at"] > verdict.as_of:
                raise StoreConflict()  # a write landed after our clock reading: judge again
            head = {k: v for k, v in (stream.head or {}).items() if k not in ("seq", "hash")}
            return self.commit(stream, ref, "decision.recorded", actor.id, fact,
                               lambda seq: {**verdict.as_dict(), "as_of_source": "service", "seq": seq},
                               idem=idem, head=head)
        try:
            return self.idempotent(ref, f"/candidates/{candidate_id}/decisions", key, actor, {}, run)
        except Refusal as refusal:
            if refusal.code != "STATE_UNAVAILABLE":
                raise
            verdict = Decision("hold", [finding("STATE_UNAVAILABLE", refusal.detail)], None, "", self.now(),
                               digest(refusal.detail))
            return Result(200, {**verdict.as_dict(), "as_of_source": "service", "recorded": False})


def state_facts(state: CandidateState) -> list[dict[str, Any]]:
    """The facts a state was folded from, in chain order."""
    facts = [*state.contexts, *state.plans, *state.reviews, *state.evidence, *state.reports, *state.settlements,
             *state.executions, *state.decisions]
    return sorted(facts, key=lambda f: f["_seq"])


def _change_summary(change: Any) -> dict[str, Any]:
    return {"files": sorted(change.files),
            "openapi": [{"name": d.name, "before_sha256": digest(d.before), "after_sha256": digest(d.after)}
                        for d in change.openapi]}


def candidate_view(state: CandidateState, seq: int) -> dict[str, Any]:
    c = state.candidate
    digest_ = state.plan_digest
    tasks = []
    for task in (state.plan["plan"]["tasks"] if state.plan else []):
        attempts = [public(r) for r in state.reports_for(digest_ or "", task["task_id"])]
        tasks.append({"task_id": task["task_id"], "attempts": attempts,
                      "passes": state.task_passes(digest_ or "", task["task_id"]),
                      "settled": state.task_settled(digest_ or "", task["task_id"])})
    return {
        "candidate_id": c["candidate_id"], "subject": c["subject"], "base_revision": c["base_revision"],
        "revision": c["revision"], "environment": c["environment"], "created_by": c["created_by"],
        "created_at": c["recorded_at"], "scope": state.scope(), "obligations": list(state.obligations.values()),
        "change_context": "attested" if state.attested else "declared",
        "plan_versions": [{"plan_version": p["plan_version"], "plan_digest": p["plan_digest"], "mode": p["mode"],
                           "author": p["author"], "recorded_at": p["recorded_at"]} for p in state.plans],
        "plan": state.plan["plan"] if state.plan else None, "plan_digest": digest_,
        "reviews": [public(r) for r in state.reviews],
        "evidence": [{k: e[k] for k in ("evidence_id", "check_id", "kind", "outcome", "trust", "counts",
                                        "observed_at", "recorded_at", "raw_sha256", "binding", "scope")}
                     | {"publisher": e["publisher"]["id"]} for e in state.evidence],
        "tasks": tasks,
        "executions": [public(e) for e in state.executions],
        "last_decision": public(state.decisions[-1]) if state.decisions else None,
        "seq": seq,
    }


