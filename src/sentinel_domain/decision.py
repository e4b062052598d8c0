"""The deterministic decision (DOMAIN.md rules 1 to 10 and 22): `ready` only when nothing is unproven."""

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .canonical import canonical_bytes, digest
from .evidence import WRONG_KIND, scope_covers
from .models import Policy, ProjectConfig
from .plan_walk import PlanWalk, Row, epoch_us, evidence_rows, plan_walk
from .reviews import approval_status, withdrawn_approvers
from .state import CandidateState, ProjectState
from .times import utc_naive

TRUST_FINDING = {"unverified": "EVIDENCE_UNVERIFIED", "untrusted": "EVIDENCE_UNTRUSTED"}
# Rule 26: what a principal revoked as compromised did stops counting; each finding says how to go on.
REVOKED_REMEDIATION = {
    "APPROVAL_REVOKED": "ask a reviewer who was not compromised to review the current plan digest again "
    "(POST .../reviews); if the compromised reviewer may have shaped the plan, amend it first",
    "ATTESTATION_REVOKED": "have a trusted ci publisher that was not compromised attest the change context "
    "again (POST .../change-context from CI)",
    "EVIDENCE_UNTRUSTED": "re-run the check in CI under a publisher that was not compromised, listed in the "
    "policy's trusted_publishers, and post its evidence",
    "REQUESTER_REVOKED": "a candidate created by a compromised principal is never cleared: push the change "
    "again as a new commit and create its candidate as a live requester; a plan authored by one is "
    "cleared by a live requester storing the plan again (PUT .../plan with If-Match) and a new review",
}


class Finding(BaseModel):
    """One reason a decision holds (or a report does not pass): a stable code and where it applies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str
    obligation_id: str | None = None
    check_id: str | None = None
    task_id: str | None = None
    detail: str
    remediation_hint: str | None = None


def finding(
    code: str,
    detail: str,
    *,
    obligation_id: str | None = None,
    check_id: str | None = None,
    task_id: str | None = None,
    remediation_hint: str | None = None,
) -> Finding:
    return Finding(
        code=code,
        obligation_id=obligation_id,
        check_id=check_id,
        task_id=task_id,
        detail=detail,
        remediation_hint=remediation_hint,
    )


def findings_digest(findings: list[Finding]) -> str:
    """SHA-256 of the RFC 8785 form of the findings, in their order (what a recorded decision keeps)."""
    return digest([f.model_dump() for f in findings])


def _identity(f: Finding) -> tuple[str | None, ...]:
    return (f.code, f.obligation_id, f.check_id, f.task_id, f.detail, f.remediation_hint)


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Each finding once (equal in every field), sorted by (code, obligation, check, task, detail)."""
    unique = {_identity(f): f for f in findings}
    return sorted(
        unique.values(),
        key=lambda f: (f.code, f.obligation_id or "", f.check_id or "", f.task_id or "", f.detail),
    )


