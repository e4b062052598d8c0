"""API Gateway HTTP API (payload format 2.0) events, as the gateway builds them for Lambda."""

import base64
import time
import uuid
from typing import Any
from urllib.parse import urlencode


def http_event(
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    body: bytes | str | None = None,
    query: dict[str, str] | None = None,
    route_key: str | None = None,
) -> dict[str, Any]:
    raw = body.encode("utf-8") if isinstance(body, str) else (body or b"")
    try:
        text, encoded = raw.decode("utf-8"), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(raw).decode("ascii"), True
    now = time.time()
    return {
        "version": "2.0",
        "routeKey": route_key or f"{method} {path}",
        "rawPath": path,
        "rawQueryString": urlencode(query or {}),
        "headers": {k.lower(): v for k, v in (headers or {}).items()},
        "queryStringParameters": dict(query) if query else None,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": "localhost",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": (headers or {}).get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": route_key or f"{method} {path}",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "body": text if raw else None,
        "isBase64Encoded": encoded,
    }


def authorizer_event(event: dict[str, Any]) -> dict[str, Any]:
    """The REQUEST authorizer's event (payload 2.0) for a route call."""
    header = event["headers"].get("authorization")
    return {
        "version": "2.0",
        "type": "REQUEST",
        "routeArn": f"arn:aws:execute-api:local:0:local/$default/"
        f"{event['requestContext']['http']['method']}{event['rawPath']}",
        "identitySource": [header] if header else [],
        "routeKey": event["routeKey"],
        "rawPath": event["rawPath"],
        "rawQueryString": event["rawQueryString"],
        "headers": event["headers"],
        "requestContext": event["requestContext"],
    }


def with_authorizer(event: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    event["requestContext"]["authorizer"] = {"lambda": context}
    return event


def response_parts(result: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    status = int(result.get("statusCode", 200))
    headers = {k: str(v) for k, v in (result.get("headers") or {}).items()}
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers[name] = ", ".join(values)
    body = result.get("body") or ""
    data = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode("utf-8")
    return status, headers, data
