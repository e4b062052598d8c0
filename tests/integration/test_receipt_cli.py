"""`sentinel keys` and `sentinel receipt verify`, as a deploy step runs them: offline, on a receipt file,
with the data directory's key or one given; exit 0 and one line when valid, exit 1 and the stable reason
when not."""

import json
from pathlib import Path
from typing import Any

import pytest

from sentinel_domain.receipts import envelope
from sentinel_runner.cli import main
from sentinel_service.adapters.receipt_signer import PemReceiptSigner, new_private_key_pem
from support.receipts import flip_byte, payload_of, ready_decision
from support.world import PROJECT, RECEIPT_SIGNER, REV, World

AT = "2026-11-29T12:30:00Z"


@pytest.fixture(scope="module")
def statement() -> dict:
    return payload_of(ready_decision(World())["receipt"])


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data directory of the user's own, its receipt key made by `sentinel keys` (as on a first run)."""
    folder = tmp_path / "data"
    monkeypatch.setenv("SENTINEL_DATA_DIR", str(folder))
    monkeypatch.delenv("SENTINEL_RECEIPT_KEY_FILE", raising=False)
    return folder


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, receipt: object, name: str = "receipt.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(receipt))
    return str(path)


def verify(capsys, file: str, *extra: str, revision: str = REV, environment: str = "staging"):
    args = ["receipt", "verify", file, "--revision", revision, "--project", PROJECT]
    return run(capsys, *args, "--environment", environment, "--at", AT, *extra)


def test_keys_prints_the_data_directorys_public_key_and_verify_uses_it(capsys, data, tmp_path, statement):
    # Given the data directory's key, printed by `sentinel keys` (made on first use, 0600)
    code, pem, _err = run(capsys, "keys")
    assert code == 0 and pem.startswith("-----BEGIN PUBLIC KEY-----")
    assert oct((data / "receipt.key").stat().st_mode & 0o777) == "0o600"
    # And a receipt the local gate signed with it
    from sentinel_service.adapters.receipt_signer import FileReceiptSigner

    receipt = envelope(statement, FileReceiptSigner(str(data / "receipt.key")))
    # When a deploy step verifies it without --key
    code, out, err = verify(capsys, write(tmp_path, receipt))
    # Then it passes with one line naming the commit, the project and environment, and the expiry
    assert (code, err) == (0, "")
    assert out.count("\n") == 1 and out.startswith(f"ok: {REV} is ready for {PROJECT}/staging")
    # And the same receipt for another commit is refused with the stable reason and a non-zero exit
    code, out, err = verify(capsys, write(tmp_path, receipt), revision="c" * 40)
    assert code == 1 and out == "" and err.startswith("error: RECEIPT_REVISION_MISMATCH: ")


def given_key(tmp_path: Path, text: str) -> str:
    path = tmp_path / "gate.pem"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("genuine", None),
        ("another environment", "RECEIPT_ENVIRONMENT_MISMATCH"),
        ("expired", "RECEIPT_EXPIRED"),
        ("one byte of the payload", "RECEIPT_SIGNATURE_INVALID"),
        ("one byte of the signature", "RECEIPT_SIGNATURE_INVALID"),
        ("re-signed with another key", "RECEIPT_KEY_UNKNOWN"),
        ("a hold", "RECEIPT_NOT_READY"),
        ("not json", "RECEIPT_MALFORMED"),
        ("null (a hold's receipt)", "RECEIPT_MALFORMED"),
    ],
)
def test_verify_with_a_given_key(capsys, data, tmp_path, statement, case, reason) -> None:
    # Given the gate's key list (`sentinel keys --json`'s shape) and a receipt changed as the case says
    keys = {"keys": [{"key_id": RECEIPT_SIGNER.key_id, "algorithm": "ECDSA_P256_SHA256",
                      "public_key": RECEIPT_SIGNER.public_key_pem()}]}  # fmt: skip
    key = given_key(tmp_path, json.dumps(keys))
    receipt: Any = envelope(statement, RECEIPT_SIGNER)
    environment, extra = "staging", []
    if case == "another environment":
        environment = "production"
    elif case == "expired":
        extra = ["--at", statement["predicate"]["expires_at"]]
    elif case == "one byte of the payload":
        receipt = dict(receipt, payload=flip_byte(receipt["payload"], 99))
    elif case == "one byte of the signature":
        signature = receipt["signatures"][0]
        receipt = dict(receipt, signatures=[dict(signature, sig=flip_byte(signature["sig"], 5))])
    elif case == "re-signed with another key":
        receipt = envelope(statement, PemReceiptSigner(new_private_key_pem(secret=0x0BAD_5EED)))
    elif case == "a hold":
        receipt = envelope(
            dict(statement, predicate=dict(statement["predicate"], decision="hold")), RECEIPT_SIGNER
        )
    elif case in ("not json", "null (a hold's receipt)"):
        receipt = None
    path = write(tmp_path, receipt)
    if case == "not json":
        Path(path).write_text("{not json")
    # When it is verified with --key (a later --at wins over the default one)
    code, out, err = verify(capsys, path, "--key", key, *extra, environment=environment)
    # Then only the genuine one passes; every other fails with its stable reason
    if reason is None:
        assert code == 0 and out.startswith("ok: ")
    else:
        assert code == 1 and out == "" and err.startswith(f"error: {reason}: "), err


