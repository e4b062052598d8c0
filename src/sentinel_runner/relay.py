"""The local outbox relay: moves side-effect outbox items to a local event log, as DynamoDB Streams and
EventBridge Pipes do in AWS, and checkpoint outbox items to the witness, as the witness writer does in AWS.
Delivery is at least once; consumers dedupe by id (the witness by content).

Checkpoints come only from the outbox items the gate committed with each head, never from reading the
table's heads (a head the table holds may be a tamperer's). Each one reaches the witness only when its tag
verifies under the chain key: whoever can write the table can write an outbox item, and a forged one is
recorded as tampering of the chain it names instead. The gate itself appends each checkpoint to the local
witness before answering; the relay delivers what that missed (a witness briefly unavailable) and catches
forged items.

Forge check items (`forge_check`, `forge_recheck`; sentinel_domain.forge_checks), when the runner has a
forge check publisher, are handed to it before they are marked relayed, as the bus rule hands them to the
publisher function in AWS. A forge that cannot be reached leaves the item in the outbox, retried with
exponential backoff (FORGE_BACKOFF_SECONDS, doubling) up to FORGE_ATTEMPTS times; then the item is handed over
to the sweep (the check's record has fallen due) so that a long outage never holds back the items behind it.
The relay thread also runs the publisher's sweep every `sweep_interval` seconds.

A synthetic project's side effects (marked by the gate, `synthetic: true` under the item's tag; the store's
row flag counts only where nothing is sealed) go to the event log and nowhere else: no forge check publisher,
no consumer."""

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.forge import ForgeRefused, ForgeUnavailable
from sentinel_domain.forge_checks import FORGE_CHECK_KIND, FORGE_RECHECK_KIND
from sentinel_domain.integrity import ChainSeal, CheckpointForged, checkpoint_from_outbox
from sentinel_domain.ports import StreamRef, Witness, WitnessConflict
from sentinel_domain.usecases.chain import ANSWER_TAG, SYNTHETIC, side_effect_verifies


class EventLog:
    """The local stand-in for the event bus and its archive: JSON lines, appended, never rewritten."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.events: list[dict[str, Any]] = self._read(path) if path is not None else []
        self._lock = threading.Lock()

    @staticmethod
    def _read(path: Path) -> list[dict[str, Any]]:
        """What earlier runs appended, so checkpoints outlive a restart. A crash or a full disk can cut the
        last line short: it is passed over, and a newline ends it so the next event starts a line of its own
        (glued to the fragment, it would be lost on the next read). Lines that are not events are passed
        over too."""
        if not path.exists():
            return []
        text = path.read_text(encoding="utf-8", errors="replace")
        if text and not text.endswith("\n"):
            with path.open("a", encoding="utf-8") as out:
                out.write("\n")
        events = []
        for line in text.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("detail"), dict) and "detail-type" in event:
                events.append(event)
        return events

    def publish(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.events.append(event)
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(event, sort_keys=True) + "\n")
                    out.flush()
                    # On disk before the relay marks the item relayed: at least once, never zero times.
                    os.fsync(out.fileno())


def chain_of(pk: str) -> StreamRef | None:
    """The chain an outbox item's partition names (`P#project` or `P#project#C#candidate`)."""
    if not pk.startswith("P#"):
        return None
    project, _, candidate_id = pk[2:].partition("#C#")
    return StreamRef(project, candidate_id or None)


WAIT = object()  # a side effect that can be judged only later
FORGE_KINDS = frozenset({FORGE_CHECK_KIND, FORGE_RECHECK_KIND})
FORGE_ATTEMPTS = 5  # then the sweep takes the publication over (its record is due)
FORGE_BACKOFF_SECONDS = 1.0  # the first retry's wait; each next one waits twice as long
SWEEP_INTERVAL_SECONDS = 300.0  # the forge check sweep, as the AWS schedule runs it

# A consumer that cannot act now (the forge unavailable) is tried again after FIRST_RETRY seconds, doubling up
# to MAX_RETRY (or after the forge's own Retry-After, when longer); the item stays pending meanwhile.
FIRST_RETRY, MAX_RETRY = 1.0, 300.0
Consumer = Callable[[dict[str, Any]], Any]


def _why(error: Exception) -> str:
    return str(getattr(error, "code", "") or getattr(error, "detail", "") or type(error).__name__)[:500]


