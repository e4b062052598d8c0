"""Principals and tokens, once on each store (SQLite, DynamoDB on moto): adding, authenticating, rotating,
revoking, and failing closed. The authorizer and the token key are in test_principals.py."""

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sentinel_service.adapters.principals import DirectoryUnavailable, PrincipalRefused
from sentinel_service.adapters.tokens import new_token, token_hmac
from support.principal_stores import DynamoPrincipals, PrincipalKit, SqlitePrincipals

KEY = bytes(range(32))
NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "dynamodb"])
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PrincipalKit]:
    made: PrincipalKit
    if request.param == "sqlite":
        made = SqlitePrincipals(tmp_path / "state.db")
    else:
        made = DynamoPrincipals(request.getfixturevalue("moto"))
    yield made
    made.close()


@pytest.fixture
def admin(kit: PrincipalKit) -> Any:
    return kit.admin


@pytest.fixture
def directory(kit: PrincipalKit) -> Any:
    return kit.directory


def add_human(admin: Any, principal_id: str = "hank", roles: dict | None = None) -> str:
    return admin.add(principal_id, "human", None, roles or {"demo": ["reviewer"]}, None, KEY, NOW)


def refusal(call: Any) -> str:
    with pytest.raises(PrincipalRefused) as caught:
        call()
    return caught.value.code


# -- add and authenticate -------------------------------------------------------------------------


def test_an_added_principal_authenticates_with_its_token(admin: Any, directory: Any):
    # Given a human added with roles in two projects
    token = admin.add(
        "hank", "human", None, {"demo": ["reviewer", "requester"], "shop": ["auditor"]}, None, KEY, NOW
    )
    # When the token is presented
    principal = directory.authenticate(token, KEY, NOW)
    # Then it names that principal, its kind and roles, and nothing secret
    assert principal is not None
    assert principal["id"] == "hank"
    assert principal["kind"] == "human"
    assert principal["sponsor"] is None
    assert principal["roles"] == {"demo": ["requester", "reviewer"], "shop": ["auditor"]}
    assert principal["token_expires_at"] == "2026-11-30T00:00:00.000000Z"  # 12 h by default for humans
    assert "token_hmac" not in principal


def test_an_agent_with_a_human_sponsor_is_added(admin: Any, directory: Any):
    # Given a human
    add_human(admin)
    # When an agent sponsored by that human is added
    token = admin.add("agent-1", "agent", "hank", {"demo": ["requester"]}, None, KEY, NOW)
    # Then it authenticates with its sponsor, and its token lives 90 days
    principal = directory.authenticate(token, KEY, NOW)
    assert principal is not None and principal["sponsor"] == "hank"
    assert principal["token_expires_at"] == "2027-02-27T12:00:00.000000Z"


@pytest.mark.parametrize(
    ("kind", "role"),
    [
        ("agent", "reviewer"),
        ("agent", "publisher"),
        ("agent", "admin"),
        ("ci", "reviewer"),
        ("ci", "admin"),
        ("human", "publisher"),
        ("human", "superuser"),
    ],
)
def test_kind_and_role_combinations_outside_the_table_are_refused(admin: Any, kind: str, role: str):
    # Given a role the kind may not hold
    # When the principal is added  Then it is refused and nothing is written
    assert (
        refusal(lambda: admin.add("p-1", kind, None, {"demo": [role]}, None, KEY, NOW)) == "ROLE_NOT_ALLOWED"
    )
    assert admin.get("p-1") is None


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"kind": "robot"}, "INVALID_KIND"),
        ({"roles": {}}, "NO_ROLES"),
        ({"roles": {"demo": []}}, "NO_ROLES"),
        ({"roles": {"Not A Project": ["requester"]}}, "INVALID_PROJECT"),
        ({"principal_id": "bad id"}, "INVALID_ID"),
        ({"principal_id": "PRINCIPAL#x"}, "INVALID_ID"),
        ({"ttl_seconds": 0}, "INVALID_TTL"),
        ({"ttl_seconds": 10**9}, "INVALID_TTL"),
    ],
)
def test_bad_additions_are_refused(admin: Any, arguments: dict, code: str):
    # Given an addition with one thing wrong
    call = {
        "principal_id": "p-1",
        "kind": "ci",
        "sponsor": None,
        "roles": {"demo": ["requester"]},
        "ttl_seconds": None,
        "key": KEY,
        "now": NOW,
        **arguments,
    }
    # When added  Then it is refused with its code
    assert refusal(lambda: admin.add(**call)) == code


