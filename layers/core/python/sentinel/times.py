"""One textual form for every instant the gate stores.

Stored times always carry six fractional digits and a `Z`, so their text sorts as their instants
do; DynamoDB condition expressions compare them as strings (for example an approval's expiry)."""

from datetime import UTC, datetime, timedelta


def format_time(instant: datetime) -> str:
    if instant.tzinfo is None:
        raise ValueError("naive datetimes are refused: every instant is UTC")
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"time without an offset: {text!r}")
    return value.astimezone(UTC)


def plus_seconds(text: str, seconds: int) -> str:
    return format_time(parse_time(text) + timedelta(seconds=seconds))
