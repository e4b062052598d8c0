"""`sentinel audit verify` and `sentinel audit export` on the embedded store: exit 0 for chains that verify
against the witness, 1 naming the first bad seq, 2 when the check cannot be made; an export checked with no
service at all, with and without the chain key."""

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from sentinel_runner.cli import main


def sentinel(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict], str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.startswith("{")], err


@pytest.fixture
def data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A data directory holding one project with a principal (three events on the project chain)."""
    where = tmp_path / "data"
    assert main(["projects", "create", "--id", "shop", "--data", str(where)]) == 0
    added = [
        "principals",
        "add",
        "--id",
        "ci-bot",
        "--kind",
        "ci",
        "--project",
        "shop",
        "--role",
        "publisher",
    ]
    assert main([*added, "--data", str(where)]) == 0
    capsys.readouterr()
    return where


def test_chains_that_verify_against_the_witness_exit_0(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, _err = sentinel(capsys, "audit", "verify", "--project", "shop", "--data", str(data))
    assert code == 0
    assert [(line["candidate_id"], line["valid"], line["witness_seq"]) for line in lines] == [(None, True, 2)]


def test_a_rolled_back_project_chain_exits_1_naming_the_first_missing_seq(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the newest project event deleted and HEAD put back to the genuine head before it
    with closing(sqlite3.connect(data / "sentinel.db", isolation_level=None)) as db:
        older = json.loads(
            db.execute(
                "SELECT item FROM outbox WHERE chain = 'P#shop' AND seq = 1 AND kind = 'checkpoint'"
            ).fetchone()[0]
        )
        head = json.loads(db.execute("SELECT head FROM chain_heads WHERE chain = 'P#shop'").fetchone()[0])
        db.execute("DELETE FROM events WHERE chain = 'P#shop' AND seq = 2")
        db.execute("DELETE FROM facts WHERE chain = 'P#shop' AND seq = 2")
        head.update(seq=1, hash=older["hash"], mac=older["mac"])
        db.execute("UPDATE chain_heads SET seq = 1, head = ? WHERE chain = 'P#shop'", (json.dumps(head),))
    # Then verify exits 1 and names seq 2
    code, lines, _err = sentinel(capsys, "audit", "verify", "--project", "shop", "--data", str(data))
    assert code == 1 and lines[0]["first_bad_seq"] == 2 and "rolled back" in lines[0]["reason"]


def test_without_its_chain_key_the_check_cannot_be_made_exit_2(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (data / "chain.key").unlink()
    code, lines, err = sentinel(capsys, "audit", "verify", "--project", "shop", "--data", str(data))
    assert code == 2 and lines == [] and "chain key" in err


def test_an_export_is_checked_with_no_service_and_an_edit_in_it_is_named(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the project exported
    out = tmp_path / "export"
    code, lines, _err = sentinel(
        capsys, "audit", "export", "--project", "shop", "--out", str(out), "--data", str(data)
    )
    assert code == 0 and lines == [{"chains": 1, "checkpoints": 2, "out": str(out)}]
    key = str(data / "chain.key")
    # Then it verifies, with the key (every tag checked) and without (said so)
    code, lines, _err = sentinel(capsys, "audit", "verify", "--from", str(out), "--chain-key-file", key)
    assert code == 0 and lines[0]["valid"] and lines[0]["authenticated"] is True
    code, lines, _err = sentinel(capsys, "audit", "verify", "--from", str(out))
    assert code == 0 and lines[0]["authenticated"] is False
    # When an event in the export is re-tagged by hand (its actor changed, its hash recomputed)
    from sentinel_domain.audit import event_hash

    (chain_file,) = (out / "chains").glob("*.json")
    chain = json.loads(chain_file.read_text())
    chain["events"][0]["actor"] = "mallory"
    chain["events"][0]["hash"] = event_hash(chain["events"][0])
    chain_file.write_text(json.dumps(chain))
    # Then the key names it at seq 1; without the key the broken link after it is named
    code, lines, _err = sentinel(capsys, "audit", "verify", "--from", str(out), "--chain-key-file", key)
    assert code == 1 and lines[0]["first_bad_seq"] == 1
    code, lines, _err = sentinel(capsys, "audit", "verify", "--from", str(out))
    assert code == 1 and lines[0]["first_bad_seq"] == 2
