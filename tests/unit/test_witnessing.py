"""The witness writer's reading of stream records and the chain key's loading, without AWS: what reaches the
witness (only checkpoints whose tag verifies, and change notes for chain items), what is ignored, and a
chain key that cannot be used being ChainKeyUnavailable with the key never in the message."""

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from sentinel_domain.integrity import ChainKeyUnavailable, ChainSeal
from sentinel_domain.memory import FixedClock
from sentinel_domain.ports import StreamRef
from sentinel_service import names
from sentinel_service.settings import Settings
from sentinel_service.witnessing import (
    WINDOW_SECONDS,
    WitnessWriter,
    emf,
    load_chain_seal,
    ref_of_partition,
    window_of,
)

SEAL = ChainSeal(b"\x07" * 32)
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class Recorder:
    """The witness as the writer sees it: appends and change notes, recorded."""

    def __init__(self) -> None:
        self.appended: list[dict[str, Any]] = []
        self.changed: list[tuple[int, StreamRef]] = []

    def append(self, checkpoint: dict[str, Any]) -> bool:
        self.appended.append(checkpoint)
        return True

    def mark_changed(self, window: int, ref: StreamRef) -> bool:
        self.changed.append((window, ref))
        return True


def record(pk: str, sk: str, event: str = "INSERT", **image: str) -> dict[str, Any]:
    keys = {"pk": {"S": pk}, "sk": {"S": sk}}
    body: dict[str, Any] = {"Keys": keys}
    if event != "REMOVE":
        body["NewImage"] = {**keys, **{k: {"S": v} for k, v in image.items()}}
    return {"eventName": event, "dynamodb": body}


def checkpoint_record(cp: Any, kind: str = "checkpoint") -> dict[str, Any]:
    text = cp if isinstance(cp, str) else json.dumps(cp)
    return record("P#demo#C#c1", "O#cp-1", item=text, outbox_kind=kind, outbox_pending="1")


@pytest.fixture
def writer() -> tuple[WitnessWriter, Recorder, list[dict[str, Any]]]:
    witness, metrics = Recorder(), []
    made = WitnessWriter(witness, SEAL, FixedClock(NOW), emit=metrics.append)  # type: ignore[arg-type]
    return made, witness, metrics


def test_only_checkpoints_whose_tag_verifies_are_appended(writer: Any) -> None:
    # Given a genuine checkpoint item, and forgeries of several kinds
    w, witness, metrics = writer
    genuine = SEAL.checkpoint("demo", "c1", 3, "a" * 64, "2026-12-01T12:00:00Z")
    other_key = ChainSeal(b"\x08" * 32).checkpoint("demo", "c1", 4, "b" * 64, "2026-12-01T12:00:00Z")
    records = [
        checkpoint_record(genuine),
        checkpoint_record(other_key),
        checkpoint_record({**genuine, "seq": 9}),
        checkpoint_record("not json"),
        checkpoint_record("[1, 2]"),
    ]
    # When the writer handles them
    report = w.handle(records)
    # Then only the genuine one reaches the witness, and the rest are counted as forged
    assert witness.appended == [genuine]
    assert (report.appended, report.forged) == (1, 4)
    (document,) = metrics
    assert document[names.FORGED_CHECKPOINTS_METRIC] == 4
    assert document[names.WITNESSED_CHECKPOINTS_METRIC] == 1


def test_chain_items_note_their_chain_once_per_window_and_other_items_are_ignored(writer: Any) -> None:
    w, witness, _ = writer
    w.handle(
        [
            record("P#demo#C#c1", "HEAD", "MODIFY"),
            record("P#demo#C#c1", "E#0000000003", "REMOVE"),
            record("P#demo", "E#0000000001"),
            record("P#demo", "I#abc"),  # an idempotency record
            record("P#demo", "U#claim"),  # a candidate claim
            record("P#demo", "O#side-effect", outbox_kind="dispatch_checks", outbox_pending="1"),
            record("X#other", "HEAD"),  # not a chain partition
            {"eventName": "INSERT"},  # no dynamodb part
        ]
    )
    window = window_of(NOW)
    assert witness.changed == [(window, StreamRef("demo", "c1")), (window, StreamRef("demo"))]
    assert witness.appended == []
    # And the next window notes them again
    w.clock.advance(WINDOW_SECONDS)  # type: ignore[attr-defined]
    w.handle([record("P#demo#C#c1", "HEAD")])
    assert witness.changed[-1] == (window + 1, StreamRef("demo", "c1"))


def test_partitions_name_their_chain() -> None:
    assert ref_of_partition("P#demo") == StreamRef("demo")
    assert ref_of_partition("P#demo#C#cand:1.x") == StreamRef("demo", "cand:1.x")
    assert ref_of_partition("P#") is None
    assert ref_of_partition("Q#demo") is None


def test_the_metrics_are_embedded_metric_format_in_the_integrity_namespace() -> None:
    document = emf({names.TAMPERED_CHAINS_METRIC: 1}, now_ms=5)
    (directive,) = document["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == names.INTEGRITY_NAMESPACE
    assert directive["Dimensions"] == [[names.INTEGRITY_DIMENSION]]
    assert document[names.INTEGRITY_DIMENSION] == names.SERVICE
    assert document[names.TAMPERED_CHAINS_METRIC] == 1


class Secrets:
    def __init__(self, value: str | None = None, error: Exception | None = None) -> None:
        self.value, self.error = value, error

    def get_secret_value(self, SecretId: str) -> dict[str, str]:  # noqa: N803 - boto3's name
        if self.error:
            raise self.error
        assert self.value is not None
        return {"SecretString": self.value}


SETTINGS = Settings.from_env({"SENTINEL_CHAIN_KEY_SECRET_ARN": "arn:aws:secretsmanager:x:1:secret:chain"})


def test_the_chain_key_is_read_as_hex_or_as_text() -> None:
    hex_key = "ab" * 32
    assert load_chain_seal(SETTINGS, Secrets(hex_key)).key == bytes.fromhex(hex_key)
    text = "k" * 40
    assert load_chain_seal(SETTINGS, Secrets(text)).key == text.encode()


@pytest.mark.parametrize(
    ("settings", "secrets"),
    [
        (Settings.from_env({}), Secrets("ab" * 32)),  # no secret configured
        (SETTINGS, Secrets("ab" * 8)),  # too short: 8 bytes
        (SETTINGS, Secrets(error=RuntimeError("denied"))),  # unreadable
    ],
    ids=["unset", "short", "unreadable"],
)
def test_an_unusable_chain_key_is_unavailable_and_never_quoted(settings: Settings, secrets: Secrets) -> None:
    with pytest.raises(ChainKeyUnavailable) as raised:
        load_chain_seal(settings, secrets)
    assert "ab" * 8 not in str(raised.value)
