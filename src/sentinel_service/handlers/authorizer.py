"""API Gateway HTTP API request authorizer (payload 2.0, simple responses): a token names a live principal,
or the request is refused. Every failure, including an unreadable table or key, refuses (fail closed)."""

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sentinel_service.adapters.principals import PrincipalDirectory, authorizer_response
from sentinel_service.adapters.token_key import load_token_key
from sentinel_service.settings import Settings

log = logging.getLogger(__name__)

# Filled on the first call of a cold start (never at import time), or by set_directory_for_tests.
_state: dict[str, Any] = {}


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    try:
        directory, key, clock = _resolve()
        return authorizer_response(event, lambda token: directory.authenticate(token, key, clock()))
    except Exception as error:  # whatever went wrong, the answer is no
        log.warning("authorizer refused on error: %s", type(error).__name__)
        return {"isAuthorized": False}


def _resolve() -> tuple[PrincipalDirectory, bytes, Callable[[], datetime]]:
    if "directory" not in _state:
        import boto3
        from botocore.config import Config

        settings = Settings.from_env()
        key = load_token_key(settings)  # raises before anything is cached: the next call tries again
        client = boto3.client(
            "dynamodb",
            region_name=settings.region,
            endpoint_url=settings.dynamodb_endpoint,
            config=Config(connect_timeout=2, read_timeout=2, retries={"max_attempts": 2, "mode": "standard"}),
        )
        _state.update(directory=PrincipalDirectory(client, settings.principals_table), key=key)
    return _state["directory"], _state["key"], _state.get("clock") or _utc_now


def _utc_now() -> datetime:
    return datetime.now(UTC)


def set_directory_for_tests(
    directory: PrincipalDirectory | None,
    key: bytes | None = None,
    clock: Callable[[], datetime] | None = None,
) -> None:
    """Inject the directory, key and clock (None clears them, so the next call builds from settings)."""
    _state.clear()
    if directory is not None:
        _state.update(directory=directory, key=key, clock=clock)