class Judge:
    """Rule 7 for the (check, obligation) pairs of one decision, on one candidate and project state at one
    instant. What every pair would otherwise look up again is looked up once: the policies in force, the
    principals revoked as compromised, the instant, and the candidate's evidence grouped by (check,
    obligation) as compact rows (`_rows`, built once per state). Each pair then walks only its own rows and
    builds findings only when there are some: a decision costs time in proportion to its checks and
    evidence."""

    __slots__ = ("state", "project", "as_of", "at_utc", "_policies", "compromised", "rows")

    def __init__(self, state: CandidateState, project: ProjectState, as_of: str) -> None:
        self.state, self.project, self.as_of = state, project, as_of
        self.at_utc = utc_naive(as_of)
        self._policies: dict[str, tuple[int, Policy] | None] = {}
        self.compromised = project.compromised(as_of)
        self.rows: dict[tuple[str, str], list[Row]] = state.memo("judging", lambda: evidence_rows(state))

    def limits(self, policy_ids: list[str]) -> dict[str, tuple[int, int, int] | None]:
        """Per policy: (the version in force, its evidence age limit in microseconds, its minimum tests), or
        None when none is in force at this instant."""
        out: dict[str, tuple[int, int, int] | None] = {}
        for policy_id in policy_ids:
            entry = self.policy(policy_id)
            out[policy_id] = (
                None
                if entry is None
                else (entry[0], entry[1].max_evidence_age_seconds * 1_000_000, entry[1].min_tests)
            )
        return out

    def policy(self, policy_id: str) -> tuple[int, Policy] | None:
        if policy_id not in self._policies:
            self._policies[policy_id] = self.project.policy(policy_id, self.as_of)
        return self._policies[policy_id]

    def trust(self, evidence: dict[str, Any]) -> str:
        """A principal revoked as compromised makes its evidence untrusted from the revocation on."""
        if evidence["trust"] == "verified" and self.compromised.get(evidence["publisher"]["id"]):
            return "untrusted"
        return str(evidence["trust"])

    def _newest(
        self, check: dict[str, Any], obligation_id: str, version: int, rows: Any = None
    ) -> tuple[bool, Row | None]:
        """(whether any of the check's evidence for the obligation is bound at write time to the policy
        version in force, the row of the newest such evidence that may decide: eligible (see `Row`) and
        its publisher not revoked as compromised). Rule 10's order: observed, recorded, arrival."""
        policy_id = check["policy_ref"]
        compromised = self.compromised
        bound = False
        newest: Row | None = None
        if rows is None:
            rows = self.rows.get((check["check_id"], obligation_id), ())
        for row in rows:
            if row[0] != policy_id or row[1] != version:
                continue
            bound = True
            if row[2] and (newest is None or row[4] > newest[4]) and not compromised.get(row[3]):
                newest = row
        return bound, newest

    def deciding(self, check: dict[str, Any], obligation_id: str) -> dict[str, Any] | None:
        """The evidence that decides the (check, obligation), if any."""
        entry = self.policy(check["policy_ref"])
        if entry is None or obligation_id not in self.state.obligations:
            return None
        row = self._newest(check, obligation_id, entry[0])[1]
        return None if row is None else row[5]

    def findings(
        self, check: dict[str, Any], obligation_id: str, task_id: str | None = None, rows: Any = None
    ) -> list[Finding]:
        """[] when the (check, obligation) is satisfied, else why not (placed at the task, when given).
        `rows`: the pair's rows when the caller has them at hand (`_plan_walk`)."""
        policy_id = check["policy_ref"]
        entry = self._policies[policy_id] if policy_id in self._policies else self.policy(policy_id)
        if entry is None or obligation_id not in self.state.obligations:
            return [
                finding(
                    "EVIDENCE_MISSING",
                    "the check's policy or obligation is unknown at this instant",
                    **_where(check, obligation_id, task_id),
                )
            ]
        version, policy = entry
        bound, row = self._newest(check, obligation_id, version, rows)
        if row is None:
            return self._unbound(bound, check, obligation_id, task_id, entry)
        since, tests = row[6], row[8]
        if row[7] == "pass" and since is not None:
            age = (self.at_utc - since).total_seconds()
            if 0 <= age < policy.max_evidence_age_seconds and (
                policy.min_tests < 1 or (tests is not None and tests >= policy.min_tests)
            ):
                return []
        return self._judge_newest(row[5], policy, check, obligation_id, task_id)

    def _unbound(
        self,
        bound: bool,
        check: dict[str, Any],
        obligation_id: str,
        task_id: str | None,
        entry: tuple[int, Policy],
    ) -> list[Finding]:
        """No evidence decides: the trust and binding problems of what was bound, else EVIDENCE_MISSING."""
        where = _where(check, obligation_id, task_id)
        version, policy = entry
        hint = policy.remediation_hint or None
        if not bound:
            return [
                finding(
                    "EVIDENCE_MISSING",
                    f"no evidence for check {check['check_id']} under policy "
                    f"{check['policy_ref']} v{version}",
                    remediation_hint=hint,
                    **where,
                )
            ]
        obligation = self.state.obligations[obligation_id]
        out: list[Finding] = []
        for e in self.state.evidence_index().get((check["check_id"], obligation_id), ()):
            if e["binding"]["policy_id"] != check["policy_ref"] or e["binding"]["policy_version"] != version:
                continue
            trust = self.trust(e)
            since = self.compromised.get(e["publisher"]["id"]) if e["trust"] == "verified" else None
            if since is not None:
                out.append(
                    finding(
                        "EVIDENCE_UNTRUSTED",
                        f"evidence {e['evidence_id']} is untrusted: its publisher {e['publisher']['id']} was "
                        f"revoked as compromised at {since}, and nothing it published counts from then on",
                        remediation_hint=REVOKED_REMEDIATION["EVIDENCE_UNTRUSTED"],
                        **where,
                    )
                )
            elif trust in TRUST_FINDING:
                out.append(
                    finding(
                        TRUST_FINDING[trust],
                        f"evidence {e['evidence_id']} is {trust}: its publisher "
                        f"{e['publisher']['id']} is not a trusted ci publisher of {check['policy_ref']}",
                        remediation_hint=hint,
                        **where,
                    )
                )
            for code in _binding_problems(e, self.state, obligation):
                out.append(
                    finding(
                        code,
                        f"evidence {e['evidence_id']} is {_kind_label(e['kind'])}; policy "
                        f"{check['policy_ref']} takes {_kind_label(policy.check_type)}"
                        if code == WRONG_KIND
                        else f"evidence {e['evidence_id']} is not bound to this candidate's "
                        f"{code.removeprefix('EVIDENCE_WRONG_').lower()}",
                        remediation_hint=hint,
                        **where,
                    )
                )
        return out

    def _judge_newest(
        self,
        e: dict[str, Any],
        policy: Policy,
        check: dict[str, Any],
        obligation_id: str,
        task_id: str | None,
    ) -> list[Finding]:
        """Why the deciding evidence does not satisfy: failed, proves nothing, stale, or too few tests."""
        where = _where(check, obligation_id, task_id)
        hint = policy.remediation_hint or None
        label = f"evidence {e['evidence_id']}"
        if e["outcome"] == "fail":
            return [
                finding(
                    "EVIDENCE_NEGATIVE",
                    f"{label} failed: {policy.fail_message or 'the check failed'}",
                    remediation_hint=hint,
                    **where,
                )
            ]
        if e["outcome"] != "pass":
            return [
                finding(
                    "EVIDENCE_UNKNOWN",
                    f"{label} proves nothing: no test was executed",
                    remediation_hint=hint,
                    **where,
                )
            ]
        age = (self.at_utc - utc_naive(min(e["observed_at"], e["recorded_at"]))).total_seconds()
        if not 0 <= age < policy.max_evidence_age_seconds:
            return [
                finding(
                    "EVIDENCE_STALE",
                    f"{label} is {age:.0f} s old; the policy accepts under "
                    f"{policy.max_evidence_age_seconds} s",
                    remediation_hint=hint,
                    **where,
                )
            ]
        return [
            finding(
                "EVIDENCE_TOO_FEW_TESTS",
                f"{label} executed {e['counts']['tests']} tests; the policy "
                f"needs a JUnit report with at least {policy.min_tests}",
                remediation_hint=hint,
                **where,
            )
        ]


