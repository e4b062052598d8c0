"""Tokens: shape, checksum, keyed hash and durations (no I/O)."""

import re

import pytest

from sentinel_service.adapters.tokens import (
    ALPHABET,
    DEFAULT_TTL_SECONDS,
    MAX_TTL_SECONDS,
    default_ttl_seconds,
    new_token,
    parse_duration,
    token_hmac,
    well_formed,
)

KEY = b"k" * 32


def test_a_new_token_has_the_documented_shape() -> None:
    # Given / When a fresh token
    token = new_token()
    # Then it is snt_ + 43 base62 characters + a 6-character base62 checksum, and it checks out
    assert re.fullmatch(r"snt_[0-9A-Za-z]{49}", token)
    assert well_formed(token)


def test_tokens_are_not_repeated() -> None:
    # Given / When many tokens
    tokens = {new_token() for _ in range(500)}
    # Then no two are the same
    assert len(tokens) == 500


@pytest.mark.parametrize("position", [4, 20, 46, 47, 52])
def test_the_checksum_catches_a_one_character_change(position: int) -> None:
    # Given a valid token
    token = new_token()
    # When one character of the body or the checksum is changed to another base62 character
    original = token[position]
    replacement = ALPHABET[(ALPHABET.index(original) + 1) % 62]
    altered = token[:position] + replacement + token[position + 1 :]
    # Then the token is no longer well formed
    assert not well_formed(altered)


@pytest.mark.parametrize(
    "candidate",
    [
        "",
        "snt_",
        "snt_abc",
        None,
        42,
        b"snt_" + b"0" * 49,
        "SNT_" + "0" * 49,
        "tok_" + "0" * 49,
        "snt_" + "0" * 48 + "!",
        "snt_" + "0" * 50,
        " snt_" + "0" * 49,
        "snt_" + "z" * 49,  # the body exceeds 256 bits
    ],
)
def test_malformed_tokens_are_refused(candidate: object) -> None:
    # Given something that is not a token  When it is checked  Then it is refused
    assert not well_formed(candidate)


def test_a_token_followed_by_a_newline_is_refused() -> None:
    # Given a valid token with a trailing newline (a pasted secret)
    token = new_token()
    # When checked  Then it is refused: the exact characters are the credential
    assert not well_formed(token + "\n")


def test_the_hmac_is_stable_and_keyed() -> None:
    # Given a token
    token = new_token()
    # When hashed twice under one key and once under another
    first, second, other = token_hmac(KEY, token), token_hmac(KEY, token), token_hmac(b"o" * 32, token)
    # Then the hash is stable, hex SHA-256, depends on the key, and does not contain the token
    assert first == second
    assert re.fullmatch(r"[0-9a-f]{64}", first)
    assert first != other
    assert token not in first


def test_an_empty_key_is_refused() -> None:
    # Given no key material  When hashing  Then it refuses rather than hashing under nothing
    with pytest.raises(ValueError):
        token_hmac(b"", new_token())


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("12h", 43200), ("90d", 7776000), ("30m", 1800), ("3600s", 3600), ("1s", 1), ("366d", MAX_TTL_SECONDS)],
)
def test_durations_parse_to_seconds(text: str, seconds: int) -> None:
    # Given a duration  When parsed  Then it is that many seconds
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    ["", "0h", "-1h", "12", "h", "1.5h", "12H", "12 h", " 12h", "12h ", "1w", "367d", "99999999999s", "٣h"],
)
def test_nonsense_durations_are_refused(text: str) -> None:
    # Given a nonsense duration  When parsed  Then it is a ValueError
    with pytest.raises(ValueError):
        parse_duration(text)


def test_default_ttls_follow_the_kind() -> None:
    # Given the three kinds  Then humans get 12 hours, machines 90 days
    assert DEFAULT_TTL_SECONDS == {"human": 43200, "agent": 7776000, "ci": 7776000}
    assert default_ttl_seconds("ci") == 90 * 86400
    with pytest.raises(ValueError):
        default_ttl_seconds("robot")
