"""Decision receipts (sentinel_domain.receipts): the PAE, the expiry at its boundaries, the statement of a
real ready decision, and every stable reason a verifier refuses with, including the tamper cases."""

import base64

import pytest

from sentinel_domain.canonical import canonical_bytes
from sentinel_domain.receipts import (
    PAYLOAD_TYPE,
    RECEIPT_CODES,
    ReceiptRefused,
    envelope,
    expiry,
    pae,
    verify_receipt,
)
from sentinel_service.adapters.receipt_signer import (
    PemReceiptSigner,
    new_private_key_pem,
    read_keys,
    signature_check,
)
from support.receipts import flip_byte, payload_of, ready_decision, with_payload
from support.world import PROJECT, RECEIPT_SIGNER, REV, World

AT = "2026-11-29T12:30:00Z"
OTHER_SIGNER = PemReceiptSigner(new_private_key_pem(secret=0x0BAD_5EED))
TRUSTED = signature_check({RECEIPT_SIGNER.key_id: RECEIPT_SIGNER.public_key_pem()})


@pytest.fixture(scope="module")
def receipt() -> dict:
    return ready_decision(World())["receipt"]


def refused(receipt, *, check=TRUSTED, revision=REV, project=PROJECT, environment="staging", at=AT) -> str:
    with pytest.raises(ReceiptRefused) as caught:
        verify_receipt(receipt, check, revision, project, environment, at)
    return caught.value.code


# ---- building --------------------------------------------------------------------------------------------


def test_pae_is_dsse_v1s_encoding() -> None:
    # Given the DSSE specification's example (payload type and body as bytes)
    # Then the encoding is "DSSEv1" SP len(type) SP type SP len(body) SP body, lengths in bytes
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    # And a multi-byte type counts its UTF-8 bytes, not its characters
    assert pae("é", b"") == "DSSEv1 2 é 0 ".encode()


APPROVAL = {"reviewer": "r", "plan_digest": "d", "expires_at": "2026-11-30T12:00:00.000000Z"}
EVIDENCE = {"evidence_id": "e", "fresh_until": "2026-11-30T11:00:00.000000Z"}
RECORDED = "2026-11-29T12:00:00.000000Z"


@pytest.mark.parametrize(
    ("approvals", "evidence", "max_seconds", "expected"),
    [
        # the configured maximum is the earliest
        ([APPROVAL], [EVIDENCE], 3600, "2026-11-29T13:00:00.000000Z"),
        # the evidence's freshness is the earliest
        ([APPROVAL], [EVIDENCE], 86400, "2026-11-30T11:00:00.000000Z"),
        # the approval is the earliest (no evidence)
        ([APPROVAL], [], 2 * 86400, "2026-11-30T12:00:00.000000Z"),
        # two limits at the very same instant: that instant
        (
            [APPROVAL],
            [dict(EVIDENCE, fresh_until=APPROVAL["expires_at"])],
            86400,
            "2026-11-30T12:00:00.000000Z",
        ),
        # a microsecond apart: the earlier one
        (
            [APPROVAL],
            [dict(EVIDENCE, fresh_until="2026-11-30T11:59:59.999999Z")],
            86400,
            "2026-11-30T11:59:59.999999Z",
        ),
        # an offset that is not Z is compared as the instant it is
        ([dict(APPROVAL, expires_at="2026-11-30T13:00:00+02:00")], [], 86400, "2026-11-30T11:00:00.000000Z"),
    ],
)
def test_expiry_is_the_earliest_limit(approvals, evidence, max_seconds, expected) -> None:
    assert expiry(RECORDED, approvals, evidence, max_seconds) == expected


def test_a_receipt_lives_a_positive_time() -> None:
    with pytest.raises(ValueError):
        expiry(RECORDED, [], [], 0)


