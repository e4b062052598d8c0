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

from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.integrity import ChainKeyUnavailable, ChainSeal
from sentinel_service.adapters.chain_key import create_key_file, read_key_file
from sentinel_service.adapters.file_witness import FileWitness, create_witness_file
from sentinel_service.adapters.receipt_signer import FileReceiptSigner
from sentinel_service.adapters.tables import ensure_tables
from sentinel_service.adapters.token_key import TokenKeyUnavailable
from sentinel_service.compose import OPERATOR_TIMEOUTS, Services, compose, dynamodb_client
from sentinel_service.settings import Settings

from .data_dir import DataDir, default_data_dir, open_data_dir
from .embedded import LockedClient


def local_integrity(key_file: Path, witness_file: Path, *, new: bool) -> tuple[ChainSeal, FileWitness]:
    """The local gate's seal and witness. A new store gets both, created together (the key 0600 and
    atomically); a store that has chains must find both where they were: a missing key cannot be replaced
    (every chain is authenticated under it), and a missing witness would vouch for any rollback."""
    if new:
        create_key_file(str(key_file))
        create_witness_file(witness_file)
    elif not key_file.exists():
        raise ChainKeyUnavailable(
            f"the chain key {key_file} is missing, but the store holds chains authenticated under it: "
            "restore the key file (a new key would make every chain fail verification)"
        )
    elif not witness_file.exists():
        raise StoreUnavailable(
            f"the witness {witness_file} is missing, but the store holds chains it vouched for: restore it "
            "(without it a rolled-back chain could not be told from a whole one)"
        )
    seal = ChainSeal(read_key_file(str(key_file)))
    return seal, FileWitness(witness_file, seal)


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
    environ: Mapping[str, str] | None = None,
) -> Services:
    """Against `endpoint` (the embedded store, DynamoDB Local) or, without one, real DynamoDB with the
    operator's own AWS credentials. A store on an endpoint gets its tables created when missing, and the
    local runner's seal and witness from the data directory (SENTINEL_CHAIN_KEY_FILE may name another key):
    the key is created when missing, and so is the witness (a development store: what its witness is worth
    is what the data directory keeps, docs/failing-closed.md)."""
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
    integrity: dict[str, Any] = {}
    if settings.runtime == "local":
        data = open_data_dir(default_data_dir(env))
        key_file = Path(settings.chain_key_file or data.chain_key).expanduser()
        # One witness per state table: two tables' chains of the same name are not one chain.
        witness_file = data.path / f"witness-{settings.state_table}.jsonl"
        create_witness_file(witness_file)
        seal, witness = local_integrity(key_file, witness_file, new=not key_file.exists())
        integrity.update(seal=seal, witness=witness)
        if not settings.receipt_key_id:  # a KMS key named explicitly is used as in AWS
            integrity.update(receipt_signer=local_receipt_signer(data, env))
    return compose(
        settings,
        dynamodb=client,
        environ=env,
        create_token_key=settings.runtime == "local",
        **integrity,
    )


def local_receipt_signer(data: DataDir, env: dict[str, str]) -> FileReceiptSigner:
    """The local gate's receipt key: SENTINEL_RECEIPT_KEY_FILE, else `receipt.key` in the data directory,
    created (0600) on first use. Unlike the chain key it may be made at any time: a new key voids no stored
    state, only the receipts signed under the old one (keep its public half to check those)."""
    env.setdefault("SENTINEL_RECEIPT_KEY_FILE", str(data.receipt_key))
    return FileReceiptSigner(env["SENTINEL_RECEIPT_KEY_FILE"], create=True)


def open_embedded(data: DataDir, *, environ: Mapping[str, str] | None = None) -> Services:
    """The embedded store in `data`: chains, principals and token hashes in one SQLite database, the token
    key beside it (created 0600 on first use, unless SENTINEL_TOKEN_KEY_FILE names another), and the chain
    key and witness (`local_integrity`: made with a new store, required with an existing one). Raises
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
    new = not data.database.exists()
    env.setdefault("SENTINEL_CHAIN_KEY_FILE", str(data.chain_key))
    seal, witness = local_integrity(Path(env["SENTINEL_CHAIN_KEY_FILE"]).expanduser(), data.witness, new=new)
    database = SqliteDatabase(data.database)
    signer = local_receipt_signer(data, env)
    services: Services | None = None

    def token_key() -> bytes:  # the admin tags a revoked row with it; read when a revocation runs
        if services is None:
            raise TokenKeyUnavailable("the token key is read only once the services are composed")
        return services.token_key()

    services = compose(
        Settings.from_env(env),
        store=SqliteStateStore(database),
        directory=SqlitePrincipalDirectory(database),
        admin=SqlitePrincipalAdmin(database, token_key=token_key),
        witness=witness,
        seal=seal,
        environ=env,
        create_token_key=True,
        receipt_signer=signer,
    )
    if new:
        # The token key is made with the store, as the chain key is: a first command that needs no token
        # (`projects create`) must not leave a store whose key the next command takes for lost.
        services.token_key()
    return services


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
