"""The local runner signs receipts with the key in its data directory: the ready flow over real HTTP answers a
receipt, GET /v1/keys publishes the key anonymously, and `sentinel receipt verify` accepts the receipt with
that key, offline, and refuses it for another commit."""

import base64
import json
import tempfile
from pathlib import Path

import pytest

from sentinel_client.flow import run_ready_flow
from sentinel_runner.cli import main
from sentinel_runner.demo import LocalGate

pytestmark = pytest.mark.http


def test_a_ready_flow_over_http_yields_a_receipt_the_cli_verifies(capsys: pytest.CaptureFixture[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp, LocalGate(Path(tmp) / "data") as gate:
        # Given the ready flow of API.md run against `sentinel serve`
        clients = {role: gate.client(role) for role in ("requester", "publisher", "reviewer")}
        decision = run_ready_flow(clients, "demo", outbox_count=gate.delivered).decision
        assert decision["decision"] == "ready"
        # Then the recorded decision carries the receipt, saved as a deploy pipeline would save it
        receipt = Path(tmp) / "receipt.json"
        receipt.write_text(json.dumps(decision["receipt"]))
        # And the gate's key, read from GET /v1/keys without a token, is the data directory's key
        assert main(["keys", "--url", gate.banner["url"], "--json"]) == 0
        published = capsys.readouterr().out
        assert main(["keys", "--data", str(Path(tmp) / "data"), "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == json.loads(published)
        key = Path(tmp) / "gate-keys.json"
        key.write_text(published)
        predicate = json.loads(base64.b64decode(decision["receipt"]["payload"]))["predicate"]
        # When the deploy step verifies the receipt offline, for the commit it deploys
        argv = ["receipt", "verify", str(receipt), "--project", "demo", "--key", str(key)]
        argv += ["--environment", predicate["environment"]]
        code = main([*argv, "--revision", decision["revision"]])
        out, err = capsys.readouterr()
        # Then it passes with one line; and for another commit it is refused with the stable reason
        assert (code, err) == (0, "") and out.startswith(f"ok: {decision['revision']} is ready")
        assert main([*argv, "--revision", "f" * 40]) == 1
        assert capsys.readouterr().err.startswith("error: RECEIPT_REVISION_MISMATCH: ")
