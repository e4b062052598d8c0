"""The local outbox relay: moves outbox items (side effects) and chain-head checkpoints to a local event log,
as DynamoDB Streams and EventBridge Pipes do in AWS. Delivery is at least once; consumers dedupe by id."""

import json
import os
import threading
from pathlib import Path
from typing import Any


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

    def newest_checkpoint(self, project: str, candidate_id: str | None) -> dict[str, Any] | None:
        with self._lock:
            found = [
                e
                for e in self.events
                if e["detail-type"] == "sentinel.checkpoint"
                and e["detail"].get("project") == project
                and e["detail"].get("candidate_id") == candidate_id
            ]
        return found[-1]["detail"] if found else None

    def newest(self, ref: Any) -> dict[str, Any] | None:
        """The Checkpoints port of the core, over this log."""
        return self.newest_checkpoint(ref.project, ref.candidate_id)


class OutboxRelay:
    def __init__(self, store: Any, log: EventLog, interval: float = 0.2) -> None:
        self.store = store
        self.log = log
        self.interval = interval
        self._seen_heads: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> int:
        moved = 0
        for pending in self.store.pending_outbox():
            self.log.publish(
                {
                    "source": "sentinel",
                    "detail-type": f"sentinel.{pending['kind']}",
                    "detail": pending["item"],
                }
            )
            self.store.mark_relayed(pending["pk"], pending["sk"])
            moved += 1
        for head in self.store.chain_heads():
            if self._seen_heads.get(head["pk"]) != head["seq"]:
                self._seen_heads[head["pk"]] = head["seq"]
                self.log.publish(
                    {
                        "source": "sentinel",
                        "detail-type": "sentinel.checkpoint",
                        "detail": {k: head[k] for k in ("project", "candidate_id", "seq", "hash")},
                    }
                )
        return moved

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.interval):
                try:
                    self.run_once()
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
