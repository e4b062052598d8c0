"""Where operations are served: a change of `servers` (the document's, a path item's or an operation's) is a
change of the URLs clients call, and derives obligations like any other change. Which operations it touches
follows the level it was made at: the document's servers every operation, a path item's the operations of
that path, an operation's that operation alone. Each is reported on the operation as `servers-changed`,
`where` naming the level. Server descriptions are documentation and never make a change; a URL or a variable
(its default or enum) does.

Graded by what a client configured with the old list meets: a server gone (or its URL or variables changed)
is breaking (a client calling it fails); servers only added, or the same servers reordered, break nobody
(info, and warning for a reorder: many clients call the first)."""

from __future__ import annotations

from typing import Any

from .changes import BREAKING, INFO, WARNING, _render
from .errors import quote

LEVELS = (("document servers", "document"), ("path servers", "path"), ("servers", "operation"))
KIND = "servers-changed"


def _entries(value: Any) -> list[Any]:
    """The server list as written: anything that is not a list is one opaque entry (the loader has already
    refused what it cannot read; a strange value still compares, it is never dropped)."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _url(entry: Any) -> str:
    if isinstance(entry, dict) and isinstance(entry.get("url"), str):
        return quote(entry["url"], 80)
    return _render(entry)


def server_changes(
    olds: tuple[Any, Any, Any], news: tuple[Any, Any, Any], same: Any
) -> list[tuple[str, str, str]]:
    """(where, level, detail) for each level whose servers differ: `olds` and `news` are the document's, the
    path item's and the operation's `servers` on each side; `same(a, b)` compares two values with
    documentation dropped and references inlined."""
    out = []
    for (where, _name), old, new in zip(LEVELS, olds, news, strict=True):
        old_list, new_list = _entries(old), _entries(new)
        if same(old_list, new_list):
            continue
        removed = [o for o in old_list if not any(same(o, n) for n in new_list)]
        added = [n for n in new_list if not any(same(o, n) for o in old_list)]
        level = BREAKING if removed else (INFO if added else WARNING)
        parts = []
        if removed:
            parts.append("removed or changed " + ", ".join(_url(o) for o in removed))
        if added:
            parts.append("added " + ", ".join(_url(n) for n in added))
        out.append((where, level, "; ".join(parts) or "the same servers in another order"))
    return out
