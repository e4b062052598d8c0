"""API Gateway HTTP API request authorizer (payload 2.0, simple responses): a token names a live principal,
or the request is refused. Every failure, including an unreadable table or key, refuses (fail closed)."""

import logging
from collections.abc import Callable
from typing import Any

from sentinel_service.adapters.principals import authorizer_response
from sentinel_service.compose import ServicesProvider

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def make_authorizer(services: ServicesProvider) -> Handler:
    """The authorizer over the principal directory and token key that `services` provides (built on the first
    call, never at import time: a key that cannot be read is tried again on the next call)."""

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        try:
            svc = services()
            directory, key = svc.directory, svc.token_key()
            return authorizer_response(event, lambda token: directory.authenticate(token, key, svc.now()))
        except Exception as error:  # whatever went wrong, the answer is no
            log.warning("authorizer refused on error: %s", type(error).__name__)
            return {"isAuthorized": False}

    return handler
