"""Ways to change an emulated deployment, and the state a gate keeps, for the tests that prove the gate
catches what it exists to catch."""

import hashlib
import json
import shutil
import zipfile
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from sentinel_acceptance.emulation import Asset, Synth
from sentinel_acceptance.target import read_build
from sentinel_service import names
from support.paths import REPO


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def functions_asset(synth: Synth, build: Path) -> Asset:
    """The asset that uploads functions.zip."""
    want = read_build(build)["functions"].sha256
    found = [a for a in synth.assets if a.path.suffix == ".zip" and sha256(a.path) == want]
    assert len(found) == 1, "the synth uploads functions.zip once (every function shares it)"
    return found[0]


def zip_with(
    source: Path,
    dest: Path,
    replace: dict[str, Callable[[str], str]] | None = None,
    extra: dict[str, str] | None = None,
) -> Path:
    """A copy of a zip with some files' text changed and some added, written as the build writes zips."""
    import sys

    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from sentinel_infra import packaging

    staging = dest.parent / (dest.stem + "-staging")
    with zipfile.ZipFile(source) as archive:
        archive.extractall(staging)
    for name, edit in (replace or {}).items():
        path = staging / name
        changed = edit(path.read_text())
        assert changed != path.read_text(), f"the edit of {name} changed nothing"
        path.write_text(changed)
    for name, text in (extra or {}).items():
        (staging / name).write_text(text)
    entries = [(p.relative_to(staging).as_posix(), p) for p in staging.rglob("*") if p.is_file()]
    packaging.write_zip(entries, dest)
    shutil.rmtree(staging)
    return dest


def build_with_functions(build: Path, functions_zip: Path, dest: Path) -> Path:
    """A build folder like `build`, whose functions.zip is another one (digests.json updated to match)."""
    dest.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((build / "digests.json").read_text())
    for key, entry in manifest["packages"].items():
        source = functions_zip if key == "functions" else read_build(build)[key].path
        digest = hashlib.sha256(source.read_bytes()).digest()
        import base64

        entry.update(
            path=str(source.resolve()),
            sha256=digest.hex(),
            code_sha256=base64.b64encode(digest).decode(),
            bytes=source.stat().st_size,
        )
    (dest / "digests.json").write_text(json.dumps(manifest, indent=2))
    return dest


def retarget(template: dict[str, Any], old_digest: str, new_digest: str) -> None:
    """What a synth of the other build would state: its digest as every function's SENTINEL_PACKAGE_DIGEST and
    as the PackageDigest output (the asset's own key may keep its name: CloudFormation never reads it)."""
    text = json.dumps(template).replace(old_digest, new_digest)
    template.clear()
    template.update(json.loads(text))


def set_package_digest(template: dict[str, Any], digest: str) -> None:
    """Every function configured with another package digest than the zip it runs."""
    for resource in template["Resources"].values():
        env = resource.get("Properties", {}).get("Environment", {}).get("Variables", {})
        if names.ENV_PACKAGE_DIGEST in env:
            env[names.ENV_PACKAGE_DIGEST] = digest


# ---- the state store, as a tamperer with write access to it sees it ----------------------------------------
#
# Both stores behind one interface, so every attack on the audit chains runs on the embedded SQLite store and
# on DynamoDB (moto) alike. The tamperer writes the rows directly, with no key: whatever the gate
# authenticated (an event's or a head's `mac`, a checkpoint) can only be copied from what the store holds.


def chain_pk(ref: Any) -> str:
    return f"P#{ref.project}" + (f"#C#{ref.candidate_id}" if ref.candidate_id else "")


class SqliteRows:
    """The embedded store's rows, through a connection of the tamperer's own."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _db(self) -> Any:
        import sqlite3

        return sqlite3.connect(self.path, isolation_level=None)

    def events(self, ref: Any) -> list[dict[str, Any]]:
        with closing(self._db()) as db:
            rows = db.execute("SELECT event FROM events WHERE chain = ? ORDER BY seq", (chain_pk(ref),))
            return [json.loads(text) for (text,) in rows]

    def fact(self, ref: Any, seq: int) -> str:
        with closing(self._db()) as db:
            row = db.execute("SELECT fact FROM facts WHERE chain = ? AND seq = ?", (chain_pk(ref), seq))
            return str(row.fetchone()[0])

    def head(self, ref: Any) -> dict[str, Any]:
        with closing(self._db()) as db:
            row = db.execute("SELECT head FROM chain_heads WHERE chain = ?", (chain_pk(ref),)).fetchone()
            return dict(json.loads(row[0]))

    def delete(self, ref: Any, seq: int) -> None:
        with closing(self._db()) as db:
            db.execute("DELETE FROM events WHERE chain = ? AND seq = ?", (chain_pk(ref), seq))
            db.execute("DELETE FROM facts WHERE chain = ? AND seq = ?", (chain_pk(ref), seq))

    def put(self, ref: Any, seq: int, event: dict[str, Any], fact: str | None = None) -> None:
        with closing(self._db()) as db:
            db.execute(
                "INSERT OR REPLACE INTO events (chain, seq, event) VALUES (?, ?, ?)",
                (chain_pk(ref), seq, json.dumps(event, sort_keys=True)),
            )
            if fact is not None:
                db.execute(
                    "INSERT OR REPLACE INTO facts (chain, seq, fact) VALUES (?, ?, ?)",
                    (chain_pk(ref), seq, fact),
                )

    def set_head(self, ref: Any, head: dict[str, Any]) -> None:
        with closing(self._db()) as db:
            db.execute(
                "UPDATE chain_heads SET seq = ?, head = ? WHERE chain = ?",
                (head["seq"], json.dumps(head, sort_keys=True), chain_pk(ref)),
            )

    _TABLES = ("chain_heads", "events", "facts", "outbox", "idempotency")

    def snapshot(self, ref: Any) -> dict[str, list[Any]]:
        """Every row the chain's partition holds."""
        with closing(self._db()) as db:
            return {
                t: db.execute(f"SELECT * FROM {t} WHERE chain = ?", (chain_pk(ref),)).fetchall()
                for t in self._TABLES
            }

    def restore(self, ref: Any, snapshot: dict[str, list[Any]]) -> None:
        """The partition put back exactly as the snapshot held it, everything written since gone."""
        with closing(self._db()) as db:
            for table in self._TABLES:
                db.execute(f"DELETE FROM {table} WHERE chain = ?", (chain_pk(ref),))
                for row in snapshot[table]:
                    db.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(row))})", row)

    def outbox(self, ref: Any) -> list[dict[str, Any]]:
        with closing(self._db()) as db:
            rows = db.execute("SELECT item FROM outbox WHERE chain = ? ORDER BY seq", (chain_pk(ref),))
            return [json.loads(text) for (text,) in rows]

    def put_outbox(self, ref: Any, sk: str, seq: int, entry: dict[str, Any]) -> None:
        with closing(self._db()) as db:
            db.execute(
                "INSERT INTO outbox (chain, sk, seq, kind, item, recorded_at, pending) "
                "VALUES (?, ?, ?, ?, ?, ?, 1)",
                (
                    chain_pk(ref),
                    sk,
                    seq,
                    str(entry.get("kind", "")),
                    json.dumps(entry),
                    "2026-11-29T12:00:00Z",
                ),
            )


