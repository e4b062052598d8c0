"""The principals table on moto: adding, authenticating, rotating, revoking, and the authorizer's answers."""

import json
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from sentinel_domain.memory import FixedClock
from sentinel_service.adapters.principals import (
    DirectoryUnavailable,
    PrincipalAdmin,
    PrincipalDirectory,
    PrincipalRefused,
)
from sentinel_service.adapters.tables import principals_table_definition
from sentinel_service.adapters.token_key import TokenKeyUnavailable, clear_token_key_cache, load_token_key
from sentinel_service.adapters.tokens import new_token, token_hmac
from sentinel_service.compose import compose, lambda_services
from sentinel_service.handlers import authorizer
from sentinel_service.http.authorizer import Handler, make_authorizer
from sentinel_service.settings import Settings

TABLE = "sentinel-principals"
REGION = "us-east-1"
KEY = bytes(range(32))
NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def fresh_key_cache() -> Iterator[None]:
    clear_token_key_cache()
    yield
    clear_token_key_cache()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SECURITY_TOKEN", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield


@pytest.fixture
def client(aws: None) -> Any:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    # The deployed shape: a string hash key `pk`, on demand.
    dynamodb.create_table(**principals_table_definition(TABLE))
    return dynamodb


@pytest.fixture
def admin(client: Any) -> PrincipalAdmin:
    return PrincipalAdmin(client, TABLE)


@pytest.fixture
def directory(client: Any) -> PrincipalDirectory:
    return PrincipalDirectory(client, TABLE)


@pytest.fixture
def authorize(client: Any) -> Handler:
    """The authorizer over the test table, the known key and a fixed clock, as the composition root builds
    it."""
    services = compose(
        Settings.from_env({"SENTINEL_PRINCIPALS_TABLE": TABLE, "AWS_REGION": REGION}),
        dynamodb=client,
        token_key=KEY,
        clock=FixedClock(NOW),
    )
    return make_authorizer(lambda: services)


@pytest.fixture
def lambda_container() -> Iterator[None]:
    """A fresh Lambda container: the handler module's services are built from the environment on first use."""
    lambda_services.cache_clear()
    clear_token_key_cache()
    yield
    lambda_services.cache_clear()
    clear_token_key_cache()


def add_human(admin: PrincipalAdmin, principal_id: str = "hank", roles: dict | None = None) -> str:
    return admin.add(principal_id, "human", None, roles or {"demo": ["reviewer"]}, None, KEY, NOW)


def refusal(call: Any) -> str:
    with pytest.raises(PrincipalRefused) as caught:
        call()
    return caught.value.code


def scan_text(client: Any) -> str:
    return json.dumps(client.scan(TableName=TABLE)["Items"])


# -- add and authenticate -------------------------------------------------------------------------


def test_an_added_principal_authenticates_with_its_token(
    admin: PrincipalAdmin, directory: PrincipalDirectory
):
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


def test_an_agent_with_a_human_sponsor_is_added(admin: PrincipalAdmin, directory: PrincipalDirectory):
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
def test_kind_and_role_combinations_outside_the_table_are_refused(
    admin: PrincipalAdmin, kind: str, role: str
):
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
def test_bad_additions_are_refused(admin: PrincipalAdmin, arguments: dict, code: str):
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


def test_a_human_with_a_sponsor_is_refused(admin: PrincipalAdmin):
    # Given a human who could sponsor
    add_human(admin)
    # When another human is added with that sponsor  Then it is refused
    assert refusal(lambda: admin.add("h-2", "human", "hank", {"demo": ["reviewer"]}, None, KEY, NOW)) == (
        "SPONSOR_NOT_ALLOWED"
    )


def test_sponsors_must_be_existing_unrevoked_humans(admin: PrincipalAdmin):
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


def test_a_sponsor_revoked_after_the_check_is_caught_by_the_transaction(admin: PrincipalAdmin, monkeypatch):
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


def test_an_id_is_never_reused_even_after_revocation(admin: PrincipalAdmin):
    # Given a principal
    add_human(admin)
    # When the same id is added again  Then it is refused
    assert refusal(lambda: add_human(admin)) == "PRINCIPAL_EXISTS"
    # And after it is revoked, still refused
    admin.revoke("hank", False, NOW)
    assert refusal(lambda: add_human(admin)) == "PRINCIPAL_EXISTS"


def test_a_concurrent_addition_of_the_same_id_loses_in_the_transaction(admin: PrincipalAdmin, monkeypatch):
    # Given a principal written by someone else after this addition's existence check
    add_human(admin)
    real_get = admin._get_item
    monkeypatch.setattr(
        admin, "_get_item", lambda principal_id: None if principal_id == "hank" else real_get(principal_id)
    )
    # When the same id is added  Then the transaction's condition refuses it
    assert refusal(lambda: add_human(admin)) == "PRINCIPAL_EXISTS"


