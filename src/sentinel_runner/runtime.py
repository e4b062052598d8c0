"""The local runner's and the operator commands' services: the composition root over the store they name —
the embedded SQLite database in a data directory (the default), or DynamoDB at an endpoint (moto, DynamoDB
Local), or a deployed stack's tables named explicitly by its stage and region."""

import ipaddress
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sentinel_domain.ports import Checkpoints
from sentinel_service.adapters.tables import ensure_tables
from sentinel_service.adapters.token_key import TokenKeyUnavailable
from sentinel_service.compose import OPERATOR_TIMEOUTS, Services, compose, dynamodb_client
from sentinel_service.settings import Settings

from .data_dir import DataDir
from .embedded import LockedClient


def is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def connect(
    endpoint: str | None,
    lock: "threading.Lock | None" = None,
    *,
    checkpoints: Checkpoints | None = None,
    environ: Mapping[str, str] | None = None,
) -> Services:
    """Against `endpoint` (the embedded store, DynamoDB Local) or, without one, real DynamoDB with the
    operator's own AWS credentials. A store on an endpoint gets its tables created when missing."""
    env = dict(os.environ if environ is None else environ)
    if endpoint:
        env["SENTINEL_DYNAMODB_ENDPOINT"] = endpoint
    settings = Settings.from_env(env)
    credentials: dict[str, Any] = {}
    if (
        settings.dynamodb_endpoint
        and is_loopback(settings.dynamodb_endpoint)
        and not env.get("AWS_ACCESS_KEY_ID")
    ):
        # A loopback store checks no signature; boto3 still wants some credentials to sign with.
        credentials.update(aws_access_key_id="local", aws_secret_access_key="local")
    client = LockedClient(dynamodb_client(settings, OPERATOR_TIMEOUTS, credentials), lock)
    if settings.dynamodb_endpoint:
        ensure_tables(client, settings.state_table, settings.principals_table)
    return compose(
        settings,
        dynamodb=client,
        checkpoints=checkpoints,
        environ=env,
        create_token_key=settings.runtime == "local",
    )


def open_embedded(
    data: DataDir, *, checkpoints: Checkpoints | None = None, environ: Mapping[str, str] | None = None
) -> Services:
    """The embedded store in `data`: chains, principals and token hashes in one SQLite database, the token
    key beside it (created 0600 on first use, unless SENTINEL_TOKEN_KEY_FILE names another). Raises
    StoreUnavailable with a clear message when the database cannot be opened (locked, corrupt, read-only,
    written by a newer version)."""
    from sentinel_service.adapters.sqlite_database import SqliteDatabase
    from sentinel_service.adapters.sqlite_principals import SqlitePrincipalAdmin, SqlitePrincipalDirectory
    from sentinel_service.adapters.sqlite_store import SqliteStateStore

    env = dict(os.environ if environ is None else environ)
    env.setdefault("SENTINEL_TOKEN_KEY_FILE", str(data.token_key))
    env["SENTINEL_RUNTIME"] = "local"
    env.pop("SENTINEL_DYNAMODB_ENDPOINT", None)
    # A key is made only with a new store: a store whose key has gone missing holds tokens no new key can
    # check, and a fresh key would silently void every one of them.
    key_file = Path(env["SENTINEL_TOKEN_KEY_FILE"]).expanduser()
    if data.database.exists() and not key_file.exists():
        raise TokenKeyUnavailable(
            f"the token key {key_file} is missing, but the store in {data.path} holds tokens made under it: "
            "restore the key file (a new key would void every token)"
        )
    database = SqliteDatabase(data.database)
    return compose(
        Settings.from_env(env),
        store=SqliteStateStore(database),
        directory=SqlitePrincipalDirectory(database),
        admin=SqlitePrincipalAdmin(database),
        checkpoints=checkpoints,
        environ=env,
        create_token_key=True,
    )


def open_stack(stage: str, region: str, *, environ: Mapping[str, str] | None = None) -> Services:
    """A deployed stack's tables and token key, found from its CloudFormation outputs, with the operator's
    own AWS credentials: never reached without naming the stage and the region."""
    import boto3

    from sentinel_service import names

    env = dict(os.environ if environ is None else environ)
    stack = names.stack_name(stage)
    described = boto3.client("cloudformation", region_name=region).describe_stacks(StackName=stack)
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described["Stacks"][0].get("Outputs", [])}
    env.update(
        SENTINEL_STATE_TABLE=outputs[names.OUTPUT_STATE_TABLE],
        SENTINEL_PRINCIPALS_TABLE=outputs[names.OUTPUT_PRINCIPALS_TABLE],
        SENTINEL_TOKEN_KEY_SECRET_ARN=outputs[names.OUTPUT_TOKEN_KEY_SECRET_ARN],
        AWS_REGION=region,
        SENTINEL_RUNTIME="operator",
    )
    env.pop("SENTINEL_DYNAMODB_ENDPOINT", None)
    env.pop("SENTINEL_TOKEN_KEY_FILE", None)
    settings = Settings.from_env(env)
    client = dynamodb_client(settings, OPERATOR_TIMEOUTS)
    return compose(settings, dynamodb=client, environ=env)