def test_a_human_with_a_sponsor_is_refused(admin: Any):
    # Given a human who could sponsor
    add_human(admin)
    # When another human is added with that sponsor  Then it is refused
    assert refusal(lambda: admin.add("h-2", "human", "hank", {"demo": ["reviewer"]}, None, KEY, NOW)) == (
        "SPONSOR_NOT_ALLOWED"
    )


def test_sponsors_must_be_existing_unrevoked_humans(admin: Any):
    # Given a revoked human, a live ci principal and a live human
    add_human(admin, "gone")
    admin.revoke("gone", False, NOW)
    admin.add("ci-bot", "ci", None, {"demo": ["publisher"]}, None, KEY, NOW)
    add_human(admin, "hank")
    # When agents are added with a missing, a revoked, and a non-human sponsor  Then each is refused
    for sponsor in ("nobody", "gone", "ci-bot"):
        code = refusal(
            lambda s=sponsor: admin.add("agent-1", "agent", s, {"demo": ["requester"]}, None, KEY, NOW)
        )
        assert code == "SPONSOR_INVALID"
    # And with the live human it is accepted
    assert admin.add("agent-1", "agent", "hank", {"demo": ["requester"]}, None, KEY, NOW)


def test_a_sponsor_revoked_after_the_check_is_caught_by_the_transaction(admin: Any, monkeypatch):
    # Given a live human whose revocation lands between the sponsor check and the write
    add_human(admin)
    real_check = admin._check_sponsor

    def check_then_revoke(sponsor: str) -> None:
        real_check(sponsor)
        admin.revoke(sponsor, False, NOW)

    monkeypatch.setattr(admin, "_check_sponsor", check_then_revoke)
    # When the agent is added  Then the in-transaction condition refuses it and nothing is written
    assert (
        refusal(lambda: admin.add("agent-1", "agent", "hank", {"demo": ["requester"]}, None, KEY, NOW))
        == "SPONSOR_INVALID"
    )
    assert admin.get("agent-1") is None


def test_an_id_is_never_reused_even_after_revocation(admin: Any):
    # Given a principal
    add_human(admin)
    # When the same id is added again  Then it is refused
    assert refusal(lambda: add_human(admin)) == "PRINCIPAL_EXISTS"
    # And after it is revoked, still refused
    admin.revoke("hank", False, NOW)
    assert refusal(lambda: add_human(admin)) == "PRINCIPAL_EXISTS"


def test_a_concurrent_addition_of_the_same_id_loses_in_the_transaction(admin: Any, monkeypatch):
    # Given a principal written by someone else after this addition's existence check
    add_human(admin)
    real_get = admin._get_item
    monkeypatch.setattr(
        admin, "_get_item", lambda principal_id: None if principal_id == "hank" else real_get(principal_id)
    )
    # When the same id is added  Then the transaction's condition refuses it
    assert refusal(lambda: add_human(admin)) == "PRINCIPAL_EXISTS"


# -- rotate, revoke, expiry -----------------------------------------------------------------------


def test_rotation_invalidates_the_old_token(kit: PrincipalKit, admin: Any, directory: Any):
    # Given a principal and its token
    old = add_human(admin)
    # When the token is rotated with a one-hour TTL
    new = admin.rotate("hank", 3600, KEY, NOW)
    # Then the old token is refused, the new one accepted, and one token item remains
    assert new != old
    assert directory.authenticate(old, KEY, NOW) is None
    principal = directory.authenticate(new, KEY, NOW)
    assert principal is not None and principal["token_expires_at"] == "2026-11-29T13:00:00.000000Z"
    assert kit.token_hashes() == [token_hmac(KEY, new)]


def test_a_leftover_token_does_not_outlive_its_replacement(kit: PrincipalKit, admin: Any, directory: Any):
    # Given a rotated principal whose old token was put back (a partial restore, a stray write)
    old = add_human(admin)
    admin.rotate("hank", None, KEY, NOW)
    kit.put_token(token_hmac(KEY, old), "hank", "2099-01-01T00:00:00.000000Z")
    # When the old token is presented  Then it is refused: it is not the principal's current token
    assert directory.authenticate(old, KEY, NOW) is None