# -- rotate, revoke, expiry -----------------------------------------------------------------------


def test_rotation_invalidates_the_old_token(
    admin: PrincipalAdmin, directory: PrincipalDirectory, client: Any
):
    # Given a principal and its token
    old = add_human(admin)
    # When the token is rotated with a one-hour TTL
    new = admin.rotate("hank", 3600, KEY, NOW)
    # Then the old token is refused, the new one accepted, and one token item remains
    assert new != old
    assert directory.authenticate(old, KEY, NOW) is None
    principal = directory.authenticate(new, KEY, NOW)
    assert principal is not None and principal["token_expires_at"] == "2026-11-29T13:00:00.000000Z"
    token_items = [i for i in client.scan(TableName=TABLE)["Items"] if i["pk"]["S"].startswith("TOKEN#")]
    assert [i["pk"]["S"] for i in token_items] == ["TOKEN#" + token_hmac(KEY, new)]


def test_a_leftover_token_item_does_not_outlive_its_replacement(
    admin: PrincipalAdmin, directory: PrincipalDirectory, client: Any
):
    # Given a rotated principal whose old token item was put back (a partial restore, a stray write)
    old = add_human(admin)
    admin.rotate("hank", None, KEY, NOW)
    client.put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": "TOKEN#" + token_hmac(KEY, old)},
            "principal_id": {"S": "hank"},
            "expires_at": {"S": "2099-01-01T00:00:00.000000Z"},
        },
    )
    # When the old token is presented  Then it is refused: it is not the principal's current token
    assert directory.authenticate(old, KEY, NOW) is None


def test_revocation_invalidates_the_token(admin: PrincipalAdmin, directory: PrincipalDirectory):
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


def test_revoking_again_may_only_add_compromised(admin: PrincipalAdmin):
    # Given a principal revoked as compromised
    add_human(admin)
    admin.revoke("hank", True, NOW)
    # When it is revoked again without the flag, later
    view = admin.revoke("hank", False, NOW + timedelta(hours=1))
    # Then it stays compromised and keeps its first revocation time
    assert view["compromised"] is True
    assert view["revoked_at"] == "2026-11-29T12:00:00.000000Z"


def test_unknown_principals_cannot_be_rotated_or_revoked(admin: PrincipalAdmin):
    # Given an empty table  When rotating or revoking  Then NOT_FOUND
    assert refusal(lambda: admin.rotate("ghost", None, KEY, NOW)) == "NOT_FOUND"
    assert refusal(lambda: admin.revoke("ghost", False, NOW)) == "NOT_FOUND"


def test_a_token_is_refused_exactly_at_its_expiry(admin: PrincipalAdmin, directory: PrincipalDirectory):
    # Given a token living one hour
    token = admin.add("ci-bot", "ci", None, {"demo": ["publisher"]}, 3600, KEY, NOW)
    # When presented a microsecond before, exactly at, and after its expiry
    expiry = NOW + timedelta(hours=1)
    # Then it is accepted only before
    assert directory.authenticate(token, KEY, expiry - timedelta(microseconds=1)) is not None
    assert directory.authenticate(token, KEY, expiry) is None
    assert directory.authenticate(token, KEY, expiry + timedelta(seconds=1)) is None


def test_a_token_under_another_key_is_refused(admin: PrincipalAdmin, directory: PrincipalDirectory):
    # Given a token issued under one key  When checked under another  Then it is unknown
    token = add_human(admin)
    assert directory.authenticate(token, b"x" * 32, NOW) is None


# -- nothing secret at rest or in listings --------------------------------------------------------


def test_listing_never_shows_a_token_or_a_hash(admin: PrincipalAdmin):
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


def test_the_table_holds_no_plaintext_token(admin: PrincipalAdmin, client: Any):
    # Given principals added and rotated
    tokens = [add_human(admin), admin.rotate("hank", None, KEY, NOW)]
    tokens.append(admin.add("agent-1", "agent", "hank", {"demo": ["requester"]}, None, KEY, NOW))
    # When the whole table is read
    text = scan_text(client)
    # Then no token, nor its random body, appears in it
    for token in tokens:
        assert token not in text
        assert token[4:47] not in text
    assert "snt_" not in text


# -- failing closed --------------------------------------------------------------------------------