def test_a_lone_pem_key_verifies_whatever_the_key_id(capsys, data, tmp_path, statement) -> None:
    key = given_key(tmp_path, RECEIPT_SIGNER.public_key_pem())
    code, out, _err = verify(capsys, write(tmp_path, envelope(statement, RECEIPT_SIGNER)), "--key", key)
    assert code == 0 and out.startswith("ok: ")


def test_an_unreadable_key_or_receipt_is_refused(capsys, data, tmp_path, statement) -> None:
    receipt = write(tmp_path, envelope(statement, RECEIPT_SIGNER))
    code, _out, err = verify(capsys, receipt, "--key", str(tmp_path / "missing.pem"))
    assert code == 1 and err.startswith("error: RECEIPT_KEY_UNKNOWN: ")
    code, _out, err = verify(capsys, str(tmp_path / "missing.json"), "--key", str(tmp_path / "missing.pem"))
    assert code == 1 and err.startswith("error: RECEIPT_MALFORMED: ")
    # And without --key, a data directory with no receipt key is no key at all (verify never makes one)
    code, _out, err = verify(capsys, receipt)
    assert code == 1 and err.startswith("error: RECEIPT_KEY_UNKNOWN: ")
    assert not (data / "receipt.key").exists()


def test_a_bad_instant_is_a_usage_error(capsys, data, tmp_path, statement) -> None:
    receipt = write(tmp_path, envelope(statement, RECEIPT_SIGNER))
    code, _out, err = verify(capsys, receipt, "--at", "yesterday")
    assert code == 1 and err.startswith("error: VALIDATION_FAILED: ")


def test_keys_json_is_what_the_keys_route_answers(capsys, data) -> None:
    code, out, _err = run(capsys, "keys", "--json")
    [key] = json.loads(out)["keys"]
    assert code == 0 and key["algorithm"] == "ECDSA_P256_SHA256" and key["key_id"].startswith("sha256:")


def test_keys_refuses_a_plain_http_gate_that_is_not_loopback(capsys, data) -> None:
    code, _out, err = run(capsys, "keys", "--url", "http://gate.example.com")
    assert code == 1 and "https" in err


def test_attack_an_explicit_data_directory_is_not_overridden_by_the_environment(
    capsys, tmp_path, monkeypatch, statement
):
    # Given the operator's data directory, whose key the deploy script names with --data
    from sentinel_service.adapters.chain_key import create_private_file
    from sentinel_service.adapters.receipt_signer import FileReceiptSigner

    theirs = tmp_path / "operator"
    theirs.mkdir()
    create_private_file(str(theirs / "receipt.key"), new_private_key_pem(), "receipt key", OSError)
    # And a key of the agent's own, named by SENTINEL_RECEIPT_KEY_FILE in the environment it can set
    mine = tmp_path / "mine.key"
    create_private_file(str(mine), new_private_key_pem(), "receipt key", OSError)
    monkeypatch.setenv("SENTINEL_RECEIPT_KEY_FILE", str(mine))
    forged = write(tmp_path, envelope(statement, FileReceiptSigner(str(mine))))
    # When the script verifies a receipt the agent signed, naming the operator's data directory
    code, _out, err = verify(capsys, forged, "--data", str(theirs))
    # Then the directory it named decides, and the agent's key is not trusted
    assert code == 1 and "RECEIPT_KEY_UNKNOWN" in err, err
