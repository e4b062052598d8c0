"""The local runner's HTTP server: loopback only, each request through the emulated API Gateway."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from .gateway import LocalGateway

# API Gateway's own payload limit; the handlers apply the per-route limits below it.
GATEWAY_MAX_BODY = 10 * 1024 * 1024
# The only hosts the local runner binds: it is not a security boundary (API.md, "The local runner").
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def make_server(gateway: LocalGateway, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    if host not in LOOPBACK_HOSTS:
        raise ValueError("the local runner listens on loopback only: it is not a security boundary")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "sentinel-local"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > GATEWAY_MAX_BODY:
                self._send(
                    413,
                    {"content-type": "application/json"},
                    json.dumps({"message": "Request Entity Too Large"}).encode(),
                )
                self.close_connection = True
                return
            body = self.rfile.read(length) if length else None
            parts = urlsplit(self.path)
            query = dict(parse_qsl(parts.query, keep_blank_values=True)) or None
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, out_headers, data = gateway.invoke(self.command, parts.path, headers, body, query)
            self._send(status, out_headers, data)

        def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                if name.lower() not in ("content-length", "connection"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve  # noqa: N815 - stdlib naming

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def serve_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, name="sentinel-http", daemon=True)
    thread.start()
    return thread
