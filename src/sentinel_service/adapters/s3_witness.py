"""The witness in AWS (`ports.Witness`): an S3 bucket under Object Lock in compliance mode, which the state
table cannot feed (the writer re-verifies every checkpoint's tag) and nobody can rewrite within the
retention period (not even the account's root user).

Key layout:

    checkpoints/<project>/<candidate id, or _project>/<10^12 - seq, 12 digits>.json   one per chain and seq
    tampered/<project>/<candidate id, or _project>.json                              the first finding
    changed/<5-minute window, 10 digits>/<project>/<candidate id, or _project>       a chain moved then
    verifier/runs/<10^10 - window, 10 digits>                                         a verifier run ended

- A checkpoint's key is a function of its chain and seq alone, so a second, different checkpoint at the same
  seq meets If-None-Match and is refused (412): a fork is found at write time (`WitnessConflict`). Putting
  the hash or tag in the key would let one request find the newest checkpoint, but would let a fork sit
  beside the genuine record unnoticed, so `newest` costs two requests: one listing, one read.
- S3 lists keys in ascending order, so the reversed, zero-padded seq puts a chain's newest checkpoint first.
  The listing is of versions (ListObjectVersions, at most two entries), not of current objects: a delete
  marker would hide a locked record from ListObjectsV2 and turn a rollback into "the newest checkpoint", and
  a second version means someone wrote without If-None-Match. Either is a witness that cannot be trusted,
  and a read of it is a store fault (StoreUnavailable), never a pass.
- `tampered/` holds at most one object per chain, written create-only: the first finding stays.
- `changed/` and `verifier/runs/` are the scheduled verifier's index (sentinel_service.witnessing): which
  chains moved in which 5-minute window, and how far the last run got.

Faults (throttling, timeouts, access denied, a malformed or unverifiable record) raise StoreUnavailable."""

import json
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.integrity import ChainSeal
from sentinel_domain.ports import StreamRef, WitnessConflict
from sentinel_domain.times import format_time
from sentinel_service.adapters.witness_records import RECORD_FORMAT, Signer, signed

SEQ_LIMIT = 10**12  # seqs from 1 to 10^12 - 1 fit the 12-digit reversed key
WINDOW_LIMIT = 10**10
PROJECT_CHAIN = "_project"  # never a candidate id: those start with a letter or digit (identity.IDENT)
CONFLICT_ATTEMPTS = 3  # 409 ConditionalRequestConflict: a concurrent conditional write; S3 asks for a retry
CHECKPOINTS = "checkpoints/"
TAMPERED = "tampered/"
CHANGED = "changed/"
RUNS = "verifier/runs/"


class CheckpointRejected(ValueError):
    """A checkpoint whose tag does not verify under the chain key: it must never reach the witness."""


def chain_segment(ref: StreamRef) -> str:
    return ref.candidate_id if ref.candidate_id is not None else PROJECT_CHAIN


def ref_of(project: str, segment: str) -> StreamRef:
    return StreamRef(project, None if segment == PROJECT_CHAIN else segment)


def chain_prefix(ref: StreamRef) -> str:
    return f"{CHECKPOINTS}{ref.project}/{chain_segment(ref)}/"


def checkpoint_key(ref: StreamRef, seq: int) -> str:
    if not 1 <= seq < SEQ_LIMIT:
        raise CheckpointRejected(f"a witnessed seq is between 1 and {SEQ_LIMIT - 1}")
    return f"{chain_prefix(ref)}{SEQ_LIMIT - seq:012d}.json"


def seq_of_key(key: str) -> int:
    return SEQ_LIMIT - int(key.rsplit("/", 1)[1].removesuffix(".json"))


def tampered_key(ref: StreamRef) -> str:
    return f"{TAMPERED}{ref.project}/{chain_segment(ref)}.json"


def changed_prefix(window: int) -> str:
    return f"{CHANGED}{window:010d}/"


def changed_key(window: int, ref: StreamRef) -> str:
    return f"{changed_prefix(window)}{ref.project}/{chain_segment(ref)}"


