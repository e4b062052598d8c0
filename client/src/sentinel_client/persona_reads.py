"""Reads the reviewer's, auditor's and operator's commands share: every candidate of a project (paged), and
the candidate view's facts in the one shape the commands print, whichever version of the gate answered
(a fact the gate does not keep reads as "not recorded", never as "none")."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from .api import SentinelClient, iter_pages
from .cli_context import body_of

PAGE = 500


def candidate_rows(
    client: SentinelClient, project: str, subject: str | None = None, environment: str | None = None
) -> Iterator[dict[str, Any]]:
    """Every candidate the project lists ({candidate_id, subject, revision, environment, created_at}), all
    pages, in the service's order."""

    def fetch(cursor: str | None) -> Any:
        return client.find_candidates(
            project, subject=subject, environment=environment, limit=PAGE, cursor=cursor
        )

    for page in iter_pages(fetch):
        body = body_of(page, 200)
        yield from body.get("candidates") or []


def parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def plan_version_of(view: Mapping[str, Any], digest: str | None) -> int | None:
    """The plan version with this digest (None when no version has it)."""
    for version in view.get("plan_versions") or []:
        if version.get("plan_digest") == digest:
            return int(version["plan_version"])
    return None


def current_plan_version(view: Mapping[str, Any]) -> int | None:
    return plan_version_of(view, view.get("plan_digest"))


def changed_files(view: Mapping[str, Any]) -> dict[str, Any] | None:
    """{files, count, truncated}; None when the gate does not record the changed files."""
    found = view.get("changed_files")
    if not isinstance(found, dict):
        return None
    files = [f for f in found.get("files") or [] if isinstance(f, str)]
    count = found.get("count")
    return {
        "files": files,
        "count": count if isinstance(count, int) else len(files),
        "truncated": bool(found.get("truncated")),
    }


def failing_tests(evidence: Mapping[str, Any]) -> dict[str, Any] | None:
    """{names, count} of an evidence summary's failing tests; None when the gate does not keep them. Takes
    both shapes a gate may answer: `failing_tests: [names]` with `failing_tests_count`, or
    `failing_tests: {names, count}`."""
    found = evidence.get("failing_tests")
    if isinstance(found, dict):
        names = [n for n in found.get("names") or [] if isinstance(n, str)]
        count = found.get("count")
    elif isinstance(found, list):
        names = [n for n in found if isinstance(n, str)]
        count = evidence.get("failing_tests_count")
    else:
        return None
    return {"names": names, "count": count if isinstance(count, int) else len(names)}


def source_of(evidence: Mapping[str, Any]) -> dict[str, Any] | None:
    found = evidence.get("source")
    return found if isinstance(found, dict) else None


def short(digest: Any, size: int = 12) -> str:
    return str(digest)[:size] if digest else "-"


def read_plan_version(client: SentinelClient, project: str, cid: str, version: int) -> dict[str, Any] | None:
    """Plan version `version` of a candidate ({plan_version, plan_digest, plan, ...}), or None when the gate
    will not say. `GET .../plans/{version}` first; a gate without that route (404 and no problem code) is
    read from the candidate's audit chain instead, whose `plan.stored` payloads hold every version. Callers
    check the digest against the one they expect."""
    answer = client.get_plan(project, cid, version)
    if answer.status == 200 and isinstance(answer.body, dict):
        return answer.body
    if answer.status != 404 or answer.code is not None:
        body_of(answer, 200)  # says the gate's refusal
    for page in iter_pages(lambda cursor: client.candidate_audit(project, cid, limit=PAGE, cursor=cursor)):
        for event in body_of(page, 200).get("events") or []:
            payload = event.get("payload")
            if (
                event.get("type") == "plan.stored"
                and isinstance(payload, dict)
                and payload.get("plan_version") == version
            ):
                return {**payload, "read_from": "audit"}
    return None
