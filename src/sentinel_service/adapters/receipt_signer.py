"""The receipt signing key (`sentinel_domain.receipts.ReceiptSigner`), and the offline check of a receipt.

In AWS it is an asymmetric KMS key (KeySpec ECC_NIST_P256, KeyUsage SIGN_VERIFY): the gating function may
only Sign with it and the health function only read its public half (GetPublicKey), so no function ever holds
the private key. KMS signs a message of at most 4096 bytes itself (MessageType RAW, hashing it with SHA-256);
a longer one is hashed here and sent as MessageType DIGEST, which KMS signs without hashing again. Both give
the same ECDSA_SHA_256 signature over the message, which the DSSE verifiers check.

Locally it is a PEM (PKCS#8) P-256 private key in the data directory (`receipt.key`), created atomically with
mode 0600 and refused when group or others may read it, when it belongs to another user or when it is a
symlink: the same checks as the chain key (`chain_key.read_owner_only_file`). Local signatures are
deterministic (RFC 6979), so a fixed key gives fixed receipts (the evaluation harness replays byte for byte).

There is no default key: a gate whose settings name none records no `ready` decision (it holds, not recorded).

`cryptography` is needed to sign locally and to verify anywhere; it is imported where it is used, never at
module import, so the Lambda functions (which sign through KMS) do not load it."""

import base64
import hashlib
import json
import os
import textwrap
import threading
from typing import Any

from sentinel_domain.receipts import SIGNING_ALGORITHM, ReceiptRefused, ReceiptSignerUnavailable
from sentinel_service.adapters.chain_key import create_private_file, read_owner_only_file

RECEIPT_KEY_FILE = "receipt.key"
KMS_SIGNING_ALGORITHM = "ECDSA_SHA_256"
KMS_RAW_MESSAGE_LIMIT = 4096
CURVE = "secp256r1"


def pem_of_der(der: bytes) -> str:
    """A SubjectPublicKeyInfo in DER as PEM: base64 in 64-character lines between the armour."""
    body = "\n".join(textwrap.wrap(base64.b64encode(der).decode("ascii"), 64))
    return f"-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n"


def der_of_pem(pem: str) -> bytes:
    lines = [line.strip() for line in pem.strip().splitlines()]
    if not lines or lines[0] != "-----BEGIN PUBLIC KEY-----" or lines[-1] != "-----END PUBLIC KEY-----":
        raise ValueError("not a PEM public key")
    return base64.b64decode("".join(lines[1:-1]), validate=True)


def fingerprint(public_key_pem: str) -> str:
    """A key id that names the key itself: SHA-256 of its SubjectPublicKeyInfo DER."""
    return "sha256:" + hashlib.sha256(der_of_pem(public_key_pem)).hexdigest()


