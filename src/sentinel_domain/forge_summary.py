"""The Markdown a reviewer reads on a pull request: a candidate's decision as a forge check's title and
summary (docs/github.md, "What a team sees on a pull request").

Pure: the decision, the candidate's state and the project's policies in, text out. Bounded: the summary is at
most `limit` characters (GitHub's CHECK_SUMMARY_LIMIT by default); what does not fit is counted in an explicit
"N more not shown" line, never cut mid-item.

Everything that came from a caller (test names, scopes, comments, source systems and run ids, the details of
findings, which quote paths and ids) is shown so that it cannot become markup: test names and comments in code
spans (where GitHub renders no link, HTML or mention), other text with every ASCII punctuation character
backslash-escaped and the patterns GitHub links after parsing (`@login`, `#123`, `http://`, `www.`) broken by
a zero-width space. A run URL becomes a link only when it is https and plain; else it is shown as text."""

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .canonical import digest
from .decision import Decision
from .forge import CHECK_SUMMARY_LIMIT
from .state import CandidateState, ProjectState

ZWSP = "\u200b"
# CommonMark lets any ASCII punctuation be backslash-escaped; escaping all of it leaves nothing to parse.
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
# What GitHub turns into links or notifications after parsing, escapes or not: mentions and e-mail addresses
# (@), issue references (#), and extended autolinks (scheme:// and www.).
_LINKED = re.compile(r"(@|#|:(?=//)|www(?=\.))", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
_SAFE_URL = re.compile(r"https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~!$&'*+,;=:@%/?-]*)?")
TEXT_CHARS = 300  # the longest caller text shown in one place
RESERVE = 240  # room kept for the truncation line
EVIDENCE_PER_OBLIGATION = 3

# Findings that mean the change failed, or that the gate cannot vouch for its state: someone must look
# (failure). Every other hold is waiting for the next ordinary step (a plan, a review, CI): action_required.
FAILING_CODES = frozenset(
    {
        "EVIDENCE_NEGATIVE",
        "EVIDENCE_UNKNOWN",
        "EVIDENCE_TOO_FEW_TESTS",
        "TASK_FAILED",
        "REVIEW_REJECTED",
        "STATE_TAMPERED",
        "STATE_UNAVAILABLE",
        "EVIDENCE_QUERY_INCOMPLETE",
        "REQUESTER_REVOKED",
    }
)


def one_line(value: object, limit: int = TEXT_CHARS) -> str:
    text = _CONTROL.sub(" ", str(value)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def escape(value: object, limit: int = TEXT_CHARS) -> str:
    """Caller text as inert Markdown: one line, bounded, no markup, no link, no mention."""
    text = _LINKED.sub(lambda m: m.group(0) + ZWSP, one_line(value, limit))
    return _PUNCTUATION.sub(r"\\\1", text)


def code(value: object, limit: int = TEXT_CHARS) -> str:
    """Caller text as a code span: a fence longer than any run of backticks inside it, so it cannot close
    early; GitHub renders nothing inside a code span as a link, HTML or mention."""
    text = one_line(value, limit) or " "
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}"


def link(url: object, label: str) -> str:
    """A link only to a plain https URL (the label is ours); anything else is shown as escaped text."""
    if isinstance(url, str) and len(url) <= 2000 and _SAFE_URL.fullmatch(url):
        return f"[{label}](<{url}>)"
    return f"{label}: {escape(url)}" if url else ""


def conclusion_for(decision: Decision, expires_soon: bool = False) -> str:
    """`success` only for `ready` that stays ready until the next re-check; otherwise `failure` when a
    finding says the change failed or the gate cannot vouch for its state, else `action_required`."""
    if decision.decision == "ready" and not decision.findings:
        return "action_required" if expires_soon else "success"
    if any(f.code in FAILING_CODES for f in decision.findings) or not decision.findings:
        return "failure"
    return "action_required"


@dataclass
class Section:
    heading: str
    items: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CheckText:
    title: str
    summary: str
    digest: str  # what the summary says, without the instants and ages that change every minute
    shown: int
    more: int


def render(sections: Iterable[Section], head: str, limit: int = CHECK_SUMMARY_LIMIT) -> tuple[str, int, int]:
    """`head`, then each section's heading and items while they fit in `limit`; the rest counted."""
    out = [head]
    size = len(head)
    budget = limit - RESERVE
    shown = more = 0
    for section in sections:
        opened = False
        for item in section.items:
            piece = ("" if opened else f"\n\n### {section.heading}\n") + "\n" + item
            if more or size + len(piece) > budget:
                more += 1
                continue
            out.append(piece)
            size += len(piece)
            opened, shown = True, shown + 1
    if more:
        out.append(
            f"\n\n**{more} more not shown** (the summary is limited to {limit} characters): the whole "
            "state is `GET /v1/projects/{project}/candidates/{candidate_id}`."
        )
    return "".join(out)[:limit], shown, more


def _failing(evidence: dict[str, Any]) -> str:
    failing = evidence.get("failing_tests") or {}
    names = list(failing.get("names") or [])
    count = int(failing.get("count") or 0)
    if not names:
        return ""
    listed = ", ".join(code(n) for n in names)
    rest = count - len(names)
    return f"; failing: {listed}" + (f" and {rest} more" if rest > 0 else "")


def _evidence_line(e: dict[str, Any]) -> str:
    counts = e.get("counts") or {}
    what = (
        f"{counts.get('tests', 0)} tests, {counts.get('failures', 0)} failed, "
        f"{counts.get('errors', 0)} errors"
        if e.get("kind") == "junit"
        else f"exit code {e.get('exit_code')}"
    )
    source = e.get("source") or {}
    run = link(source.get("url"), "the run")
    origin = " ".join(
        f"{label} {code(source[k], 80)}"
        for k, label in (("system", "from"), ("run_id", "run"))
        if source.get(k)
    )
    mismatches = (e.get("binding") or {}).get("mismatches") or []
    return (
        f"  - {code(e['check_id'], 80)}: **{e['outcome']}**, {e['trust']}, {what}{_failing(e)}"
        + (f"; {origin}" if origin else "")
        + (f"; {run}" if run else "")
        + (f"; not bound: {', '.join(mismatches)}" if mismatches else "")
        + f" (observed {e['observed_at']})"
    )


def _obligations(state: CandidateState) -> list[str]:
    items = []
    for oid, obligation in sorted(state.obligations.items()):
        bound = [e for e in state.evidence if oid in (e.get("binding") or {}).get("obligation_ids", [])]
        bound.sort(key=lambda e: (e["observed_at"], e["recorded_at"]), reverse=True)
        lines = [
            f"- {code(oid, 80)} ({escape(obligation.get('policy_id', ''))}) on {code(obligation['scope'])}"
        ]
        if not bound:
            lines.append("  - no evidence yet")
        lines.extend(_evidence_line(e) for e in bound[:EVIDENCE_PER_OBLIGATION])
        if len(bound) > EVIDENCE_PER_OBLIGATION:
            lines.append(f"  - and {len(bound) - EVIDENCE_PER_OBLIGATION} older")
        items.append("\n".join(lines))
    return items


def _approvals(state: CandidateState, as_of: str) -> list[str]:
    items = []
    for review in state.reviews:
        current = review["plan_digest"] == state.plan_digest
        expires = review.get("expires_at", "")
        status = (
            "rejected"
            if review["decision"] == "reject"
            else "expired"
            if expires <= as_of
            else f"valid until {expires}"
        )
        comment = f": {code(review['comment'])}" if review.get("comment") else ""
        items.append(
            f"- {escape(review['reviewer']['id'])} {review['decision']}d "
            f"{'the current plan' if current else 'an earlier plan'} ({status}){comment}"
        )
    return items or ["- none yet"]


def _ids(plan: dict[str, Any] | None) -> dict[str, set[str]]:
    body = (plan or {}).get("plan") or {}
    tasks = body.get("tasks") or []
    return {
        "tasks": {t["task_id"] for t in tasks},
        "checks": {c["check_id"] for t in tasks for c in t.get("checks", [])},
        "actions": {a["action_id"] for a in body.get("actions") or []},
    }


def plan_changes(state: CandidateState) -> list[str]:
    """The current plan against the newest earlier version any review approved."""
    current = state.plan
    if current is None:
        return ["- no plan yet"]
    items = [f"- plan version {current['plan_version']}, digest {code(current['plan_digest'], 80)}"]
    approved = {r["plan_digest"] for r in state.reviews if r["decision"] == "approve"}
    # A version with the current digest is this plan submitted again unchanged, not an earlier plan: against
    # it nothing changed, so it is no baseline (it would read "changed since" with nothing to show).
    earlier = [
        p
        for p in state.plans[:-1]
        if p["plan_digest"] in approved and p is not current and p["plan_digest"] != current["plan_digest"]
    ]
    if not earlier:
        items.append(
            "- this plan version is the first one approved"
            if current["plan_digest"] in approved
            else "- no earlier plan version was approved: review the whole plan"
        )
        return items
    before = earlier[-1]
    items.append(
        f"- changed since approved version {before['plan_version']} ({code(before['plan_digest'], 80)}):"
    )
    old, new = _ids(before), _ids(current)
    for kind in ("tasks", "checks", "actions"):
        added, removed = sorted(new[kind] - old[kind]), sorted(old[kind] - new[kind])
        if added:
            items.append(f"  - {kind} added: {', '.join(code(i, 80) for i in added)}")
        if removed:
            items.append(f"  - {kind} removed: {', '.join(code(i, 80) for i in removed)}")
    if len(items) == 2:
        items.append("  - no task, check or action was added or removed (commands or coverage may differ)")
    return items


def check_text(
    decision: Decision,
    state: CandidateState | None,
    project: ProjectState | None,
    environment: str,
    *,
    expires_soon: str | None = None,
    limit: int = CHECK_SUMMARY_LIMIT,
) -> CheckText:
    """The check's title and summary. `expires_soon`: the instant a `ready` stops being ready, when it falls
    before the next re-check (the check is then not success: it would outlive the decision)."""
    ready = decision.decision == "ready" and not decision.findings
    n = len(decision.findings)
    title = (
        f"{environment}: ready, but it expires at {expires_soon} before the next re-check"
        if ready and expires_soon
        else f"{environment}: ready"
        if ready
        else f"{environment}: hold ({n} finding{'s' if n != 1 else ''})"
    )
    head = f"## Sentinel: **{'ready' if ready else 'hold'}** for {escape(environment)}\n\n"
    head += (
        f"Decided at the service clock ({decision.as_of}); facts digest {code(decision.facts_digest, 80)}."
    )
    if ready and expires_soon:
        head += (
            f"\n\nThe decision expires at {expires_soon}: renew what expires (an approval, or CI's evidence)."
        )
    findings = Section("Findings")
    for f in decision.findings:
        where = " ".join(
            f"{k} {code(v, 80)}"
            for k, v in (("obligation", f.obligation_id), ("check", f.check_id), ("task", f.task_id))
            if v
        )
        hint = f"\n  - what to do: {escape(f.remediation_hint)}" if f.remediation_hint else ""
        findings.items.append(f"- **{f.code}**{' ' + where if where else ''}: {escape(f.detail)}{hint}")
    sections = [findings]
    if state is not None:
        sections += [
            Section("Obligations and evidence", _obligations(state)),
            Section("Approvals", _approvals(state, decision.as_of)),
            Section("Plan", plan_changes(state)),
        ]
    summary, shown, more = render(sections, head, limit)
    substance = {
        "title": title,
        "findings": [(f.code, f.obligation_id, f.check_id, f.task_id) for f in decision.findings],
        "evidence": [e["evidence_id"] for e in state.evidence] if state else [],
        "reviews": [(r["review_id"], r["expires_at"] <= decision.as_of) for r in state.reviews]
        if state
        else [],
        "plan": state.plan_digest if state else None,
        "obligations": sorted(state.obligations) if state else [],
        "policies": project.config_version() if project else None,
        "more": more,
    }
    return CheckText(title=title, summary=summary, digest=digest(substance), shown=shown, more=more)
