"""The GitHub webhook as the acceptance suite sees it: anonymous (no bearer token), so it must refuse every
delivery GitHub did not sign, and a refusal must change nothing (docs/github.md)."""

from __future__ import annotations

import json
import os
import secrets
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from sentinel_service import names
from sentinel_service.adapters.tokens import new_token

HTTP_TIMEOUT = 30.0
# The GitHub secrets' ARNs, which the emulated runner must not follow (moto's CloudFormation makes no secret).
FORGE_SECRETS = (names.ENV_GITHUB_WEBHOOK_SECRET_ARN, names.ENV_GITHUB_APP_KEY_SECRET_ARN)
WEBHOOK_REFUSAL = (401, "WEBHOOK_SIGNATURE_INVALID")


def post_delivery(url: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
    """One webhook delivery as GitHub sends it (its own headers, which the client library does not send)."""
    data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(
        url + "/v1" + path,
        data=data,
        headers={"Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/acceptance", **headers},
        method="POST",
    )
    try:
        answer = urllib.request.urlopen(request, timeout=HTTP_TIMEOUT)  # noqa: S310 - the target's own URL
    except urllib.error.HTTPError as error:
        answer = error
    with answer:
        raw = answer.read(64 * 1024)
        status = answer.code if isinstance(answer, urllib.error.HTTPError) else answer.status
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, None


def unsigned_deliveries_refused(url: str, path: str) -> list[str]:
    """The webhook takes no bearer token, so it must refuse every delivery GitHub did not sign: one without a
    signature, one with a wrong one, and one carrying a token instead. A refusal changes nothing: the same
    delivery id, sent again unsigned, is refused again (a recorded delivery would answer 200 "duplicate")."""
    delivery = "acceptance-" + new_token()[-12:]
    body = {
        "action": "opened",
        "pull_request": {"number": 1, "head": {"sha": "a" * 40}, "base": {"sha": "b" * 40}},
        "repository": {"full_name": "acceptance/unsigned"},
        "installation": {"id": 1},
    }
    headers = {"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": delivery}
    problems = []
    for who, sent in (
        ("unsigned", headers),
        ("wrongly signed", {**headers, "X-Hub-Signature-256": "sha256=" + "0" * 64}),
        ("with a token instead of a signature", {**headers, "Authorization": f"Bearer {new_token()}"}),
        ("unsigned, again", headers),
    ):
        status, answer = post_delivery(url, path, body, sent)
        code = answer.get("code") if isinstance(answer, dict) else None
        if (status, code) != WEBHOOK_REFUSAL:
            problems.append(
                f"POST {path} {who}: {status} {code or ''}".rstrip()
                + f", expected {WEBHOOK_REFUSAL[0]} {WEBHOOK_REFUSAL[1]}"
            )
    return problems


def webhook_secret_file(beside: Path) -> Path:
    """A webhook secret for the emulated runner (moto's CloudFormation makes no Secrets Manager secret), 0600
    beside the chain key: the suite signs nothing, but refusing unsigned deliveries needs a secret to check
    them against."""
    path = beside.with_name("webhook.secret")
    if not path.exists():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_hex(24) + "\n")
    return path
