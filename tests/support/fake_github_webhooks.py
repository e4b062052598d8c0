"""Webhook deliveries as GitHub makes them: a JSON payload that validates against `@octokit/openapi-webhooks`
for its event and action, posted with `X-GitHub-Event`, `X-GitHub-Delivery` (a GUID),
`X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body under the webhook secret, hex>` (and the legacy SHA-1
`X-Hub-Signature`), the hook's target headers and `User-Agent: GitHub-Hookshot/<id>`.

Payloads are built for `pull_request` (opened, reopened, synchronize), `merge_group` (checks_requested) and
`check_run` (rerequested): the smallest instance of the documented schema, with the repository, the
installation, the sender and the event's commits set from the fake's world, then `payload_overrides`
merged in (nested dicts merge; anything else replaces). A payload the description refuses is recorded as a
violation, unless the test asks for it (`validate=False`, for malformed-delivery cases)."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from support.github_description import WebhookDescription, webhook_description

if TYPE_CHECKING:
    from support.fake_github import FakeGitHub

DEFAULT_ACTIONS = {"pull_request": "opened", "merge_group": "checks_requested", "check_run": "rerequested"}
HOOKSHOT = "GitHub-Hookshot/5c1bd2e"


@dataclass(frozen=True)
class Delivery:
    status: int
    body: bytes
    headers: dict[str, str]
    delivery_id: str
    payload: dict[str, Any]

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def sign(secret: str | bytes, body: bytes) -> str:
    key = secret.encode() if isinstance(secret, str) else secret
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


class WebhookSender:
    def __init__(self, fake: FakeGitHub) -> None:
        self.fake = fake
        self.description: WebhookDescription = webhook_description()

    def _common(self, repository: str, installation_id: int, sender: str) -> dict[str, Any]:
        from support.fake_github_routes import repository_object

        repo = self.fake.repo(repository)
        described = self.description.instance(self.description.at("#/components/schemas/repository-webhooks"))
        listed = repository_object(self.fake, repo)
        described.update({k: listed[k] for k in ("id", "name", "full_name", "private")})
        described["owner"] = dict(described["owner"], login=repo.full_name.split("/")[0])
        return {
            "repository": described,
            "installation": {
                "id": installation_id,
                "node_id": f"MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u{installation_id}",
            },
            "sender": dict(
                self.description.instance(self.description.at("#/components/schemas/simple-user")),
                login=sender,
            ),
        }

    def payload(
        self,
        event: str,
        action: str | None = None,
        *,
        repository: str | None = None,
        installation_id: int | None = None,
        base: str | None = None,
        head: str | None = None,
        number: int = 1,
        author: str = "octocat",
        check_run_id: int = 1,
        check_name: str = "sentinel/prod",
        overrides: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The payload GitHub would send for `event`.`action` about the fake's repository (the first one
        installed when none is named): the smallest documented instance, the world's facts, then overrides."""
        action = action or (overrides or {}).get("action") or DEFAULT_ACTIONS[event]
        if repository is None:
            repository = next(iter(self.fake.repositories.values())).full_name
        if installation_id is None:
            installation_id = next(
                i for i, repos in self.fake.installations.items() if repository.lower() in repos
            )
        value = self.description.payload_instance(event, action)
        value = merge(value, self._common(repository, installation_id, author))
        value["action"] = action
        if event == "pull_request":
            value["number"] = number
            pull = value["pull_request"]
            pull.update(number=number, state="open")
            pull["user"] = dict(pull["user"] or {}, login=author)
            pull["head"] = dict(pull["head"], sha=head, ref=f"feature-{number}")
            pull["base"] = dict(pull["base"], sha=base, ref="main")
            pull["head"]["repo"] = pull["base"]["repo"] = merge(
                pull["base"]["repo"] or {}, {"full_name": repository}
            )
            if action == "synchronize":
                value["before"], value["after"] = base, head
        elif event == "merge_group":
            group = value["merge_group"]
            group.update(
                head_sha=head,
                base_sha=base,
                head_ref=f"refs/heads/gh-readonly-queue/main/pr-{number}-{base}",
                base_ref="refs/heads/main",
            )
            group["head_commit"] = dict(group["head_commit"], id=head, tree_id=head)
        elif event == "check_run":
            run = value["check_run"]
            run.update(id=check_run_id, head_sha=head, name=check_name)
            run["check_suite"] = dict(run["check_suite"], head_sha=head)
            if isinstance(run.get("app"), dict):
                run["app"] = dict(run["app"], id=self.fake.app_id)
        return merge(value, overrides or {})

    def deliver(
        self,
        url: str,
        event: str,
        payload_overrides: dict[str, Any] | None = None,
        *,
        action: str | None = None,
        secret: str | bytes | None = None,
        delivery_id: str | None = None,
        signature: str | None = None,
        body: bytes | None = None,
        validate: bool = True,
        timeout: float = 10.0,
        **facts: Any,
    ) -> Delivery:
        """Post one signed delivery of `event` to `url` and return the response. `facts` go to `payload`;
        `secret`, `signature` or `body` replace what GitHub would send, for the refusal cases."""
        payload = self.payload(event, action, overrides=payload_overrides, **facts)
        if validate and body is None:
            self.fake.violations += self.description.check_payload(event, payload["action"], payload)
        data = body if body is not None else json.dumps(payload).encode("utf-8")
        delivery_id = delivery_id or str(uuid.uuid4())
        key = self.fake.webhook_secret if secret is None else secret
        headers = {
            "Content-Type": "application/json",
            "User-Agent": HOOKSHOT,
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery_id,
            "X-GitHub-Hook-ID": "1",
            "X-GitHub-Hook-Installation-Target-ID": str(self.fake.app_id),
            "X-GitHub-Hook-Installation-Target-Type": "integration",
            "X-Hub-Signature": "sha1="
            + hmac.new(key.encode() if isinstance(key, str) else key, data, hashlib.sha1).hexdigest(),
            "X-Hub-Signature-256": signature if signature is not None else sign(key, data),
        }
        request = urllib.request.Request(url, data=data, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return Delivery(
                    response.status, response.read(), dict(response.headers.items()), delivery_id, payload
                )
        except urllib.error.HTTPError as error:
            with error:
                return Delivery(error.code, error.read(), dict(error.headers.items()), delivery_id, payload)
