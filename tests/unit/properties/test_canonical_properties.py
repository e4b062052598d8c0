"""Property-based tests (hypothesis) of the gate's fast paths to RFC 8785 and to time: whatever the value, the
canonical writer gives the bytes `rfc8785` gives (or refuses what it refuses), an event's hash is the digest
of its hashed fields' canonical form, and a stored time reads as parse_time reads it. Generation is
derandomised so that a failure reproduces."""

import string
from datetime import UTC, datetime
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sentinel_domain.audit import HASHED_FIELDS, event_hash
from sentinel_domain.canonical import canonical_bytes, digest
from sentinel_domain.times import format_time, parse_time, utc_naive

SETTINGS = settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Text with what RFC 8785 escapes (quote, backslash, every control character), non-ASCII and astral
# characters, and the code points around the surrogates whose UTF-16 order differs from code point order.
TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from('"\\/\x00\x01\x08\t\n\x0b\x0c\r\x1f\x7f\u2028\ue000\uffff\U0001f600'),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=12,
)
KEYS = st.one_of(st.text(alphabet=string.ascii_letters + "_-", max_size=8), TEXT)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),  # beyond 2^53 - 1 too, which both refuse
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(KEYS, inner, max_size=4)
    ),
    max_leaves=20,
)


def either(write: Any, value: Any) -> tuple[str, Any]:
    try:
        return "bytes", write(value)
    except Exception as error:  # what each refuses, by type
        return "refused", type(error)


@SETTINGS
@given(JSON)
@example({"\ue000": 1, "\U0001f600": 2})  # UTF-16 puts the astral key first, code points the other
@example({"b": [1, "\x1f"], "a": {"z": None, "é": True}})
@example([2**53 - 1, -(2**53) + 1, 2**53, 1.0, True])
def test_the_canonical_writer_gives_the_bytes_rfc8785_gives(value: Any) -> None:
    # Given any JSON value, floats, large integers, escapes, non-ASCII and astral keys included
    # When both writers write it
    # Then they give the same bytes, or both refuse it the same way
    assert either(canonical_bytes, value) == either(rfc8785.dumps, value)


def test_a_lone_surrogate_is_refused_as_rfc8785_refuses_it() -> None:
    # Given text holding a lone surrogate
    value = {"a": "x\ud800"}
    # When it is canonicalised, Then it is refused with rfc8785's own error
    with pytest.raises(rfc8785.CanonicalizationError):
        canonical_bytes(value)


EVENT_TEXT = st.one_of(TEXT, st.sampled_from(["demo", "cand_00000001", "decision.recorded", "agent-1"]))


@SETTINGS
@given(
    st.fixed_dictionaries(
        {
            "project": EVENT_TEXT,
            "candidate_id": st.one_of(st.none(), EVENT_TEXT),
            "seq": st.one_of(st.integers(min_value=-(2**54), max_value=2**54), st.booleans(), st.floats()),
            "type": EVENT_TEXT,
            "actor": EVENT_TEXT,
            "at": EVENT_TEXT,
            "payload_digest": st.one_of(EVENT_TEXT, st.none(), st.integers()),
            "prev_hash": st.one_of(EVENT_TEXT, st.none()),
        }
    )
)
def test_an_events_hash_is_the_digest_of_its_hashed_fields(event: dict[str, Any]) -> None:
    # Given any event, tampered ones (odd types, escapes, huge or boolean seqs) included
    # When its hash is computed
    # Then it is the SHA-256 of the RFC 8785 form of its hashed fields, or refused as that is
    assert either(event_hash, event) == either(digest, {k: event[k] for k in HASHED_FIELDS})


@SETTINGS
@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)))
def test_a_stored_time_reads_as_parse_time_reads_it(instant: datetime) -> None:
    # Given a time as the gate stores it
    text = format_time(instant)
    # When it is read directly, Then it is the instant parse_time reads, without its offset
    assert utc_naive(text) == parse_time(text).replace(tzinfo=None)


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-29T12:00:00+01:00",
        "2026-11-29T12:00:00.5Z",
        "2026-11-29 12:00:00.000000Z",
        "2026-11-29T12:00:00.00+01:00Z",
        "2026-11-29T12:00:00.000000z",
        "not a time at all, 27 charZ",
        "2026-11-29T12:00:00",
    ],
)
def test_any_other_time_reads_as_parse_time_reads_it_or_is_refused_alike(text: str) -> None:
    # Given a time in another form, or none
    # When it is read, Then it reads as parse_time reads it, or both refuse it
    assert either(utc_naive, text) == either(lambda t: parse_time(t).replace(tzinfo=None), text)
