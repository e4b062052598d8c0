"""Where a synthetic side effect goes once the gate marked it: the DynamoDB item carries the attribute the bus
rules exclude, the SQLite row its flag, and the local relay writes it to the event log and hands it to no
consumer and no forge check publisher."""

from typing import Any

from sentinel_domain.ports import StreamRef
from sentinel_domain.usecases.chain import SYNTHETIC, seal_side_effect
from sentinel_runner.relay import EventLog, OutboxRelay
from sentinel_service import names
from sentinel_service.adapters.dynamodb_items import outbox_item, outbox_row
from support.world import SEAL

PK = "P#acceptance#C#cand_1"


def entry(kind: str, synthetic: bool) -> dict[str, Any]:
    body = {"kind": kind, "outbox_id": f"cand_1/{kind}", **({SYNTHETIC: True} if synthetic else {})}
    return seal_side_effect(SEAL, StreamRef("acceptance", "cand_1"), body)


class Pending:
    """The relay's view of a store: pending items, marked relayed once moved."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.relayed: list[str] = []

    def pending_outbox(self) -> list[dict[str, Any]]:
        return [i for i in self.items if i["sk"] not in self.relayed]

    def mark_relayed(self, _pk: str, sk: str) -> bool:
        self.relayed.append(sk)
        return True


class Publisher:
    def __init__(self) -> None:
        self.handled: list[dict[str, Any]] = []

    def handle(self, item: dict[str, Any]) -> None:
        self.handled.append(item)


def test_the_dynamodb_item_of_a_synthetic_side_effect_carries_the_attribute_the_rules_exclude() -> None:
    # Given a marked and an unmarked side effect
    # When the adapter writes their items
    marked = outbox_item(PK, 3, 0, entry("action", True), "t")
    plain = outbox_item(PK, 3, 1, entry("action", False), "t")
    # Then only the marked one has the attribute, as a string (the rules test its `S` leaf)
    assert marked[names.OUTBOX_SYNTHETIC_ATTRIBUTE] == {"S": "1"}
    assert names.OUTBOX_SYNTHETIC_ATTRIBUTE not in plain
    # And the relay reads it back from either
    assert outbox_row(marked)["synthetic"] is True and outbox_row(plain)["synthetic"] is False


def test_the_local_relay_writes_synthetic_side_effects_to_the_event_log_only() -> None:
    # Given a synthetic action, a synthetic forge check item also flagged by its row, and a plain one
    items = [
        {"pk": PK, "sk": "O#a", "kind": "action", "item": entry("action", True)},
        {"pk": PK, "sk": "O#b", "kind": "forge_check", "item": entry("forge_check", True)},
        {
            "pk": PK,
            "sk": "O#c",
            "kind": "forge_check",
            "item": entry("forge_check", True),
            "synthetic": True,
        },
        {"pk": PK, "sk": "O#d", "kind": "forge_check", "item": entry("forge_check", False)},
    ]
    consumed: list[dict[str, Any]] = []
    publisher, log = Publisher(), EventLog()
    relay = OutboxRelay(
        Pending(items),
        log,
        seal=lambda: SEAL,
        forge_checks=publisher,
        consumers={"action": consumed.append},
    )
    # When the relay runs
    assert relay.run_once() == 4
    # Then every item reached the event log, the synthetic ones marked so
    assert [e["detail"].get(SYNTHETIC, False) for e in log.events] == [True, True, True, False]
    # And no consumer or publisher saw a synthetic one; the plain forge item reached the publisher
    assert consumed == []
    assert [h["outbox_id"] for h in publisher.handled] == ["cand_1/forge_check"]
    assert len(publisher.handled) == 1 and SYNTHETIC not in publisher.handled[0]


def test_attack_a_row_flag_flipped_by_a_table_writer_never_silences_a_production_side_effect() -> None:
    # Given a production project's forge check item and action, as the gate sealed them (no synthetic key),
    # whose rows a table writer flagged synthetic (the SQLite column sits outside the tag)
    production, ref = "P#shop#C#cand_1", StreamRef("shop", "cand_1")
    items = [
        {"pk": production, "sk": "O#a", "kind": "action", "synthetic": True,
         "item": seal_side_effect(SEAL, ref, {"kind": "action", "outbox_id": "a"})},
        {"pk": production, "sk": "O#b", "kind": "forge_check", "synthetic": True,
         "item": seal_side_effect(SEAL, ref, {"kind": "forge_check", "outbox_id": "b"})},
    ]  # fmt: skip
    consumed: list[dict[str, Any]] = []
    publisher, log = Publisher(), EventLog()
    relay = OutboxRelay(
        Pending(items), log, seal=lambda: SEAL, forge_checks=publisher, consumers={"action": consumed.append}
    )
    # When the relay runs
    assert relay.run_once() == 2
    # Then both still reach their consumer and the forge check publisher: only the gate's sealed body says
    # what is synthetic (a hold on the forge, or a notification, is not suppressed by a table write)
    assert [c["outbox_id"] for c in consumed] == ["a"]
    assert [h["outbox_id"] for h in publisher.handled] == ["b"]
    assert all(not e["detail"].get(SYNTHETIC) for e in log.events)
