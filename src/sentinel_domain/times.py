"""One textual form for every instant the gate stores.

Stored times always carry six fractional digits and a `Z`, so their text sorts as their instants
do; DynamoDB condition expressions compare them as strings (for example an approval's expiry)."""

from datetime import UTC, datetime, timedelta

MIN_YEAR, MAX_YEAR = 1970, 9999


def format_time(instant: datetime) -> str:
    """Refuses instants outside 1970..9999 UTC: only those keep a four-digit year, so that text order is
    time order (an unpadded year 999 would sort after 2026)."""
    if instant.tzinfo is None:
        raise ValueError("naive datetimes are refused: every instant is UTC")
    try:
        utc = instant.astimezone(UTC)
    except OverflowError as error:
        raise ValueError("the instant is outside the years 1970 to 9999") from error
    if not MIN_YEAR <= utc.year <= MAX_YEAR:
        raise ValueError("the instant is outside the years 1970 to 9999")
    return f"{utc.year:04d}-" + utc.strftime("%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"time without an offset: {text!r}")
    try:
        return value.astimezone(UTC)
    except OverflowError as error:
        raise ValueError("the instant is outside the years 1970 to 9999") from error


def utc_naive(text: str) -> datetime:
    """The instant as a naive UTC datetime: what parse_time reads, without its offset. A stored time
    (`format_time`'s 27 characters ending in `Z`) is read directly, several times faster; any other text goes
    through parse_time and is refused as it refuses it."""
    if len(text) == 27 and text[-1] == "Z":
        try:
            value = datetime.fromisoformat(text[:-1])
        except ValueError:
            value = None
        if value is not None and value.tzinfo is None:
            return value
    return parse_time(text).replace(tzinfo=None)


def plus_seconds(text: str, seconds: int) -> str:
    return format_time(parse_time(text) + timedelta(seconds=seconds))
