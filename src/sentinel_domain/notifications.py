"""Notifications: what a person should hear about, built as outbox items from the fact that caused them.

Three events, schema docs/schemas/notification.v1.json (docs/notifications.md):

- `decision.changed`: a recorded decision whose value differs from the candidate's previous recorded one (the
  first recorded decision counts, `from` null);
- `review.requested`: a stored plan version, which needs `approvals_required` approvals of its digest;
- `hold.needs_person`: a recorded hold with findings in NEEDS_PERSON (no publish by CI or the agent clears
  them), emitted when those findings are new (not on the same hold recorded again).

Pure functions of the fact being written and the state it was judged from: the use cases append their result
to the `CommitRequest.outbox` of the same write, so a notification leaves exactly when its fact is committed,
and an idempotent replay (which writes nothing) emits nothing.

Each event carries `text`, a chat-ready message (one short line, then the decisive findings). Everything in it
that a caller could have chosen (subjects, environments, finding details that quote test names or paths) goes
through `chat_literal`: inside a code span, with `&`, `<`, `>` escaped as Slack requires, `@` and `://`
broken so that no mention or link is ever made, control and format characters (bidi overrides, zero-width)
dropped, and length bounded. Token-shaped strings, ARNs and 12-digit account ids are redacted from finding
details, which may quote a store error: a notification leaves the account boundary.
"""

import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from .decision import Decision, Finding
from .state import CandidateState

OUTBOX_KIND = "notification"
SCHEMA_VERSION = 1
DECISION_CHANGED = "decision.changed"
REVIEW_REQUESTED = "review.requested"
HOLD_NEEDS_PERSON = "hold.needs_person"
EVENTS = (DECISION_CHANGED, REVIEW_REQUESTED, HOLD_NEEDS_PERSON)

# Finding codes (DOMAIN.md) that only a person can resolve: a human reviewer must approve the current digest
# (missing, expired, rejected, or an approval of an older one), a human must amend a blocked plan, a reviewer
# must settle a passed task, an operator must restore a tampered chain. A hold with any of them cannot become
# ready by CI or the agent alone: it is the hold at which `sentinel-hook gate --wait` stops waiting
# (sentinel_client.ci_wait.PERSON_ONLY, the same set: a test keeps the two equal), and the one a person hears
# about. The docs and the schema name this list; the tests read it.
NEEDS_PERSON = frozenset(
    {
        "REVIEW_MISSING",  # no approval of the current plan yet
        "REVIEW_EXPIRED",  # the approval expired
        "REVIEW_STALE",  # approvals name an older digest: the amended plan needs its own
        "REVIEW_REJECTED",  # rejected: final for the digest, a person amends the plan
        "TASK_BLOCKED",  # a blocked task asks for a human amendment of the plan (rule 20)
        "TASK_NOT_SETTLED",  # settlement is a human reviewer's act (rule 22)
        # An operator restores the chain (rule 25). A decision read from a tampered chain is refused rather
        # than recorded, so no notification carries it today; listed so the set is the CI wait's.
        "STATE_TAMPERED",
    }
)

MAX_FINDINGS_SHOWN = 5
LITERAL_LIMIT = 120
DETAIL_LIMIT = 160
_REDACTIONS = (
    (re.compile(r"snt_[0-9A-Za-z]{8,}"), "[token]"),  # the gate's own bearer-token shape
    (re.compile(r"arn:[A-Za-z0-9-]+:[^\s`'\"]*"), "[arn]"),
    (re.compile(r"(?<!\d)\d{12}(?!\d)"), "[account]"),
)
_BARE_PERIOD = re.compile(r"(?<=\w)\.(?=[A-Za-z])")  # a dot between word characters: a domain to autolink