def test_revocation_invalidates_the_token(admin: Any, directory: Any):
    # Given a principal and its token
    token = add_human(admin)
    # When it is revoked as compromised
    view = admin.revoke("hank", True, NOW)
    # Then the token is refused, the principal is marked, and it cannot be rotated back to life
    assert directory.authenticate(token, KEY, NOW) is None
    assert view["revoked"] and view["compromised"] and view["revoked_at"] == "2026-11-29T12:00:00.000000Z"
    stored = admin.get("hank")
    assert stored is not None and stored["revoked"] and stored["compromised"]
    assert refusal(lambda: admin.rotate("hank", None, KEY, NOW)) == "PRINCIPAL_REVOKED"


def test_a_principal_whose_sponsor_is_revoked_is_refused_as_if_revoked(admin: Any, directory: Any):
    # Given an agent and a ci principal sponsored by a human, and an agent sponsored by another human
    add_human(admin)
    add_human(admin, "rita")
    agent = admin.add("agent-1", "agent", "hank", {"demo": ["requester"]}, None, KEY, NOW)
    ci = admin.add("ci-1", "ci", "hank", {"demo": ["publisher"]}, None, KEY, NOW)
    other = admin.add("agent-2", "agent", "rita", {"demo": ["requester"]}, None, KEY, NOW)
    assert directory.authenticate(agent, KEY, NOW) is not None
    # When the sponsor is revoked (plainly, not as compromised)
    admin.revoke("hank", False, NOW)
    # Then every principal it sponsors is refused, though none of them was revoked itself
    assert directory.authenticate(agent, KEY, NOW) is None
    assert directory.authenticate(ci, KEY, NOW) is None
    stored = admin.get("agent-1")
    assert stored is not None and stored["revoked"] is False
    # And a principal sponsored by someone else still stands
    assert directory.authenticate(other, KEY, NOW) is not None


def test_a_principal_whose_sponsor_is_revoked_is_not_rotated(admin: Any):
    # Given an agent whose sponsor was revoked
    add_human(admin)
    admin.add("agent-1", "agent", "hank", {"demo": ["requester"]}, None, KEY, NOW)
    admin.revoke("hank", False, NOW)
    # When its token is rotated  Then refused: the new token could never be used
    assert refusal(lambda: admin.rotate("agent-1", None, KEY, NOW)) == "SPONSOR_INVALID"


def test_a_sponsor_whose_own_token_expired_still_holds(admin: Any, directory: Any):
    # Given an agent sponsored by a human whose token lives one hour
    admin.add("hank", "human", None, {"demo": ["reviewer"]}, 3600, KEY, NOW)
    agent = admin.add("agent-1", "agent", "hank", {"demo": ["requester"]}, None, KEY, NOW)
    # When the sponsor's token has expired (expiry is not revocation)
    later = NOW + timedelta(hours=2)
    # Then the agent still authenticates
    assert directory.authenticate(agent, KEY, later) is not None


def test_a_missing_sponsor_refuses_its_principals(kit: PrincipalKit, admin: Any, directory: Any):
    # Given an agent whose sponsor's entry is gone (a partial restore): it cannot be shown to act for anyone
    add_human(admin)
    agent = admin.add("agent-1", "agent", "hank", {"demo": ["requester"]}, None, KEY, NOW)
    kit.delete_principal("hank")
    # When the agent's token is presented  Then it is refused
    assert directory.authenticate(agent, KEY, NOW) is None


def test_revoking_again_may_only_add_compromised(admin: Any):
    # Given a principal revoked as compromised
    add_human(admin)
    admin.revoke("hank", True, NOW)
    # When it is revoked again without the flag, later
    view = admin.revoke("hank", False, NOW + timedelta(hours=1))
    # Then it stays compromised and keeps its first revocation time
    assert view["compromised"] is True
    assert view["revoked_at"] == "2026-11-29T12:00:00.000000Z"


