"""Signed decision receipts: what a recorded `ready` decision proves to someone who never calls the gate.

A receipt is an in-toto Statement v1 in a DSSE envelope (https://github.com/secure-systems-lab/dsse):

    {"payloadType": "application/vnd.in-toto+json",
     "payload": base64(RFC 8785 form of the statement),
     "signatures": [{"keyid": "...",
                     "sig": base64(DER ECDSA P-256 / SHA-256 over PAE(payloadType, payload))}]}

The statement's subjects are the git commit judged (`{"gitCommit": revision}`) and the candidate (the
digest of its `candidate.created` fact); its predicate says who judged what, and until when the judgement
holds (`expires_at`: the earliest of the counted approvals' expiry, each deciding evidence's freshness
limit and `recorded_at` plus a configured maximum), so a deploy step can check it offline at the instant
it deploys.

This module is pure: building the statement, the PAE, and the claim checks. Signing goes through the
`ReceiptSigner` port (an asymmetric KMS key in AWS, a key file locally) and signature verification through a
callable the caller supplies (it needs `cryptography`, which the core does not import). Every refusal is a
`ReceiptRefused` with one of `RECEIPT_CODES`, stable as finding codes are."""

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any, Final, Protocol

from .canonical import canonical_bytes, digest
from .decision import Decision, Judge
from .state import CandidateState, ProjectState
from .times import format_time, parse_time, plus_seconds

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://sentinel-readiness.dev/receipt/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
SIGNING_ALGORITHM: Final = "ECDSA_P256_SHA256"  # DSSE's ECDSA over SHA-256 on NIST P-256; signatures are DER
DEFAULT_MAX_SECONDS = 86400
MAX_RECEIPT_BYTES = 64 * 1024  # a receipt is a few KiB; anything far larger is not one of ours

RECEIPT_CODES = (
    "RECEIPT_MALFORMED",  # not a DSSE envelope of an in-toto statement of ours
    "RECEIPT_KEY_UNKNOWN",  # signed by a key id the verifier was not given
    "RECEIPT_SIGNATURE_INVALID",  # the signature does not verify (a byte altered, or another key)
    "RECEIPT_PAYLOAD_TYPE",  # the envelope's payloadType is not in-toto's
    "RECEIPT_REVISION_MISMATCH",  # the commit it names is not the one being deployed
    "RECEIPT_PROJECT_MISMATCH",
    "RECEIPT_ENVIRONMENT_MISMATCH",
    "RECEIPT_NOT_READY",  # the decision it records is not `ready`
    "RECEIPT_EXPIRED",  # checked at an instant at or after its `expires_at`
    # The subject (what is released) it names is not the one being deployed: candidates are claimed per
    # subject, so two subjects of one repository (a monorepo's services) are judged apart at one commit.
    "RECEIPT_SUBJECT_MISMATCH",
)


class ReceiptRefused(Exception):
    """A receipt that does not prove what the verifier asked: `code` is one of RECEIPT_CODES."""

    def __init__(self, code: str, detail: str) -> None:
        if code not in RECEIPT_CODES:
            raise ValueError(f"unknown receipt code {code}")
        self.code, self.detail = code, detail
        super().__init__(f"{code}: {detail}")


class ReceiptSignerUnavailable(Exception):
    """The signer cannot sign (no key configured, KMS refused or unreachable): no receipt, so no `ready`."""


class ReceiptSigner(Protocol):
    """An asymmetric ECDSA P-256 key the gate signs receipts with and never exports."""

    @property
    def key_id(self) -> str: ...

    def public_key_pem(self) -> str:
        """The public half, SubjectPublicKeyInfo PEM; ReceiptSignerUnavailable when it cannot be read."""
        ...

    def sign(self, message: bytes) -> bytes:
        """A DER ECDSA signature over SHA-256 of `message`; ReceiptSignerUnavailable when it cannot sign."""
        ...


# ---- building ----------------------------------------------------------------------------------------------


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE's pre-authentication encoding: "DSSEv1" SP len(type) SP type SP len(body) SP body, lengths in
    ASCII decimal bytes (type as UTF-8). The signature covers this, never the bare payload."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


