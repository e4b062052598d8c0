"""The authorizer on the principals table (moto), as the composition root and the Lambda handler build it, and
the token key it hashes under. What a principal directory does on either store is in
test_principals_contract.py."""

import json
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sentinel_domain.memory import FixedClock
from sentinel_service.adapters.principals import (
    PrincipalAdmin,
)
from sentinel_service.adapters.tables import principals_table_definition
from sentinel_service.adapters.token_key import TokenKeyUnavailable, clear_token_key_cache, load_token_key
from sentinel_service.adapters.tokens import new_token
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


def test_the_authorizer_refuses_a_principal_whose_sponsor_is_revoked(
    authorize: Handler, admin: PrincipalAdmin, client: Any, monkeypatch: pytest.MonkeyPatch
):
    # Given an agent sponsored by a human, and a human without a sponsor
    add_human(admin)
    human = add_human(admin, "rita")
    agent = admin.add("agent-1", "agent", "hank", {"demo": ["requester"]}, None, KEY, NOW)
    reads: list[str] = []
    original = client.get_item
    monkeypatch.setattr(client, "get_item", lambda **kw: reads.append(kw["Key"]["pk"]["S"]) or original(**kw))
    # When the agent's token is presented  Then it passes, at the cost of one more read (its sponsor's)
    assert authorize(event("Bearer " + agent), None)["isAuthorized"] is True
    assert [r.split("#")[0] for r in reads] == ["TOKEN", "PRINCIPAL", "PRINCIPAL"] and reads[
        -1
    ] == "PRINCIPAL#hank"
    # And an unsponsored principal costs no extra read
    reads.clear()
    assert authorize(event("Bearer " + human), None)["isAuthorized"] is True
    assert len(reads) == 2
    # When the sponsor is revoked  Then the agent is refused as if revoked itself (API Gateway answers 403)
    admin.revoke("hank", False, NOW)
    assert authorize(event("Bearer " + agent), None) == {"isAuthorized": False}


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