def _kind_label(kind: str) -> str:
    return "a JUnit report" if kind == "junit" else "exit-code evidence"


def _where(check: dict[str, Any], obligation_id: str, task_id: str | None) -> dict[str, Any]:
    return {"obligation_id": obligation_id, "check_id": str(check["check_id"]), "task_id": task_id}


def _binding_problems(
    evidence: dict[str, Any], state: CandidateState, obligation: dict[str, Any]
) -> list[str]:
    candidate = state.candidate
    problems = []
    if evidence["subject"] != candidate["subject"]:
        problems.append("EVIDENCE_WRONG_SUBJECT")
    if evidence["revision"] != candidate["revision"]:
        problems.append("EVIDENCE_WRONG_REVISION")
    if evidence["environment"] != candidate["environment"]:
        problems.append("EVIDENCE_WRONG_ENVIRONMENT")
    if not scope_covers(evidence["scope"], obligation["scope"]):
        problems.append("EVIDENCE_WRONG_SCOPE")
    if WRONG_KIND in evidence["binding"]["mismatches"]:
        problems.append(WRONG_KIND)
    return problems


class Decision(BaseModel):
    """`ready` only with no finding; the facts digest names exactly what was considered."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decision: Literal["ready", "hold"]
    findings: list[Finding]
    plan_digest: str | None
    revision: str
    as_of: str
    facts_digest: str

    def as_dict(self) -> dict[str, Any]:
        """The decision as JSON values (what a decision.recorded fact stores)."""
        return self.model_dump(mode="json")


def hold(findings: list[Finding], as_of: str, facts_digest: str) -> Decision:
    """A hold the gate could not judge from facts (nothing readable to bind it to a plan or revision)."""
    return Decision(
        decision="hold",
        findings=sort_findings(findings),
        plan_digest=None,
        revision="",
        as_of=as_of,
        facts_digest=facts_digest,
    )


_REVIEW_DETAIL = {
    "REVIEW_REJECTED": "a reviewer rejected the current plan digest; amend the plan to go on",
    "REVIEW_EXPIRED": "the approval of the current plan digest has expired",
    "REVIEW_STALE": "the approval names an older plan digest",
}


def _task_finding(reports: list[dict[str, Any]] | None, task_id: str, settled: bool | None) -> Finding | None:
    """Rules 19 to 22 for one task of the current plan: its newest report under the plan's digest, and its
    settlement where the project requires one (settled None: not required)."""
    if not reports:
        return finding("TASK_NOT_REPORTED", "no report for this task under the current plan", task_id=task_id)
    report = reports[-1]
    if report["recorded_status"] == "blocked":
        return finding(
            "TASK_BLOCKED",
            f"blocked: {report.get('blocked_reason') or ''}; a human amendment of the plan is needed",
            task_id=task_id,
        )
    if not report["passes"]:
        return finding("TASK_FAILED", f"attempt {report['attempt']} did not pass", task_id=task_id)
    if settled is False:
        return finding("TASK_NOT_SETTLED", "the project requires a reviewer's settlement", task_id=task_id)
    return None


def _plan_findings(
    state: CandidateState, project: ProjectState, config: ProjectConfig, as_of: str
) -> list[Finding]:
    """Every check of the current plan against its evidence (rule 7), every task against its reports, and
    every obligation no check covers. The pairs and tasks the walk (`plan_walk`) shows to be satisfied
    without a closer look are passed over; every other one is judged in full by the Judge, which also names
    why it is not."""
    plan = state.plan
    assert plan is not None
    digest_now = plan["plan_digest"]
    findings: list[Finding] = []
    judge = Judge(state, project, as_of)
    walk: PlanWalk = state.memo("plan_walk", lambda: plan_walk(state, judge.rows))
    for i in walk.to_judge(judge.limits(walk.policy_ids), epoch_us(judge.at_utc), bool(judge.compromised)):
        check, obligation_id, task_id, rows = walk.pairs[i]
        findings += judge.findings(check, obligation_id, task_id, rows)
    settled = (
        {s["task_id"] for s in state.settlements if s["plan_digest"] == digest_now}
        if config.settlement_required
        else None
    )
    # Without settlements to check, only the tasks whose reports do not pass can have a problem.
    for i in walk.task_problems if settled is None else range(len(walk.tasks)):
        task_id, reports = walk.tasks[i]
        task_problem = _task_finding(reports, task_id, None if settled is None else task_id in settled)
        if task_problem is not None:
            findings.append(task_problem)
    for obligation_id in walk.uncovered:
        findings.append(
            finding(
                "EVIDENCE_MISSING",
                "an obligation added after the plan is covered by no check: amend the plan",
                obligation_id=obligation_id,
            )
        )
    return findings


def attester(context: dict[str, Any]) -> str:
    """Who wrote a change context: the candidate's creator for the first one, the poster for the others."""
    return str(context["created_by" if context["type"] == "candidate.created" else "actor"]["id"])


