"""The decision for one commit, asked of the service: `Service.verdict` finds the candidate for (subject,
revision, environment) and reads its decision within one time budget, and never raises. Anything that is
not a well-formed `ready` or `hold` is a `Verdict` in state "error" that carries the `Problem`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .settings import ClientConfigError, ClientSettings, SentinelClientError, load_settings

if TYPE_CHECKING:  # the HTTP client is imported only when a release needs the service
    from .api import Response, SentinelClient

# A socket timeout normally ends a slow call; the watchdog ends one that trickles bytes forever.
WATCHDOG_GRACE_SECONDS = 0.25


class Problem(Exception):
    """Why no decision could be established; `code` is stable."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


@dataclass
class Verdict:
    """The answer for one thing judged. `findings` carry the service's findings, or the problem."""

    target: str
    state: str  # "ready", "hold" or "error"
    candidate_id: str | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)
    # What a recorded decision (`POST …/decisions`) answered as `receipt`: a DSSE envelope, or None.
    receipt: Any = None

    @classmethod
    def error(cls, target: str, problem: Problem, candidate_id: str | None = None) -> Verdict:
        return cls(target, "error", candidate_id, [{"code": problem.code, "detail": problem.detail}])


# ---- the service -------------------------------------------------------------------------------------


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self._end - time.monotonic()


def _timeout(client: SentinelClient, deadline: _Deadline) -> Problem:
    return Problem("TIMEOUT", f"no answer from {client.base_url} within {deadline.seconds:g} s")


def _call(client: SentinelClient, deadline: _Deadline, request: Callable[[], Response]) -> Response:
    """One request within what is left of the budget; a watchdog bounds a server that trickles bytes."""
    remaining = deadline.remaining()
    if remaining <= 0:
        raise _timeout(client, deadline)
    client.timeout = remaining
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["response"] = request()
        except BaseException as error:  # noqa: BLE001 - handed back to the caller's thread
            box["error"] = error

    worker = threading.Thread(target=run, name="sentinel-request", daemon=True)
    worker.start()
    worker.join(remaining + WATCHDOG_GRACE_SECONDS)
    if worker.is_alive():
        raise _timeout(client, deadline)
    from .api import TransportError

    error = box.get("error")
    if isinstance(error, TransportError):
        if error.code == "TIMEOUT":
            raise _timeout(client, deadline)
        raise Problem(error.code, error.message)
    if isinstance(error, SentinelClientError):
        raise Problem(error.code, error.message)
    if isinstance(error, ValueError):
        raise Problem("INVALID_REQUEST", str(error))
    if error is not None:
        raise error
    return box["response"]


def _refusal(response: Response, settings: ClientSettings) -> Problem:
    body = response.body if isinstance(response.body, dict) else {}
    if response.status == 401:
        return Problem("UNAUTHORIZED", "the service asked for a token (HTTP 401); check SENTINEL_TOKEN_FILE")
    if response.status == 403 and body == {"message": "Forbidden"}:
        return Problem(
            "TOKEN_REFUSED",
            "the service refused the token (HTTP 403): unknown, malformed, expired or revoked",
        )
    detail = body.get("detail") or body.get("title")
    text = f"HTTP {response.status}" + (f": {detail}" if isinstance(detail, str) and detail else "")
    if response.status == 404:
        text += f" (project {settings.project} does not exist, or the token has no role in it)"
    if response.retry_after is not None:
        text += f"; retry after {response.retry_after:g} s"
    return Problem(response.code or f"HTTP_{response.status}", text)


def _json_object(
    response: Response, settings: ClientSettings, what: str, statuses: tuple[int, ...] = (200,)
) -> dict[str, Any]:
    if not response.ok:
        raise _refusal(response, settings)
    if response.status not in statuses or not isinstance(response.body, dict):
        raise Problem("BAD_RESPONSE", f"the {what} answered HTTP {response.status} without a JSON object")
    return response.body


def _describe(settings: ClientSettings, revision: str) -> str:
    return f"{settings.subject} at {revision} in {settings.environment}"


def find_candidate(
    client: SentinelClient, settings: ClientSettings, revision: str, deadline: _Deadline
) -> str | None:
    """The id of the one open candidate for (subject, revision, environment), None when there is none.
    Raises Problem for an answer that is not a well-formed lookup of exactly this commit."""
    project, subject, environment = settings.project or "", settings.subject, settings.environment
    found = _json_object(
        _call(
            client,
            deadline,
            lambda: client.find_candidates(
                project, subject=subject, revision=revision, environment=environment
            ),
        ),
        settings,
        "candidate lookup",
    )
    items = found.get("candidates")
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise Problem("BAD_RESPONSE", "the candidate lookup answered without a list of candidates")
    if any(
        (item.get("subject"), str(item.get("revision", "")).lower(), item.get("environment"))
        != (subject, revision, environment)
        for item in items
    ):
        raise Problem(
            "BAD_RESPONSE", "the candidate lookup answered with another subject, revision or environment"
        )
    if not items:
        return None
    if len(items) > 1:
        raise Problem(
            "AMBIGUOUS_CANDIDATE",
            f"{len(items)} candidates answer for one subject, revision and environment",
        )
    found_id = items[0].get("candidate_id")
    if not isinstance(found_id, str) or not found_id:
        raise Problem("BAD_RESPONSE", "the candidate lookup answered without a candidate id")
    return found_id


