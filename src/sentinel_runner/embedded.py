"""The embedded DynamoDB-compatible store: moto's server, in-process, on loopback."""

import logging
import threading
from typing import Any


class EmbeddedStore:
    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        # moto's request log would interleave with the runner's own output.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)

    def start(self) -> str:
        self._server.start()
        host, port = self._server.get_host_and_port()
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self._server.stop()


class LockedClient:
    """Serialises every call on one boto3 client: moto is not safe under concurrent transactions, and one
    call at a time keeps DynamoDB's atomic conditional semantics intact."""

    def __init__(self, client: Any, lock: "threading.Lock | None" = None) -> None:
        self._client = client
        self._lock = lock or threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr) or name.startswith("_") or name in ("exceptions", "meta"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return call