def _repository(project: ProjectState, state: CandidateState, as_of: str) -> str | None:
    """The GitHub repository the candidate's subject and environment map to, when exactly one does."""
    config = project.config(as_of)
    if config is None or config.github is None:
        return None
    subject, environment = state.candidate["subject"], state.candidate["environment"]
    found = [
        r.repository
        for r in config.github.repositories
        if r.subject == subject and environment in r.environments
    ]
    return found[0] if len(found) == 1 else None


def _approvals(state: CandidateState, project: ProjectState, as_of: str) -> list[dict[str, Any]]:
    """The approvals the decision counted: of the current plan digest, unexpired, by reviewers not revoked as
    compromised (as `reviews.approval_status` counts them); a reviewer's newest approval only."""
    compromised = project.compromised(as_of)
    newest: dict[str, dict[str, Any]] = {}
    for review in state.reviews:
        reviewer = review["reviewer"]["id"]
        if (
            review["decision"] == "approve"
            and review["plan_digest"] == state.plan_digest
            and as_of < review["expires_at"]
            and reviewer not in compromised
            and review["expires_at"] > newest.get(reviewer, {}).get("expires_at", "")
        ):
            newest[reviewer] = review
    return [
        {"reviewer": reviewer, "plan_digest": r["plan_digest"], "expires_at": r["expires_at"]}
        for reviewer, r in sorted(newest.items())
    ]


def _evidence(
    state: CandidateState, project: ProjectState, as_of: str
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The evidence that decided each (check, obligation) of the current plan, each once, with the instant
    it stops being fresh (the judge counts its age from the earlier of observed and recorded), and the policy
    versions those checks were judged under."""
    judge = Judge(state, project, as_of)
    chosen: dict[str, dict[str, Any]] = {}
    versions: dict[str, int] = {}
    for task in (state.plan or {"plan": {"tasks": []}})["plan"]["tasks"]:
        for check in task["checks"]:
            entry = judge.policy(check["policy_ref"])
            if entry is None:
                continue
            version, policy = entry
            versions[check["policy_ref"]] = version
            for obligation_id in check["covers"]:
                evidence = judge.deciding(check, obligation_id)
                if evidence is None or evidence["evidence_id"] in chosen:
                    continue
                since = min(evidence["observed_at"], evidence["recorded_at"])
                chosen[evidence["evidence_id"]] = {
                    "evidence_id": evidence["evidence_id"],
                    "check_id": evidence["check_id"],
                    "policy_id": check["policy_ref"],
                    "policy_version": version,
                    "raw_sha256": evidence["raw_sha256"],
                    "observed_at": evidence["observed_at"],
                    "fresh_until": plus_seconds(since, policy.max_evidence_age_seconds),
                }
    return [chosen[k] for k in sorted(chosen)], dict(sorted(versions.items()))


def expiry(
    recorded_at: str, approvals: list[dict[str, Any]], evidence: list[dict[str, Any]], max_seconds: int
) -> str:
    """The earliest of the approvals' expiry, the evidence's freshness limits and recorded_at + max_seconds.
    Stored times share one text form, so their text order is their time order."""
    if max_seconds <= 0:
        raise ValueError("a receipt's maximum lifetime is a positive number of seconds")
    limits = [plus_seconds(recorded_at, max_seconds)]
    limits += [format_time(parse_time(a["expires_at"])) for a in approvals]
    limits += [format_time(parse_time(e["fresh_until"])) for e in evidence]
    return min(limits)


def statement(
    verdict: Decision,
    state: CandidateState,
    project: ProjectState,
    max_seconds: int = DEFAULT_MAX_SECONDS,
) -> dict[str, Any]:
    """The in-toto statement of a `ready` decision judged from `state` and `project` at `verdict.as_of`."""
    if verdict.decision != "ready":
        raise ValueError("only a ready decision has a receipt")
    as_of = verdict.as_of
    candidate = state.candidate
    repository = _repository(project, state, as_of)
    approvals = _approvals(state, project, as_of)
    evidence, policy_versions = _evidence(state, project, as_of)
    predicate = {
        "project": project.project,
        "repository": repository,
        "subject": candidate["subject"],
        "candidate_id": state.candidate_id,
        "environment": candidate["environment"],
        "revision": verdict.revision,
        "base_revision": candidate["base_revision"],
        "decision": verdict.decision,
        "facts_digest": verdict.facts_digest,
        "plan_digest": verdict.plan_digest,
        "policy_versions": policy_versions,
        "approvals": approvals,
        "evidence": evidence,
        "recorded_at": as_of,
        "expires_at": expiry(as_of, approvals, evidence, max_seconds),
    }
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": repository or str(candidate["subject"]), "digest": {"gitCommit": verdict.revision}},
            {
                "name": f"sentinel:{project.project}/candidates/{state.candidate_id}",
                "digest": {"sha256": str(candidate["_digest"])},
            },
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def statement_digest(value: dict[str, Any]) -> str:
    """What the decision's fact keeps of its receipt: the signature is not deterministic, the statement is."""
    return digest(value)


def envelope(value: dict[str, Any], signer: ReceiptSigner) -> dict[str, Any]:
    """The statement signed into a DSSE envelope. Any failure of the signer is ReceiptSignerUnavailable."""
    body = canonical_bytes(value)
    try:
        key_id = signer.key_id
        signature = signer.sign(pae(PAYLOAD_TYPE, body))
    except ReceiptSignerUnavailable:
        raise
    except Exception as error:  # a signer that fails in any way yields no receipt, never a partial one
        raise ReceiptSignerUnavailable(f"the receipt could not be signed: {type(error).__name__}") from None
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(body).decode("ascii"),
        "signatures": [{"keyid": key_id, "sig": base64.b64encode(signature).decode("ascii")}],
    }


