"""Wiring for the operator's commands and the local runner: a DynamoDB client for the chosen store, the gate
and the principals table over it, and the token key."""

import ipaddress
import os
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sentinel_domain.usecases import Gate
from sentinel_service.adapters.dynamodb_store import DynamoStateStore
from sentinel_service.adapters.principals import PrincipalAdmin, PrincipalDirectory
from sentinel_service.adapters.system_ports import RandomIds, SystemClock
from sentinel_service.adapters.tables import ensure_tables
from sentinel_service.adapters.token_key import load_token_key
from sentinel_service.compose import build_proposer
from sentinel_service.settings import Settings

from .embedded import LockedClient


def is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Runtime:
    settings: Settings
    client: Any
    gate: Gate
    store: DynamoStateStore
    admin: PrincipalAdmin
    directory: PrincipalDirectory

    def token_key(self) -> bytes:
        return load_token_key(self.settings, create=self.settings.runtime == "local")


def connect(endpoint: str | None, lock: "threading.Lock | None" = None) -> Runtime:
    """Against `endpoint` (the embedded store, DynamoDB Local) or, without one, real DynamoDB with the
    operator's own AWS credentials."""
    import boto3
    from botocore.config import Config

    env = dict(os.environ)
    if endpoint:
        env["SENTINEL_DYNAMODB_ENDPOINT"] = endpoint
    settings = Settings.from_env(env)
    kwargs: dict[str, Any] = {}
    if settings.dynamodb_endpoint and is_loopback(settings.dynamodb_endpoint) \
            and not os.environ.get("AWS_ACCESS_KEY_ID"):
        # A loopback store checks no signature; boto3 still wants some credentials to sign with.
        kwargs.update(aws_access_key_id="local", aws_secret_access_key="local")
    raw = boto3.client("dynamodb", region_name=settings.region, endpoint_url=settings.dynamodb_endpoint,
                       config=Config(connect_timeout=2, read_timeout=10, retries={"max_attempts": 3}), **kwargs)
    client = LockedClient(raw, lock)
    if settings.dynamodb_endpoint:
        ensure_tables(client, settings.state_table, settings.principals_table)
    store = DynamoStateStore(client, settings.state_table)
    gate = Gate(store, SystemClock(), RandomIds(), proposer=build_proposer(settings))
    return Runtime(settings, client, gate, store,
                   PrincipalAdmin(client, settings.principals_table),
                   PrincipalDirectory(client, settings.principals_table))
