"""A receipt checked by an implementation that is not ours: securesystemslib's DSSE Envelope (its own PAE) and
its ECDSA P-256 key verification (`ecdsa-sha2-nistp256`). What it accepts, ours accepts, and the tamper cases
fail in both.

securesystemslib writes a DSSE signature as hex where the DSSE specification (and our envelope) use base64:
the test converts it, and nothing else."""

import base64
import json

import pytest
from cryptography.hazmat.primitives import serialization
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import Signature, SSlibKey

from sentinel_domain.receipts import envelope, pae
from sentinel_service.adapters.receipt_signer import PemReceiptSigner, new_private_key_pem
from support.receipts import flip_byte, payload_of, ready_decision, with_payload
from support.world import RECEIPT_SIGNER, REV, World


def their_key(signer) -> SSlibKey:
    public = serialization.load_pem_public_key(signer.public_key_pem().encode())
    return SSlibKey.from_crypto(public, keyid=signer.key_id, scheme="ecdsa-sha2-nistp256")


def their_envelope(receipt: dict) -> Envelope:
    signatures = {
        s["keyid"]: Signature(s["keyid"], base64.b64decode(s["sig"]).hex()) for s in receipt["signatures"]
    }
    return Envelope(base64.b64decode(receipt["payload"]), receipt["payloadType"], signatures)


@pytest.fixture(scope="module")
def receipt() -> dict:
    return ready_decision(World())["receipt"]


def test_securesystemslib_verifies_a_genuine_receipt(receipt) -> None:
    # Given the receipt of a recorded ready decision, and the gate's public key as securesystemslib reads it
    theirs = their_envelope(receipt)
    # Then its own PAE is ours, and its DSSE verification accepts the signature under the gate's key
    assert theirs.pae() == pae(receipt["payloadType"], base64.b64decode(receipt["payload"]))
    accepted = theirs.verify([their_key(RECEIPT_SIGNER)], 1)
    assert list(accepted) == [RECEIPT_SIGNER.key_id]
    # And the statement it vouches for names the commit
    statement = json.loads(theirs.payload)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"][0]["digest"] == {"gitCommit": REV}


def tampered(receipt: dict) -> dict[str, dict]:
    other = PemReceiptSigner(new_private_key_pem(secret=0x0BAD_5EED))
    statement = payload_of(receipt)
    statement["subject"][0]["digest"]["gitCommit"] = "c" * 40
    statement["predicate"]["revision"] = "c" * 40
    resigned = envelope(payload_of(receipt), other)
    resigned["signatures"][0]["keyid"] = RECEIPT_SIGNER.key_id  # the forger claims the gate's key
    signature = dict(receipt["signatures"][0], sig=flip_byte(receipt["signatures"][0]["sig"], 12))
    return {
        "another revision under the original signature": with_payload(receipt, statement),
        "re-signed with another key": resigned,
        "one byte of the payload": dict(receipt, payload=flip_byte(receipt["payload"], 40)),
        "one byte of the signature": dict(receipt, signatures=[signature]),
        "another payload type": dict(receipt, payloadType="application/json"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "another revision under the original signature",
        "re-signed with another key",
        "one byte of the payload",
        "one byte of the signature",
        "another payload type",
    ],
)
def test_securesystemslib_refuses_every_tampered_receipt(receipt, case) -> None:
    # Given a receipt changed as an attacker could change it
    forged = tampered(receipt)[case]
    # Then securesystemslib's verification refuses it under the gate's key
    with pytest.raises(VerificationError):
        their_envelope(forged).verify([their_key(RECEIPT_SIGNER)], 1)
