"""The chain seal: checkpoints tagged under a key the table never holds verify; anything else does not."""

import pytest

from sentinel_domain.integrity import ChainKeyUnavailable, ChainSeal

KEY = bytes(range(32))


def test_a_checkpoint_the_seal_made_verifies():
    # Given a seal, When it tags a checkpoint, Then the same seal verifies it
    seal = ChainSeal(KEY)
    checkpoint = seal.checkpoint("p", "c-1", 3, "ab" * 32, "2026-12-01T00:00:00Z")
    assert seal.checkpoint_verifies(checkpoint)


@pytest.mark.parametrize(
    "change",
    [
        {"seq": 4},
        {"hash": "cd" * 32},
        {"candidate_id": None},
        {"project": "q"},
        {"at": "2026-12-01T00:00:01Z"},
        {"mac": "00" * 32},
        {"extra": 1},
        {"seq": True},
    ],
)
def test_a_changed_or_extended_checkpoint_does_not_verify(change):
    # Given a genuine checkpoint, When one field is changed or added, Then it no longer verifies
    seal = ChainSeal(KEY)
    checkpoint = {**seal.checkpoint("p", "c-1", 3, "ab" * 32, "2026-12-01T00:00:00Z"), **change}
    assert not seal.checkpoint_verifies(checkpoint)


def test_another_key_or_purpose_does_not_verify():
    # Given a checkpoint tagged under one key
    # Then another key refuses it, and a head tag is not a checkpoint tag
    checkpoint = ChainSeal(KEY).checkpoint("p", None, 1, "ab" * 32, "t")
    assert not ChainSeal(bytes(32)).checkpoint_verifies(checkpoint)
    body = {k: checkpoint[k] for k in ("project", "candidate_id", "seq", "hash", "at")}
    assert not ChainSeal(KEY).verify("head", body, checkpoint["mac"])


def test_a_short_key_is_refused_and_the_key_is_never_shown():
    with pytest.raises(ChainKeyUnavailable):
        ChainSeal(b"short")
    assert KEY.hex() not in repr(ChainSeal(KEY)) and "withheld" in repr(ChainSeal(KEY))
