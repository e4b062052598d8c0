"""Lifecycle rules: an operation's `x-stability-level` (draft < alpha < beta < stable), its `deprecated`
flag and its `x-sunset` date, and what they do to the other changes of the operation (issue 18).

Who writes what decides the design. The agent whose change is gated writes the revision, so a lifecycle value
that *softens* a rule (an alpha operation may change freely; a deprecated operation past its sunset may go)
is always read from the **base** document: marking an operation alpha, or deprecating it, in the change that
then breaks it softens nothing. Making a value softer is itself a change a person should see: a stability
downgrade is breaking, and so is a deprecation (or a sunset date) that would let the operation go sooner than
the rule's minimum sunset period allows. A deprecation with no sunset date softens nothing (removing the
operation later stays breaking), so it stays what it always was: information.

Malformed values (a stability level that is not one of the four, a sunset that is not a date) are changes
with their own ids, breaking when the revision holds them, never a crash and never ignored.

Dates are compared with `DiffOptions.today`, given by the caller (the core has no clock). Without it, a rule
that needs today's date cannot be satisfied and is reported breaking, saying so."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Any

from .changes import BREAKING, INFO, WARNING
from .errors import quote

STABILITY_LEVELS = ("draft", "alpha", "beta", "stable")
"""In ascending order. An operation without `x-stability-level` is stable."""
UNSTABLE = frozenset({"draft", "alpha"})
"""Levels whose operations may change without breaking anyone (oasdiff's default threshold)."""
STABILITY = "x-stability-level"
SUNSET = "x-sunset"
LIFECYCLE_KINDS = frozenset(
    {
        "operation-stability-invalid",
        "operation-stability-decreased",
        "operation-stability-increased",
        "operation-sunset-invalid",
        "operation-sunset-missing",
        "operation-sunset-too-soon",
        "operation-sunset-deleted",
        "operation-sunset-changed",
    }
)
"""Changes about the lifecycle itself: never softened by it."""

_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2}))?\Z")


@dataclass(frozen=True)
class DiffOptions:
    """How a derivation rule wants some changes graded (docs/ingestion.md, "Rule options").

    `min_sunset_days`: the shortest period, in days from `today`, between deprecating a beta or stable
    operation (or moving its sunset earlier) and its sunset; 0 (oasdiff's default) only asks that the sunset
    is not already past. Above 0, a deprecation without a sunset is breaking too.
    `response_patterns`: "strict" (the default) treats a response `pattern` removed or replaced as breaking,
    since a reader may parse or validate by it; "lenient" grades it info, as oasdiff does (looser output).
    `today`: the date sunsets are measured from; None when the caller has no clock to offer."""

    min_sunset_days: int = 0
    response_patterns: str = "strict"
    today: date | None = None


def stability(operation: dict[str, Any]) -> tuple[str, str | None]:
    """(level, problem): the operation's stability level, "stable" when absent, and why the written value
    cannot be read (None when it can). An unreadable level is taken as stable: it softens nothing."""
    if STABILITY not in operation:
        return "stable", None
    value = operation[STABILITY]
    if isinstance(value, str) and value in STABILITY_LEVELS:
        return value, None
    return "stable", f"{quote(value, 60)} is not one of {', '.join(STABILITY_LEVELS)}"


def sunset(operation: dict[str, Any]) -> tuple[date | None, str | None]:
    """(date, problem): the operation's sunset (RFC 3339 full-date, or a date-time whose date is taken), and
    why the written value cannot be read. (None, None) when there is none."""
    if SUNSET not in operation:
        return None, None
    value = operation[SUNSET]
    match = _DATE.match(value) if isinstance(value, str) else None
    if match:
        try:
            return date(int(match[1]), int(match[2]), int(match[3])), None
        except ValueError:
            pass
    return None, f"{quote(value, 60)} is not an RFC 3339 date"


