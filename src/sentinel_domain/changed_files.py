"""The changed files a candidate's change contexts declared or attested, as their facts keep them and as a
reviewer reads them.

A change may name up to 20,000 paths, and every read of the candidate (each decision included) reads every
fact on its chain: a fact keeps at most `KEPT_PER_FACT` paths, the first in sorted order, and the number of
distinct paths it was sent (`files_count`, stored only past the bound, so a context within it is stored, and
digested, exactly as before it existed). Obligations are always derived from the whole change, never from
what is kept."""

from typing import Any

KEPT_PER_FACT = 1000
SHOWN = 1000


def kept(files: list[str]) -> tuple[list[str], int]:
    """(the paths a fact keeps, sorted, at most KEPT_PER_FACT; how many distinct paths were sent). Within
    the bound the list is the one facts always kept (sorted, as sent), so such facts replay unchanged."""
    distinct = sorted(set(files))
    if len(distinct) <= KEPT_PER_FACT:
        return sorted(files), len(distinct)
    return distinct[:KEPT_PER_FACT], len(distinct)


def view(contexts: list[dict[str, Any]]) -> dict[str, Any]:
    """`{files, count, truncated}` over every change context (candidate.created and change_context.added):
    `files` the union of the stored paths, sorted, at most SHOWN (attested paths chosen first); `count` the
    distinct paths declared or attested. Past a fact's bound the paths it did not keep are unknown, so
    `count` is the larger of the union's size and each fact's own count: exact unless two contexts each named
    different paths beyond what they kept (then it is a lower bound, and `truncated` says the list is not
    whole)."""
    union: set[str] = set()
    attested: set[str] = set()
    count = 0
    past_bound = False
    for fact in contexts:
        change = fact.get("change") or {}
        stored = [p for p in change.get("files") or [] if isinstance(p, str)]
        union.update(stored)
        if fact.get("attested") is True:
            attested.update(stored)
        declared = change.get("files_count")
        if isinstance(declared, int) and declared > len(stored):
            past_bound = True
            count = max(count, declared)
    count = max(count, len(union))
    # Past SHOWN, the attested paths are kept first and the declared ones fill what is left: a requester
    # (the agent) declaring paths that sort before the real ones cannot push the attested change off the list.
    chosen = sorted(attested)[:SHOWN]
    chosen += sorted(union - attested)[: SHOWN - len(chosen)]
    return {"files": sorted(chosen), "count": count, "truncated": past_bound or len(union) > SHOWN}
