"""Red-team finding: locally the principals and their token HMACs live in the same SQLite file as the chains
(README: sentinel.db holds "principals and token hashes"), with no tag under the chain key or the token key
over who a token belongs to. Whoever can write that file (the threat failing-closed.md says the local gate
detects: "whoever can write the database but not its key and witness") needs no token key to become someone
else: it moves its OWN token's HMAC onto another principal (tokens.principal_id, principals.token_hmac). The
agent's token then authenticates as the human reviewer, and the gate itself writes a genuine, sealed,
witnessed approval by `rita`: nothing on the chain is ever tampered, so nothing detects it.
Closed: the token's mapping and every principal row carry a tag under the token key, checked by the
authorizer on every read (sqlite_principals)."""

from __future__ import annotations

import secrets
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

import pytest

from sentinel_runner.demo import LocalGate

pytestmark = pytest.mark.http


def test_attack_an_agent_token_relabelled_in_the_database_never_reviews() -> None:
    with tempfile.TemporaryDirectory() as data, LocalGate(Path(data)) as gate:
        requester, publisher = gate.client("requester"), gate.client("publisher")
        seed = gate.banner["seed"]["principals"]
        agent_id, reviewer_id = seed["requester"]["id"], seed["reviewer"]["id"]
        # Given a candidate the agent created, attested by CI, with a plan the agent stored
        revision, base = secrets.token_hex(20), secrets.token_hex(20)
        change = {"files": ["services/payments/api.py"]}
        created = requester.create_candidate(
            "demo",
            {
                "subject": "payments",
                "base_revision": base,
                "revision": revision,
                "environment": "staging",
                "change": change,
            },
        )
        assert created.status == 201, created.body
        cid = created.body["candidate_id"]
        assert publisher.add_change_context("demo", cid, change).status == 201
        proposal = requester.propose("demo", cid)
        assert proposal.status == 201, proposal.body
        digest = proposal.body["plan_digest"]
        approve = {"decision": "approve", "plan_digest": digest, "revision": revision, "comment": "lgtm"}

        # When the agent, able to write sentinel.db but holding no key, moves its own token's HMAC onto rita
        db_path = next(Path(data).rglob("sentinel.db"))
        with closing(sqlite3.connect(db_path, isolation_level=None)) as db:
            hmac, expires = db.execute(
                "SELECT token_hmac, token_expires_at FROM principals WHERE id = ?", (agent_id,)
            ).fetchone()
            db.execute("UPDATE tokens SET principal_id = ? WHERE hmac = ?", (reviewer_id, hmac))
            db.execute(
                "UPDATE principals SET token_hmac = ?, token_expires_at = ? WHERE id = ?",
                (hmac, expires, reviewer_id),
            )
        answer = requester.review("demo", cid, approve)  # the agent's own token

        # Then the gate refuses the token outright, as an unknown one (an agent never reviews, and a token is
        # never someone else's)
        assert answer.status == 403, answer.body
