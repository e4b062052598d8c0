"""`make demo`: start the local gate on its embedded store, run the end-to-end ready flow through the HTTP
client, print every step, stop the server, and check the chains it wrote against the witness (as
`sentinel audit verify` does). Exits non-zero when any step deviates."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sentinel_client.api import SentinelClient
from sentinel_client.flow import FlowError, run_ready_flow

START_TIMEOUT = 60


class LocalGate:
    """`sentinel serve --seed` as a child process; its first line says where it listens and where its data
    lives. `data_dir` None: the default data directory (the user's own, kept across runs)."""

    def __init__(self, data_dir: Path | None = None, event_log: Path | None = None) -> None:
        self.data_dir = data_dir
        self.process: subprocess.Popen[str] | None = None
        self.banner: dict[str, Any] = {}
        self._event_log = event_log

    @property
    def event_log(self) -> Path:
        """Where the server's relay writes (its first line says so)."""
        return Path(self.banner["event_log"])

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "sentinel_runner.cli", "serve", "--seed"]
        if self.data_dir is not None:
            command += ["--data", str(self.data_dir)]
        if self._event_log is not None:
            command += ["--event-log", str(self._event_log)]
        return command

    def __enter__(self) -> "LocalGate":
        self.process = subprocess.Popen(
            self.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT
        line = self.process.stdout.readline()
        if not line or time.monotonic() > deadline:
            err = self.process.stderr.read() if self.process.stderr else ""
            raise RuntimeError(f"sentinel serve did not start: {err.strip()[-2000:]}")
        self.banner = json.loads(line)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def client(self, role: str) -> SentinelClient:
        return SentinelClient(self.banner["url"], token=self.banner["seed"]["principals"][role]["token"])

    def delivered(self, execution_id: str, wait: float = 5.0) -> int:
        """Side effects the relay delivered for one execution (waits for the relay's next round)."""
        deadline = time.monotonic() + wait
        count = 0
        while time.monotonic() < deadline:
            lines = self.event_log.read_text().splitlines() if self.event_log.exists() else []
            events = [json.loads(x) for x in lines]
            count = sum(
                1
                for e in events
                if e["detail-type"] == "sentinel.action" and e["detail"]["execution_id"] == execution_id
            )
            if count:
                time.sleep(0.5)  # one more relay round: a duplicate would show now
                lines = self.event_log.read_text().splitlines()
                return sum(
                    1
                    for e in map(json.loads, lines)
                    if e["detail-type"] == "sentinel.action" and e["detail"]["execution_id"] == execution_id
                )
            time.sleep(0.1)
        return count


def sealed_or_fresh() -> Path | None:
    """The default data directory, unless it holds a store written before chains were sealed (a database
    without a chain key): that one cannot be verified, so the demo runs in a fresh directory and says so."""
    from .data_dir import default_data_dir

    data = default_data_dir()
    database = data / "sentinel.db"
    if not database.exists():
        return None
    if not (data / "chain.key").exists():
        why = "a store written before audit chains were sealed (no chain.key)"
    elif _untagged_principals(database):
        why = (
            "principals written before their rows were tagged (the operator's `sentinel principals "
            "tag-legacy` vouches for them)"
        )
    else:
        return None
    fresh = Path(tempfile.mkdtemp(prefix="sentinel-demo-"))
    print(f"   {data} holds {why}; this demo runs in {fresh} instead", flush=True)
    return fresh


def _untagged_principals(database: Path) -> bool:
    """Whether the store holds principal rows without the tag schema 4 gives them (read-only; a file that
    cannot be read is left for the server to refuse in its own words)."""
    import sqlite3
    from contextlib import closing

    try:
        with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
            columns = {row[1] for row in db.execute("PRAGMA table_info(principals)")}
            if not columns:
                return False
            if "row_tag" not in columns:
                return bool(db.execute("SELECT count(*) FROM principals").fetchone()[0])
            return bool(db.execute("SELECT count(*) FROM principals WHERE row_tag IS NULL").fetchone()[0])
    except sqlite3.Error:
        return False


def witnessed(data_dir: str, project: str, candidate_id: str) -> list[str]:
    """The project's and the candidate's chains against the witness's newest checkpoints, read from the data
    directory once the server has stopped; a line each, or FlowError."""
    from sentinel_domain.integrity import verify_against_witness
    from sentinel_domain.ports import StreamRef

    from .data_dir import open_data_dir
    from .runtime import open_embedded

    services = open_embedded(open_data_dir(Path(data_dir)))
    seal = services.chain_seal()
    lines = []
    for name, ref in (("project", StreamRef(project)), ("candidate", StreamRef(project, candidate_id))):
        found = verify_against_witness(services.store, services.witness, ref, seal)
        newest = services.witness.newest(ref)
        if not found.valid or newest is None or newest["seq"] != found.length:
            raise FlowError(f"the {name} chain does not verify against the witness: {found.as_dict()}")
        lines.append(
            f"   witness: {name} chain verifies against the witness's newest checkpoint "
            f"(seq {newest['seq']} of {found.length}, every event and head authenticated)"
        )
    return lines


def receipt_line(data_dir: str, project: str, decision: dict[str, Any]) -> str:
    """The ready decision's receipt, checked offline as a deploy step checks it (`sentinel receipt verify`):
    under the data directory's public key, for the decided commit, project and environment, now."""
    from sentinel_domain.receipts import verify_receipt
    from sentinel_domain.times import format_time
    from sentinel_service.adapters.receipt_signer import FileReceiptSigner, signature_check

    from .data_dir import RECEIPT_KEY

    signer = FileReceiptSigner(str(Path(data_dir) / RECEIPT_KEY), create=False)
    check = signature_check({signer.key_id: signer.public_key_pem()})
    at = format_time(datetime.now(UTC))
    statement = verify_receipt(decision.get("receipt"), check, decision["revision"], project, "staging", at)
    return (
        f"   receipt: signed by {signer.key_id[:20]}…, verifies for {decision['revision'][:12]}… until "
        + str(statement["predicate"]["expires_at"])
    )


def main() -> int:
    started = time.monotonic()
    print("Starting the local gate (its embedded store, the seeded demo project)…", flush=True)
    try:
        gate_context = LocalGate(sealed_or_fresh())
        gate = gate_context.__enter__()
    except RuntimeError as error:  # the server said why it would not start: say it, without a traceback
        print(f"\nFAILED: {error}", file=sys.stderr)
        return 1
    try:
        where = gate.banner.get("data_dir") or gate.banner.get("dynamodb_endpoint")
        kept = "kept across restarts" if gate.banner.get("persistent") else "not kept"
        print(
            f"   serving {gate.banner['url']}  store {gate.banner['store']} in {where} ({kept})", flush=True
        )
        clients = {role: gate.client(role) for role in ("requester", "publisher", "reviewer")}
        try:
            result = run_ready_flow(
                clients,
                gate.banner["seed"]["project"],
                say=lambda line: print(line, flush=True),
                outbox_count=gate.delivered,
            )
        except FlowError as error:
            print(f"\nFAILED: {error}", file=sys.stderr)
            return 1
    finally:
        gate_context.__exit__(None, None, None)
    try:
        for line in witnessed(str(where), gate.banner["seed"]["project"], result.candidate_id):
            print(line, flush=True)
        print(receipt_line(str(where), gate.banner["seed"]["project"], result.decision), flush=True)
    except Exception as error:  # any failure to verify is a failed demo, said plainly
        print(f"\nFAILED: {error}", file=sys.stderr)
        return 1
    print(
        f"\nREADY: candidate {result.candidate_id} — chain valid and verified against the witness, "
        f"{result.verification['length']} events ({time.monotonic() - started:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