def test_unknown_principals_cannot_be_rotated_or_revoked(admin: Any):
    # Given an empty table  When rotating or revoking  Then NOT_FOUND
    assert refusal(lambda: admin.rotate("ghost", None, KEY, NOW)) == "NOT_FOUND"
    assert refusal(lambda: admin.revoke("ghost", False, NOW)) == "NOT_FOUND"


def test_a_token_is_refused_exactly_at_its_expiry(admin: Any, directory: Any):
    # Given a token living one hour
    token = admin.add("ci-bot", "ci", None, {"demo": ["publisher"]}, 3600, KEY, NOW)
    # When presented a microsecond before, exactly at, and after its expiry
    expiry = NOW + timedelta(hours=1)
    # Then it is accepted only before
    assert directory.authenticate(token, KEY, expiry - timedelta(microseconds=1)) is not None
    assert directory.authenticate(token, KEY, expiry) is None
    assert directory.authenticate(token, KEY, expiry + timedelta(seconds=1)) is None


def test_a_token_under_another_key_is_refused(admin: Any, directory: Any):
    # Given a token issued under one key  When checked under another  Then it is unknown
    token = add_human(admin)
    assert directory.authenticate(token, b"x" * 32, NOW) is None


# -- nothing secret at rest or in listings --------------------------------------------------------


def test_listing_never_shows_a_token_or_a_hash(admin: Any):
    # Given a human, a sponsored agent and a revoked ci principal
    tokens = [add_human(admin)]
    tokens.append(admin.add("agent-1", "agent", "hank", {"demo": ["requester"]}, None, KEY, NOW))
    tokens.append(admin.add("ci-bot", "ci", None, {"demo": ["publisher"]}, None, KEY, NOW))
    admin.revoke("ci-bot", False, NOW)
    # When listed
    listing = admin.principals()
    # Then every principal appears, sorted, and no token or token hash appears anywhere
    assert [p["id"] for p in listing] == ["agent-1", "ci-bot", "hank"]
    text = json.dumps(listing)
    for token in tokens:
        assert token not in text
        assert token_hmac(KEY, token) not in text
    assert "hmac" not in text and "TOKEN#" not in text and "snt_" not in text


def test_the_store_holds_no_plaintext_token(kit: PrincipalKit, admin: Any):
    # Given principals added and rotated
    tokens = [add_human(admin), admin.rotate("hank", None, KEY, NOW)]
    tokens.append(admin.add("agent-1", "agent", "hank", {"demo": ["requester"]}, None, KEY, NOW))
    # When everything stored is read
    text = kit.stored_text()
    # Then no token, nor its random body, appears in it
    for token in tokens:
        assert token not in text
        assert token[4:47] not in text
    assert "snt_" not in text


# -- failing closed --------------------------------------------------------------------------------


def test_malformed_tokens_are_refused_without_a_store_read(kit: PrincipalKit):
    # Given a directory whose store would fail on any read
    directory, _admin = kit.unreadable()
    token = new_token()
    # When a token with a broken checksum is presented  Then it is refused and nothing is read
    assert directory.authenticate(token[:-1] + ("A" if token[-1] != "A" else "B"), KEY, NOW) is None


def test_an_unreadable_store_makes_authentication_and_administration_raise(kit: PrincipalKit):
    # Given a directory and an admin on a store that cannot be read
    directory, admin = kit.unreadable()
    # When a well-formed token is presented, or a principal is looked up or added  Then DirectoryUnavailable,
    # never None
    for call in (
        lambda: directory.authenticate(new_token(), KEY, NOW),
        lambda: admin.get("hank"),
        lambda: admin.principals(),
        lambda: add_human(admin),
    ):
        with pytest.raises(DirectoryUnavailable):
            call()


def test_store_errors_other_than_conditions_surface_as_unavailable(
    kit: PrincipalKit, admin: Any, monkeypatch: pytest.MonkeyPatch
):
    # Given a principal, and then a store that fails every write
    add_human(admin, "rita")
    kit.fail_writes(monkeypatch)
    # When a principal is added, rotated or revoked  Then DirectoryUnavailable, not a refusal
    for call in (
        lambda: add_human(admin),
        lambda: admin.rotate("rita", None, KEY, NOW),
        lambda: admin.revoke("rita", False, NOW),
    ):
        with pytest.raises(DirectoryUnavailable):
            call()
