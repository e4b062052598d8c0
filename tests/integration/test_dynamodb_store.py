"""DynamoStateStore against moto in-process: what only the DynamoDB store has (its tables, its items and their
layout, one Query a read, DynamoDB's failures and cancellation reasons). The contract both stores keep is in
test_state_store_contract.py and test_state_store_records.py."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from botocore.stub import Stubber

from sentinel_domain.errors import StoreConflict, StoreUnavailable
from sentinel_domain.ports import ClaimTaken, StreamRef
from sentinel_service.adapters.dynamodb_store import DynamoStateStore
from sentinel_service.adapters.state_layout import FACT_CHUNK_BYTES, idempotency_sk, partition
from sentinel_service.adapters.tables import ensure_tables
from support.moto_world import scan
from support.stores import (
    CAND,
    PRINCIPALS,
    PROJECT,
    STATE,
    Chain,
    DynamoKit,
    completed,
    created,
    fact,
    record,
    write,
)


@pytest.fixture
def client(moto: Any) -> Any:
    """Fresh, empty tables for each test on the module's moto (created and dropped in microseconds)."""
    kit = DynamoKit(moto)
    yield moto
    kit.close()


@pytest.fixture
def store(client: Any) -> DynamoStateStore:
    return DynamoStateStore(client, STATE)


def table(client: Any) -> list[dict[str, Any]]:
    return scan(client, STATE)


# --- tables -------------------------------------------------------------------------------------------


