"""Refusals to RFC 9457 problem documents, by code, in one place."""

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response

from sentinel_domain.errors import Refusal

PROBLEM_TYPE = "https://sentinel.dev/problems/"


def problem_body(code: str, status: int, title: str, detail: str, findings: list[dict[str, Any]] | None = None,
                 extra: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": PROBLEM_TYPE + code.lower().replace("_", "-"), "title": title,
                            "status": status, "detail": detail, "code": code}
    if findings:
        body["findings"] = findings
    body.update(extra or {})
    return body


def problem_response(refusal: Refusal) -> Response[str]:
    body = problem_body(refusal.code, refusal.status, refusal.title, refusal.detail, refusal.findings,
                        refusal.extra)
    return Response(status_code=refusal.status, content_type="application/problem+json",
                    body=json.dumps(body, ensure_ascii=False), headers=dict(refusal.headers))