def _why(error: Exception) -> str:
    """An AWS error's code (ThrottlingException, AccessDeniedException...), never its message."""
    response = getattr(error, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return str(code) if code else type(error).__name__


class KmsReceiptSigner:
    """Signs with an asymmetric KMS key the caller may use but never read. `kms` is a client, or a callable
    that builds one on first use (never at import time)."""

    def __init__(self, kms: Any, key_id: str) -> None:
        self._kms = kms
        self._key_ref = key_id  # what KMS is asked with: the key's id or ARN, as configured
        # What receipts and GET /v1/keys name it by: the key's own id, never its ARN (an anonymous route must
        # not show the account id).
        self._key_id = key_id.rsplit("/", 1)[-1] if key_id.startswith("arn:") else key_id
        self._lock = threading.Lock()
        self._pem: str | None = None

    def __repr__(self) -> str:
        return f"KmsReceiptSigner({self._key_id!r})"

    @property
    def key_id(self) -> str:
        return self._key_id

    def _client(self) -> Any:
        with self._lock:
            if callable(self._kms) and not hasattr(self._kms, "sign"):
                self._kms = self._kms()
            return self._kms

    def sign(self, message: bytes) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        if len(message) <= KMS_RAW_MESSAGE_LIMIT:
            payload, kind = message, "RAW"
        else:
            payload, kind = hashlib.sha256(message).digest(), "DIGEST"
        try:
            answer = self._client().sign(
                KeyId=self._key_ref,
                Message=payload,
                MessageType=kind,
                SigningAlgorithm=KMS_SIGNING_ALGORITHM,
            )
        except (BotoCoreError, ClientError) as error:
            raise ReceiptSignerUnavailable(f"the receipt key could not sign: {_why(error)}") from None
        signature = answer.get("Signature")
        if not isinstance(signature, bytes | bytearray) or not signature:
            raise ReceiptSignerUnavailable("the receipt key answered no signature")
        return bytes(signature)

    def public_key_pem(self) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        with self._lock:
            cached = self._pem
        if cached is not None:
            return cached
        try:
            answer = self._client().get_public_key(KeyId=self._key_ref)
        except (BotoCoreError, ClientError) as error:
            raise ReceiptSignerUnavailable(
                f"the receipt key's public half cannot be read: {_why(error)}"
            ) from None
        if answer.get("KeySpec") not in (None, "ECC_NIST_P256"):
            raise ReceiptSignerUnavailable(f"the receipt key is {answer.get('KeySpec')}, not ECC_NIST_P256")
        pem = pem_of_der(bytes(answer["PublicKey"]))
        with self._lock:
            self._pem = pem
        return pem


class PemReceiptSigner:
    """A P-256 private key held in memory, from its PEM (PKCS#8): what the key file holds, and what the
    tests and the evaluation harness hand the composition root. Signatures are deterministic (RFC 6979)."""

    def __init__(self, material: bytes, where: str = "the receipt key") -> None:
        try:
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric import ec
        except ImportError:
            raise ReceiptSignerUnavailable(
                "signing receipts with a local key needs the cryptography package (pip install "
                "'sentinel-readiness[audit]')"
            ) from None
        try:
            key = serialization.load_pem_private_key(material, password=None)
        except (ValueError, TypeError):
            raise ReceiptSignerUnavailable(f"{where} is not a PEM private key") from None
        if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != CURVE:
            raise ReceiptSignerUnavailable(f"{where} is not an ECDSA P-256 key")
        self._key = key
        self._pem = (
            key.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode("ascii")
        )
        self._key_id = fingerprint(self._pem)

    def __repr__(self) -> str:
        return f"PemReceiptSigner({self._key_id!r})"

    @property
    def key_id(self) -> str:
        return self._key_id

    def public_key_pem(self) -> str:
        return self._pem

    def sign(self, message: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        signature: bytes = self._key.sign(message, ec.ECDSA(hashes.SHA256(), deterministic_signing=True))
        return signature


class FileReceiptSigner:
    """The P-256 private key in a file of the data directory. Read on first use and kept; a file that cannot
    be read, or is open to others, is ReceiptSignerUnavailable (and is tried again next time)."""

    def __init__(self, path: str, create: bool = False) -> None:
        self.path = os.path.expanduser(path)
        self._create = create
        self._lock = threading.Lock()
        self._loaded: PemReceiptSigner | None = None

    def __repr__(self) -> str:
        return f"FileReceiptSigner({self.path!r})"

    def _signer(self) -> PemReceiptSigner:
        with self._lock:
            if self._loaded is None:
                if self._create:
                    create_private_file(
                        self.path, new_private_key_pem(), "receipt key", ReceiptSignerUnavailable
                    )
                material = read_owner_only_file(self.path, "receipt key", ReceiptSignerUnavailable)
                self._loaded = PemReceiptSigner(material, f"the receipt key file {self.path}")
            return self._loaded

    @property
    def key_id(self) -> str:
        return self._signer().key_id

    def public_key_pem(self) -> str:
        return self._signer().public_key_pem()

    def sign(self, message: bytes) -> bytes:
        return self._signer().sign(message)


def new_private_key_pem(secret: int | None = None) -> bytes:
    """A fresh P-256 private key as PEM (PKCS#8); from `secret` when given: a fixed key for tests and the
    evaluation harness, never for a gate anyone relies on."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec
    except ImportError:
        raise ReceiptSignerUnavailable(
            "creating a receipt key needs the cryptography package (pip install 'sentinel-readiness[audit]')"
        ) from None
    key = (
        ec.generate_private_key(ec.SECP256R1())
        if secret is None
        else ec.derive_private_key(secret, ec.SECP256R1())
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


# ---- the public keys, and checking a signature with them ---------------------------------------------------


def key_entry(signer: Any) -> dict[str, str]:
    """One entry of `GET /v1/keys`: what a verifier needs to check a receipt."""
    return {"key_id": signer.key_id, "algorithm": SIGNING_ALGORITHM, "public_key": signer.public_key_pem()}


def read_keys(text: str) -> dict[str | None, str]:
    """The verifier's keys from a file's text: a PEM public key (any key id; the signature decides), or the
    JSON `GET /v1/keys` answers (`{"keys": [{key_id, algorithm, public_key}]}`, matched by key id)."""
    stripped = text.strip()
    if stripped.startswith("-----BEGIN PUBLIC KEY-----"):
        return {None: stripped + "\n"}
    try:
        document = json.loads(stripped)
        keys: dict[str | None, str] = {str(k["key_id"]): str(k["public_key"]) for k in document["keys"]}
    except (ValueError, KeyError, TypeError):
        raise ValueError("the key is neither a PEM public key nor the JSON of GET /v1/keys") from None
    if not keys:
        raise ValueError("the key list is empty")
    return keys


def signature_check(keys: dict[str | None, str]) -> Any:
    """A `receipts.SignatureCheck` over these public keys: a key id they do not hold is RECEIPT_KEY_UNKNOWN
    (a lone PEM, keyed None, is tried whatever the id), a signature that does not verify (another key, one
    byte changed) RECEIPT_SIGNATURE_INVALID."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    def check(key_id: str, message: bytes, signature: bytes) -> None:
        pem = keys.get(key_id, keys.get(None))
        if pem is None:
            raise ReceiptRefused("RECEIPT_KEY_UNKNOWN", f"no public key with id {key_id} was given")
        key = serialization.load_pem_public_key(pem.encode("ascii"))
        if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != CURVE:
            raise ReceiptRefused("RECEIPT_KEY_UNKNOWN", "the public key given is not an ECDSA P-256 key")
        try:
            key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, ValueError):
            raise ReceiptRefused(
                "RECEIPT_SIGNATURE_INVALID", f"the signature by {key_id} does not verify"
            ) from None

    return check