def run_key(window: int) -> str:
    return f"{RUNS}{WINDOW_LIMIT - window:010d}"


class S3Witness:
    """`ports.Witness` on one Object Lock bucket. `seal` re-verifies every checkpoint written and read;
    `signer` (the witness writer and the verifier hold one, the API functions do not) signs each record.
    Appending without a signer is refused: an unsigned record could not be verified offline."""

    def __init__(
        self, s3_client: Any, bucket: str, seal: ChainSeal, signer: Signer | None = None, clock: Any = None
    ) -> None:
        self._s3 = s3_client
        self.bucket = bucket
        self._seal = seal
        self._signer = signer
        self._clock = clock

    def __repr__(self) -> str:
        return f"S3Witness({self.bucket!r})"

    # ---- ports.Witness -------------------------------------------------------------------------------------

    def newest(self, ref: StreamRef) -> dict[str, Any] | None:
        found = self._only_version(chain_prefix(ref))
        if found is None:
            return None
        key, record = found
        checkpoint = record.get("checkpoint")
        try:
            seq = seq_of_key(key)
        except ValueError:
            raise StoreUnavailable("the witness holds a key it never writes") from None
        if (
            not isinstance(checkpoint, dict)
            or record.get("kind") != "checkpoint"
            or not self._seal.checkpoint_verifies(checkpoint)
            or checkpoint["project"] != ref.project
            or checkpoint["candidate_id"] != ref.candidate_id
            or checkpoint["seq"] != seq
        ):
            raise StoreUnavailable("the witness holds a record the chain key does not vouch for")
        return dict(checkpoint)

    def append(self, checkpoint: dict[str, Any]) -> bool:
        if not self._seal.checkpoint_verifies(checkpoint):
            raise CheckpointRejected("the checkpoint's tag does not verify under the chain key")
        ref = StreamRef(checkpoint["project"], checkpoint["candidate_id"])
        key = checkpoint_key(ref, checkpoint["seq"])
        record = {"format": RECORD_FORMAT, "kind": "checkpoint", "checkpoint": dict(checkpoint)}
        if self._put_new(key, self._signed(record)):
            return True
        existing = self._only_version(key)
        if existing is None:
            raise StoreUnavailable("the witness refused a write to a key it does not show")
        if existing[1].get("checkpoint") == checkpoint:
            return False  # delivered twice (the stream and the pipe are at least once)
        raise WitnessConflict(f"another checkpoint is witnessed at seq {checkpoint['seq']}")

    def mark_tampered(self, ref: StreamRef, finding: dict[str, Any]) -> None:
        record = {
            "format": RECORD_FORMAT,
            "kind": "tampered",
            "project": ref.project,
            "candidate_id": ref.candidate_id,
            "finding": finding,
        }
        self._put_new(tampered_key(ref), self._signed(record))  # False: marked already, the first stays

    def tampered(self, ref: StreamRef) -> dict[str, Any] | None:
        found = self._first_version(tampered_key(ref))
        if found is None:
            return None
        record = found[1]
        if record.get("project") != ref.project or record.get("candidate_id") != ref.candidate_id:
            raise StoreUnavailable("the witness's tamper record names another chain")
        finding = record.get("finding")
        return dict(finding) if isinstance(finding, dict) else {"reason": "tampered"}

    # ---- the verifier's index ---------------------------------------------------------------------------

    def mark_changed(self, window: int, ref: StreamRef) -> bool:
        """Note that the chain moved in this window (an empty object; False when noted already)."""
        return self._put_new(changed_key(window, ref), b"")

    def changed(self, window: int) -> set[StreamRef]:
        refs = set()
        for key in self._keys(changed_prefix(window)):
            parts = key.split("/")
            if len(parts) == 4:
                refs.add(ref_of(parts[2], parts[3]))
        return refs

    def last_run(self) -> int | None:
        """The window of the verifier's latest completed run, or None before the first."""
        answer = self._call("list_objects_v2", Bucket=self.bucket, Prefix=RUNS, MaxKeys=1)
        contents = answer.get("Contents") or []
        if not contents:
            return None
        return WINDOW_LIMIT - int(str(contents[0]["Key"]).removeprefix(RUNS))

    def record_run(self, window: int) -> None:
        self._put_new(run_key(window), b"")

    # ---- S3 --------------------------------------------------------------------------------------------

    def _signed(self, record: dict[str, Any]) -> bytes:
        if self._signer is None:
            raise StoreUnavailable("no witness signing key: nothing is written unsigned")
        record["written_at"] = format_time(self._clock.now() if self._clock else _utc_now())
        return json.dumps(signed(record, self._signer), sort_keys=True, separators=(",", ":")).encode()

    def _put_new(self, key: str, body: bytes) -> bool:
        """Create-only: True when written, False when the key exists (412)."""
        for _attempt in range(CONFLICT_ATTEMPTS):
            try:
                self._s3.put_object(
                    Bucket=self.bucket,
                    Key=key,
                    Body=body,
                    IfNoneMatch="*",
                    ContentType="application/json",
                    # Object Lock buckets refuse a PUT without an integrity checksum.
                    ChecksumAlgorithm="SHA256",
                )
                return True
            except (BotoCoreError, ClientError) as error:
                code = _error_code(error)
                if code == "PreconditionFailed":
                    return False
                if code == "ConditionalRequestConflict":
                    continue
                raise StoreUnavailable(f"the witness could not be written: {code}") from None
        raise StoreUnavailable("the witness could not be written: concurrent writes kept conflicting")

    def _first_version(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """The record first written at exactly this key, read by version id. A delete marker on top still
        counts: the locked version under it is what was witnessed."""
        answer = self._call("list_object_versions", Bucket=self.bucket, Prefix=key, MaxKeys=2)
        versions = [v for v in answer.get("Versions", []) if v["Key"] == key]
        if not versions:
            return None
        return key, self._read(key, str(versions[-1]["VersionId"]))  # newest first: the last is the first

    def _only_version(self, prefix: str) -> tuple[str, dict[str, Any]] | None:
        """Like `_first_version`, but the first key must hold exactly one version and no delete marker: the
        witness writes each checkpoint once, create-only."""
        answer = self._call("list_object_versions", Bucket=self.bucket, Prefix=prefix, MaxKeys=2)
        versions, markers = answer.get("Versions", []), answer.get("DeleteMarkers", [])
        entries = sorted([*versions, *markers], key=lambda e: str(e["Key"]))
        if not entries:
            return None
        first = entries[0]["Key"]
        if sum(1 for e in entries if e["Key"] == first) > 1 or any(m["Key"] == first for m in markers):
            raise StoreUnavailable("the witness's newest record was overwritten or hidden: it is not trusted")
        (only,) = [v for v in versions if v["Key"] == first]
        return str(first), self._read(str(first), str(only["VersionId"]))

    def _read(self, key: str, version_id: str) -> dict[str, Any]:
        answer = self._call("get_object", Bucket=self.bucket, Key=key, VersionId=version_id)
        try:
            record = json.loads(answer["Body"].read())
        except (ValueError, OSError):
            raise StoreUnavailable("the witness holds a record that is not JSON") from None
        if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
            raise StoreUnavailable("the witness holds a record of an unknown format")
        return record

    def _keys(self, prefix: str) -> list[str]:
        keys: list[str] = []
        token: str | None = None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            answer = self._call("list_objects_v2", Bucket=self.bucket, Prefix=prefix, **extra)
            keys.extend(str(c["Key"]) for c in answer.get("Contents") or [])
            token = answer.get("NextContinuationToken")
            if not answer.get("IsTruncated") or not token:
                return keys

    def _call(self, operation: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._s3, operation)(**kwargs)
        except (BotoCoreError, ClientError) as error:
            raise StoreUnavailable(f"the witness could not be read: {_error_code(error)}") from None


def _error_code(error: Exception) -> str:
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code") or type(error).__name__)
    return type(error).__name__


def _utc_now() -> datetime:
    from datetime import UTC

    return datetime.now(UTC)
