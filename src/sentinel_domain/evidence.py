"""Evidence: judged and bound at write time (DOMAIN.md rules 7 to 10), judged again at decision time."""

from datetime import timedelta
from typing import Any

from .canonical import canonical_bytes, sha256_hex
from .derivation import glob_regex, normalise_path
from .junit import JUnitTooLarge, MalformedJUnit, parse_junit
from .models import Actor, EvidenceRequest, Policy
from .state import CandidateState, ProjectState
from .times import format_time, parse_time

FUTURE_TOLERANCE_SECONDS = 300


class EvidenceRefused(Exception):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def find_check(plan: dict[str, Any] | None, check_id: str) -> dict[str, Any] | None:
    for task in (plan or {}).get("plan", {}).get("tasks", []):
        for check in task["checks"]:
            if check["check_id"] == check_id:
                return dict(check, task_id=task["task_id"])
    return None


def scope_covers(evidence_scopes: list[str], obligation_scope: str) -> bool:
    """The run covered at least what was owed: the obligation equals or lies under one of its scopes."""
    for scope in evidence_scopes:
        base = scope.rstrip("/")
        if obligation_scope == base or obligation_scope.startswith(base + "/"):
            return True
    return False


def judge(request: EvidenceRequest, policy: Policy | None) -> tuple[str, dict[str, int], str, str]:
    """(outcome, counts, raw_sha256, kind): `judge_report` without the failing test names."""
    outcome, counts, raw_sha, kind, _failing = judge_report(request, policy)
    return outcome, counts, raw_sha, kind


def failing_tests(names: tuple[str, ...] | list[str], count: int) -> dict[str, Any]:
    """What an evidence fact keeps of the tests that failed: the first names (`classname.name`, bounded by
    sentinel_domain.junit) and how many failed in all: where a reviewer starts, without the report."""
    return {"names": list(names), "count": count}


def judge_report(
    request: EvidenceRequest, policy: Policy | None
) -> tuple[str, dict[str, int], str, str, dict[str, Any]]:
    """(outcome, counts, raw_sha256, kind, failing_tests). Raises EvidenceRefused for what cannot be stored.

    A JUnit report decides by its test cases (sentinel_domain.junit). Exit-code evidence passes only when the
    exit code is the policy's expected one and every expected artifact pattern is matched by a named artifact
    (each carries its sha256, the model requires it); without a policy (a check not in the plan) nothing is
    expected of it, so it is `unknown`, never `pass`."""
    if (request.junit_xml is None) == (request.result is None):
        raise EvidenceRefused("VALIDATION_FAILED", "send exactly one of junit_xml or result")
    if request.junit_xml is not None:
        raw = request.junit_xml.encode("utf-8", errors="surrogatepass")
        try:
            summary = parse_junit(request.junit_xml)
        except JUnitTooLarge as error:
            raise EvidenceRefused("PAYLOAD_TOO_LARGE", f"the JUnit report is too large: {error}") from error
        except MalformedJUnit as error:
            raise EvidenceRefused(
                "MALFORMED_EVIDENCE", f"the JUnit report cannot be read: {error}"
            ) from error
        counts = {
            "tests": summary.tests,
            "failures": summary.failures,
            "errors": summary.errors,
            "skipped": summary.skipped,
        }
        failing = failing_tests(summary.failing, summary.failing_count)
        return summary.outcome, counts, sha256_hex(raw), "junit", failing
    result = request.result
    assert result is not None
    raw_sha = sha256_hex(canonical_bytes(result.model_dump(mode="json")))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    digests: dict[str, str] = {}
    for artifact in result.artifacts:
        name = normalise_path(artifact.name)
        if digests.setdefault(name, artifact.sha256) != artifact.sha256:
            # Two digests for one artifact: which one was produced cannot be told, so nothing is stored.
            raise EvidenceRefused(
                "MALFORMED_EVIDENCE", f"the artifact {name!r} is listed twice with different sha256 digests"
            )
    if policy is None:
        return "unknown", counts, raw_sha, "exit_code", failing_tests((), 0)
    # Patterns use the derivation rules' globs: `*` stays inside one folder, `**` crosses folders.
    missing = [p for p in policy.expected_artifacts if not any(glob_regex(p).match(n) for n in digests)]
    outcome = "pass" if result.exit_code == policy.expected_exit_code and not missing else "fail"
    return outcome, counts, raw_sha, "exit_code", failing_tests((), 0)


