"""The AWS witness end to end on moto (in-process): the state table's stream feeds the witness writer as the
pipe would, the scheduled verifier is run directly (moto's scheduler does not fire), and someone with write
access to the table, but not to the chain key, the bucket or the signing key, tampers with it.

The checkpoint outbox items are put beside the flow's writes here, with the fixed test key, as the accepted
writes' transactions carry them (that half of issue 13 lands separately); everything after the table is the
deployed code: the stream records, the writer, the S3 witness, the verifier and its metrics."""

import json
import logging
from typing import Any

import pytest

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.ports import StreamRef
from sentinel_service import names
from sentinel_service.adapters.s3_witness import checkpoint_key
from sentinel_service.settings import Settings
from sentinel_service.witnessing import (
    WINDOW_SECONDS,
    Integrity,
    build_integrity,
    verifier_handler,
    writer_handler,
)
from support.moto_world import DynamoWorld, Flow, Tables, scan
from support.witness_world import (
    SEAL,
    aws_clients,
    checkpoint_outbox_item,
    signing_key,
    stream_record,
    witness_bucket,
)
from support.world import PROJECT


class Deployment:
    """The ready flow on a fresh table, the witness bucket, and the two functions built by the composition
    the Lambda handlers use (`build_integrity`), with the chain key in a Secrets Manager secret."""

    def __init__(self, moto: Any, tables: Tables, name: str) -> None:
        import boto3

        self.world = DynamoWorld(moto, tables)
        for step in Flow.STEPS:
            assert self.world.step(step).accepted, step
        self.candidate = StreamRef(PROJECT, self.world.flow.candidate_id)
        self.s3, kms = aws_clients()
        self.bucket = witness_bucket(self.s3, f"witness-{name}")
        secrets = boto3.client("secretsmanager", region_name="us-east-1")
        secret = secrets.create_secret(Name=f"chain-key-{name}", SecretString=SEAL.key.hex())["ARN"]
        settings = Settings.from_env(
            {
                "SENTINEL_STATE_TABLE": self.world.table,
                "SENTINEL_CHAIN_KEY_SECRET_ARN": secret,
                "SENTINEL_WITNESS_BUCKET": self.bucket,
                "SENTINEL_WITNESS_SIGNING_KEY_ID": signing_key(kms),
                "AWS_REGION": "us-east-1",
            }
        )
        self.parts = build_integrity(settings, dynamodb=moto, s3=self.s3, kms=kms, secrets=secrets)
        self.metrics: list[dict[str, Any]] = []
        for part in (self.parts.writer, self.parts.verifier):
            part.clock = self.world.clock
            part.witness._clock = self.world.clock  # type: ignore[attr-defined]
            part.emit = self.metrics.append
        self.write_handler = writer_handler(lambda: self.parts)
        self.verify_handler = verifier_handler(lambda: self.parts)
        self.pending: list[dict[str, Any]] = []  # what the stream holds for the pipe's next delivery
        self.client = moto

    @property
    def integrity(self) -> Integrity:
        return self.parts

    def commit_checkpoints(self) -> None:
        """The checkpoint of every head the flow committed, as each write's transaction carries it; and the
        stream's records of the flow's writes."""
        for item in scan(self.client, self.world.table):
            self.pending.append(stream_record("INSERT", item))
            if item["sk"]["S"].startswith("E#") and "#" not in item["sk"]["S"][2:]:
                pk = item["pk"]["S"]
                project, _, candidate = pk[2:].partition("#C#")
                ref = StreamRef(project, candidate or None)
                seq, hash_, at = int(item["seq"]["N"]), item["hash"]["S"], item["at"]["S"]
                self.put(
                    checkpoint_outbox_item(ref, SEAL.checkpoint(project, ref.candidate_id, seq, hash_, at))
                )

    def put(self, item: dict[str, Any], event_name: str = "MODIFY") -> None:
        self.client.put_item(TableName=self.world.table, Item=item)
        self.pending.append(stream_record(event_name, item))

    def delete(self, item: dict[str, Any]) -> None:
        key = {"pk": item["pk"], "sk": item["sk"]}
        self.client.delete_item(TableName=self.world.table, Key=key)
        self.pending.append(stream_record("REMOVE", item))

    def relay(self) -> dict[str, Any]:
        """One delivery of the stream's new records to the witness writer, as the pipe invokes it."""
        records, self.pending = self.pending, []
        return self.write_handler(records, None)

    def verify(self) -> dict[str, Any]:
        self.world.clock.advance(WINDOW_SECONDS)
        return self.verify_handler({"source": "aws.events", "detail-type": "Scheduled Event"}, None)

    def head(self, ref: StreamRef) -> dict[str, Any]:
        pk = f"P#{ref.project}" + (f"#C#{ref.candidate_id}" if ref.candidate_id else "")
        return self.client.get_item(
            TableName=self.world.table, Key={"pk": {"S": pk}, "sk": {"S": "HEAD"}}, ConsistentRead=True
        )["Item"]

    def emitted(self, metric: str) -> int:
        return sum(int(m.get(metric, 0)) for m in self.metrics)

    def witnessed(self, ref: StreamRef) -> dict[str, Any] | None:
        return self.parts.verifier.witness.newest(ref)


