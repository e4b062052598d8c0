"""The local halves of the seal: the chain key file (and the AWS secret, on moto), the witness file, the relay
that feeds it, and how the composition root wires them (AWS composition with a fake witness: the S3 adapter is
another branch's)."""

import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.integrity import ChainKeyUnavailable, CheckpointForged, checkpoint_outbox_entry
from sentinel_domain.memory import MemoryStore, MemoryWitness
from sentinel_domain.ports import StreamRef, WitnessConflict
from sentinel_runner.relay import EventLog, OutboxRelay
from sentinel_service.adapters.chain_key import (
    clear_chain_key_cache,
    create_key_file,
    load_chain_key,
    read_key_file,
)
from sentinel_service.adapters.file_witness import FileWitness, create_witness_file
from sentinel_service.compose import compose
from sentinel_service.settings import Settings
from support.world import PROJECT, SEAL

AT = "2026-11-29T12:00:00.000000Z"
CAND = StreamRef(PROJECT, "cand_1")


def checkpoint(seq: int, hash_: str = "ab" * 32, candidate_id: str | None = "cand_1") -> dict[str, Any]:
    return SEAL.checkpoint(PROJECT, candidate_id, seq, hash_, AT)


# ---- the chain key -----------------------------------------------------------------------------------------


def test_a_new_key_file_is_created_once_0600_and_read_back(tmp_path: Path) -> None:
    path = str(tmp_path / "keys" / "chain.key")
    assert create_key_file(path) is True
    assert create_key_file(path) is False  # never replaced
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert len(read_key_file(path)) == 32
    assert [p.name for p in (tmp_path / "keys").iterdir()] == ["chain.key"]  # no temporary left behind


def test_a_key_file_open_to_others_or_of_another_owner_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "chain.key"
    create_key_file(str(path))
    path.chmod(0o640)
    with pytest.raises(ChainKeyUnavailable, match="group or others") as refused:
        read_key_file(str(path))
    assert path.read_text().strip() not in str(refused.value)
    path.chmod(0o600)
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    os.chown(path, 4242, 4242)
    with pytest.raises(ChainKeyUnavailable, match="another user"):
        read_key_file(str(path))


def test_a_missing_short_or_symlinked_key_is_no_key(tmp_path: Path) -> None:
    with pytest.raises(ChainKeyUnavailable, match="cannot read"):
        read_key_file(str(tmp_path / "absent.key"))
    short = tmp_path / "short.key"
    short.write_text("ab" * 8)
    short.chmod(0o600)
    with pytest.raises(ChainKeyUnavailable, match="shorter"):
        read_key_file(str(short))
    real = tmp_path / "real.key"
    create_key_file(str(real))
    (tmp_path / "link.key").symlink_to(real)
    with pytest.raises(ChainKeyUnavailable):
        read_key_file(str(tmp_path / "link.key"))


def test_no_chain_key_configured_is_no_key_and_the_settings_name_where_it_is() -> None:
    settings = Settings.from_env(
        {
            "SENTINEL_CHAIN_KEY_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:1:secret:chain",
            "SENTINEL_WITNESS_BUCKET": "witness-bucket",
            "SENTINEL_WITNESS_SIGNING_KEY_ID": "alias/witness",
        }
    )
    assert (settings.chain_key_secret_arn, settings.witness_bucket, settings.witness_signing_key_id) == (
        "arn:aws:secretsmanager:us-east-1:1:secret:chain",
        "witness-bucket",
        "alias/witness",
    )
    with pytest.raises(ChainKeyUnavailable, match="no chain key configured"):
        load_chain_key(Settings.from_env({}))


def test_the_chain_key_secret_is_read_from_secrets_manager_and_a_missing_one_is_no_key() -> None:
    clear_chain_key_cache()
    with mock_aws():
        client = boto3.client("secretsmanager", region_name="us-east-1")
        arn = client.create_secret(Name="chain", SecretString="cd" * 32)["ARN"]
        settings = Settings.from_env({"SENTINEL_CHAIN_KEY_SECRET_ARN": arn, "AWS_REGION": "us-east-1"})
        assert load_chain_key(settings, secrets_client=client) == bytes.fromhex("cd" * 32)
        clear_chain_key_cache()
        missing = Settings.from_env(
            {"SENTINEL_CHAIN_KEY_SECRET_ARN": arn + "-gone", "AWS_REGION": "us-east-1"}
        )
        with pytest.raises(ChainKeyUnavailable, match="ResourceNotFoundException"):
            load_chain_key(missing, secrets_client=client)
    clear_chain_key_cache()


