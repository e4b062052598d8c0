"""DynamoStateStore against moto in-process: the StateStore contract on DynamoDB (DOMAIN.md rules 16, 17, 24,
25 and "Limits that shape the store")."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from botocore.stub import Stubber
from moto import mock_aws

from sentinel_domain.audit import AuditChain, next_event
from sentinel_domain.canonical import canonical_text
from sentinel_domain.errors import Refusal, StoreConflict, StoreUnavailable
from sentinel_domain.ports import Append, ClaimTaken, IdempotencyRecord, StreamRef
from sentinel_service.adapters.state_layout import FACT_CHUNK_BYTES, idempotency_sk, partition
from sentinel_service.adapters.dynamodb_store import DynamoStateStore
from sentinel_service.adapters.tables import ensure_tables

STATE = "sentinel-state"
PRINCIPALS = "sentinel-principals"
PROJECT = "demo"
T0 = "2026-11-29T12:00:00.000000Z"
T1 = "2026-11-29T12:05:00.000000Z"
T2 = "2026-11-29T12:10:00.000000Z"
CAND = StreamRef(PROJECT, "cand_00000001")


@pytest.fixture(scope="module")
def aws() -> Any:
    """One in-process moto for the module (fake credentials, no network); each test gets fresh tables."""
    with pytest.MonkeyPatch.context() as env:
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
            env.delenv(name, raising=False)
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        env.setenv("AWS_ACCESS_KEY_ID", "testing")
        env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        env.setenv("AWS_SESSION_TOKEN", "testing")
        with mock_aws():
            yield boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture
def client(aws: Any) -> Any:
    """Fresh, empty tables for each test (moto creates and drops them in microseconds)."""
    ensure_tables(aws, STATE, PRINCIPALS)
    yield aws
    for name in (STATE, PRINCIPALS):
        aws.delete_table(TableName=name)


@pytest.fixture
def store(client: Any) -> DynamoStateStore:
    return DynamoStateStore(client, STATE)


class Chain:
    """Builds real audit events for one chain, tracking seq and hash locally (no reads)."""

    def __init__(self, ref: StreamRef) -> None:
        self.ref = ref
        self.seq = 0
        self.hash: str | None = None

    def next(self, fact: dict[str, Any], *, head: dict[str, Any] | None = None, **extra: Any) -> Append:
        text = canonical_text(fact)
        event = next_event(
            self.ref.project,
            self.ref.candidate_id,
            self.seq,
            self.hash,
            fact["type"],
            "alice",
            fact["recorded_at"],
            text,
        )
        return Append(
            self.ref,
            self.seq,
            event,
            text,
            {"seq": event["seq"], "hash": event["hash"], **(head or {})},
            **extra,
        )

    def done(self, a: Append) -> Append:
        self.seq, self.hash = a.event["seq"], a.event["hash"]
        return a


def fact(n: int = 1, **more: Any) -> dict[str, Any]:
    return {"type": "evidence.recorded", "n": n, "recorded_at": T0, **more}


def created(candidate_id: str, subject: str = "payments") -> dict[str, Any]:
    return {
        "type": "candidate.created",
        "candidate_id": candidate_id,
        "subject": subject,
        "revision": "a" * 40,
        "environment": "staging",
        "recorded_at": T0,
    }


def table(client: Any) -> list[dict[str, Any]]:
    items = client.scan(TableName=STATE, ConsistentRead=True)["Items"]
    return sorted(items, key=lambda i: (i["pk"]["S"], i["sk"]["S"]))


def write(store: DynamoStateStore, chain: Chain, f: dict[str, Any], **kwargs: Any) -> Append:
    a = chain.next(f, **kwargs)
    store.append(a)
    return chain.done(a)


def record(
    caller: str = "alice",
    claimed_at: str = T0,
    lease_until: str = T1,
    ref: StreamRef = CAND,
    key: str = "key-1",
) -> IdempotencyRecord:
    return IdempotencyRecord(
        ref,
        "/candidates/cand_00000001/evidence",
        key,
        caller,
        "req-hash",
        claimed_at=claimed_at,
        lease_until=lease_until,
    )


def completed(rec: IdempotencyRecord, body: dict[str, Any]) -> IdempotencyRecord:
    rec.status, rec.response_body = "completed", body
    return rec


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


# --- append and load ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ref", [CAND, StreamRef(PROJECT)], ids=["candidate", "project"])
def test_append_then_load_round_trips_with_one_query(store: DynamoStateStore, ref: StreamRef) -> None:
    # Given three appends to one chain, the last head carrying plan digest and (empty) approval expiry
    chain = Chain(ref)
    appends = [
        write(
            store,
            chain,
            fact(n, note="" if n == 2 else "text é"),
            head={"plan_digest": "d" * 64 if n == 3 else "", "approval_valid_until": ""},
        )
        for n in (1, 2, 3)
    ]
    store.calls.clear()
    # When the chain is loaded
    stream = store.load(ref)
    # Then one strongly consistent Query returned the events, facts and head exactly as given
    assert store.calls == {"Query": 1}
    assert stream is not None and stream.complete and stream.pages == 1
    assert stream.events == [a.event for a in appends]
    assert stream.facts == {a.event["seq"]: a.fact_text for a in appends}
    assert stream.head == appends[-1].head
    assert stream.seq == 3 and stream.head_hash == appends[-1].event["hash"]
    assert AuditChain.verify(ref.project, ref.candidate_id, stream.events, stream.facts, stream.head).valid


def test_load_of_an_unknown_chain_is_none(store: DynamoStateStore) -> None:
    # Given an empty table, When a chain is loaded, Then there is nothing
    assert store.load(CAND) is None


def test_load_ignores_the_partitions_idempotency_outbox_and_claim_items(store: DynamoStateStore) -> None:
    # Given a project chain whose partition also holds an idempotency record, a claim and an outbox item
    project = StreamRef(PROJECT)
    chain = Chain(project)
    idem = record(ref=project)
    assert store.idempotency_begin(idem)
    write(store, chain, fact(1), outbox=[{"outbox_id": "x", "kind": "checkpoint"}])
    write(store, Chain(CAND), created("cand_00000001"), claim=("k", "cand_00000001"))
    # When the project chain is loaded
    stream = store.load(project)
    # Then it holds only its own event and head
    assert stream is not None and [e["seq"] for e in stream.events] == [1] and list(stream.facts) == [1]


def test_stale_expected_seq_is_a_conflict_and_writes_nothing(client: Any, store: DynamoStateStore) -> None:
    # Given a chain with one event, and a second writer that read it when it was empty
    chain, stale = Chain(CAND), Chain(CAND)
    write(store, chain, fact(1))
    before = table(client)
    late = stale.next(fact(2), outbox=[{"outbox_id": "o-1", "kind": "action"}])
    # When the stale writer appends
    with pytest.raises(StoreConflict):
        store.append(late)
    # Then nothing was written
    assert table(client) == before


@pytest.mark.parametrize("blob", ["x" * 800_000, "é" * 400_000], ids=["ascii", "two-byte-utf8"])
def test_a_large_fact_is_split_and_reassembled(client: Any, store: DynamoStateStore, blob: str) -> None:
    # Given a fact far above one item's size
    chain = Chain(CAND)
    a = write(store, chain, fact(1, blob=blob))
    write(store, chain, fact(2))
    # When the chain is loaded
    stream = store.load(CAND)
    # Then the fact is whole again, the chain verifies, and it was stored in chunks no item can overflow
    assert stream is not None and stream.facts[1] == a.fact_text
    assert AuditChain.verify(PROJECT, CAND.candidate_id, stream.events, stream.facts, stream.head).valid
    sks = [i["sk"]["S"] for i in table(client)]
    assert sks == ["E#0000000001", "E#0000000001#001", "E#0000000001#002", "E#0000000002", "HEAD"]
    first = next(i for i in table(client) if i["sk"]["S"] == "E#0000000001")
    assert first["fact_parts"] == {"N": "3"}
    assert all(len(i.get("fact", {"S": ""})["S"].encode()) <= FACT_CHUNK_BYTES for i in table(client))


def test_a_read_beyond_the_page_budget_is_incomplete(client: Any) -> None:
    # Given a chain of five events and a store reading two items a page
    writer = DynamoStateStore(client, STATE)
    chain = Chain(CAND)
    for n in range(1, 6):
        write(writer, chain, fact(n))
    tight = DynamoStateStore(client, STATE, page_budget=1, page_size=2)
    roomy = DynamoStateStore(client, STATE, page_budget=10, page_size=2)
    # When each loads it
    cut, whole = tight.load(CAND), roomy.load(CAND)
    # Then the tight read stops after one page, says so, and holds no head (a write from it must fail)
    assert cut is not None and not cut.complete and cut.pages == 1 and tight.calls == {"Query": 1}
    assert [e["seq"] for e in cut.events] == [1, 2] and cut.head is None
    # And the roomy one reads every page
    assert whole is not None and whole.complete and whole.pages == 3 and len(whole.events) == 5
    assert whole.head is not None and whole.head["seq"] == 5


def test_a_budget_cut_inside_a_split_fact_leaves_that_event_unread(client: Any) -> None:
    # Given a chain whose first fact spans three items, and a store reading two items in its one page
    write(DynamoStateStore(client, STATE), Chain(CAND), fact(1, blob="x" * 800_000))
    tight = DynamoStateStore(client, STATE, page_budget=1, page_size=2)
    # When it loads the chain
    cut = tight.load(CAND)
    # Then the half-read event is not returned, and the read says it is incomplete
    assert cut is not None and not cut.complete and cut.events == [] and cut.facts == {} and cut.head is None


def test_an_append_above_one_hundred_items_is_refused_before_any_call(
    client: Any, store: DynamoStateStore
) -> None:
    # Given an append carrying 99 outbox items next to its head and event
    a = Chain(CAND).next(fact(1), outbox=[{"outbox_id": f"o-{i}"} for i in range(99)])
    # When it is appended, Then it is refused without touching DynamoDB
    with pytest.raises(ValueError):
        store.append(a)
    assert store.calls["TransactWriteItems"] == 0 and table(client) == []


def test_an_append_writing_one_item_twice_is_refused(client: Any, store: DynamoStateStore) -> None:
    # Given an append whose two outbox items share an id
    a = Chain(CAND).next(fact(1), outbox=[{"outbox_id": "same"}, {"outbox_id": "same"}])
    # When it is appended, Then it is refused before any call and nothing is written
    with pytest.raises(ValueError):
        store.append(a)
    assert table(client) == []


# --- transaction conditions (rule 16) -----------------------------------------------------------------


def test_plan_digest_and_approval_conditions_refuse_when_not_met(
    client: Any, store: DynamoStateStore
) -> None:
    # Given a chain whose head records plan digest D approved until T1
    chain = Chain(CAND)
    head = {"plan_digest": "d" * 64, "approval_valid_until": T1}
    write(store, chain, fact(1), head=head)
    before = table(client)
    # When an execution requires another digest, or an approval valid after T1 (the expiry itself)
    for kwargs in (
        {"require_plan_digest": "e" * 64},
        {"require_approval_after": T1},
        {"require_approval_after": T2},
    ):
        with pytest.raises(StoreConflict):
            store.append(chain.next(fact(2), head=head, outbox=[{"outbox_id": "exe"}], **kwargs))
    # Then nothing was written
    assert table(client) == before
    # And when both hold, the execution is written
    write(store, chain, fact(2), head=head, require_plan_digest="d" * 64, require_approval_after=T0)
    loaded = store.load(CAND)
    assert loaded is not None and loaded.seq == 2


# --- claims -------------------------------------------------------------------------------------------


def test_claim_race_raises_claim_taken_with_the_existing_id(client: Any, store: DynamoStateStore) -> None:
    # Given candidate A created with the uniqueness claim K
    first = StreamRef(PROJECT, "cand_a")
    write(store, Chain(first), created("cand_a"), claim=("K", "cand_a"))
    second = StreamRef(PROJECT, "cand_b")
    idem = record(ref=StreamRef(PROJECT))
    assert store.idempotency_begin(idem)
    before = table(client)
    # When candidate B, racing, creates with the same claim (and completes its idempotency record)
    b = Chain(second).next(created("cand_b"), claim=("K", "cand_b"), idempotency=completed(idem, {"id": "b"}))
    with pytest.raises(ClaimTaken) as taken:
        store.append(b)
    # Then the existing id comes back and nothing else was written
    assert taken.value.existing_id == "cand_a"
    assert table(client) == before and store.load(second) is None
    assert store.find_claim(PROJECT, "K") == "cand_a" and store.find_claim(PROJECT, "other") is None


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


def test_list_claims_pages_with_an_opaque_cursor(store: DynamoStateStore) -> None:
    # Given five candidates with claims
    ids = [f"cand_{n}" for n in range(5)]
    for n, cid in enumerate(ids):
        write(store, Chain(StreamRef(PROJECT, cid)), created(cid, subject=f"s{n}"), claim=(f"key-{n}", cid))
    # When the claims are listed two at a time
    pages, cursor = [], None
    while True:
        rows, cursor = store.list_claims(PROJECT, 2, cursor)
        pages.append(rows)
        if cursor is None:
            break
        assert isinstance(cursor, str)
    # Then three pages hold every claim once, with its binding and creation time
    assert [len(p) for p in pages] == [2, 2, 1]
    rows = [r for p in pages for r in p]
    assert sorted(r["candidate_id"] for r in rows) == ids
    assert rows[0] == {
        "candidate_id": "cand_0",
        "subject": "s0",
        "revision": "a" * 40,
        "environment": "staging",
        "created_at": T0,
    }
    # And an exact page leaves no dangling cursor
    assert store.list_claims(PROJECT, 5, None)[1] is None


def test_a_foreign_or_garbled_cursor_is_refused(store: DynamoStateStore) -> None:
    # Given a cursor issued for another project's claims
    write(store, Chain(StreamRef("other", "c1")), created("c1"), claim=("k1", "c1"))
    write(store, Chain(StreamRef("other", "c2")), created("c2"), claim=("k2", "c2"))
    _rows, foreign = store.list_claims("other", 1, None)
    assert foreign is not None
    # When it is used for this project, or a cursor is garbage, Then it is refused as invalid
    for cursor in (foreign, "not-base64!", "eyJhIjoxfQ=="):
        with pytest.raises(Refusal) as refused:
            store.list_claims(PROJECT, 1, cursor)
        assert refused.value.code == "VALIDATION_FAILED"


# --- idempotency (rule 17) ----------------------------------------------------------------------------


def test_idempotency_begin_get_release(store: DynamoStateStore) -> None:
    # Given alice claims a key
    mine = record()
    assert store.idempotency_begin(mine)
    # When bob tries the same key while alice's lease runs, Then he cannot take it
    assert not store.idempotency_begin(record(caller="bob", claimed_at=T0))
    got = store.idempotency_get(CAND, mine.scope, mine.key)
    assert got == mine and got.status == "in_progress"
    # And bob cannot release alice's claim
    store.idempotency_release(record(caller="bob"))
    assert store.idempotency_get(CAND, mine.scope, mine.key) is not None
    # When alice releases it, Then the key is free again
    store.idempotency_release(mine)
    assert store.idempotency_get(CAND, mine.scope, mine.key) is None
    assert store.idempotency_begin(record(caller="bob"))


def test_a_lapsed_lease_can_be_taken_over(store: DynamoStateStore) -> None:
    # Given alice's claim lasting until T1
    assert store.idempotency_begin(record(lease_until=T1))
    # When bob claims at T1 (exactly at the end of the lease), Then he takes it over
    assert store.idempotency_begin(record(caller="bob", claimed_at=T1, lease_until=T2))
    assert store.idempotency_get(CAND, "/candidates/cand_00000001/evidence", "key-1").caller == "bob"


def test_completion_inside_the_append_keeps_the_response_for_replay(store: DynamoStateStore) -> None:
    # Given alice's in-progress key and an append that completes it
    mine = record()
    assert store.idempotency_begin(mine)
    body = {"evidence_id": "ev_1", "seq": 1, "note": "ü"}
    # When the append lands
    write(store, Chain(CAND), fact(1), idempotency=completed(mine, body))
    # Then the completed record is readable with its response, and the key cannot be claimed again
    got = store.idempotency_get(CAND, mine.scope, mine.key)
    assert got is not None and got.status == "completed"
    assert (got.response_body, got.caller, got.request_hash) == (body, "alice", "req-hash")
    # And the stored item keeps the shape earlier releases replay from (a 201 beside the body)
    item = store.client.get_item(
        TableName=store.table_name,
        Key={"pk": {"S": partition(CAND)}, "sk": {"S": idempotency_sk(mine.scope, mine.key)}},
    )["Item"]
    assert item["response_status"] == {"N": "201"} and "response_body" in item
    assert not store.idempotency_begin(record(caller="alice", claimed_at=T2, lease_until=T2))
    # And a release after completion keeps it
    store.idempotency_release(mine)
    assert store.idempotency_get(CAND, mine.scope, mine.key) is not None


def test_a_large_response_body_is_kept_compressed(store: DynamoStateStore) -> None:
    # Given a response body above one item's size (a candidate's 2,000 obligations)
    mine = record()
    assert store.idempotency_begin(mine)
    body = {
        "obligations": [{"obligation_id": f"ob_{i:05d}", "scope": f"services/p/{i}" * 5} for i in range(4000)]
    }
    assert len(json.dumps(body)) > 400_000
    # When the append completing it lands, Then the body replays whole
    write(store, Chain(CAND), fact(1), idempotency=completed(mine, body))
    assert store.idempotency_get(CAND, mine.scope, mine.key).response_body == body


@pytest.mark.parametrize("holder", ["bob", None, "alice-later"])
def test_completion_over_another_claim_cancels_the_whole_append(
    client: Any, store: DynamoStateStore, holder: str | None
) -> None:
    # Given the key is held by bob, by nobody, or by a later claim of alice's that took the lapsed lease over
    if holder == "bob":
        assert store.idempotency_begin(record(caller="bob"))
    elif holder == "alice-later":
        assert store.idempotency_begin(record())
        assert store.idempotency_begin(record(claimed_at=T1, lease_until=T2))
    before = table(client)
    # When alice's append tries to complete her (first) claim
    a = Chain(CAND).next(fact(1), idempotency=completed(record(), {"seq": 1}), outbox=[{"outbox_id": "o"}])
    with pytest.raises(StoreConflict):
        store.append(a)
    # Then nothing at all was written
    assert table(client) == before


# --- outbox and checkpoints (rules 16, 25) -------------------------------------------------------------


def test_pending_outbox_and_mark_relayed(client: Any, store: DynamoStateStore) -> None:
    # Given an execution with two outbox items
    items = [
        {"outbox_id": "cand_00000001/exe_1", "kind": "action", "params": {"checks": ["c1"]}},
        {"outbox_id": "cand_00000001/exe_2", "kind": "action", "params": {}},
    ]
    write(store, Chain(CAND), fact(1), outbox=items)
    # When the relay reads the pending items
    pending = store.pending_outbox()
    # Then both are there, as written
    assert [p["item"] for p in pending] == items and {p["kind"] for p in pending} == {"action"}
    assert {p["pk"] for p in pending} == {partition(CAND)}
    # When one is relayed, Then only the other stays pending
    assert store.mark_relayed(pending[0]["pk"], pending[0]["sk"])
    assert [p["item"] for p in store.pending_outbox()] == items[1:]
    # And marking something that is not an outbox item creates nothing
    before = table(client)
    assert not store.mark_relayed(partition(CAND), "O#missing")
    assert not store.mark_relayed(partition(CAND), "HEAD")
    assert table(client) == before


def test_chain_heads_name_every_chain(store: DynamoStateStore) -> None:
    # Given a project chain and a candidate chain
    p = write(store, Chain(StreamRef(PROJECT)), fact(1))
    chain = Chain(CAND)
    write(store, chain, fact(1))
    c = write(store, chain, fact(2))
    # When the heads are listed, Then each names its chain, seq and hash
    assert store.chain_heads() == [
        {"pk": "P#demo", "project": PROJECT, "candidate_id": None, "seq": 1, "hash": p.event["hash"]},
        {
            "pk": "P#demo#C#cand_00000001",
            "project": PROJECT,
            "candidate_id": "cand_00000001",
            "seq": 2,
            "hash": c.event["hash"],
        },
    ]


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