@pytest.fixture
def deployment(moto: Any, tables: Tables, request: pytest.FixtureRequest) -> Deployment:
    name = request.node.name.replace("_", "-").lower()[-40:].strip("-")
    made = Deployment(moto, tables, name)
    made.commit_checkpoints()
    made.relay()
    return made


def test_a_rolled_back_chain_is_found_by_one_verifier_run_marked_and_counted(deployment: Deployment) -> None:
    # Given the ready flow witnessed through the stream, and a first verifier run that finds nothing
    d = deployment
    length = int(d.head(d.candidate)["seq"]["N"])
    assert d.witnessed(d.candidate)["seq"] == length  # type: ignore[index]
    first = d.verify()
    assert first["verified"] >= 2 and first["tampered"] == []
    assert d.emitted(names.TAMPERED_CHAINS_METRIC) == 0

    # When someone with write access to the table deletes the newest event and rolls HEAD back to the
    # previous genuine head (its seq and hash), and the stream hands those writes to the writer
    pk = f"P#{PROJECT}#C#{d.candidate.candidate_id}"
    previous = d.client.get_item(
        TableName=d.world.table, Key={"pk": {"S": pk}, "sk": {"S": f"E#{length - 1:010d}"}}
    )["Item"]
    # (its tag too: copied from the checkpoint item the gate wrote with that head, which the table keeps)
    tagged = [
        json.loads(i["item"]["S"])
        for i in scan(d.client, d.world.table)
        if i["pk"]["S"] == pk and i.get("outbox_kind", {}).get("S") == "checkpoint"
    ]
    older = next(c for c in tagged if c["seq"] == length - 1)
    d.delete({"pk": {"S": pk}, "sk": {"S": f"E#{length:010d}"}})
    head = d.head(d.candidate)
    head["seq"], head["hash"], head["mac"] = {"N": str(length - 1)}, previous["hash"], {"S": older["mac"]}
    d.put(head)
    assert d.relay()["forged"] == 0

    # Then one run of the verifier finds the chain, marks it tampered in the witness, and counts it
    report = d.verify()
    assert report["tampered"] == [[PROJECT, d.candidate.candidate_id]]
    finding = d.parts.verifier.witness.tampered(d.candidate)
    assert finding is not None and finding["detected_by"] == names.CHAIN_VERIFIER_FUNCTION
    assert finding["first_bad_seq"] == length
    assert d.emitted(names.TAMPERED_CHAINS_METRIC) == 1
    # And the project chain, untouched, is not marked
    assert d.parts.verifier.witness.tampered(StreamRef(PROJECT)) is None


def test_a_forged_checkpoint_item_never_reaches_the_bucket(
    deployment: Deployment, caplog: pytest.LogCaptureFixture
) -> None:
    # Given the witness holds the candidate chain's genuine newest checkpoint
    d = deployment
    genuine = d.witnessed(d.candidate)
    assert genuine is not None
    # When someone with write access to the table writes a checkpoint outbox item for a seq beyond it, with a
    # tag made without the chain key
    forged = {**genuine, "seq": genuine["seq"] + 1, "hash": "f" * 64, "mac": "0" * 64}
    d.put(checkpoint_outbox_item(d.candidate, forged), "INSERT")
    with caplog.at_level(logging.WARNING, logger="sentinel.witness"):
        delivered = d.relay()
    # Then the writer drops it, counts it, and logs where it was found without its tag
    assert delivered["forged"] == 1 and delivered["appended"] == 0
    assert d.emitted(names.FORGED_CHECKPOINTS_METRIC) == 1
    assert "forged checkpoint" in caplog.text and "0" * 64 not in caplog.text
    # And nothing was written for that seq: the witness's newest is still the genuine one
    listed = d.s3.list_objects_v2(Bucket=d.bucket, Prefix=checkpoint_key(d.candidate, forged["seq"]))
    assert listed.get("KeyCount", 0) == 0
    assert d.witnessed(d.candidate) == genuine