# ---- checking ----------------------------------------------------------------------------------------------

# (key id, the PAE bytes, the DER signature) -> None, or ReceiptRefused (KEY_UNKNOWN, SIGNATURE_INVALID).
SignatureCheck = Callable[[str, bytes, bytes], None]


def _b64(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise ReceiptRefused("RECEIPT_MALFORMED", f"the envelope's {what} is not base64 text")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ReceiptRefused("RECEIPT_MALFORMED", f"the envelope's {what} is not base64") from None


def open_envelope(value: Any) -> tuple[str, bytes, list[tuple[str, bytes]]]:
    """(payloadType, payload bytes, [(keyid, signature bytes)]) of a DSSE envelope; RECEIPT_MALFORMED when it
    is not one."""
    if not isinstance(value, dict) or set(value) != {"payloadType", "payload", "signatures"}:
        raise ReceiptRefused(
            "RECEIPT_MALFORMED", "a receipt is an object of payloadType, payload and signatures"
        )
    kind, signatures = value["payloadType"], value["signatures"]
    if not isinstance(kind, str):
        raise ReceiptRefused("RECEIPT_MALFORMED", "the envelope's payloadType is not text")
    payload = _b64(value["payload"], "payload")
    if not isinstance(signatures, list) or not signatures:
        raise ReceiptRefused("RECEIPT_MALFORMED", "the envelope carries no signature")
    found: list[tuple[str, bytes]] = []
    for entry in signatures:
        if not isinstance(entry, dict) or not isinstance(entry.get("keyid"), str):
            raise ReceiptRefused("RECEIPT_MALFORMED", "a signature is an object with keyid and sig")
        found.append((entry["keyid"], _b64(entry.get("sig"), "signature")))
    return kind, payload, found


def read_statement(payload: bytes) -> dict[str, Any]:
    """The statement a verified payload holds; RECEIPT_MALFORMED when it is not a statement of ours."""
    try:
        value = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ReceiptRefused("RECEIPT_MALFORMED", "the payload is not JSON") from None
    if (
        not isinstance(value, dict)
        or value.get("_type") != STATEMENT_TYPE
        or value.get("predicateType") != PREDICATE_TYPE
        or not isinstance(value.get("predicate"), dict)
        or not isinstance(value.get("subject"), list)
    ):
        raise ReceiptRefused("RECEIPT_MALFORMED", "the payload is not a Sentinel receipt statement")
    return value


def _text(predicate: dict[str, Any], name: str) -> str:
    found = predicate.get(name)
    if not isinstance(found, str):
        raise ReceiptRefused("RECEIPT_MALFORMED", f"the predicate has no {name}")
    return found


def _instant(text: str, what: str) -> str:
    try:
        return format_time(parse_time(text))
    except (ValueError, OverflowError):
        raise ReceiptRefused("RECEIPT_MALFORMED", f"{what} is not an RFC 3339 instant") from None


def check_claims(
    value: dict[str, Any],
    revision: str,
    project: str,
    environment: str,
    at: str,
    subject: str | None = None,
) -> None:
    """The claims a deploy step relies on, checked in this order (the first that fails is the reason):
    the commit, the project, the subject (when the verifier names one), the environment, the decision, the
    expiry at `at` (expired exactly at it)."""
    predicate = value["predicate"]
    commits = [
        s["digest"]["gitCommit"]
        for s in value["subject"]
        if isinstance(s, dict) and isinstance(s.get("digest"), dict) and "gitCommit" in s["digest"]
    ]
    if len(commits) != 1 or not isinstance(commits[0], str):
        raise ReceiptRefused("RECEIPT_MALFORMED", "the statement names no single git commit")
    wanted = revision.strip().lower()
    if commits[0].lower() != wanted or _text(predicate, "revision").lower() != wanted:
        raise ReceiptRefused(
            "RECEIPT_REVISION_MISMATCH", f"the receipt is for commit {commits[0]}, not {revision}"
        )
    if _text(predicate, "project") != project:
        raise ReceiptRefused(
            "RECEIPT_PROJECT_MISMATCH", f"the receipt is for project {predicate['project']}, not {project}"
        )
    if subject is not None and _text(predicate, "subject") != subject:
        raise ReceiptRefused(
            "RECEIPT_SUBJECT_MISMATCH", f"the receipt is for subject {predicate['subject']}, not {subject}"
        )
    if _text(predicate, "environment") != environment:
        raise ReceiptRefused(
            "RECEIPT_ENVIRONMENT_MISMATCH",
            f"the receipt is for environment {predicate['environment']}, not {environment}",
        )
    if _text(predicate, "decision") != "ready":
        raise ReceiptRefused("RECEIPT_NOT_READY", f"the receipt records {predicate['decision']!r}, not ready")
    expires_at = _instant(_text(predicate, "expires_at"), "expires_at")
    if _instant(at, "the instant checked") >= expires_at:
        raise ReceiptRefused("RECEIPT_EXPIRED", f"the receipt expired at {expires_at}")


def verify_receipt(
    value: Any,
    check_signature: SignatureCheck,
    revision: str,
    project: str,
    environment: str,
    at: str,
    subject: str | None = None,
) -> dict[str, Any]:
    """The statement of a receipt whose signature verifies (any one of its signatures) and whose claims
    match; ReceiptRefused otherwise. Nothing in the payload is read before its signature verifies."""
    kind, payload, signatures = open_envelope(value)
    if kind != PAYLOAD_TYPE:
        raise ReceiptRefused("RECEIPT_PAYLOAD_TYPE", f"the payload type is {kind!r}, not {PAYLOAD_TYPE}")
    message = pae(kind, payload)
    refusal: ReceiptRefused | None = None
    for key_id, signature in signatures:
        try:
            check_signature(key_id, message, signature)
        except ReceiptRefused as refused:
            # An invalid signature says more than an unknown key: keep the most telling reason.
            if refusal is None or refused.code == "RECEIPT_SIGNATURE_INVALID":
                refusal = refused
            continue
        found = read_statement(payload)
        check_claims(found, revision, project, environment, at, subject)
        return found
    assert refusal is not None  # there was at least one signature, and none verified
    raise refusal