def judge(
    client: SentinelClient,
    settings: ClientSettings,
    revision: str,
    deadline: _Deadline,
    record: bool = False,
) -> Verdict:
    """Find the candidate for (subject, revision, environment) and read its decision; never raises.
    `record` (the CI gate, an enforcement point): the decision is recorded (`POST …/decisions`), the
    service's release path, which compares both chains with the witness first; the hook's advisory read
    (`GET …/decision`) does not in AWS (docs/failing-closed.md). A recorded decision keeps the receipt the
    service answered with (`Verdict.receipt`)."""
    target = _describe(settings, revision)
    project = settings.project or ""
    candidate_id: str | None = None
    try:
        found_id = find_candidate(client, settings, revision, deadline)
        if found_id is None:
            return Verdict(
                target,
                "hold",
                findings=[
                    {
                        "code": "NO_CANDIDATE",
                        "detail": "no candidate exists for this subject, revision and environment",
                        "remediation_hint": "create the candidate for this exact commit (POST "
                        f"/v1/projects/{project}/candidates) and have CI attest it",
                    }
                ],
            )
        candidate_id = found_id
        ask = client.record_decision if record else client.decision
        # A recorded decision is 201; one the service could not record, a 200 hold.
        body = _json_object(
            _call(client, deadline, lambda: ask(project, found_id)),
            settings,
            "decision",
            (200, 201) if record else (200,),
        )
        verdict = _verdict(body, target, found_id, revision)
        if record:
            verdict.receipt = body.get("receipt")
        return verdict
    except Problem as problem:
        return Verdict.error(target, problem, candidate_id)


def _verdict(body: dict[str, Any], target: str, candidate_id: str, revision: str) -> Verdict:
    findings = body.get("findings")
    if not isinstance(findings, list) or not all(
        isinstance(item, dict) and isinstance(item.get("code"), str) for item in findings
    ):
        raise Problem("BAD_RESPONSE", "the decision has no list of findings")
    if str(body.get("revision", "")).lower() != revision:
        raise Problem(
            "BAD_RESPONSE", f"the decision is for revision {body.get('revision')!r}, not {revision}"
        )
    decision = body.get("decision")
    if decision == "ready":
        if findings:
            raise Problem("BAD_RESPONSE", "the decision is ready but carries findings")
        return Verdict(target, "ready", candidate_id)
    if decision == "hold":
        return Verdict(target, "hold", candidate_id, findings)
    shown = json.dumps(decision)[:40]
    raise Problem(
        "UNKNOWN_DECISION", f"the service answered the decision {shown}, which is neither ready nor hold"
    )


def _connect(settings: ClientSettings) -> SentinelClient:
    from .api import SentinelClient

    settings.require("url", "project", "subject", "environment", "token_file")
    try:
        return SentinelClient.from_settings(settings)
    except ValueError as error:
        raise Problem("TOKEN_UNAVAILABLE", str(error)) from None


def _settings() -> ClientSettings:
    try:
        return load_settings()
    except ClientConfigError as error:
        raise Problem(error.code, error.message) from None


class Service:
    """The service as one hook run sees it: connected once, one time budget for every request."""

    def __init__(self, settings: ClientSettings, record: bool = False) -> None:
        self.settings = settings
        self.record = record  # the CI gate records the decision it acts on (judge)
        self._client: SentinelClient | None = None
        self._problem: Problem | None = None
        self._deadline: _Deadline | None = None

    def verdict(self, revision: str, fresh_budget: bool = False) -> Verdict:
        """`fresh_budget`: this read gets the whole budget again (a gate polling with `--wait`)."""
        if fresh_budget and self._client is not None:
            self._deadline = _Deadline(self.settings.timeout_seconds)
        if self._client is None and self._problem is None:
            try:
                self._client = _connect(self.settings)
                self._deadline = _Deadline(self.settings.timeout_seconds)
            except ClientConfigError as error:
                self._problem = Problem(error.code, error.message)
            except Problem as problem:
                self._problem = problem
        if self._problem is not None:
            return Verdict.error(f"the commit {revision}", self._problem)
        assert self._client is not None and self._deadline is not None
        return judge(self._client, self.settings, revision, self._deadline, self.record)
