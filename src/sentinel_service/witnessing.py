"""The witness writer and the scheduled chain verifier: the AWS half of DOMAIN.md rule 25 (issue 13).

The writer is fed by the state table's stream through an EventBridge pipe (sentinel_infra/constructs/
integrity.py), a batch of DynamoDB stream records at a time:

- a checkpoint outbox item (written in the same transaction as the accepted write it checkpoints) is
  re-verified under the chain key and appended to the witness. One whose tag does not verify was written by
  someone who can write the table but does not hold the key: it is dropped, counted (ForgedCheckpoints,
  which pages) and logged by its chain and seq only. It is never retried: it will never verify.
- any other change to a chain's events or head (the gate's own, or a tamperer's: the stream records every
  write to the table, whoever makes it) notes the chain as changed in the current 5-minute window, which is
  how the verifier finds the chains to check without reading the whole table.

A fault (S3 or KMS unavailable) raises, and the pipe retries the whole batch: every step is idempotent (an
identical checkpoint appends as False, a change note exists already).

The verifier runs every 5 minutes: it reads the windows since its last completed run (at most a day back),
verifies each chain noted there against the witness (`integrity.verify_against_witness`), marks one that
fails as tampered in the witness and counts it (TamperedChains, which pages). A chain it could not read fails
the run (so Lambda's error alarm fires) and the run is not recorded: the next one covers the same windows."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.integrity import (
    ChainKeyUnavailable,
    ChainSeal,
    checkpoint_from_outbox,
    verify_against_witness,
)
from sentinel_domain.ports import Clock, StateStore, StreamRef, WitnessConflict
from sentinel_domain.times import format_time
from sentinel_service import names

if TYPE_CHECKING:
    from sentinel_service.adapters.s3_witness import S3Witness
    from sentinel_service.settings import Settings

WINDOW_SECONDS = 300  # the verifier's schedule: rate(5 minutes)
MAX_CATCH_UP_WINDOWS = 288  # one day: a verifier stopped for longer starts again from a day back
NOTED_CACHE_LIMIT = 10_000  # change notes this container remembers writing (one PUT per chain per window)
CHAIN_SORT_KEYS = ("E#", "HEAD")  # the items of a chain: events, their facts, and the head

log = logging.getLogger("sentinel.witness")
Emit = Callable[[dict[str, Any]], None]


def window_of(instant: datetime) -> int:
    return int(instant.timestamp()) // WINDOW_SECONDS


def emf(metrics: dict[str, int], now_ms: int | None = None) -> dict[str, Any]:
    """One embedded-metric-format document: counts in the integrity namespace, dimension Service."""
    return {
        "_aws": {
            "Timestamp": now_ms if now_ms is not None else int(time.time() * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": names.INTEGRITY_NAMESPACE,
                    "Dimensions": [[names.INTEGRITY_DIMENSION]],
                    "Metrics": [{"Name": name, "Unit": "Count"} for name in metrics],
                }
            ],
        },
        names.INTEGRITY_DIMENSION: names.SERVICE,
        **metrics,
    }


def print_emf(document: dict[str, Any]) -> None:
    print(json.dumps(document, separators=(",", ":")), file=sys.stdout, flush=True)


def ref_of_partition(pk: str) -> StreamRef | None:
    if not pk.startswith("P#"):
        return None
    project, _, candidate_id = pk[2:].partition("#C#")
    return StreamRef(project, candidate_id or None) if project else None


def _text(image: dict[str, Any], name: str) -> str:
    value = image.get(name)
    return str(value.get("S", "")) if isinstance(value, dict) else ""


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@dataclass
class WriterReport:
    appended: int = 0
    duplicates: int = 0
    forged: int = 0
    forks: int = 0
    changed: int = 0

    def metrics(self) -> dict[str, int]:
        return {
            names.WITNESSED_CHECKPOINTS_METRIC: self.appended,
            names.FORGED_CHECKPOINTS_METRIC: self.forged,
            names.TAMPERED_CHAINS_METRIC: self.forks,
        }


@dataclass
class WitnessWriter:
    witness: S3Witness
    seal: ChainSeal
    clock: Clock
    emit: Emit = print_emf
    _noted: set[tuple[int, StreamRef]] = field(default_factory=set)

    def handle(self, records: Iterable[dict[str, Any]]) -> WriterReport:
        report = WriterReport()
        for record in records:
            self._one(record, report)
        self.emit(emf(report.metrics()))
        return report

    def _one(self, record: dict[str, Any], report: WriterReport) -> None:
        dynamodb = record.get("dynamodb") if isinstance(record, dict) else None
        if not isinstance(dynamodb, dict):
            return
        keys, image = dynamodb.get("Keys") or {}, dynamodb.get("NewImage") or {}
        sk = _text(keys, names.SK)
        if sk.startswith("O#"):
            if _text(image, "outbox_kind") == names.OUTBOX_KIND_CHECKPOINT:
                self._checkpoint(_text(keys, names.PK), _text(image, "item"), report)
            return
        ref = ref_of_partition(_text(keys, names.PK))
        if ref is not None and sk.startswith(CHAIN_SORT_KEYS):
            self._note_changed(ref, report)

    def _checkpoint(self, pk: str, item: str, report: WriterReport) -> None:
        # The gate's outbox entry: the checkpoint's fields and its kind (integrity.checkpoint_outbox_entry)
        checkpoint = checkpoint_from_outbox(_json_object(item))
        if checkpoint is None or not self.seal.checkpoint_verifies(checkpoint):
            report.forged += 1
            # Where it was found, never what it carried: no tag, and never the key.
            seq = checkpoint.get("seq") if checkpoint else None
            log.warning("forged checkpoint dropped: partition=%s seq=%r", pk, seq)
            return
        ref = StreamRef(checkpoint["project"], checkpoint["candidate_id"])
        try:
            written = self.witness.append(checkpoint)
        except WitnessConflict as conflict:
            report.forks += 1
            log.error("fork refused by the witness: project=%s chain=%s", ref.project, ref.candidate_id)
            self.witness.mark_tampered(ref, self._finding(checkpoint["seq"], str(conflict)))
            return
        if written:
            report.appended += 1
        else:
            report.duplicates += 1

    def _note_changed(self, ref: StreamRef, report: WriterReport) -> None:
        window = window_of(self.clock.now())
        if (window, ref) in self._noted:
            return
        self.witness.mark_changed(window, ref)
        if len(self._noted) >= NOTED_CACHE_LIMIT:
            self._noted.clear()
        self._noted.add((window, ref))
        report.changed += 1

    def _finding(self, seq: int, reason: str) -> dict[str, Any]:
        return {
            "first_bad_seq": seq,
            "reason": f"the gate committed a checkpoint that forks the witnessed chain: {reason}",
            "detected_at": format_time(self.clock.now()),
            "detected_by": names.WITNESS_WRITER_FUNCTION,
        }


@dataclass
class VerifierReport:
    windows: tuple[int, int]
    verified: list[StreamRef] = field(default_factory=list)
    tampered: list[StreamRef] = field(default_factory=list)
    unreadable: list[StreamRef] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "windows": list(self.windows),
            "verified": len(self.verified),
            "tampered": [[r.project, r.candidate_id] for r in self.tampered],
            "unreadable": len(self.unreadable),
        }


@dataclass
class ChainVerifier:
    store: StateStore
    witness: S3Witness
    clock: Clock
    emit: Emit = print_emf
    seal: ChainSeal | None = None  # every event's and head's tag is checked too (issue 13, the local half)

    def run(self) -> VerifierReport:
        now = self.clock.now()
        current = window_of(now)
        last = self.witness.last_run()
        start = current - MAX_CATCH_UP_WINDOWS if last is None else max(last, current - MAX_CATCH_UP_WINDOWS)
        report = VerifierReport((start, current))
        refs: set[StreamRef] = set()
        for window in range(start, current + 1):
            refs |= self.witness.changed(window)
        for ref in sorted(refs, key=lambda r: (r.project, r.candidate_id or "")):
            self._verify(ref, now, report)
        self.emit(
            emf(
                {
                    names.VERIFIED_CHAINS_METRIC: len(report.verified),
                    names.TAMPERED_CHAINS_METRIC: len(report.tampered),
                }
            )
        )
        if report.unreadable:
            raise StoreUnavailable(
                f"{len(report.unreadable)} chains could not be verified; the run is redone"
            )
        self.witness.record_run(current)
        return report

    def _verify(self, ref: StreamRef, now: datetime, report: VerifierReport) -> None:
        try:
            verification = verify_against_witness(self.store, self.witness, ref, self.seal)
            if verification.valid:
                report.verified.append(ref)
                return
            finding = {
                "first_bad_seq": verification.first_bad_seq,
                "reason": verification.reason,
                "length": verification.length,
                "detected_at": format_time(now),
                "detected_by": names.CHAIN_VERIFIER_FUNCTION,
            }
            self.witness.mark_tampered(ref, finding)
            # Where advisory decision reads (which do not read the witness) see it: on the chain's HEAD.
            mark_head = getattr(self.store, "mark_head_tampered", None)
            if mark_head is not None:
                mark_head(ref, finding)
        except StoreUnavailable:
            report.unreadable.append(ref)
            log.error("chain unreadable: project=%s chain=%s", ref.project, ref.candidate_id)
            return
        report.tampered.append(ref)
        log.error(
            "chain tampered: project=%s chain=%s first_bad_seq=%s",
            ref.project,
            ref.candidate_id,
            verification.first_bad_seq,
        )


# ---- Lambda ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Integrity:
    """What the two functions need, built once per container."""

    writer: WitnessWriter
    verifier: ChainVerifier


def writer_handler(parts: Callable[[], Integrity]) -> Callable[[Any, Any], dict[str, Any]]:
    def handler(event: Any, _context: Any) -> dict[str, Any]:
        records = event if isinstance(event, list) else (event or {}).get("Records", [])
        report = parts().writer.handle(records)
        return {"appended": report.appended, "duplicates": report.duplicates, "forged": report.forged}

    return handler


def verifier_handler(parts: Callable[[], Integrity]) -> Callable[[Any, Any], dict[str, Any]]:
    def handler(_event: Any, _context: Any) -> dict[str, Any]:
        return parts().verifier.run().as_dict()

    return handler


def load_chain_seal(settings: Settings, secrets_client: Any) -> ChainSeal:
    """The chain key from its Secrets Manager secret: 64 hex characters (32 bytes) as the stack generates it,
    or raw text of at least 32 bytes. Raises ChainKeyUnavailable; the message never holds the key."""
    if not settings.chain_key_secret_arn:
        raise ChainKeyUnavailable(f"{names.ENV_CHAIN_KEY_SECRET_ARN} is not set")
    try:
        material = secrets_client.get_secret_value(SecretId=settings.chain_key_secret_arn)["SecretString"]
    except Exception as error:  # any failure: no key, nothing vouched for
        raise ChainKeyUnavailable(f"the chain key could not be read: {type(error).__name__}") from None
    text = str(material).strip()
    try:
        key = bytes.fromhex(text) if len(text) % 2 == 0 else text.encode()
    except ValueError:
        key = text.encode()
    return ChainSeal(key)


def build_integrity(settings: Settings, *, dynamodb: Any, s3: Any, kms: Any, secrets: Any) -> Integrity:
    from sentinel_service.adapters.dynamodb_store import DynamoStateStore
    from sentinel_service.adapters.s3_witness import S3Witness
    from sentinel_service.adapters.system_ports import SystemClock
    from sentinel_service.adapters.witness_records import KmsSigner

    if not settings.witness_bucket or not settings.witness_signing_key_id:
        raise StoreUnavailable(
            f"{names.ENV_WITNESS_BUCKET} and {names.ENV_WITNESS_SIGNING_KEY_ID} are needed"
        )
    seal = load_chain_seal(settings, secrets)
    clock = SystemClock()
    signer = KmsSigner(kms, settings.witness_signing_key_id)
    witness = S3Witness(s3, settings.witness_bucket, seal, signer=signer, clock=clock)
    store = DynamoStateStore(dynamodb, settings.state_table)
    return Integrity(WitnessWriter(witness, seal, clock), ChainVerifier(store, witness, clock, seal=seal))


@lru_cache(maxsize=1)
def lambda_integrity() -> Integrity:
    """The container's writer and verifier, from its environment (a failure is retried on the next call)."""
    import boto3
    from botocore.config import Config

    from sentinel_service.compose import API_TIMEOUTS, dynamodb_client
    from sentinel_service.settings import Settings

    settings = Settings.from_env()
    config = Config(**API_TIMEOUTS)
    return build_integrity(
        settings,
        dynamodb=dynamodb_client(settings),
        s3=boto3.client("s3", region_name=settings.region, config=config),
        kms=boto3.client("kms", region_name=settings.region, config=config),
        secrets=boto3.client("secretsmanager", region_name=settings.region, config=config),
    )
