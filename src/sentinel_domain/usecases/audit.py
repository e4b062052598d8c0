"""Reading a chain as it is stored, a page at a time, with the whole chain's verification."""

import base64
import json
from typing import Any

from ..errors import Refusal, StoreUnavailable
from ..models import Actor
from ..outcomes import AuditPage
from ..ports import StreamRef
from ..state import public
from .chain import Chain, need, unavailable


def encode_cursor(position: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": position}).encode()).decode()


def decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor.encode()))["after"]
        if not isinstance(value, int) or value < 0:
            raise ValueError
        return value
    except Exception as error:  # any undecodable cursor is the caller's mistake
        raise Refusal("VALIDATION_FAILED", "cursor is not one this service issued") from error


# The payloads of one page stop here (the page then ends early and its cursor goes on): a page of 500 large
# facts must still fit one Lambda response (6 MB) with room to spare.
PAYLOAD_PAGE_BYTES = 2_000_000


def _with_payloads(events: list[dict[str, Any]], facts: dict[int, str]) -> list[dict[str, Any]]:
    """Each event with the fact it recorded (`payload`, as stored, without internal fields; null when the
    stored text cannot be read), up to the page's byte budget (at least one event)."""
    out: list[dict[str, Any]] = []
    used = 0
    for event in events:
        text = facts.get(event["seq"])
        used += len((text or "").encode("utf-8"))
        if out and used > PAYLOAD_PAGE_BYTES:
            break
        try:
            payload = json.loads(text) if text is not None else None
        except ValueError:
            payload = None
        out.append({**event, "payload": public(payload) if isinstance(payload, dict) else None})
    return out


def audit(chain: Chain, ref: StreamRef, actor: Actor, limit: int, cursor: str | None) -> AuditPage:
    """A project's chain is for admins and auditors; a candidate's for anyone with a role in the project."""
    need(actor, *(("admin", "auditor") if ref.candidate_id is None else ()))
    stream = chain.load(ref)
    if stream is None or not stream.facts:
        raise Refusal("NOT_FOUND", "no such " + ("project" if ref.candidate_id is None else "candidate"))
    after = decode_cursor(cursor)
    try:
        verification = chain.verify(stream)
    except StoreUnavailable as error:
        raise unavailable(f"{error}: the chain cannot be verified") from error
    page = _with_payloads([e for e in stream.events if e["seq"] > after][:limit], stream.facts)
    more = bool(page) and page[-1]["seq"] < len(stream.events)
    return AuditPage(
        events=page, next_cursor=encode_cursor(page[-1]["seq"]) if more else None, verification=verification
    )