WRONG_KIND = "EVIDENCE_WRONG_KIND"


def wrong_kind(kind: str, policy: Policy) -> bool:
    """Evidence of a kind the policy does not take (its `check_type`), bound at write time so it never
    decides: a JUnit report cannot stand in for an exit code and its expected artifacts. Exit-code evidence
    under a policy that needs executed tests is left to rule 7, which holds it with EVIDENCE_TOO_FEW_TESTS."""
    if kind == policy.check_type:
        return False
    return not (kind == "exit_code" and policy.min_tests >= 1)


def trust_of(actor: Actor, policy: Policy | None) -> str:
    """Fixed at write time: only a listed `ci` publisher verifies; an agent never certifies work."""
    if actor.kind == "ci" and "publisher" in actor.roles:
        return "verified" if policy is not None and actor.id in policy.trusted_publishers else "untrusted"
    return "unverified"


def bind_evidence(
    state: CandidateState,
    project: ProjectState,
    request: EvidenceRequest,
    actor: Actor,
    evidence_id: str,
    recorded_at: str,
) -> dict[str, Any]:
    """The evidence fact: bound to the current plan's check, its obligations and policy version."""
    if not request.scope:
        raise EvidenceRefused("VALIDATION_FAILED", "scope must name at least one path")
    observed = parse_time(format_time(request.observed_at))
    if observed - parse_time(recorded_at) > timedelta(seconds=FUTURE_TOLERANCE_SECONDS):
        raise EvidenceRefused(
            "EVIDENCE_FUTURE_DATED", "observed_at is more than 300 s after the service clock"
        )
    check = find_check(state.plan, request.check_id)
    policy_entry = project.policy(check["policy_ref"], recorded_at) if check else None
    policy = policy_entry[1] if policy_entry else None
    outcome, counts, raw_sha, kind, failing = judge_report(request, policy)
    candidate = state.candidate
    mismatches = []
    if check is None:
        mismatches.append("CHECK_NOT_IN_PLAN")
    if request.subject != candidate["subject"]:
        mismatches.append("EVIDENCE_WRONG_SUBJECT")
    if request.revision.lower() != candidate["revision"]:
        mismatches.append("EVIDENCE_WRONG_REVISION")
    if request.environment != candidate["environment"]:
        mismatches.append("EVIDENCE_WRONG_ENVIRONMENT")
    if policy is not None and wrong_kind(kind, policy):
        mismatches.append(WRONG_KIND)
    covers = check["covers"] if check else []
    if any(
        not scope_covers(request.scope, state.obligations[o]["scope"])
        for o in covers
        if o in state.obligations
    ):
        mismatches.append("EVIDENCE_WRONG_SCOPE")
    return {
        "type": "evidence.recorded",
        "evidence_id": evidence_id,
        "check_id": request.check_id,
        "kind": kind,
        "subject": request.subject,
        "revision": request.revision.lower(),
        "environment": request.environment,
        "scope": list(request.scope),
        "observed_at": format_time(request.observed_at),
        "recorded_at": recorded_at,
        "source": request.source.model_dump(mode="json"),
        "publisher": actor.fact(),
        "trust": trust_of(actor, policy),
        "outcome": outcome,
        "counts": counts,
        "failing_tests": failing,
        "exit_code": request.result.exit_code if request.result else None,
        "artifacts": [a.model_dump(mode="json") for a in request.result.artifacts] if request.result else [],
        "raw_sha256": raw_sha,
        "binding": {
            "obligation_ids": list(covers),
            "policy_id": check["policy_ref"] if check else None,
            "policy_version": policy_entry[0] if policy_entry else None,
            "plan_digest": state.plan_digest,
            "mismatches": mismatches,
        },
    }


def evidence_response(fact: dict[str, Any]) -> dict[str, Any]:
    return {k: fact[k] for k in ("evidence_id", "outcome", "trust", "binding", "counts", "raw_sha256")}
