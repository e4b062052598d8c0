"""In-memory implementations of the ports: the reference fakes for unit tests and the scenario harness.

They keep DynamoDB's contract where the core relies on it: a conditional append either writes everything
or nothing, and a lost race raises StoreConflict."""

import copy
import json
import threading
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from .errors import Refusal, StoreConflict
from .forge_checks import CheckRecord
from .integrity import CHECKPOINT_KIND, ChainSeal, CheckpointForged, WitnessBook
from .notifications import OUTBOX_KIND as NOTIFICATION_KIND
from .ports import Append, ClaimTaken, IdempotencyRecord, Stream, StreamRef


class FixedClock:
    def __init__(self, start: datetime) -> None:
        self.current = start

    def now(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


class SequentialIds:
    def __init__(self) -> None:
        self.counter = 0

    def new_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}_{self.counter:08d}"


class MemoryStore:
    def __init__(self) -> None:
        self.streams: dict[StreamRef, Stream] = {}
        self.claims: dict[str, dict[str, dict[str, Any]]] = {}
        self.forge_index: dict[str, str] = {}  # repository key -> project (sentinel_domain.ports.ForgeIndex)
        self.idempotency: dict[tuple[StreamRef, str, str], IdempotencyRecord] = {}
        self.outbox: list[dict[str, Any]] = []  # side effects
        # The checkpoint items every sealed append carries, kept apart from the side effects (the outbox the
        # rules speak of): a relay would move them to the witness.
        self.checkpoint_items: list[dict[str, Any]] = []
        # Notifications (sentinel_domain.notifications) ride the same outbox, kept apart from the actions'
        # side effects so that a count of side effects stays a count of executions.
        self.notifications: list[dict[str, Any]] = []
        self.loads = 0
        self.head_loads = 0
        # Each candidate's published forge check (sentinel_domain.forge_checks), beside the chains.
        self.check_records: dict[tuple[str, str], CheckRecord] = {}
        self._lock = threading.Lock()

    def snapshot(self) -> tuple[Any, ...]:
        """Everything a request could change: chains, outbox, idempotency records, claims (a refused request
        must leave it equal)."""
        with self._lock:
            return (
                sorted(
                    (r.project, r.candidate_id or "", s.seq, len(s.events), len(s.facts))
                    for r, s in self.streams.items()
                ),
                len(self.outbox),
                len(self.notifications),
                sorted(
                    (r.project, r.candidate_id or "", scope, key, rec.status)
                    for (r, scope, key), rec in self.idempotency.items()
                ),
                json.dumps(self.claims, sort_keys=True),
                json.dumps(self.forge_index, sort_keys=True),
            )

    def load(self, ref: StreamRef) -> Stream | None:
        with self._lock:
            self.loads += 1
            stream = self.streams.get(ref)
            return copy.deepcopy(stream) if stream else None

    def load_head(self, ref: StreamRef) -> dict[str, Any] | None:
        with self._lock:
            self.head_loads += 1
            stream = self.streams.get(ref)
            return copy.deepcopy(stream.head) if stream and stream.head is not None else None

    def append(self, a: Append) -> None:
        with self._lock:
            current = self.streams.get(a.ref)
            if (current.seq if current else 0) != a.expected_seq:
                raise StoreConflict()
            head = current.head if current else {}
            if a.require_plan_digest is not None and (head or {}).get("plan_digest") != a.require_plan_digest:
                raise StoreConflict()
            if a.require_approval_after is not None and not (
                (head or {}).get("approval_valid_until", "") > a.require_approval_after
            ):
                raise StoreConflict()
            if a.require_project_seq is not None:
                project = self.streams.get(StreamRef(a.ref.project))
                if (project.seq if project else 0) != a.require_project_seq:
                    raise StoreConflict()
            if a.claim:
                taken = self.claims.get(a.ref.project, {}).get(a.claim[0])
                if taken:
                    raise ClaimTaken(taken["candidate_id"])
            if a.idempotency is not None:
                held = self.idempotency.get((a.idempotency.ref, a.idempotency.scope, a.idempotency.key))
                if (
                    held is None
                    or held.status != "in_progress"
                    or held.caller != a.idempotency.caller
                    or held.claimed_at != a.idempotency.claimed_at
                ):
                    raise StoreConflict()
            stream = copy.deepcopy(current) if current else Stream(a.ref, [], {}, None)
            stream.events.append(dict(a.event))
            stream.facts[a.event["seq"]] = a.fact_text
            stream.head = dict(a.head)
            self.streams[a.ref] = stream
            for entry in copy.deepcopy(a.outbox):
                kind = entry.get("kind")
                kept = (
                    self.checkpoint_items
                    if kind == CHECKPOINT_KIND
                    else self.notifications
                    if kind == NOTIFICATION_KIND
                    else self.outbox
                )
                kept.append(entry)
            if a.idempotency is not None:
                rec = a.idempotency
                self.idempotency[(rec.ref, rec.scope, rec.key)] = replace(rec)
            if a.claim:
                fact = json.loads(a.fact_text)
                self.claims.setdefault(a.ref.project, {})[a.claim[0]] = {
                    "candidate_id": a.claim[1],
                    "subject": fact["subject"],
                    "revision": fact["revision"],
                    "environment": fact["environment"],
                    "created_at": fact["recorded_at"],
                }

    def forge_claim(self, key: str, project: str) -> str:
        with self._lock:
            return self.forge_index.setdefault(key, project)

    def forge_owner(self, key: str) -> str | None:
        with self._lock:
            return self.forge_index.get(key)

    def find_claim(self, project: str, key: str) -> str | None:
        with self._lock:
            claim = self.claims.get(project, {}).get(key)
            return claim["candidate_id"] if claim else None

    def list_claims(
        self, project: str, limit: int, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        with self._lock:
            rows = sorted(self.claims.get(project, {}).items())
        try:
            start = int(cursor) if cursor else 0
        except ValueError as error:  # as the DynamoDB store does: a cursor this store did not issue
            raise Refusal("VALIDATION_FAILED", "cursor is not one this service issued") from error
        page = [row for _key, row in rows[start : start + limit]]
        return page, (str(start + limit) if start + limit < len(rows) else None)

    def idempotency_get(self, ref: StreamRef, scope: str, key: str) -> IdempotencyRecord | None:
        with self._lock:
            rec = self.idempotency.get((ref, scope, key))
            return replace(rec) if rec else None

    def idempotency_begin(self, record: IdempotencyRecord) -> bool:
        with self._lock:
            held = self.idempotency.get((record.ref, record.scope, record.key))
            if held is not None and not (
                held.status == "in_progress" and held.lease_until <= record.claimed_at
            ):
                return False
            self.idempotency[(record.ref, record.scope, record.key)] = replace(record, status="in_progress")
            return True

    def idempotency_release(self, record: IdempotencyRecord) -> None:
        with self._lock:
            held = self.idempotency.get((record.ref, record.scope, record.key))
            if (
                held is not None
                and held.status == "in_progress"
                and held.caller == record.caller
                and held.claimed_at == record.claimed_at
            ):
                del self.idempotency[(record.ref, record.scope, record.key)]

    def check_record(self, project: str, candidate_id: str) -> CheckRecord | None:
        with self._lock:
            return self.check_records.get((project, candidate_id))

    def put_check_record(self, record: CheckRecord) -> bool:
        with self._lock:
            held = self.check_records.get((record.project, record.candidate_id))
            if (held.version if held else 0) != record.version - 1:
                return False
            self.check_records[(record.project, record.candidate_id)] = record
            return True

    def check_records_due(
        self, before: str, limit: int, cursor: str | None
    ) -> tuple[list[CheckRecord], str | None]:
        with self._lock:
            due = sorted(
                (r for r in self.check_records.values() if r.due_at and r.due_at <= before),
                key=lambda r: (r.project, r.candidate_id),
            )
        start = int(cursor) if cursor else 0
        page = due[start : start + limit]
        return page, (str(start + limit) if start + limit < len(due) else None)


class MemoryWitness:
    """The Witness port in memory (tests, the evaluation harness): the same admission rule as every witness
    (`integrity.WitnessBook`), and what it was asked to keep, for tests to look at."""

    def __init__(self, seal: ChainSeal | None) -> None:
        self.book = WitnessBook(seal)
        self.refused: list[Any] = []
        self._lock = threading.Lock()

    def newest(self, ref: StreamRef) -> dict[str, Any] | None:
        with self._lock:
            return self.book.newest(ref)

    def append(self, checkpoint: dict[str, Any]) -> bool:
        with self._lock:
            try:
                chain, kept, duplicate = self.book.check(checkpoint)
            except CheckpointForged:
                self.refused.append(copy.deepcopy(checkpoint))
                raise
            if duplicate:
                return False
            self.book.keep(chain, kept)
            return True

    def mark_tampered(self, ref: StreamRef, finding: dict[str, Any]) -> None:
        with self._lock:
            self.book.keep_mark(ref, finding)

    def tampered(self, ref: StreamRef) -> dict[str, Any] | None:
        with self._lock:
            return self.book.tampered(ref)