def test_malformed_tokens_are_refused_without_a_store_read(admin: PrincipalAdmin):
    # Given a directory whose store would fail on any read
    class Exploding:
        def get_item(self, **_: Any) -> Any:
            raise AssertionError("no read expected")

    directory = PrincipalDirectory(Exploding(), TABLE)
    token = new_token()
    # When a token with a broken checksum is presented  Then it is refused and nothing is read
    assert directory.authenticate(token[:-1] + ("A" if token[-1] != "A" else "B"), KEY, NOW) is None


def test_an_unreadable_table_makes_authentication_raise(aws: None):
    # Given a directory on a table that does not exist
    directory = PrincipalDirectory(boto3.client("dynamodb", region_name=REGION), "missing-table")
    # When a well-formed token is presented  Then DirectoryUnavailable, never None
    with pytest.raises(DirectoryUnavailable):
        directory.authenticate(new_token(), KEY, NOW)


# -- the authorizer --------------------------------------------------------------------------------


def event(authorization: str | None) -> dict[str, Any]:
    headers = {"content-type": "application/json"}
    if authorization is not None:
        headers["authorization"] = authorization
    return {"version": "2.0", "type": "REQUEST", "routeKey": "GET /v1/projects/{project}", "headers": headers}


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer ", "Basic abc", "Bearer snt_abc", "Token " + "snt_" + "0" * 49],
)
def test_the_authorizer_refuses_missing_and_malformed_credentials(
    authorize: Handler, authorization: str | None
):
    # Given a request without a usable bearer token  When authorized  Then refused
    assert authorize(event(authorization), None) == {"isAuthorized": False}


def test_the_authorizer_refuses_an_unknown_token(authorize: Handler):
    # Given a well-formed token that was never issued  When authorized  Then refused
    assert authorize(event("Bearer " + new_token()), None) == {"isAuthorized": False}


def test_the_authorizer_answers_a_valid_token_with_the_principal(authorize: Handler, admin: PrincipalAdmin):
    # Given a sponsored agent with roles in two projects
    add_human(admin)
    token = admin.add(
        "agent-1", "agent", "hank", {"demo": ["requester"], "shop": ["auditor"]}, None, KEY, NOW
    )
    # When its token is presented
    answer = authorize(event("Bearer " + token), None)
    # Then the principal is passed on as the authorizer context, roles as a JSON string
    assert answer == {
        "isAuthorized": True,
        "context": {
            "principal_id": "agent-1",
            "kind": "agent",
            "sponsor": "hank",
            "roles": json.dumps({"demo": ["requester"], "shop": ["auditor"]}, separators=(",", ":")),
        },
    }
    # And a human without a sponsor gets an empty sponsor string
    human = authorize(event("Bearer " + admin.rotate("hank", None, KEY, NOW)), None)
    assert human["isAuthorized"] is True and human["context"]["sponsor"] == ""


def test_the_authorizer_reads_the_identity_source_when_headers_are_absent(
    authorize: Handler, admin: PrincipalAdmin
):
    # Given an event carrying the credential only in identitySource
    token = add_human(admin)
    request = {"version": "2.0", "type": "REQUEST", "identitySource": ["Bearer " + token]}
    # When authorized  Then accepted
    assert authorize(request, None)["isAuthorized"] is True


def test_the_authorizer_refuses_revoked_and_expired_tokens(authorize: Handler, admin: PrincipalAdmin):
    # Given a revoked principal's token and a token that expired
    revoked = add_human(admin)
    admin.revoke("hank", False, NOW)
    expired = admin.add("ci-bot", "ci", None, {"demo": ["publisher"]}, 1, KEY, NOW - timedelta(seconds=1))
    # When each is presented  Then refused
    assert authorize(event("Bearer " + revoked), None) == {"isAuthorized": False}
    assert authorize(event("Bearer " + expired), None) == {"isAuthorized": False}


def test_the_authorizer_fails_closed_when_the_table_is_unreadable(aws: None):
    # Given an authorizer whose table does not exist
    services = compose(
        Settings.from_env({"SENTINEL_PRINCIPALS_TABLE": "missing-table", "AWS_REGION": REGION}),
        dynamodb=boto3.client("dynamodb", region_name=REGION),
        token_key=KEY,
    )
    authorize = make_authorizer(lambda: services)
    # When a well-formed token is presented  Then refused, not an exception
    assert authorize(event("Bearer " + new_token()), None) == {"isAuthorized": False}