# ---- the witness file --------------------------------------------------------------------------------------


@pytest.fixture
def witness_file(tmp_path: Path) -> Path:
    path = tmp_path / "witness.jsonl"
    create_witness_file(path)
    return path


def test_the_witness_keeps_what_the_key_tagged_once_and_refuses_forgeries_and_forks(
    witness_file: Path,
) -> None:
    witness = FileWitness(witness_file, SEAL)
    assert witness.append(checkpoint(1)) is True
    assert witness.append(checkpoint(1)) is False
    with pytest.raises(CheckpointForged):
        witness.append(dict(checkpoint(2), mac="0" * 64))
    with pytest.raises(WitnessConflict):
        witness.append(checkpoint(1, "cd" * 32))
    assert witness.newest(CAND) == checkpoint(1)
    assert len(witness_file.read_text().splitlines()) == 1  # only the genuine one was written


def test_two_processes_share_one_witness_and_a_torn_line_is_passed_over(witness_file: Path) -> None:
    # Given two witnesses on one file (the server and an operator's command), one appending
    server, command = FileWitness(witness_file, SEAL), FileWitness(witness_file, SEAL)
    server.append(checkpoint(1))
    assert command.newest(CAND)["seq"] == 1
    # When a crash leaves half a line, then the other appends
    with witness_file.open("a") as out:
        out.write('{"checkpoint": {"project": "de')
    command.append(checkpoint(2))
    # Then the fragment is never read, and each sees the other's newest
    assert server.newest(CAND)["seq"] == 2
    assert FileWitness(witness_file, SEAL).newest(CAND)["seq"] == 2


def test_a_line_nobody_tagged_vouches_for_nothing(witness_file: Path) -> None:
    with witness_file.open("a") as out:
        out.write(json.dumps({"checkpoint": dict(checkpoint(9), mac="0" * 64)}) + "\n")
    assert FileWitness(witness_file, SEAL).newest(CAND) is None


def test_tamper_findings_are_kept_and_the_first_stays(witness_file: Path) -> None:
    witness = FileWitness(witness_file, SEAL)
    witness.mark_tampered(CAND, {"first_bad_seq": 3, "reason": "a fork"})
    witness.mark_tampered(CAND, {"first_bad_seq": 9, "reason": "later"})
    assert FileWitness(witness_file, SEAL).tampered(CAND) == {"first_bad_seq": 3, "reason": "a fork"}


@pytest.mark.parametrize("fault", ["missing", "truncated", "open to others"])
def test_a_witness_that_cannot_vouch_is_a_store_fault_never_an_empty_witness(
    witness_file: Path, fault: str
) -> None:
    witness = FileWitness(witness_file, SEAL)
    witness.append(checkpoint(1))
    witness.append(checkpoint(2))
    if fault == "missing":
        witness_file.unlink()
    elif fault == "truncated":
        witness_file.write_text(witness_file.read_text().splitlines()[0] + "\n")
    else:
        witness_file.chmod(0o666)
    with pytest.raises(StoreUnavailable):
        witness.newest(CAND)


# ---- the relay ---------------------------------------------------------------------------------------------