def test_ensure_tables_is_idempotent_and_streams_new_images(client: Any) -> None:
    # Given tables already created by the fixture
    # When they are ensured again
    ensure_tables(client, STATE, PRINCIPALS)
    # Then both are active, the state table streams new images, the principals table has a hash key only
    state = client.describe_table(TableName=STATE)["Table"]
    principals = client.describe_table(TableName=PRINCIPALS)["Table"]
    assert state["TableStatus"] == principals["TableStatus"] == "ACTIVE"
    assert state["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    assert [k["AttributeName"] for k in state["KeySchema"]] == ["pk", "sk"]
    assert principals["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]


# --- reads and writes as DynamoDB calls ----------------------------------------------------------------


@pytest.mark.parametrize("ref", [CAND, StreamRef(PROJECT)], ids=["candidate", "project"])
def test_a_chain_is_read_with_one_strongly_consistent_query(store: DynamoStateStore, ref: StreamRef) -> None:
    # Given three appends to one chain
    chain = Chain(ref)
    for n in (1, 2, 3):
        write(store, chain, fact(n))
    store.calls.clear()
    # When the chain is loaded, Then one Query read it whole
    stream = store.load(ref)
    assert store.calls == {"Query": 1}
    assert stream is not None and stream.complete and stream.seq == 3


@pytest.mark.parametrize("ref", [CAND, StreamRef(PROJECT)], ids=["candidate", "project"])
def test_load_head_reads_the_head_alone_with_one_consistent_get_item(
    client: Any, store: DynamoStateStore, ref: StreamRef
) -> None:
    # Given two appends to one chain, the last head carrying a plan digest
    chain = Chain(ref)
    write(store, chain, fact(1))
    last = write(store, chain, fact(2), head={"plan_digest": "d" * 64})
    store.calls.clear()
    # When its head alone is read
    head = store.load_head(ref)
    # Then one GetItem returned the head exactly as the last append wrote it, and as load() reads it
    assert store.calls == {"GetItem": 1}
    assert head == last.head == {"seq": 2, "hash": last.event["hash"], "plan_digest": "d" * 64}
    stream = store.load(ref)
    assert stream is not None and head == stream.head
    # And a chain with nothing stored has no head
    assert store.load_head(StreamRef("other")) is None
    # And that GetItem is strongly consistent, of HEAD, and when it fails it is unavailable, never "no head"
    with Stubber(client) as stub:
        stub.add_client_error(
            "get_item",
            service_error_code="ThrottlingException",
            http_status_code=400,
            expected_params={
                "TableName": STATE,
                "Key": {"pk": {"S": partition(ref)}, "sk": {"S": "HEAD"}},
                "ConsistentRead": True,
            },
        )
        with pytest.raises(StoreUnavailable):
            store.load_head(ref)


def test_a_read_cut_by_the_page_budget_issued_that_many_queries(client: Any) -> None:
    # Given a chain of five events and a store reading two items a page, one page at most
    chain = Chain(CAND)
    for n in range(1, 6):
        write(store_of(client), chain, fact(n))
    tight = DynamoStateStore(client, STATE, page_budget=1, page_size=2)
    # When it loads the chain, Then it issued exactly one Query and says the read is incomplete
    cut = tight.load(CAND)
    assert tight.calls == {"Query": 1} and cut is not None and not cut.complete


@pytest.mark.parametrize("blob", ["x" * 800_000, "é" * 400_000], ids=["ascii", "two-byte-utf8"])
def test_a_large_fact_is_split_into_items_no_limit_can_overflow(
    client: Any, store: DynamoStateStore, blob: str
) -> None:
    # Given a fact far above one item's size, and another after it
    chain = Chain(CAND)
    write(store, chain, fact(1, blob=blob))
    write(store, chain, fact(2))
    # When the table is read raw, Then the fact is stored in chunks that no item can overflow
    sks = [i["sk"]["S"] for i in table(client)]
    assert sks == ["E#0000000001", "E#0000000001#001", "E#0000000001#002", "E#0000000002", "HEAD"]
    first = next(i for i in table(client) if i["sk"]["S"] == "E#0000000001")
    assert first["fact_parts"] == {"N": "3"}
    assert all(len(i.get("fact", {"S": ""})["S"].encode()) <= FACT_CHUNK_BYTES for i in table(client))


def test_an_append_above_one_hundred_items_is_refused_before_any_call(
    client: Any, store: DynamoStateStore
) -> None:
    # Given an append carrying 99 outbox items next to its head and event
    a = Chain(CAND).next(fact(1), outbox=[{"outbox_id": f"o-{i}"} for i in range(99)])
    # When it is appended, Then it is refused without touching DynamoDB
    with pytest.raises(ValueError):
        store.append(a)
    assert store.calls["TransactWriteItems"] == 0 and table(client) == []


def test_a_kept_answer_keeps_the_item_shape_earlier_releases_replay_from(store: DynamoStateStore) -> None:
    # Given alice's in-progress key, completed by an append with a small body and another with a large one
    small, large = record(), record(key="key-2")
    assert store.idempotency_begin(small) and store.idempotency_begin(large)
    chain = Chain(CAND)
    write(store, chain, fact(1), idempotency=completed(small, {"evidence_id": "ev_1"}))
    big = {"obligations": [{"obligation_id": f"ob_{i:05d}", "scope": f"s/{i}" * 5} for i in range(4000)]}
    write(store, chain, fact(2), idempotency=completed(large, big))
    # When the stored items are read raw
    items = [
        store.client.get_item(
            TableName=store.table_name,
            Key={"pk": {"S": partition(CAND)}, "sk": {"S": idempotency_sk(rec.scope, rec.key)}},
        )["Item"]
        for rec in (small, large)
    ]
    # Then each has a 201 beside its body, the large one compressed
    assert all(item["response_status"] == {"N": "201"} for item in items)
    assert "response_body" in items[0] and "response_body_zlib" in items[1]


def store_of(client: Any) -> DynamoStateStore:
    return DynamoStateStore(client, STATE)


# --- claims -------------------------------------------------------------------------------------------


def test_claim_taken_reads_the_winner_when_no_old_image_comes_back(
    client: Any, store: DynamoStateStore
) -> None:
    # Given DynamoDB cancels a create on its claim (item 3: head, event, claim) without the old image
    a = Chain(CAND).next(created("cand_00000001"), claim=("K", "cand_00000001"))
    with Stubber(client) as stub:
        stub.add_client_error(
            "transact_write_items",
            service_error_code="TransactionCanceledException",
            modeled_fields={
                "CancellationReasons": [
                    {"Code": "None"},
                    {"Code": "None"},
                    {"Code": "ConditionalCheckFailed"},
                ]
            },
        )
        stub.add_response(
            "get_item",
            {"Item": {"pk": {"S": "P#demo"}, "sk": {"S": "U#K"}, "candidate_id": {"S": "cand_winner"}}},
            {"TableName": STATE, "Key": {"pk": {"S": "P#demo"}, "sk": {"S": "U#K"}}, "ConsistentRead": True},
        )
        # When the store appends, Then the winner is read (consistently) and named
        with pytest.raises(ClaimTaken) as taken:
            store.append(a)
    assert taken.value.existing_id == "cand_winner"


# --- failures are StoreUnavailable, never a guess (rule 3) ----------------------------------------------


@pytest.mark.parametrize(
    ("operation", "code", "status"),
    [
        ("query", "ThrottlingException", 400),
        ("query", "InternalServerError", 500),
        ("query", "ServiceUnavailable", 503),
        ("query", "RequestLimitExceeded", 400),
        ("transact_write_items", "ProvisionedThroughputExceededException", 400),
        ("transact_write_items", "InternalServerError", 500),
        ("get_item", "ThrottlingException", 400),
        ("put_item", "ThrottlingException", 400),
        ("delete_item", "InternalServerError", 500),
    ],
)
def test_dynamodb_errors_are_store_unavailable(
    client: Any, store: DynamoStateStore, operation: str, code: str, status: int
) -> None:
    # Given DynamoDB answers the next call with a throttle or a server error
    with Stubber(client) as stub:
        stub.add_client_error(operation, service_error_code=code, http_status_code=status)
        # When the store makes that call, Then it is unavailable, never a guess (not "absent", not "taken")
        with pytest.raises(StoreUnavailable):
            {
                "query": lambda: store.load(CAND),
                "transact_write_items": lambda: store.append(Chain(CAND).next(fact(1))),
                "get_item": lambda: store.idempotency_get(CAND, "s", "k"),
                "put_item": lambda: store.idempotency_begin(record()),
                "delete_item": lambda: store.idempotency_release(record()),
            }[operation]()


@pytest.mark.parametrize(
    ("reasons", "expected"),
    [
        (["TransactionConflict", "None"], StoreConflict),
        (["ThrottlingError", "None"], StoreUnavailable),
        (["None", "ValidationError"], StoreUnavailable),
    ],
)
def test_cancellation_reasons_decide_conflict_or_unavailable(
    client: Any, store: DynamoStateStore, reasons: list[str], expected: type
) -> None:
    # Given DynamoDB cancels the transaction for these reasons
    with Stubber(client) as stub:
        stub.add_client_error(
            "transact_write_items",
            service_error_code="TransactionCanceledException",
            modeled_fields={"CancellationReasons": [{"Code": r} for r in reasons]},
        )
        # When the store appends, Then a race is a conflict and anything else is unavailable
        with pytest.raises(expected):
            store.append(Chain(CAND).next(fact(1)))


class Broken:
    """A client whose every call fails in transport."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Any:
        def call(**_kwargs: Any) -> Any:
            raise self.error

        return call


@pytest.mark.parametrize(
    "error",
    [
        EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"),
        ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"),
        ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "Query"),
    ],
    ids=["connect", "read-timeout", "access-denied"],
)
def test_transport_failures_are_store_unavailable(error: Exception) -> None:
    # Given a store whose client cannot reach DynamoDB
    store = DynamoStateStore(Broken(error), STATE)
    # When it reads or writes anything, Then it is unavailable
    for call in (
        lambda: store.load(CAND),
        lambda: store.append(Chain(CAND).next(fact(1))),
        lambda: store.find_claim(PROJECT, "k"),
        lambda: store.list_claims(PROJECT, 10, None),
        lambda: store.idempotency_get(CAND, "s", "k"),
        lambda: store.idempotency_begin(record()),
        lambda: store.idempotency_release(record()),
        lambda: store.pending_outbox(),
        lambda: store.chain_heads(),
    ):
        with pytest.raises(StoreUnavailable):
            call()