class DynamoRows:
    """The DynamoDB table's items, written with put_item and delete_item (no transaction, no condition)."""

    def __init__(self, client: Any, table: str) -> None:
        self.client, self.table = client, table

    def _get(self, pk: str, sk: str) -> dict[str, Any]:
        key = {"pk": {"S": pk}, "sk": {"S": sk}}
        return dict(self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True)["Item"])

    def _partition(self, ref: Any) -> list[dict[str, Any]]:
        from support.moto_world import scan

        return [i for i in scan(self.client, self.table) if i["pk"]["S"] == chain_pk(ref)]

    @staticmethod
    def _event_of(item: dict[str, Any]) -> dict[str, Any]:
        from sentinel_service.adapters.dynamodb_items import from_attr

        return {k: from_attr(v) for k, v in item.items() if k not in ("pk", "sk", "fact", "fact_parts")}

    def events(self, ref: Any) -> list[dict[str, Any]]:
        items = [
            i for i in self._partition(ref) if i["sk"]["S"].startswith("E#") and "#" not in i["sk"]["S"][2:]
        ]
        return [self._event_of(i) for i in sorted(items, key=lambda i: i["sk"]["S"])]

    def fact(self, ref: Any, seq: int) -> str:
        return str(self._get(chain_pk(ref), f"E#{seq:010d}")["fact"]["S"])

    def head(self, ref: Any) -> dict[str, Any]:
        from sentinel_service.adapters.dynamodb_items import head_fields

        return head_fields(self._get(chain_pk(ref), "HEAD"))

    def delete(self, ref: Any, seq: int) -> None:
        self.client.delete_item(
            TableName=self.table, Key={"pk": {"S": chain_pk(ref)}, "sk": {"S": f"E#{seq:010d}"}}
        )

    def put(self, ref: Any, seq: int, event: dict[str, Any], fact: str | None = None) -> None:
        from sentinel_service.adapters.dynamodb_items import to_attr

        sk = f"E#{seq:010d}"
        try:
            old = self._get(chain_pk(ref), sk)
        except KeyError:
            old = {}
        item = {"pk": {"S": chain_pk(ref)}, "sk": {"S": sk}, **{k: to_attr(v) for k, v in event.items()}}
        item["fact"] = {"S": fact} if fact is not None else old["fact"]
        item["fact_parts"] = {"N": "1"} if fact is not None else old.get("fact_parts", {"N": "1"})
        self.client.put_item(TableName=self.table, Item=item)

    def set_head(self, ref: Any, head: dict[str, Any]) -> None:
        from sentinel_service.adapters.dynamodb_items import head_item

        self.client.put_item(TableName=self.table, Item=head_item(chain_pk(ref), head))

    def snapshot(self, ref: Any) -> list[dict[str, Any]]:
        return self._partition(ref)

    def restore(self, ref: Any, snapshot: list[dict[str, Any]]) -> None:
        for item in self._partition(ref):
            self.client.delete_item(TableName=self.table, Key={"pk": item["pk"], "sk": item["sk"]})
        for item in snapshot:
            self.client.put_item(TableName=self.table, Item=item)

    def outbox(self, ref: Any) -> list[dict[str, Any]]:
        items = sorted(
            (i for i in self._partition(ref) if i["sk"]["S"].startswith("O#")),
            key=lambda i: int(i["seq"]["N"]),
        )
        return [json.loads(i["item"]["S"]) for i in items]

    def put_outbox(self, ref: Any, sk: str, seq: int, entry: dict[str, Any]) -> None:
        self.client.put_item(
            TableName=self.table,
            Item={
                "pk": {"S": chain_pk(ref)},
                "sk": {"S": sk},
                "item": {"S": json.dumps(entry)},
                "outbox_kind": {"S": str(entry.get("kind", ""))},
                "outbox_pending": {"S": "1"},
                "seq": {"N": str(seq)},
                "recorded_at": {"S": "2026-11-29T12:00:00Z"},
            },
        )