def test_the_statement_of_a_ready_decision(receipt) -> None:
    # Given the receipt of a ready decision recorded at the tests' clock (12:00)
    statement = payload_of(receipt)
    predicate = statement["predicate"]
    # Then it is an in-toto Statement v1 about the commit and the candidate
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"][0] == {"name": "payments", "digest": {"gitCommit": REV}}
    assert statement["subject"][1]["name"] == f"sentinel:{PROJECT}/candidates/{predicate['candidate_id']}"
    # And its payload is the statement's canonical form, so its digest is reproducible
    assert base64.b64decode(receipt["payload"]) == canonical_bytes(statement)
    # And it lists the deciding evidence by the digest of its raw report, with its freshness limit
    [evidence] = predicate["evidence"]
    assert len(evidence["raw_sha256"]) == 64 and evidence["policy_id"] == "unit-tests"
    assert evidence["fresh_until"] == "2026-11-30T11:59:00.000000Z"
    assert predicate["approvals"][0]["expires_at"] == "2026-11-30T12:00:00.000000Z"
    assert predicate["expires_at"] == min(evidence["fresh_until"], predicate["approvals"][0]["expires_at"])


def test_a_receipt_is_deterministic_under_a_fixed_key_and_clock() -> None:
    # Given two worlds that run the same flow at the same fixed clock
    # Then their receipts are the same bytes (RFC 6979 signatures): the evaluation replay can rely on it
    assert ready_decision(World())["receipt"] == ready_decision(World())["receipt"]


def test_the_configured_maximum_bounds_a_receipt() -> None:
    # Given a gate whose receipts live at most an hour
    world = World()
    world.gate.receipt_max_seconds = 3600
    # Then a receipt recorded at 12:00 expires at 13:00, before the evidence and the approval
    predicate = payload_of(ready_decision(world)["receipt"])["predicate"]
    assert predicate["expires_at"] == "2026-11-29T13:00:00.000000Z"


# ---- checking --------------------------------------------------------------------------------------------


def test_a_genuine_receipt_verifies(receipt) -> None:
    statement = verify_receipt(receipt, TRUSTED, REV.upper(), PROJECT, "staging", AT)
    assert statement["predicate"]["decision"] == "ready"


def test_it_expires_exactly_at_its_expiry(receipt) -> None:
    expires_at = payload_of(receipt)["predicate"]["expires_at"]
    # Then a microsecond before, it holds; at the instant, and after, it is expired
    verify_receipt(receipt, TRUSTED, REV, PROJECT, "staging", "2026-11-30T11:58:59.999999Z")
    assert refused(receipt, at=expires_at) == "RECEIPT_EXPIRED"
    assert refused(receipt, at="2026-12-01T00:00:00Z") == "RECEIPT_EXPIRED"


def test_it_refuses_another_commit_project_or_environment(receipt) -> None:
    assert refused(receipt, revision="c" * 40) == "RECEIPT_REVISION_MISMATCH"
    assert refused(receipt, project="other") == "RECEIPT_PROJECT_MISMATCH"
    assert refused(receipt, environment="production") == "RECEIPT_ENVIRONMENT_MISMATCH"


def test_a_claim_changed_under_the_signature_fails_the_signature(receipt) -> None:
    # Given the statement rewritten for another commit and environment, the signature kept
    statement = payload_of(receipt)
    statement["subject"][0]["digest"]["gitCommit"] = "c" * 40
    statement["predicate"].update(revision="c" * 40, environment="production")
    # Then it verifies for nothing
    assert refused(with_payload(receipt, statement), revision="c" * 40, environment="production") == (
        "RECEIPT_SIGNATURE_INVALID"
    )


@pytest.mark.parametrize("index", [0, 17, 200, -1])
def test_one_byte_changed_in_the_payload_fails(receipt, index) -> None:
    assert refused(dict(receipt, payload=flip_byte(receipt["payload"], index))) == "RECEIPT_SIGNATURE_INVALID"