def chat_literal(value: Any, limit: int = LITERAL_LIMIT, *, redact: bool = False) -> str:
    """Caller-chosen text as an inert code span for Slack and Markdown chats: one line, bounded, no mention,
    no link, no formatting, no markup. `redact`: prose that may quote an error (never identifiers, whose
    hex could look like an account id)."""
    text = " ".join(str(value).split())
    text = "".join(ch for ch in text if unicodedata.category(ch)[0] != "C")
    for pattern, replacement in _REDACTIONS if redact else ():
        text = pattern.sub(replacement, text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = text.replace("`", "'")  # a backtick would close the span and let the rest render
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    # Zero-width spaces break what chats match as mentions and links even outside code spans (a client that
    # renders code spans loosely, or a notification preview that drops them).
    text = text.replace("@", "@\u200b").replace("://", ":\u200b//")
    text = _BARE_PERIOD.sub(".\u200b", text)
    return f"`{text}`" if text else "`-`"


def person_codes(decision: Decision) -> list[str]:
    """The codes of a hold that only a person can clear (none for a ready decision)."""
    if decision.decision != "hold":
        return []
    return sorted({f.code for f in decision.findings} & NEEDS_PERSON)


def finding_codes(findings: Iterable[Finding]) -> list[str]:
    return sorted({f.code for f in findings})


def _finding_lines(findings: Sequence[Finding]) -> list[str]:
    shown = [
        f"• {f.code} {chat_literal(f.detail, DETAIL_LIMIT, redact=True)}"
        for f in list(findings)[:MAX_FINDINGS_SHOWN]
    ]
    if len(findings) > MAX_FINDINGS_SHOWN:
        shown.append(f"• …and {len(findings) - MAX_FINDINGS_SHOWN} more")
    return shown


def _where(candidate: dict[str, Any], project: str) -> str:
    return (
        f"{chat_literal(candidate['subject'])} at {chat_literal(str(candidate['revision'])[:12])} "
        f"in {chat_literal(candidate['environment'])} (project {chat_literal(project)})"
    )


def _event(
    event: str,
    project: str,
    candidate: dict[str, Any],
    seq: int,
    recorded_at: str,
    text: str,
    data: dict[str, Any],
) -> dict[str, Any]:
    notification_id = f"{candidate['candidate_id']}/{seq}/{event}"
    return {
        "kind": OUTBOX_KIND,
        "outbox_id": f"notification/{notification_id}",
        "schema_version": SCHEMA_VERSION,
        "event": event,
        "notification_id": notification_id,  # what consumers dedupe by: delivery is at least once
        "project": project,
        "candidate_id": candidate["candidate_id"],
        "subject": candidate["subject"],
        "revision": candidate["revision"],
        "environment": candidate["environment"],
        "seq": seq,
        "recorded_at": recorded_at,
        **data,
        "text": text,
    }


def decision_notifications(
    project: str,
    candidate: dict[str, Any],
    previous: dict[str, Any] | None,
    verdict: Decision,
    seq: int,
) -> list[dict[str, Any]]:
    """What recording `verdict` at `seq` announces, given the candidate's previous `decision.recorded` fact
    (None for the first): `decision.changed` when the value changed, `hold.needs_person` when the hold waits
    on a person for other reasons than it already did (not when the same person-only codes held before)."""
    codes = finding_codes(verdict.findings)
    before = previous.get("decision") if previous else None
    before_codes = sorted((previous or {}).get("finding_counts", {}))
    out: list[dict[str, Any]] = []
    if before != verdict.decision:
        was = f" (was {str(before).upper()})" if before else ""
        line = f"Sentinel: {_where(candidate, project)} is now {verdict.decision.upper()}{was}"
        out.append(
            _event(
                DECISION_CHANGED,
                project,
                candidate,
                seq,
                verdict.as_of,
                "\n".join([line, *_finding_lines(verdict.findings)]),
                {
                    "from": before,
                    "to": verdict.decision,
                    "finding_codes": codes,
                    "plan_digest": verdict.plan_digest,
                },
            )
        )
    person = person_codes(verdict)
    person_before = sorted(set(before_codes) & NEEDS_PERSON) if before == "hold" else []
    if person and person != person_before:
        line = f"Sentinel: {_where(candidate, project)} holds until a person acts"
        decisive = [f for f in verdict.findings if f.code in NEEDS_PERSON]
        out.append(
            _event(
                HOLD_NEEDS_PERSON,
                project,
                candidate,
                seq,
                verdict.as_of,
                "\n".join([line, *_finding_lines(decisive)]),
                {"person_codes": person, "finding_codes": codes, "plan_digest": verdict.plan_digest},
            )
        )
    return out


def for_recorded_decision(
    project: str, state: CandidateState | None, verdict: Decision, seq: int
) -> list[dict[str, Any]]:
    """The notifications of recording `verdict` at `seq` on the candidate judged as `state` (None when a
    stored fact could not be read: nothing is known of the candidate or its previous decision, and the
    recorded STATE_TAMPERED hold is the operator's alarm, not a chat message)."""
    if state is None:
        return []
    previous = state.decisions[-1] if state.decisions else None
    return decision_notifications(project, state.candidate, previous, verdict, seq)


def review_requested(
    project: str,
    candidate: dict[str, Any],
    plan_fact: dict[str, Any],
    approvals_required: int,
    seq: int,
) -> list[dict[str, Any]]:
    """A stored plan version: every version needs its own approvals (an approval of an older digest never
    counts), so each one asks for review."""
    digest = str(plan_fact["plan_digest"])
    version = int(plan_fact["plan_version"])
    tasks = len(plan_fact["plan"].get("tasks", []))
    approvals = "approval" if approvals_required == 1 else "approvals"
    line = (
        f"Sentinel: plan v{version} for {_where(candidate, project)} needs "
        f"{approvals_required} {approvals} to proceed"
    )
    details = f"• plan digest {chat_literal(digest[:16])}, {tasks} task(s), {plan_fact['mode']}"
    return [
        _event(
            REVIEW_REQUESTED,
            project,
            candidate,
            seq,
            str(plan_fact["recorded_at"]),
            f"{line}\n{details}",
            {"plan_digest": digest, "plan_version": version, "approvals_required": approvals_required},
        )
    ]
