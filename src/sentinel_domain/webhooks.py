"""GitHub webhook deliveries: the signature check and the few fields Sentinel takes from each event.

A delivery is believed only once its `X-Hub-Signature-256` (HMAC-SHA256 of the raw body under the webhook
secret) verifies, with a constant-time compare, before the body is parsed at all. Of a verified delivery only
what the forge worker needs is kept (repository, installation, commits, the author's login, the check's
candidate): the fact the gate records is small whatever GitHub sent, and nothing else of the payload reaches
a use case. Every refusal has a stable code; an event Sentinel does not act on is ignored with a code.

Pure: the secret comes in as bytes, the body as bytes, the headers as strings."""

import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import Refusal
from .models import GITHUB_LOGIN, GITHUB_REPOSITORY, REVISION

SIGNATURE_PREFIX = "sha256="
DELIVERY_ID = re.compile(r"^[A-Za-z0-9-]{1,100}$")  # GitHub sends a GUID
EVENT_NAME = re.compile(r"^[a-z_]{1,60}$")
CANDIDATE_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")

# The events and actions the forge worker acts on; every other one is answered "ignored", nothing recorded.
ACTED_ON: dict[str, frozenset[str]] = {
    "pull_request": frozenset({"opened", "reopened", "synchronize"}),
    "merge_group": frozenset({"checks_requested"}),
    "check_run": frozenset({"rerequested"}),
}

# Ignored, with the code the answer carries.
IGNORED_EVENT = "WEBHOOK_EVENT_IGNORED"
IGNORED_PING = "WEBHOOK_PING"
IGNORED_REPOSITORY = "WEBHOOK_REPOSITORY_UNKNOWN"
IGNORED_CANDIDATE = "WEBHOOK_CHECK_UNKNOWN"
IGNORED_CODES = (IGNORED_EVENT, IGNORED_PING, IGNORED_REPOSITORY, IGNORED_CANDIDATE)


def signature_valid(secret: bytes, body: bytes, header: str | None) -> bool:
    """True only when `header` is `sha256=<hex>` of HMAC-SHA256(secret, body); compared in constant time.
    An empty secret never verifies anything (a deployment without a secret accepts no delivery)."""
    if not secret or not header or not header.startswith(SIGNATURE_PREFIX):
        return False
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    given = header[len(SIGNATURE_PREFIX) :].strip().lower()
    # compare_digest on ASCII text of any length: a wrong length is as slow as a wrong byte.
    return hmac.compare_digest(expected.encode("ascii"), given.encode("ascii", "replace"))


