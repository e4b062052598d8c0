"""The receipt signers: the asymmetric KMS key (on moto for RAW messages; with botocore's Stubber where moto
differs from KMS, for DIGEST, and for KMS's faults) and the key file of the data directory (created 0600,
refused when loose, foreign or a symlink). Every receipt they sign verifies with the public key they
publish."""

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

from sentinel_domain.receipts import PAYLOAD_TYPE, ReceiptSignerUnavailable, envelope, pae, verify_receipt
from sentinel_service.adapters.receipt_signer import (
    KMS_RAW_MESSAGE_LIMIT,
    FileReceiptSigner,
    KmsReceiptSigner,
    fingerprint,
    read_keys,
    signature_check,
)
from sentinel_service.compose import compose
from sentinel_service.settings import Settings
from support.receipts import payload_of, ready_decision
from support.world import PROJECT, REV, World

AT = "2026-11-29T12:30:00Z"


@pytest.fixture(scope="module")
def statement() -> dict[str, Any]:
    return payload_of(ready_decision(World())["receipt"])


def verifies(receipt: dict[str, Any], public_key_pem: str, key_id: str) -> bool:
    check = signature_check({key_id: public_key_pem})
    return verify_receipt(receipt, check, REV, PROJECT, "staging", AT)["_type"] is not None


# ---- KMS ---------------------------------------------------------------------------------------------------


def test_a_kms_key_signs_receipts_its_public_key_verifies(moto: Any, statement: dict[str, Any]) -> None:
    # Given an ECC_NIST_P256 signing key in (moto's) KMS
    kms = boto3.client("kms", region_name="us-east-1")
    key_id = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["Arn"]
    signer = KmsReceiptSigner(kms, key_id)
    # When a receipt is signed through it (a statement is well under 4096 bytes: MessageType RAW)
    receipt = envelope(statement, signer)
    assert len(pae(PAYLOAD_TYPE, receipt["payload"].encode())) < KMS_RAW_MESSAGE_LIMIT
    # Then the public key GetPublicKey answers (DER, written as PEM without cryptography) verifies it
    pem = signer.public_key_pem()
    assert pem.startswith("-----BEGIN PUBLIC KEY-----\n")
    # And the key is named by its own id, never its ARN (GET /v1/keys is anonymous: no account id)
    assert key_id.startswith("arn:") and signer.key_id == key_id.rsplit("/", 1)[-1]
    assert "arn:" not in signer.key_id and signer.key_id in key_id
    assert serialization.load_pem_public_key(pem.encode()).curve.name == "secp256r1"  # type: ignore[union-attr]
    assert verifies(receipt, pem, signer.key_id)


def test_the_composition_root_builds_the_kms_signer_from_the_settings(moto: Any) -> None:
    # Given settings that name a KMS key, and a file too
    kms = boto3.client("kms", region_name="us-east-1")
    key_id = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["Arn"]
    env = {"SENTINEL_RECEIPT_KEY_ID": key_id, "SENTINEL_RECEIPT_KEY_FILE": "/nonexistent/receipt.key"}
    services = compose(Settings.from_env(env), kms=kms)
    # Then the KMS key wins, and the gate holds it
    assert isinstance(services.receipt_signer, KmsReceiptSigner)
    assert services.gate.receipt_signer is services.receipt_signer
    # And settings that name none give no signer (never a default key)
    assert compose(Settings.from_env({})).receipt_signer is None


def stubbed(private: ec.EllipticCurvePrivateKey) -> tuple[Any, Stubber]:
    kms = boto3.client("kms", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    return kms, Stubber(kms)


def test_a_message_over_4096_bytes_is_signed_as_its_sha256_digest() -> None:
    # Given KMS as its API describes it (moto hashes a DIGEST again, KMS does not): a stub that signs the
    # 32-byte digest it receives without hashing it
    private = ec.generate_private_key(ec.SECP256R1())
    message = b"x" * (KMS_RAW_MESSAGE_LIMIT + 1)
    digest = hashlib.sha256(message).digest()
    kms, stub = stubbed(private)
    signature = private.sign(digest, ec.ECDSA(Prehashed(hashes.SHA256())))
    stub.add_response(
        "sign",
        {"KeyId": "k", "Signature": signature, "SigningAlgorithm": "ECDSA_SHA_256"},
        {"KeyId": "k", "Message": digest, "MessageType": "DIGEST", "SigningAlgorithm": "ECDSA_SHA_256"},
    )
    # When the signer signs the long message
    with stub:
        answered = KmsReceiptSigner(kms, "k").sign(message)
    # Then the request was a DIGEST of it, and the signature verifies over the message itself
    stub.assert_no_pending_responses()
    private.public_key().verify(answered, message, ec.ECDSA(hashes.SHA256()))


def test_a_short_message_is_sent_raw() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    kms, stub = stubbed(private)
    stub.add_response(
        "sign",
        {"KeyId": "k", "Signature": b"\x30\x00", "SigningAlgorithm": "ECDSA_SHA_256"},
        {"KeyId": "k", "Message": b"short", "MessageType": "RAW", "SigningAlgorithm": "ECDSA_SHA_256"},
    )
    with stub:
        assert KmsReceiptSigner(kms, "k").sign(b"short") == b"\x30\x00"
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    "code", ["ThrottlingException", "KMSInvalidStateException", "AccessDeniedException", "DisabledException"]
)
def test_kms_faults_are_an_unavailable_signer(code: str) -> None:
    # Given KMS answering an error to Sign and to GetPublicKey
    kms, stub = stubbed(ec.generate_private_key(ec.SECP256R1()))
    stub.add_client_error("sign", service_error_code=code, http_status_code=400)
    stub.add_client_error("get_public_key", service_error_code=code, http_status_code=400)
    signer = KmsReceiptSigner(kms, "k")
    # Then neither is an answer: the signer is unavailable (and the gate records no ready decision)
    with stub:
        with pytest.raises(ReceiptSignerUnavailable, match=code):
            signer.sign(b"m")
        with pytest.raises(ReceiptSignerUnavailable, match=code):
            signer.public_key_pem()


