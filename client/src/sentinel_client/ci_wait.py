"""`sentinel-hook gate --wait DURATION`: read the decision until it is worth recording, then the gate records.

The gate is otherwise a snapshot, run once. Waiting polls the cheap `GET …/decision` with exponential
backoff and jitter (the interval doubles from 2 s up to 60 s, each sleep between half and all of it, and
starts again from 2 s whenever the decision changes) and stops at the first of: `ready`; a hold that only a
person can resolve (PERSON_ONLY); an error that waiting cannot cure; the deadline. Progress goes to stderr,
one line each time the decision or its finding codes change. The caller then records the decision
(`POST …/decisions`) exactly as the gate without `--wait` does, and that recorded decision is the answer.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from .verdicts import Verdict

# Findings no automation can clear for this candidate, so polling longer only burns CI minutes: a human
# reviewer must approve the current digest (missing, rejected, expired, or an approval of an older digest),
# a human must amend a blocked plan, a reviewer must settle a passed task, or an operator must restore a
# tampered chain (DOMAIN.md rules 13, 14, 20, 22, 25). Everything else can still change without a person:
# the candidate and its attestation (NO_CANDIDATE, CHANGE_CONTEXT_UNVERIFIED), a plan from the requester,
# evidence from a later or re-run job, task reports, a store that comes back.
PERSON_ONLY = frozenset(
    {
        "REVIEW_MISSING",
        "REVIEW_REJECTED",
        "REVIEW_EXPIRED",
        "REVIEW_STALE",
        "TASK_BLOCKED",
        "TASK_NOT_SETTLED",
        "STATE_TAMPERED",
    }
)
# Errors that a later poll can cure; any other error (a refused token, an unknown project, a malformed
# answer) ends the wait at once.
TRANSIENT_ERRORS = frozenset(
    {
        "UNREACHABLE",
        "TIMEOUT",
        "RATE_LIMITED",
        "STATE_UNAVAILABLE",
        "HTTP_500",
        "HTTP_502",
        "HTTP_503",
        "HTTP_504",
    }
)
FIRST_INTERVAL_SECONDS = 2.0
MAX_INTERVAL_SECONDS = 60.0
# A GitHub-hosted job stops after 6 hours; a longer wait is a typo.
MAX_WAIT_SECONDS = 6 * 3600.0
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_duration(text: str) -> float:
    """`90s`, `30m`, `1h`, `1h30m`: seconds. Raises ValueError for anything else, zero, or over 6 h."""
    match = _DURATION.fullmatch(text.strip())
    if not text.strip() or match is None or not any(match.groups()):
        raise ValueError(f"{text!r} is not a duration such as 90s, 30m or 1h30m")
    hours, minutes, seconds = (int(group or 0) for group in match.groups())
    total = hours * 3600.0 + minutes * 60.0 + seconds
    if not 0 < total <= MAX_WAIT_SECONDS:
        raise ValueError(f"the wait must be above 0 and at most {MAX_WAIT_SECONDS / 3600:g} h")
    return total


def codes(verdict: Verdict) -> tuple[str, ...]:
    return tuple(sorted({str(finding.get("code")) for finding in verdict.findings}))


def stop_reason(verdict: Verdict) -> str | None:
    """Why waiting longer cannot help, or None to keep polling."""
    if verdict.state == "ready":
        return "ready"
    found = codes(verdict)
    if verdict.state == "error":
        return (
            None if set(found) <= TRANSIENT_ERRORS else f"an error waiting cannot cure ({', '.join(found)})"
        )
    person = [code for code in found if code in PERSON_ONLY]
    return f"a hold only a person can resolve ({', '.join(person)})" if person else None


@dataclass
class Clock:
    """Time as the wait sees it; tests replace it."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    jitter: Callable[[], float] = random.random


def wait(
    poll: Callable[[], Verdict], seconds: float, say: Callable[[str], None], clock: Clock | None = None
) -> str:
    """Poll until stop_reason says stop or `seconds` have passed; returns why it stopped."""
    clock = clock or Clock()
    started = clock.now()
    interval = FIRST_INTERVAL_SECONDS
    last: tuple[str, tuple[str, ...]] | None = None
    while True:
        verdict = poll()
        elapsed = clock.now() - started
        seen = (verdict.state, codes(verdict))
        if seen != last:
            say(f"[{_clock(elapsed)}] {verdict.state}: {', '.join(seen[1]) or 'no findings'}")
            if last is not None:
                interval = FIRST_INTERVAL_SECONDS  # something moved: look again soon
            last = seen
        reason = stop_reason(verdict)
        if reason is not None:
            say(f"[{_clock(elapsed)}] stopped waiting: {reason}")
            return reason
        left = seconds - elapsed
        if left <= 0:
            say(f"[{_clock(elapsed)}] stopped waiting: the deadline of {_clock(seconds)} passed")
            return "deadline"
        clock.sleep(min(left, interval * (0.5 + clock.jitter() / 2)))
        interval = min(MAX_INTERVAL_SECONDS, interval * 2)


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return (
        f"{whole // 3600}h{whole % 3600 // 60:02d}m{whole % 60:02d}s"
        if whole >= 3600
        else (f"{whole // 60}m{whole % 60:02d}s")
    )