@dataclass(frozen=True)
class Delivery:
    """What Sentinel keeps of one verified delivery: where it comes from and what the worker needs."""

    delivery_id: str
    event: str
    action: str
    repository: str
    installation_id: int
    fields: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """As the fact (and the outbox item) carries it."""
        return {
            "delivery_id": self.delivery_id,
            "event": self.event,
            "action": self.action,
            "repository": self.repository,
            "installation_id": self.installation_id,
            **self.fields,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "Delivery":
        own = ("delivery_id", "event", "action", "repository", "installation_id")
        return cls(
            str(record["delivery_id"]),
            str(record["event"]),
            str(record["action"]),
            str(record["repository"]),
            int(record["installation_id"]),
            {k: v for k, v in record.items() if k not in own},
        )


@dataclass(frozen=True)
class Ignored:
    """A verified delivery Sentinel does not act on: answered with `code`, nothing recorded."""

    delivery_id: str
    event: str
    action: str
    code: str
    detail: str


def _malformed(detail: str) -> Refusal:
    return Refusal("WEBHOOK_MALFORMED", detail)


def _invalid(detail: str) -> Refusal:
    return Refusal("WEBHOOK_PAYLOAD_INVALID", detail)


def _at(payload: Any, *path: str) -> Any:
    value = payload
    for name in path:
        if not isinstance(value, dict) or name not in value:
            raise _invalid(f"the payload has no {'.'.join(path)}")
        value = value[name]
    return value


def _sha(payload: Any, *path: str) -> str:
    value = _at(payload, *path)
    if not isinstance(value, str) or not REVISION.match(value):
        raise _invalid(f"{'.'.join(path)} is not a full commit id")
    return value.lower()


def _login(payload: Any, *path: str) -> str | None:
    """The login at `path`, or None when the payload carries no user there (a deleted account, `ghost`)."""
    try:
        value = _at(payload, *path)
    except Refusal:
        return None
    return value if isinstance(value, str) and re.match(GITHUB_LOGIN, value) else None


def parse_delivery(event: str | None, delivery_id: str | None, body: bytes) -> Delivery | Ignored:
    """A verified delivery's body (its signature already checked by the caller) as what Sentinel keeps of it.
    Missing headers or a body that is not a JSON object: WEBHOOK_MALFORMED (400). An event acted on whose
    payload lacks a field the worker needs: WEBHOOK_PAYLOAD_INVALID (422). Anything else: Ignored."""
    if not delivery_id or not DELIVERY_ID.match(delivery_id):
        raise _malformed("X-GitHub-Delivery is missing or not a delivery id")
    if not event or not EVENT_NAME.match(event):
        raise _malformed("X-GitHub-Event is missing or not an event name")
    try:
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _malformed(
            "the body is not UTF-8 JSON (configure the webhook's content type as JSON)"
        ) from None
    if not isinstance(payload, dict):
        raise _malformed("the body is not a JSON object")
    raw_action = payload.get("action")
    action = raw_action if isinstance(raw_action, str) else ""
    if event == "ping":
        return Ignored(delivery_id, event, action, IGNORED_PING, "ping received; Sentinel acts on no ping")
    if action not in ACTED_ON.get(event, frozenset()):
        return Ignored(
            delivery_id, event, action, IGNORED_EVENT, f"Sentinel does not act on {event}.{action or '-'}"
        )
    repository = _at(payload, "repository", "full_name")
    if not isinstance(repository, str) or not re.match(GITHUB_REPOSITORY, repository):
        raise _invalid("repository.full_name is not an owner/name")
    installation = _at(payload, "installation", "id")
    if type(installation) is not int or installation < 1:
        raise _invalid("installation.id is not a positive integer (deliver to a GitHub App's webhook)")
    return Delivery(delivery_id, event, action, repository, installation, _fields(event, payload))


def _fields(event: str, payload: dict[str, Any]) -> dict[str, Any]:
    if event == "pull_request":
        number = _at(payload, "pull_request", "number")
        if type(number) is not int or number < 1:
            raise _invalid("pull_request.number is not a positive integer")
        return {
            "pull_request": number,
            "base": _sha(payload, "pull_request", "base", "sha"),
            "head": _sha(payload, "pull_request", "head", "sha"),
            "author": _login(payload, "pull_request", "user", "login"),
            # Who caused this event: for `synchronize` the one who pushed the head, who may not be the author.
            "sender": _login(payload, "sender", "login"),
        }
    if event == "merge_group":
        return {
            "base": _sha(payload, "merge_group", "base_sha"),
            "head": _sha(payload, "merge_group", "head_sha"),
            # The queue's branch names the pull request it tests (gh-readonly-queue/<base>/pr-<N>-<sha>); the
            # worker asks GitHub for its author, the requester of record of the queue's commit.
            "pull_request": _queued_pull_request(_at(payload, "merge_group", "head_ref")),
            "author": None,
        }
    candidate = _at(payload, "check_run", "external_id")
    if not isinstance(candidate, str) or not CANDIDATE_ID.match(candidate):
        raise _invalid("check_run.external_id does not name a candidate")
    return {"candidate_id": candidate, "head": _sha(payload, "check_run", "head_sha")}


QUEUE_REF = re.compile(r"^refs/heads/gh-readonly-queue/.+/pr-([1-9][0-9]{0,9})-[0-9a-f]{40,64}$")


def _queued_pull_request(head_ref: Any) -> int | None:
    """The pull request a merge queue's branch tests, or None when its name says none."""
    found = QUEUE_REF.match(head_ref) if isinstance(head_ref, str) else None
    return int(found.group(1)) if found else None


def forge_index_key(installation_id: int, repository: str) -> str:
    """The repository index's key: GitHub names are case-insensitive, installation ids are not."""
    return f"github/{installation_id}/{repository.lower()}"