class OutboxRelay:
    def __init__(
        self,
        store: Any,
        log: EventLog,
        interval: float = 0.2,
        witness: Witness | None = None,
        seal: Callable[[], ChainSeal] | None = None,
        forge_checks: Any = None,
        sweep_interval: float = SWEEP_INTERVAL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        consumers: Mapping[str, Consumer] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`seal`: the chain key's seal; with it, a side effect is published only when its tag verifies
        (the runner always passes it). `forge_checks`: the forge check publisher
        (sentinel_domain.usecases.forge_checks.ForgeChecks), or None to relay forge items to the log only.
        `consumers`: an outbox kind's in-process consumer (the forge worker, as the bus rule's Lambda target
        is in AWS), called with the authentic item before it is published; one raising ForgeUnavailable
        leaves the item pending and is retried with backoff, any other failure is final (published with the
        failure noted, as a dead-letter queue would keep it)."""
        self.consumers = dict(consumers or {})
        self.clock = clock
        self._backoff: dict[tuple[str, str], tuple[float, float]] = {}  # item -> (next try, last delay)
        self.store = store
        self.log = log
        self.witness = witness
        self.seal = seal
        self.interval = interval
        self.forged = 0  # forged checkpoint items found, each recorded as tampering of its chain
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.forge_checks = forge_checks
        self.sweep_interval = sweep_interval
        self._monotonic = monotonic
        self._next_sweep = monotonic() + sweep_interval
        self._forge_retries: dict[tuple[str, str], tuple[int, float]] = {}  # item -> (failures, next try)

    def run_once(self) -> int:
        moved = 0
        for pending in self.store.pending_outbox():
            if pending["kind"] == "checkpoint":
                if not self._witness(pending["pk"], checkpoint_from_outbox(pending["item"])):
                    continue  # the witness cannot be written now: the item waits for the next round
            else:
                detail = self._authentic(pending["pk"], pending["item"])
                if detail is WAIT:
                    continue  # the chain key cannot be read now: the item waits for the next round
                if detail is not None and self._synthetic(pending, detail):
                    # A synthetic project's side effect (the acceptance suite's): the event log only, as in
                    # AWS the archive keeps it and every consumer rule excludes it. No forge, no consumer.
                    self.log.publish(
                        {
                            "source": "sentinel",
                            "detail-type": f"sentinel.{pending['kind']}",
                            "detail": {**detail, SYNTHETIC: True},
                        }
                    )
                    self.store.mark_relayed(pending["pk"], pending["sk"])
                    moved += 1
                    continue
                if detail is not None and not self._forge(pending, detail):
                    continue  # the forge cannot take it now: the item waits, with backoff
                if detail is not None and pending["kind"] in self.consumers:
                    detail = self._consume(pending, detail)
                    if detail is WAIT:
                        continue
                if detail is not None:  # None: forged, never published (and its chain marked tampered)
                    self.log.publish(
                        {"source": "sentinel", "detail-type": f"sentinel.{pending['kind']}", "detail": detail}
                    )
            self.store.mark_relayed(pending["pk"], pending["sk"])
            moved += 1
        return moved

    def _synthetic(self, pending: dict[str, Any], detail: dict[str, Any]) -> bool:
        """Whether a side effect is a synthetic project's. With the seal, only the gate's sealed body says so:
        the store's row flag lies outside the tag, and a table writer who set it on a production item would
        silence it (a forge hold, a notification). Without a seal nothing is authenticated: either says."""
        if detail.get(SYNTHETIC) is True:
            return True
        return self.seal is None and bool(pending.get("synthetic"))

    def _forge(self, pending: dict[str, Any], detail: dict[str, Any]) -> bool:
        """Hand a forge item to the publisher; False to keep it for a later round."""
        if self.forge_checks is None or pending["kind"] not in FORGE_KINDS:
            return True
        key = (pending["pk"], pending["sk"])
        failures, next_try = self._forge_retries.get(key, (0, 0.0))
        if self._monotonic() < next_try:
            return False
        try:
            self.forge_checks.handle(detail)
        except ForgeRefused as error:
            # No retry helps (the app lacks access to the repository): recorded, never silently dropped.
            self.log.publish(
                {
                    "source": "sentinel",
                    "detail-type": "sentinel.forge_check_refused",
                    "detail": {**detail, "reason": error.detail[:300]},
                }
            )
        except Exception as error:  # unreachable, rate-limited, a store fault, a bug: retried, never lost
            failures += 1
            if not isinstance(error, StoreUnavailable) and failures >= FORGE_ATTEMPTS:
                self._forge_retries.pop(key, None)
                self.log.publish(
                    {"source": "sentinel", "detail-type": "sentinel.forge_check_deferred", "detail": detail}
                )
                return True  # its check record is due: the sweep publishes it once the forge answers
            wait = FORGE_BACKOFF_SECONDS * 2 ** (failures - 1)
            retry_after = getattr(error, "retry_after_seconds", None)
            self._forge_retries[key] = (failures, self._monotonic() + max(wait, float(retry_after or 0)))
            return False
        self._forge_retries.pop(key, None)
        return True

    def sweep_if_due(self) -> None:
        """The forge check sweep, every `sweep_interval` seconds (the AWS schedule's local stand-in)."""
        if self.forge_checks is None or self._monotonic() < self._next_sweep:
            return
        self._next_sweep = self._monotonic() + self.sweep_interval
        self.forge_checks.sweep()

    def _consume(self, pending: dict[str, Any], detail: dict[str, Any]) -> Any:
        """Hand the item to its consumer; WAIT while it must be retried later (its backoff not yet over, or
        the forge unavailable now), else the detail to publish."""
        key = (str(pending["pk"]), str(pending["sk"]))
        next_try, last = self._backoff.get(key, (0.0, 0.0))
        now = self.clock()
        if now < next_try:
            return WAIT
        try:
            self.consumers[pending["kind"]](detail)
        except ForgeUnavailable as unavailable:
            delay = min(MAX_RETRY, max(FIRST_RETRY, last * 2, float(unavailable.retry_after_seconds or 0)))
            self._backoff[key] = (now + delay, delay)
            return WAIT
        except Exception as error:  # no retry helps: kept in the log with why, as a dead-letter queue would
            self._backoff.pop(key, None)
            return {**detail, "consumer_failed": type(error).__name__, "consumer_detail": _why(error)}
        self._backoff.pop(key, None)
        return detail

    def _authentic(self, pk: str, item: Any) -> Any:
        """The side effect without its tag, when the gate wrote it; None when it is forged (never published,
        its chain marked tampered); WAIT while the chain key cannot be read."""
        if self.seal is None:
            return dict(item) if isinstance(item, dict) else None
        ref = chain_of(pk)
        try:
            seal = self.seal()
        except Exception:  # the key cannot be read now
            return WAIT
        if ref is not None and side_effect_verifies(seal, ref, item):
            return {k: v for k, v in item.items() if k != ANSWER_TAG}
        self.forged += 1
        if ref is not None and self.witness is not None:
            try:
                self.witness.mark_tampered(
                    ref,
                    {"first_bad_seq": 1, "reason": "a side effect in the outbox that the gate did not write"},
                )
            except Exception:  # the witness is down: the item stays unpublished all the same
                pass
        return None

    def _witness(self, pk: str, checkpoint: dict[str, Any] | None) -> bool:
        """Deliver one checkpoint item; False when it must wait (no witness, or the witness failed)."""
        if self.witness is None:
            return False
        ref = chain_of(pk)
        try:
            if (
                checkpoint is None
                or ref is None
                or (checkpoint.get("project"), checkpoint.get("candidate_id"))
                != (ref.project, ref.candidate_id)
            ):
                raise CheckpointForged("the checkpoint item names another chain than its partition")
            self.witness.append(checkpoint)
        except (CheckpointForged, WitnessConflict) as error:
            self.forged += 1
            if ref is not None:
                seq = checkpoint.get("seq") if isinstance(checkpoint, dict) else None
                self.witness.mark_tampered(
                    ref,
                    {
                        "first_bad_seq": seq if type(seq) is int and seq >= 1 else 1,
                        "reason": "a checkpoint in the outbox that the gate did not write"
                        if isinstance(error, CheckpointForged)
                        else "the outbox holds another checkpoint than the witness at this seq: a fork",
                    },
                )
        except StoreUnavailable:
            return False
        return True

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.interval):
                try:
                    self.run_once()
                    self.sweep_if_due()
                except Exception:  # the store may be stopping; the next round retries
                    continue

        self._thread = threading.Thread(target=loop, name="sentinel-relay", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        try:
            self.run_once()  # drain what the last requests left
        except Exception:
            pass


def forge_consumers(services: Any) -> dict[str, Consumer]:
    """The forge worker in-process, as the bus rule's target is in AWS: each forge outbox kind to
    `sentinel_service.forge_worker.handle_outbox_item` on these services."""
    from sentinel_service import names
    from sentinel_service.forge_worker import FORGE_KINDS, handle_outbox_item

    def consumer(kind: str) -> Consumer:
        return lambda entry: handle_outbox_item(services, kind, entry)

    # Check items are the publisher's (OutboxRelay(forge_checks=...)), as the publisher's own rule takes
    # them in AWS: the worker consumes deliveries only.
    return {kind: consumer(kind) for kind in FORGE_KINDS if kind != names.OUTBOX_KIND_FORGE_CHECK}