def _revoked_findings(state: CandidateState, compromised: dict[str, str]) -> list[Finding]:
    """Rule 26 for what is not an approval or evidence: attestations by a principal revoked as compromised no
    longer count (ATTESTATION_REVOKED when no other attestation stands), and a candidate created, or a current
    plan authored, by one holds (REQUESTER_REVOKED): the requester chose the revision and what the plan
    proves, and nobody can tell which of its choices the intruder made."""
    if not compromised:
        return []
    out: list[Finding] = []
    attesters = {attester(c) for c in state.contexts if c["attested"]}
    if attesters and attesters <= set(compromised):
        out.append(
            finding(
                "ATTESTATION_REVOKED",
                f"every attested change context was attested by {', '.join(sorted(attesters))}, since "
                "revoked as compromised: the change this candidate describes is no longer vouched for",
                remediation_hint=REVOKED_REMEDIATION["ATTESTATION_REVOKED"],
            )
        )
    creator = str(state.candidate["created_by"]["id"])
    if creator in compromised:
        out.append(
            finding(
                "REQUESTER_REVOKED",
                f"the candidate was created by {creator}, revoked as compromised at {compromised[creator]}",
                remediation_hint=REVOKED_REMEDIATION["REQUESTER_REVOKED"],
            )
        )
    author = str(state.plan["author"]["id"]) if state.plan is not None else None
    if author is not None and author != creator and author in compromised:
        out.append(
            finding(
                "REQUESTER_REVOKED",
                f"the current plan was stored by {author}, revoked as compromised at {compromised[author]}",
                remediation_hint=REVOKED_REMEDIATION["REQUESTER_REVOKED"],
            )
        )
    return out