def test_a_kms_key_of_another_spec_is_refused() -> None:
    kms, stub = stubbed(ec.generate_private_key(ec.SECP256R1()))
    rsa_der = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    stub.add_response("get_public_key", {"KeyId": "k", "PublicKey": rsa_der, "KeySpec": "RSA_2048"})
    with stub, pytest.raises(ReceiptSignerUnavailable, match="RSA_2048"):
        KmsReceiptSigner(kms, "k").public_key_pem()


# ---- the key file ------------------------------------------------------------------------------------------


def test_the_key_file_is_created_0600_once_and_signs_receipts(tmp_path: Path, statement: dict) -> None:
    # Given no key file yet
    path = tmp_path / "data" / "receipt.key"
    # When a signer that may create it signs a receipt
    signer = FileReceiptSigner(str(path), create=True)
    receipt = envelope(statement, signer)
    # Then the file is a PEM private key, mode 0600, and the receipt verifies with its public half
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(stored, ec.EllipticCurvePrivateKey) and stored.curve.name == "secp256r1"
    assert verifies(receipt, signer.public_key_pem(), signer.key_id)
    assert signer.key_id == fingerprint(signer.public_key_pem())
    # And a second signer (another process) reads the same key rather than making another
    again = FileReceiptSigner(str(path), create=True)
    assert again.key_id == signer.key_id
    assert [p.name for p in path.parent.iterdir()] == ["receipt.key"]  # no temporary file left behind


def test_a_key_file_open_to_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "receipt.key"
    FileReceiptSigner(str(path), create=True).public_key_pem()
    os.chmod(path, 0o644)
    with pytest.raises(ReceiptSignerUnavailable, match="open to group or others"):
        FileReceiptSigner(str(path)).sign(b"m")


def test_a_key_file_behind_a_symlink_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.key"
    FileReceiptSigner(str(real), create=True).public_key_pem()
    link = tmp_path / "receipt.key"
    link.symlink_to(real)
    with pytest.raises(ReceiptSignerUnavailable, match="cannot read"):
        FileReceiptSigner(str(link), create=True).sign(b"m")


def test_a_key_file_that_is_not_a_p256_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "receipt.key"
    other = ec.generate_private_key(ec.SECP384R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.write_bytes(other)
    os.chmod(path, 0o600)
    with pytest.raises(ReceiptSignerUnavailable, match="not an ECDSA P-256 key"):
        _ = FileReceiptSigner(str(path)).key_id
    path.write_bytes(b"not a key")
    with pytest.raises(ReceiptSignerUnavailable, match="not a PEM private key"):
        _ = FileReceiptSigner(str(path)).key_id


def test_a_missing_key_file_is_not_created_unless_asked(tmp_path: Path) -> None:
    with pytest.raises(ReceiptSignerUnavailable, match="cannot read"):
        FileReceiptSigner(str(tmp_path / "receipt.key")).sign(b"m")
    assert not (tmp_path / "receipt.key").exists()


def test_the_verifiers_key_file_is_a_pem_or_the_keys_route_json(tmp_path: Path) -> None:
    signer = FileReceiptSigner(str(tmp_path / "receipt.key"), create=True)
    pem = signer.public_key_pem()
    assert read_keys(pem) == {None: pem}
    listed = json.dumps(
        {"keys": [{"key_id": signer.key_id, "algorithm": "ECDSA_P256_SHA256", "public_key": pem}]}
    )
    assert read_keys(listed) == {signer.key_id: pem}
    for broken in ("", "{}", '{"keys": []}', "-----BEGIN CERTIFICATE-----"):
        with pytest.raises(ValueError):
            read_keys(broken)
