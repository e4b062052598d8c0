"""DynamoDB's capacity arithmetic, and a client wrapper that applies it to every call it passes on.

moto answers ReturnConsumedCapacity=TOTAL with fixed placeholders (1.0 for a write, 0.5 for a GetItem, 1.0
for a Query, 2.0 per transaction item), whatever the item sizes, so the units here are computed from the
items themselves by DynamoDB's published rules (developerguide/CapacityUnitCalculations.html):

- item size: the UTF-8 bytes of every attribute name plus its value; a number is about 1 byte per two
  significant digits plus 1; binary its raw bytes; null and boolean 1 byte; a list or map 3 bytes plus
  1 byte per element plus the elements.
- reads: a GetItem's item, or the sum of the items one Query page returns, rounded up to 4 KB: one read
  request unit per 4 KB strongly consistent, half of that eventually consistent; at least one unit (half)
  even when nothing is found.
- writes: the larger of the item before and after, rounded up to 1 KB: one write request unit per KB, at
  least one; a failed conditional write still pays; TransactWriteItems pays twice per item.
moto's own figures are kept next to them for reference."""

import math
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

READ_BLOCK = 4096
WRITE_BLOCK = 1024


def _number_size(text: str) -> int:
    try:
        digits = Decimal(text).normalize().as_tuple().digits
    except InvalidOperation:
        digits = tuple(text)
    significant = max(1, len(digits))
    return (significant + 1) // 2 + 1


def value_size(value: dict[str, Any]) -> int:
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode("utf-8"))
    if kind == "N":
        return _number_size(inner)
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode("utf-8")) for s in inner)
    if kind == "NS":
        return sum(_number_size(s) for s in inner)
    if kind == "BS":
        return sum(len(b) for b in inner)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + value_size(v) for k, v in inner.items())
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: dict[str, Any] | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


def read_units(size: int, consistent: bool) -> float:
    blocks = max(1, math.ceil(size / READ_BLOCK))
    return float(blocks) if consistent else blocks / 2


def write_units(size: int, transactional: bool = False) -> float:
    blocks = max(1, math.ceil(size / WRITE_BLOCK))
    return float(blocks * (2 if transactional else 1))


@dataclass
class Call:
    op: str
    table: str
    pk: str
    consistent: bool
    items: int
    bytes: int
    rru: float
    wru: float
    seconds: float
    moto_units: float | None
    failed: bool
    continued: bool  # a Query or Scan page after the first (ExclusiveStartKey given)
    context: dict[str, str] = field(default_factory=dict)


