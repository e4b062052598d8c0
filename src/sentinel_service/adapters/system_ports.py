"""The real clock and id source (the scenario harness swaps in fixed ones)."""

import secrets
from datetime import UTC, datetime


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class RandomIds:
    """Unguessable ids: an id never tells whether another exists."""

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{secrets.token_hex(12)}"
