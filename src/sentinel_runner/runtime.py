"""The local runner's and the operator commands' services: the composition root over the store they name
(the embedded one, DynamoDB Local, or real DynamoDB with the operator's own AWS credentials)."""

import ipaddress
import os
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from sentinel_domain.ports import Checkpoints
from sentinel_service.adapters.tables import ensure_tables
from sentinel_service.compose import OPERATOR_TIMEOUTS, Services, compose, dynamodb_client
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