class Outbox:
    """pending_outbox / mark_relayed over a list, as the stores give them."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.relayed: list[str] = []

    def pending_outbox(self) -> list[dict[str, Any]]:
        return [i for i in self.items if i["sk"] not in self.relayed]

    def mark_relayed(self, pk: str, sk: str) -> bool:
        self.relayed.append(sk)
        return True


def item(sk: str, entry: dict[str, Any], pk: str = f"P#{PROJECT}#C#cand_1") -> dict[str, Any]:
    return {"pk": pk, "sk": sk, "kind": entry.get("kind", ""), "item": entry}


def test_the_relay_delivers_genuine_checkpoints_and_records_forged_ones_as_tampering(tmp_path: Path) -> None:
    witness, log = MemoryWitness(SEAL), EventLog(tmp_path / "events.jsonl")
    outbox = Outbox(
        [
            item("O#1", checkpoint_outbox_entry(checkpoint(1))),
            item("O#2", checkpoint_outbox_entry(dict(checkpoint(2), mac="0" * 64))),
            item(
                "O#3", checkpoint_outbox_entry(checkpoint(1, candidate_id="cand_2"))
            ),  # in another partition
            item("O#4", {"kind": "action", "outbox_id": "x"}),
        ]
    )
    assert OutboxRelay(outbox, log, witness=witness).run_once() == 4
    # Then only the genuine checkpoint of this chain reached the witness, the side effect reached the log,
    # and the chain is recorded as tampered at the forged checkpoint's seq
    assert witness.newest(CAND) == checkpoint(1)
    assert witness.newest(StreamRef(PROJECT, "cand_2")) is None
    assert witness.tampered(CAND)["first_bad_seq"] == 2
    assert [e["detail-type"] for e in log.events] == ["sentinel.action"]


def test_a_checkpoint_waits_in_the_outbox_while_the_witness_cannot_be_written() -> None:
    class Down(MemoryWitness):
        def append(self, checkpoint: dict[str, Any]) -> bool:
            raise StoreUnavailable("disk full")

    outbox = Outbox([item("O#1", checkpoint_outbox_entry(checkpoint(1)))])
    assert OutboxRelay(outbox, EventLog(), witness=Down(SEAL)).run_once() == 0
    assert outbox.relayed == []


# ---- composition -------------------------------------------------------------------------------------------


def test_aws_composition_builds_the_s3_witness_lazily_and_reads_it_only_where_it_must(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given AWS settings naming a witness bucket, and a stand-in for the S3 adapter (another branch's)
    built: list[tuple[Any, str, Any]] = []

    class S3Witness(MemoryWitness):
        def __init__(self, s3: Any, bucket: str, seal: Any) -> None:
            super().__init__(seal)
            built.append((s3, bucket, seal))

    monkeypatch.setitem(
        sys.modules, "sentinel_service.adapters.s3_witness", types.SimpleNamespace(S3Witness=S3Witness)
    )
    settings = Settings.from_env({"SENTINEL_RUNTIME": "aws_lambda", "SENTINEL_WITNESS_BUCKET": "witness-b"})
    services = compose(settings, store=MemoryStore(), seal=SEAL, s3="s3-client")
    gate = services.gate
    # Then nothing is built until used; advisory reads skip the witness, the gate never appends to it itself
    assert built == [] and not gate.chain.reads_witness and not gate.chain.appends_witness
    assert services.witness.newest(CAND) is None
    assert built == [("s3-client", "witness-b", SEAL)]


def test_without_a_witness_or_a_key_the_aws_gate_refuses_every_write() -> None:
    from sentinel_domain.errors import Refusal

    services = compose(Settings.from_env({"SENTINEL_RUNTIME": "aws_lambda"}), store=MemoryStore(), seal=SEAL)
    with pytest.raises(StoreUnavailable, match="no witness is configured"):
        services.witness.newest(CAND)
    with pytest.raises(Refusal) as refused:
        services.gate.create_project(PROJECT)
    assert refused.value.code == "STATE_UNAVAILABLE"
    assert services.store.snapshot()[0] == []


# ---- the local runner's data directory ---------------------------------------------------------------------


def test_a_store_whose_chain_key_or_witness_is_gone_is_refused_never_reopened_blank(tmp_path: Path) -> None:
    from sentinel_runner.data_dir import open_data_dir
    from sentinel_runner.runtime import open_embedded

    # Given a store made by the local runner (its chain key and witness made with it)
    data = open_data_dir(tmp_path / "data")
    open_embedded(data, environ={}).gate.create_project(PROJECT)
    assert (data.chain_key.stat().st_mode & 0o777, data.witness.exists()) == (0o600, True)
    # When its witness is gone, then its chain key
    data.witness.rename(tmp_path / "witness.moved")
    with pytest.raises(StoreUnavailable, match="witness"):
        open_embedded(data, environ={})
    data.chain_key.unlink()
    # Then the store is refused each time: a new key or an empty witness would vouch for anything
    with pytest.raises(ChainKeyUnavailable, match="missing"):
        open_embedded(data, environ={})


def test_a_chain_the_witness_knows_is_never_created_again() -> None:
    from sentinel_domain.errors import Refusal
    from support.world import World

    # Given a project whose whole partition was deleted from the store, its checkpoints in the witness
    world = World()
    del world.store.streams[StreamRef(PROJECT)]
    # When the operator creates it again
    with pytest.raises(Refusal) as refused:
        world.gate.create_project(PROJECT)
    # Then it is refused: the witness names the lost chain
    assert refused.value.code == "STATE_UNAVAILABLE" and "seq 1" in refused.value.detail
    assert StreamRef(PROJECT) not in world.store.streams