@pytest.mark.usefixtures("lambda_container")
def test_the_authorizer_builds_itself_from_settings_on_first_call(
    admin: PrincipalAdmin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Given a key file and environment settings, nothing injected, and a token issued on the real clock
    key_file = tmp_path / "token.key"
    key_file.write_text(KEY.hex())
    monkeypatch.setenv("SENTINEL_TOKEN_KEY_FILE", str(key_file))
    monkeypatch.setenv("SENTINEL_PRINCIPALS_TABLE", TABLE)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.delenv("SENTINEL_DYNAMODB_ENDPOINT", raising=False)
    token = admin.add("hank", "human", None, {"demo": ["reviewer"]}, None, KEY, datetime.now(UTC))
    # When the token is presented to the handler module Lambda runs
    answer = authorizer.handler(event("Bearer " + token), None)
    # Then the authorizer loaded the key and the table itself and accepted it
    assert answer["isAuthorized"] is True
    assert answer["context"]["principal_id"] == "hank"


@pytest.mark.usefixtures("lambda_container")
def test_the_authorizer_refuses_everything_without_a_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Given settings pointing at a key file that does not exist
    monkeypatch.setenv("SENTINEL_TOKEN_KEY_FILE", str(tmp_path / "absent.key"))
    # When a well-formed token is presented  Then refused
    assert authorizer.handler(event("Bearer " + new_token()), None) == {"isAuthorized": False}


# -- the token key ---------------------------------------------------------------------------------


def settings(**overrides: Any) -> Settings:
    env = {"SENTINEL_RUNTIME": "local"}
    env.update(overrides)
    return Settings.from_env(env)


def test_a_key_file_is_created_private_only_when_asked(tmp_path: Path):
    # Given no key file
    path = tmp_path / "nested" / "token.key"
    config = settings(SENTINEL_TOKEN_KEY_FILE=str(path))
    # When loaded without create  Then unavailable, and nothing is created
    with pytest.raises(TokenKeyUnavailable):
        load_token_key(config)
    assert not path.exists()
    # When loaded with create  Then a private file of at least 32 random bytes exists and is reused
    key = load_token_key(config, create=True)
    assert len(key) >= 32
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    clear_token_key_cache()
    assert load_token_key(config) == key


@pytest.mark.parametrize(("content", "expected"), [(KEY.hex() + "\n", KEY), (b"r" * 40, b"r" * 40)])
def test_key_files_may_be_hex_or_raw(tmp_path: Path, content: Any, expected: bytes):
    # Given a key file in hex or raw bytes
    path = tmp_path / "token.key"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    # When loaded  Then the key is the decoded bytes
    assert load_token_key(settings(SENTINEL_TOKEN_KEY_FILE=str(path))) == expected


def test_a_short_key_is_refused(tmp_path: Path):
    # Given a key file of 16 bytes (32 hex characters)
    path = tmp_path / "token.key"
    path.write_text("ab" * 16)
    # When loaded  Then refused
    with pytest.raises(TokenKeyUnavailable):
        load_token_key(settings(SENTINEL_TOKEN_KEY_FILE=str(path)))


def test_the_default_key_file_is_used_locally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Given a home directory and no configured key
    monkeypatch.setenv("HOME", str(tmp_path))
    # When loaded with create on the local runtime  Then the default path holds the key
    key = load_token_key(settings(), create=True)
    assert (tmp_path / ".local" / "share" / "sentinel" / "token.key").read_text().strip() == key.hex()
    # And in AWS without a secret, there is no key at all
    with pytest.raises(TokenKeyUnavailable):
        load_token_key(settings(SENTINEL_RUNTIME="aws_lambda"))


def test_the_key_comes_from_secrets_manager_in_aws(aws: None):
    # Given a secret holding a hex key
    arn = boto3.client("secretsmanager", region_name=REGION).create_secret(
        Name="sentinel/token-key", SecretString=KEY.hex()
    )["ARN"]
    config = settings(SENTINEL_RUNTIME="aws_lambda", SENTINEL_TOKEN_KEY_SECRET_ARN=arn, AWS_REGION=REGION)
    # When loaded  Then it is the key
    assert load_token_key(config) == KEY
    # And a secret that cannot be read makes the key unavailable
    clear_token_key_cache()
    missing = settings(
        SENTINEL_RUNTIME="aws_lambda", SENTINEL_TOKEN_KEY_SECRET_ARN=arn + "-gone", AWS_REGION=REGION
    )
    with pytest.raises(TokenKeyUnavailable):
        load_token_key(missing)


def test_store_errors_other_than_conditions_surface_as_unavailable(admin: PrincipalAdmin, monkeypatch):
    # Given a store that throttles every transaction
    def throttled(**_: Any) -> Any:
        raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "TransactWriteItems")

    monkeypatch.setattr(admin._client, "transact_write_items", throttled)
    # When a principal is added  Then DirectoryUnavailable, not a refusal
    with pytest.raises(DirectoryUnavailable):
        add_human(admin)