@pytest.mark.parametrize("index", [0, 8, 40, -1])
def test_one_byte_changed_in_the_signature_fails(receipt, index) -> None:
    signature = dict(receipt["signatures"][0])
    signature["sig"] = flip_byte(signature["sig"], index)
    assert refused(dict(receipt, signatures=[signature])) == "RECEIPT_SIGNATURE_INVALID"


def test_a_receipt_re_signed_with_another_key_fails(receipt) -> None:
    # Given the same statement signed by another key, under its own key id
    forged = envelope(payload_of(receipt), OTHER_SIGNER)
    # Then the verifier does not know that key
    assert refused(forged) == "RECEIPT_KEY_UNKNOWN"
    # And under the genuine key id, or checked against a lone PEM, the signature does not verify
    forged["signatures"][0]["keyid"] = RECEIPT_SIGNER.key_id
    assert refused(forged) == "RECEIPT_SIGNATURE_INVALID"
    lone_pem = signature_check(read_keys(RECEIPT_SIGNER.public_key_pem()))
    assert refused(forged, check=lone_pem) == "RECEIPT_SIGNATURE_INVALID"


def test_a_non_ready_decision_is_refused_even_when_signed(receipt) -> None:
    # Given a statement of a hold signed by the genuine key (the gate never signs one)
    statement = payload_of(receipt)
    statement["predicate"]["decision"] = "hold"
    assert refused(envelope(statement, RECEIPT_SIGNER)) == "RECEIPT_NOT_READY"


def test_another_payload_type_is_refused(receipt) -> None:
    assert refused(dict(receipt, payloadType="application/json")) == "RECEIPT_PAYLOAD_TYPE"


@pytest.mark.parametrize(
    "broken",
    [
        None,
        [],
        {"payloadType": PAYLOAD_TYPE},
        {"payloadType": PAYLOAD_TYPE, "payload": "not base64!", "signatures": [{"keyid": "k", "sig": ""}]},
        {"payloadType": PAYLOAD_TYPE, "payload": "", "signatures": []},
        {"payloadType": PAYLOAD_TYPE, "payload": "", "signatures": ["x"]},
        {"payloadType": 3, "payload": "", "signatures": [{"keyid": "k", "sig": ""}]},
    ],
)
def test_what_is_not_an_envelope_is_malformed(broken) -> None:
    assert refused(broken) == "RECEIPT_MALFORMED"


def test_a_signed_payload_that_is_not_our_statement_is_malformed(receipt) -> None:
    statement = payload_of(receipt)
    statement["predicateType"] = "https://slsa.dev/provenance/v1"
    assert refused(envelope(statement, RECEIPT_SIGNER)) == "RECEIPT_MALFORMED"
    # And an expiry that is not an instant is malformed, not a pass
    statement = payload_of(receipt)
    statement["predicate"]["expires_at"] = "tomorrow"
    assert refused(envelope(statement, RECEIPT_SIGNER)) == "RECEIPT_MALFORMED"


def test_every_code_is_stable_and_known() -> None:
    with pytest.raises(ValueError):
        ReceiptRefused("RECEIPT_SOMETHING_ELSE", "x")
    assert len(set(RECEIPT_CODES)) == len(RECEIPT_CODES) == 10


def test_the_statement_names_the_github_repository_the_subject_maps_to() -> None:
    # Given a project whose GitHub App maps the candidate's subject and environment to one repository
    from support.world import CONFIG

    github = {
        "app_id": 1,
        "installation_id": 2,
        "app_principal": "ci-bot",
        "repositories": [{"repository": "acme/payments", "subject": "payments", "environments": ["staging"]}],
    }
    world = World(config=dict(CONFIG, github=github))
    # When a ready decision is recorded
    statement = payload_of(ready_decision(world)["receipt"])
    # Then the repository is named, as the commit subject's name too
    assert statement["predicate"]["repository"] == "acme/payments"
    assert statement["subject"][0] == {"name": "acme/payments", "digest": {"gitCommit": REV}}