def considered_digest(state: CandidateState, project: ProjectState, as_of: str) -> str:
    """SHA-256 of the RFC 8785 form of {"as_of", "candidate": the digests of the candidate's facts considered,
    "project": those of the project's facts visible at as_of}. Written member by member (keys in their
    canonical order), the candidate's list once per state: at ten thousand obligations its twenty thousand
    digests are most of the bytes, and the same for every decision over the state."""
    candidate = state.memo("considered", lambda: canonical_bytes(state.considered))
    visible = canonical_bytes([f["_digest"] for f in project.visible(as_of)])
    hasher = hashlib.sha256(b'{"as_of":' + canonical_bytes(as_of) + b',"candidate":')
    hasher.update(candidate)  # hashed where it lies: no copy of the largest part
    hasher.update(b',"project":' + visible + b"}")
    return hasher.hexdigest()


def decide(
    state: CandidateState, project: ProjectState, as_of: str, extra_findings: list[Finding] | None = None
) -> Decision:
    """A pure function of the facts recorded at or before `as_of` (the caller folds them so)."""
    findings = list(extra_findings or [])
    config = project.config(as_of)
    if not state.obligations:
        findings.append(
            finding("NO_OBLIGATIONS", "nothing was derived to prove: zero obligations is not a pass")
        )
    compromised = project.compromised(as_of)
    if not state.attested:
        findings.append(
            finding("CHANGE_CONTEXT_UNVERIFIED", "no change context was attested by a trusted ci publisher")
        )
        forge = state.candidate.get("forge")
        if isinstance(forge, dict) and forge.get("complete") is False:
            # The forge's file list was (or may have been) truncated: never attested. A trusted publisher's
            # attested context (a tree diff, say) lifts both findings.
            findings.append(
                finding(
                    "CHANGE_CONTEXT_INCOMPLETE",
                    "the forge's list of changed files is or may be truncated, so it was not attested: a "
                    "trusted ci publisher must attest the complete change",
                )
            )
    findings += _revoked_findings(state, compromised)
    if state.plan is None:
        findings.append(finding("PLAN_MISSING", "no work plan was stored for this candidate"))
    elif config is None:
        findings.append(finding("STATE_UNAVAILABLE", "the project has no configuration"))
    else:
        code, _until = approval_status(state, config, as_of, compromised)
        if code == "APPROVAL_REVOKED":
            withdrawn = ", ".join(withdrawn_approvers(state, compromised))
            findings.append(
                finding(
                    code,
                    f"the approval of the current plan digest by {withdrawn} no longer counts: revoked as "
                    "compromised, and the others are not enough "
                    f"({config.approvals_required} needed)",
                    remediation_hint=REVOKED_REMEDIATION[code],
                )
            )
        elif code:
            findings.append(
                finding(
                    code,
                    _REVIEW_DETAIL.get(code)
                    or f"the current plan digest needs {config.approvals_required} valid approval(s)",
                )
            )
        findings += _plan_findings(state, project, config, as_of)
    findings = sort_findings(findings)
    facts_digest = considered_digest(state, project, as_of)
    return Decision(
        decision="ready" if not findings else "hold",
        findings=findings,
        plan_digest=state.plan_digest,
        revision=str(state.candidate["revision"]),
        as_of=as_of,
        facts_digest=facts_digest,
    )