class MeteredClient:
    """Wraps a boto3 DynamoDB client: asks for consumed capacity, computes the units by DynamoDB's rules
    (reading the item a write replaces through the raw client, uncounted and untimed), times each call, and
    records it with the caller's current context (route, phase)."""

    READS = ("get_item", "query", "scan")
    WRITES = ("put_item", "delete_item", "update_item", "transact_write_items", "batch_write_item")

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[Call] = []
        self._local = threading.local()
        self._lock = threading.Lock()

    @property
    def context(self) -> dict[str, str]:
        return getattr(self._local, "context", {})

    @context.setter
    def context(self, value: dict[str, str]) -> None:
        self._local.context = value

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if name in self.READS or name in self.WRITES:
            return lambda **kwargs: self._metered(name, attr, kwargs)
        return attr

    def _old(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.client.get_item(TableName=table, Key=key, ConsistentRead=True).get(
            "Item"
        )
        return item

    def _key(self, table: str, item: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in item.items() if k in ("pk", "sk")}

    @staticmethod
    def _partition_key(kwargs: dict[str, Any]) -> str:
        """The partition key a call names: in its expression values, its key or its item ("" if none)."""
        values = kwargs.get("ExpressionAttributeValues", {})
        if ":pk" in values:
            return values[":pk"].get("S", "")
        if "Key" in kwargs:
            return kwargs["Key"].get("pk", {}).get("S", "")
        if "Item" in kwargs:
            return kwargs["Item"].get("pk", {}).get("S", "")
        return ""

    def _metered(self, name: str, method: Any, kwargs: dict[str, Any]) -> Any:
        if name != "batch_write_item":
            kwargs.setdefault("ReturnConsumedCapacity", "TOTAL")
        table = kwargs.get("TableName", "")
        consistent = bool(kwargs.get("ConsistentRead"))
        pk = self._partition_key(kwargs)
        before: list[tuple[int, int, bool]] = []  # (new size, old size, transactional) per written item
        if name == "put_item":
            before.append(
                (
                    item_size(kwargs["Item"]),
                    item_size(self._old(table, self._key(table, kwargs["Item"]))),
                    False,
                )
            )
        elif name == "delete_item":
            before.append((0, item_size(self._old(table, kwargs["Key"])), False))
        elif name == "transact_write_items":
            for op in kwargs["TransactItems"]:
                ((kind, body),) = op.items()
                table = body["TableName"]
                if kind == "Put":
                    pk = pk or body["Item"]["pk"]["S"]
                    old = self._old(table, self._key(table, body["Item"]))
                    before.append((item_size(body["Item"]), item_size(old), True))
                else:
                    before.append((0, item_size(self._old(table, body["Key"])), True))
        elif name == "batch_write_item":
            for table_name, requests in kwargs["RequestItems"].items():
                table = table_name
                for request in requests:
                    item = request.get("PutRequest", {}).get("Item")
                    if item is not None:
                        before.append((item_size(item), 0, False))
        failed = False
        response: dict[str, Any] = {}
        t0 = time.perf_counter()
        try:
            response = method(**kwargs)
        except Exception:
            failed = True
            raise
        finally:
            seconds = time.perf_counter() - t0
            if name == "update_item" and not failed:
                after = self._old(table, kwargs["Key"])
                before.append((item_size(after), item_size(after), False))
            self._record(
                name, table, pk, consistent, response, before, seconds, failed, "ExclusiveStartKey" in kwargs
            )
        return response

    def _record(
        self,
        name: str,
        table: str,
        pk: str,
        consistent: bool,
        response: dict[str, Any],
        writes: list[tuple[int, int, bool]],
        seconds: float,
        failed: bool,
        continued: bool,
    ) -> None:
        rru = wru = 0.0
        items = 0
        size = 0
        if name in self.READS:
            found = [response["Item"]] if response.get("Item") else response.get("Items", [])
            items = len(found)
            size = sum(item_size(i) for i in found)
            rru = read_units(size, consistent)
        else:
            items = len(writes)
            for new, old, transactional in writes:
                size += max(new, old)
                wru += write_units(max(new, old), transactional)
        moto = response.get("ConsumedCapacity")
        if isinstance(moto, list):
            moto_units = sum(float(c.get("CapacityUnits", 0)) for c in moto)
        elif isinstance(moto, dict):
            moto_units = float(moto.get("CapacityUnits", 0))
        else:
            moto_units = None
        call = Call(
            name,
            table,
            pk,
            consistent,
            items,
            size,
            rru,
            wru,
            seconds,
            moto_units,
            failed,
            continued,
            dict(self.context),
        )
        with self._lock:
            self.calls.append(call)


class TimingClient:
    """Times every call on a client into the current thread's accumulator (for the store's share)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._local = threading.local()

    def reset(self) -> None:
        self._local.seconds = 0.0
        self._local.calls = 0

    def taken(self) -> tuple[float, int]:
        return getattr(self._local, "seconds", 0.0), getattr(self._local, "calls", 0)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if not callable(attr) or name.startswith("_") or name in ("meta", "exceptions", "get_waiter"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self._local.seconds = getattr(self._local, "seconds", 0.0) + time.perf_counter() - t0
                self._local.calls = getattr(self._local, "calls", 0) + 1

        return call
