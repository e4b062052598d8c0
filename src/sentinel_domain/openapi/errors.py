"""The one refusal every part of the package raises, and how text an author wrote is quoted into a message."""

from __future__ import annotations

import json
from typing import Any


class MalformedOpenApi(ValueError):
    """The document must be refused (422 MALFORMED_CHANGE_CONTEXT). The message says why, for a person."""


def quote(text: Any, limit: int = 200) -> str:
    """Spec text as quoted data: JSON string syntax, ASCII only, so no newline, control or bidi character
    survives and nothing can close the quotes. Everything a document's author wrote goes through here."""
    value = str(text)
    if len(value) > limit:
        value = value[:limit] + "..."
    return json.dumps(value, ensure_ascii=True)