def test_a_fork_committed_after_a_rollback_is_refused_and_marked(deployment: Deployment) -> None:
    # Given the candidate chain witnessed up to its head
    d = deployment
    genuine = d.witnessed(d.candidate)
    assert genuine is not None
    # When a checkpoint tagged under the chain key arrives for the same seq with another hash (the gate wrote
    # a new event on a rolled-back chain)
    fork = SEAL.checkpoint(PROJECT, d.candidate.candidate_id, genuine["seq"], "e" * 64, genuine["at"])
    d.put({**checkpoint_outbox_item(d.candidate, fork), "sk": {"S": "O#checkpoint-fork"}}, "INSERT")
    d.relay()
    # Then the witness keeps the first, and the chain is marked tampered and counted
    assert d.witnessed(d.candidate) == genuine
    finding = d.parts.writer.witness.tampered(d.candidate)
    assert finding is not None and finding["first_bad_seq"] == genuine["seq"]
    assert d.emitted(names.TAMPERED_CHAINS_METRIC) == 1


def test_a_run_that_cannot_read_a_chain_fails_and_is_redone(deployment: Deployment) -> None:
    # Given a chain noted as changed, and the state table unreadable
    d = deployment
    verifier = d.parts.verifier

    class Down:
        def load(self, _ref: Any) -> Any:
            raise StoreUnavailable("injected")

    real, verifier.store = verifier.store, Down()  # type: ignore[assignment]
    # When the verifier runs, Then it fails (Lambda's error alarm) and does not record the run
    with pytest.raises(StoreUnavailable):
        d.verify()
    assert verifier.witness.last_run() is None
    # And the next run, with the table back, covers the same chains
    verifier.store = real
    assert d.verify()["verified"] >= 2


def test_advisory_reads_hold_from_the_verifiers_run_on_even_from_a_held_chain(deployment: Deployment) -> None:
    """In AWS the hook's decision read does not read the witness, and a Lambda container holds the chains it
    verified (sentinel_domain.usecases.project_reads): the verifier's finding reaches those reads on the
    chain's HEAD, which every decision read gets anyway."""
    from sentinel_domain.usecases import Gate
    from sentinel_domain.usecases.project_reads import ChainCache
    from support.world import RECEIPT_SIGNER, REQUESTER

    d = deployment
    store = d.parts.verifier.store
    lambda_gate = Gate(
        store,
        d.world.clock,
        d.world.ids,
        seal=SEAL,
        witness=d.parts.verifier.witness,
        reads_witness=False,
        appends_witness=False,
        chain_cache=ChainCache(),
        receipt_signer=RECEIPT_SIGNER,
    )

    def read() -> set[str]:
        view = lambda_gate.decision(PROJECT, d.candidate.candidate_id, REQUESTER, None)
        return {f["code"] for f in view.as_json()["findings"]}

    # Given a container that read the candidate's decision and holds its verified chain
    assert "STATE_TAMPERED" not in read()
    assert lambda_gate.chain_cache.get(d.candidate) is not None
    # When the chain is rolled back to an earlier genuine head (its tag copied from a checkpoint item)
    length = int(d.head(d.candidate)["seq"]["N"])
    pk = f"P#{PROJECT}#C#{d.candidate.candidate_id}"
    previous = d.client.get_item(
        TableName=d.world.table, Key={"pk": {"S": pk}, "sk": {"S": f"E#{length - 1:010d}"}}
    )["Item"]
    older = next(
        json.loads(i["item"]["S"])
        for i in scan(d.client, d.world.table)
        if i["pk"]["S"] == pk
        and i.get("outbox_kind", {}).get("S") == "checkpoint"
        and json.loads(i["item"]["S"])["seq"] == length - 1
    )
    d.delete({"pk": {"S": pk}, "sk": {"S": f"E#{length:010d}"}})
    head = d.head(d.candidate)
    head["seq"], head["hash"], head["mac"] = {"N": str(length - 1)}, previous["hash"], {"S": older["mac"]}
    d.put(head)
    d.relay()
    # Then until the verifier runs, an advisory read sees a chain that verifies on its own (the window)
    assert "STATE_TAMPERED" not in read()
    # And once it has run, the chain's HEAD carries its finding, and every advisory read holds
    assert d.verify()["tampered"] == [[PROJECT, d.candidate.candidate_id]]
    assert "tamper_finding" in d.head(d.candidate)
    assert "STATE_TAMPERED" in read()
    assert "STATE_TAMPERED" in read()  # and it is never held: read in full again
    assert lambda_gate.chain_cache.get(d.candidate) is None
