"""What the AWS witness stores, and how anyone holding only a public key checks it.

Every object the witness writes is one JSON record, signed one by one with an asymmetric KMS key
(ECC_NIST_P256, ECDSA_SHA_256) so that an auditor verifies it offline with the public key, never with the
chain secret (bench/witness_cost.py states what that costs per million writes against periodic digests).

    {"format": "sentinel.witness/1", "kind": "checkpoint", "checkpoint": {...the ChainSeal checkpoint...},
     "written_at": "...", "signature": {"key_id": "...", "algorithm": "ECDSA_SHA_256", "value": "<b64 DER>"}}

    {"format": "sentinel.witness/1", "kind": "tampered", "project": "...", "candidate_id": ... ,
     "finding": {...}, "written_at": "...", "signature": {...}}

The signature covers `signed_bytes(record)`: the format line and the RFC 8785 form of every field but
`signature`, so no field can be changed, added or dropped without it failing. KMS is asked to sign the raw
message (MessageType RAW, at most 4096 bytes; KMS hashes it with SHA-256): a record is a few hundred bytes,
and a caller-side digest (MessageType DIGEST) is where moto differs from KMS (it hashes the digest again)."""

import base64
from typing import Any, Protocol

from sentinel_domain.canonical import canonical_bytes
from sentinel_domain.errors import StoreUnavailable

RECORD_FORMAT = "sentinel.witness/1"
SIGNING_ALGORITHM = "ECDSA_SHA_256"
KMS_RAW_MESSAGE_LIMIT = 4096


class Signer(Protocol):
    def sign(self, message: bytes) -> dict[str, str]:
        """{"key_id", "algorithm", "value"} for these bytes; StoreUnavailable when it cannot sign."""


def signed_bytes(record: dict[str, Any]) -> bytes:
    body = {k: v for k, v in record.items() if k != "signature"}
    return RECORD_FORMAT.encode("ascii") + b"\n" + canonical_bytes(body)


class KmsSigner:
    """Signs with an asymmetric KMS key the function may use but never read (kms:Sign only)."""

    def __init__(self, kms_client: Any, key_id: str) -> None:
        self._kms = kms_client
        self.key_id = key_id

    def __repr__(self) -> str:
        return f"KmsSigner({self.key_id!r})"

    def sign(self, message: bytes) -> dict[str, str]:
        if len(message) > KMS_RAW_MESSAGE_LIMIT:
            raise ValueError(f"a witness record is at most {KMS_RAW_MESSAGE_LIMIT} bytes to sign")
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self._kms.sign(
                KeyId=self.key_id, Message=message, MessageType="RAW", SigningAlgorithm=SIGNING_ALGORITHM
            )
        except (BotoCoreError, ClientError) as error:
            raise StoreUnavailable(
                f"the witness signing key could not sign: {type(error).__name__}"
            ) from None
        return {
            "key_id": str(answer.get("KeyId", self.key_id)),
            "algorithm": SIGNING_ALGORITHM,
            "value": base64.b64encode(answer["Signature"]).decode("ascii"),
        }


def signed(record: dict[str, Any], signer: Signer) -> dict[str, Any]:
    return {**record, "signature": signer.sign(signed_bytes(record))}


def public_key_pem(kms_client: Any, key_id: str) -> str:
    """The signing key's public half as PEM (what an auditor keeps beside an export): KMS answers DER."""
    from cryptography.hazmat.primitives import serialization

    der = kms_client.get_public_key(KeyId=key_id)["PublicKey"]
    key = serialization.load_der_public_key(der)
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


def verify_witness_record(record: Any, public_key_pem: str | bytes) -> bool:
    """True only when the record carries an ECDSA P-256 / SHA-256 signature over `signed_bytes(record)` that
    the public key verifies. Needs no AWS access and no chain secret: what `sentinel audit verify --from DIR`
    uses on an export. Anything malformed is False, never an exception."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
        return False
    signature = record.get("signature")
    if not isinstance(signature, dict) or signature.get("algorithm") != SIGNING_ALGORITHM:
        return False
    try:
        value = base64.b64decode(str(signature.get("value", "")), validate=True)
        pem = public_key_pem.encode("ascii") if isinstance(public_key_pem, str) else public_key_pem
        key = serialization.load_pem_public_key(pem)
        if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
            return False
        key.verify(value, signed_bytes(record), ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True
