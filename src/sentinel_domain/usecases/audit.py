"""Reading a chain as it is stored, a page at a time, with the whole chain's verification."""

import base64
import json

from ..errors import Refusal, StoreUnavailable
from ..models import Actor
from ..outcomes import AuditPage
from ..ports import StreamRef
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
    page = [e for e in stream.events if e["seq"] > after][:limit]
    more = bool(page) and page[-1]["seq"] < len(stream.events)
    return AuditPage(
        events=page, next_cursor=encode_cursor(page[-1]["seq"]) if more else None, verification=verification
    )