class Lifecycle:
    """The lifecycle rules of one document pair, under one rule's options."""

    def __init__(self, options: DiffOptions) -> None:
        self.options = options

    def softened_by(self, base: dict[str, Any]) -> str | None:
        """The base stability level that makes the operation's other changes non-breaking, if any."""
        level, _problem = stability(base)
        return level if level in UNSTABLE else None

    def _too_soon(self, when: date, level: str) -> str | None:
        """Why a sunset on `when` is sooner than the rule allows, None when it is not."""
        days = 0 if level in UNSTABLE else self.options.min_sunset_days
        today = self.options.today
        if today is None:
            return f"sunset {when.isoformat()} cannot be checked: no reference date was given"
        if (when - today).days < days:
            return f"sunset {when.isoformat()} is less than {days} day(s) after {today.isoformat()}"
        return None

    def changed(self, o: dict[str, Any], n: dict[str, Any], add: Any, where: str) -> None:
        """The lifecycle changes of a paired operation. `add(kind, breaking, where, detail, level=...)`."""
        o_level, o_problem = stability(o)
        n_level, n_problem = stability(n)
        if n_problem and _raw(o, STABILITY) != _raw(n, STABILITY):
            add("operation-stability-invalid", True, where, f"revision: {n_problem}")
        elif o_problem and not n_problem:
            add("operation-stability-invalid", False, where, f"base: {o_problem}; read as stable")
        if not n_problem:
            before, after = STABILITY_LEVELS.index(o_level), STABILITY_LEVELS.index(n_level)
            if after < before:
                add("operation-stability-decreased", True, where, f"{o_level} -> {n_level}")
            elif after > before:
                add("operation-stability-increased", False, where, f"{o_level} -> {n_level}")
        # The period owed is the base's: an operation made alpha in this change still owes a stable one's.
        self._sunset(o, n, o_level, add, where)

    def _sunset(self, o: dict[str, Any], n: dict[str, Any], level: str, add: Any, where: str) -> None:
        o_date, _o_problem = sunset(o)
        n_date, n_problem = sunset(n)
        # Only a real `true` deprecates: a string "false" must not count as a promise of removal.
        deprecated_now = n.get("deprecated") is True
        newly = deprecated_now and o.get("deprecated") is not True
        if n_problem and (newly or _raw(o, SUNSET) != _raw(n, SUNSET)):
            add("operation-sunset-invalid", True, where, f"revision: {n_problem}")
            return
        if n_problem:  # unreadable on both sides, as it was: reported when it was written
            return
        if not deprecated_now:
            if _raw(o, SUNSET) != _raw(n, SUNSET):
                # A sunset on an operation nobody deprecated announces nothing yet.
                add("operation-sunset-changed", False, where, _dates(o_date, n_date), level=WARNING)
            return
        if n_date is None:
            if o_date is not None or (SUNSET in o and not newly):
                add("operation-sunset-deleted", True, where, f"was {quote(o.get(SUNSET), 60)}")
            elif newly and self.options.min_sunset_days > 0 and level not in UNSTABLE:
                add(
                    "operation-sunset-missing",
                    True,
                    where,
                    f"the rule asks for a sunset at least {self.options.min_sunset_days} day(s) away",
                )
            return
        if not newly and o_date == n_date:
            return
        problem = self._too_soon(n_date, level)
        if o_date is not None and n_date > o_date and not newly:
            add("operation-sunset-changed", False, where, _dates(o_date, n_date))
        elif problem:
            add("operation-sunset-too-soon", True, where, problem)
        elif not newly:
            add("operation-sunset-changed", False, where, _dates(o_date, n_date))

    def removed(self, base: dict[str, Any]) -> tuple[str, str, str]:
        """How removing an operation is graded, from the base alone: (kind, level, detail)."""
        level, problem = stability(base)
        if level in UNSTABLE:
            return "operation-removed", WARNING, f"softened: base stability {level}"
        if base.get("deprecated") is not True:
            return (
                "operation-removed",
                BREAKING,
                f"base {STABILITY}: {problem}; read as stable" if problem else "",
            )
        when, problem = sunset(base)
        if problem:
            return "operation-sunset-invalid", BREAKING, f"removed; base: {problem}"
        if when is None:
            # Deprecation without a date promised nothing a client could plan for (oasdiff: info).
            return "operation-removed-without-sunset", BREAKING, "deprecated without a sunset date"
        today = self.options.today
        if today is None:
            return (
                "operation-removed-before-sunset",
                BREAKING,
                f"sunset {when.isoformat()} cannot be checked: no reference date was given",
            )
        if today < when:
            return "operation-removed-before-sunset", BREAKING, f"sunset {when.isoformat()} not reached"
        return "operation-removed-after-sunset", INFO, f"sunset {when.isoformat()} passed"

    def added(self, n: dict[str, Any], add: Any, where: str) -> None:
        """Malformed lifecycle values on an operation that is new."""
        _level, problem = stability(n)
        if problem:
            add("operation-stability-invalid", True, where, f"revision: {problem}")
        _date, problem = sunset(n)
        if problem:
            add("operation-sunset-invalid", True, where, f"revision: {problem}")


def _raw(operation: dict[str, Any], key: str) -> tuple[bool, Any]:
    """A value as written, telling `null` from absent (a written null is a malformed value, not none)."""
    return key in operation, operation.get(key)


def _dates(old: date | None, new: date | None) -> str:
    return f"{old.isoformat() if old else 'none'} -> {new.isoformat() if new else 'none'}"
