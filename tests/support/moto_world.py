"""The gate on its DynamoDB store (moto, in-process), the ready flow as named steps, a client that fails on
demand, and a structural audit of the raw table. Shared by tests/integration/faults, races, tampering and
security (its `moto` and `tables` fixtures are in tests/integration/conftest.py)."""

import base64
import contextlib
import copy
import json
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError, ConnectTimeoutError, ReadTimeoutError

from sentinel_domain.audit import AuditChain
from sentinel_domain.decision import Decision
from sentinel_domain.errors import Refusal
from sentinel_domain.integrity import checkpoint_from_outbox
from sentinel_domain.memory import FixedClock, MemoryStore, MemoryWitness, SequentialIds
from sentinel_domain.models import (
    CandidateRequest,
    ChangeContextRequest,
    EvidenceRequest,
    ExecutionRequest,
    ReportRequest,
    ReviewRequest,
)
from sentinel_domain.outcomes import ConfigVersionStored, PlanStored, PolicyVersionStored, Replayable
from sentinel_domain.ports import Stream, StreamRef
from sentinel_domain.times import format_time
from sentinel_domain.usecases import LEASE_SECONDS, Gate
from sentinel_service.adapters.dynamodb_store import DynamoStateStore
from sentinel_service.adapters.tables import state_table_definition
from sentinel_service.http.problems import refusal_headers, refusal_status
from support.world import BASE, CI, PROJECT, RECEIPT_SIGNER, REQUESTER, REV, REVIEWER, SEAL, World

FILES = ["services/payments/api.py", "docs/guide.md"]
WRITES = frozenset({"transact_write_items", "put_item", "delete_item", "update_item"})
READS = frozenset({"query", "get_item", "scan"})
WRITTEN = (
    Replayable,
    PlanStored,
    ConfigVersionStored,
    PolicyVersionStored,
)  # the outcomes a route answers 201


@contextlib.contextmanager
def moto_dynamodb() -> Iterator[Any]:
    """moto in this process, with fake credentials and no endpoint override: nothing leaves the machine."""
    import boto3
    from moto import mock_aws

    saved = {
        k: os.environ.get(k)
        for k in (
            "AWS_DEFAULT_REGION",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_PROFILE",
            "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_DYNAMODB",
        )
    }
    os.environ.update(
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_SESSION_TOKEN="testing",
    )
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        os.environ.pop(name, None)
    try:
        with mock_aws():
            yield boto3.client("dynamodb", region_name="us-east-1")
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# ---- faults ------------------------------------------------------------------------------------------------


def client_error(code: str, operation: str, status: int = 400, **extra: Any) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": f"injected {code}"},
            "ResponseMetadata": {"HTTPStatusCode": status},
            **extra,
        },
        operation,
    )


MODES = ("throttle", "timeout", "server_error", "lost_response", "cancelled", "cancelled_always")


class FaultyClient:
    """A DynamoDB client that counts its calls and makes the Nth one fail in the way asked:

    - throttle: ProvisionedThroughputExceededException (ThrottlingException for a transaction), nothing done
    - timeout: the connection timed out, nothing done
    - server_error: HTTP 500 InternalServerError, nothing done
    - lost_response: the call is done, then the response is lost (read timeout): the caller cannot know
    - cancelled: a conditional write loses its race (ConditionalCheckFailed), nothing done
    - cancelled_always: every conditional write from the Nth on loses its race

    `before(n, action)` runs `action` just before the Nth call instead (a competing writer, for races)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[str] = []
        self._fault: tuple[int, str] | None = None
        self._before: tuple[int, Callable[[], None]] | None = None
        self.fired: list[tuple[int, str, str]] = []
        self.paused = False

    def arm(self, n: int, mode: str) -> None:
        self.calls, self.fired, self._fault, self._before = [], [], (n, mode), None

    def before(self, n: int, action: Callable[[], None]) -> None:
        self.calls, self.fired, self._fault, self._before = [], [], None, (n, action)

    def disarm(self) -> None:
        self._fault = self._before = None

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if name not in WRITES | READS:
            return attr

        def call(**kwargs: Any) -> Any:
            if self.paused:
                return attr(**kwargs)
            self.calls.append(name)
            n = len(self.calls)
            if self._before is not None and n == self._before[0]:
                action, self._before = self._before[1], None
                self.paused = True  # the competing writer's own calls are not counted or faulted
                try:
                    action()
                finally:
                    self.paused = False
                self.fired.append((n, name, "competing write"))
            if self._fault is not None:
                at, mode = self._fault
                if n == at or (mode == "cancelled_always" and n > at and name in WRITES):
                    self.fired.append((n, name, mode))
                    return self._fail(name, mode, attr, kwargs)
            return attr(**kwargs)

        return call

    @staticmethod
    def _fail(name: str, mode: str, attr: Any, kwargs: dict[str, Any]) -> Any:
        operation = "".join(part.title() for part in name.split("_"))
        if mode == "throttle":
            raise client_error(
                "ThrottlingException"
                if name == "transact_write_items"
                else "ProvisionedThroughputExceededException",
                operation,
            )
        if mode == "timeout":
            raise ConnectTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")
        if mode == "server_error":
            raise client_error("InternalServerError", operation, 500)
        if mode == "lost_response":
            attr(**kwargs)
            raise ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")
        # cancelled, cancelled_always: the conditional write lost, and wrote nothing
        if name == "transact_write_items":
            reasons = [{"Code": "ConditionalCheckFailed"}] + [{"Code": "None"}] * (
                len(kwargs["TransactItems"]) - 1
            )
            raise client_error("TransactionCanceledException", operation, CancellationReasons=reasons)
        if "ConditionExpression" in kwargs:
            raise client_error("ConditionalCheckFailedException", operation)
        return attr(**kwargs)  # an unconditional call cannot lose a race


# ---- the gate over one table -------------------------------------------------------------------------------


class Tables:
    """Fresh state tables on one moto client, each with its own name, dropped at the end."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.names: list[str] = []

    def new(self, items: list[dict[str, Any]] | None = None) -> str:
        name = f"state-{len(self.names) + 1:04d}"
        self.client.create_table(**state_table_definition(name))
        self.names.append(name)
        for start in range(0, len(items or []), 25):
            self.client.batch_write_item(
                RequestItems={
                    name: [{"PutRequest": {"Item": item}} for item in (items or [])[start : start + 25]]
                }
            )
        return name

    def drop(self, name: str) -> None:
        self.client.delete_table(TableName=name)
        self.names.remove(name)

    def drop_all(self) -> None:
        for name in list(self.names):
            self.drop(name)


def scan(client: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = client.scan(**kwargs)
        items.extend(page.get("Items", []))
        if not page.get("LastEvaluatedKey"):
            return sorted(items, key=lambda i: (i["pk"]["S"], i["sk"]["S"]))
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@dataclass
class Outcome:
    status: int
    code: str | None = None
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    replayed: bool = False

    @property
    def accepted(self) -> bool:
        return self.code is None and self.status < 300


def problem_fields(refusal: Refusal) -> dict[str, Any]:
    """What a refusal's problem document carries beside its type, title, status and code."""
    findings = {"findings": refusal.findings} if refusal.findings else {}
    return {"detail": refusal.detail, **refusal.extra, **findings}


def outcome(run: Callable[[], Any]) -> Outcome:
    """A use case's answer as the HTTP edge would give it: a refusal's status and headers from the problem
    mapping; 201 for what was written (or replayed); 200 for a read and for a decision it could not record."""
    try:
        result = run()
    except Refusal as refusal:
        return Outcome(
            refusal_status(refusal),
            refusal.code,
            {
                "detail": refusal.detail,
                **refusal.extra,
                **({"findings": refusal.findings} if refusal.findings else {}),
            },
            refusal_headers(refusal),
        )
    if isinstance(result, Decision):  # Gate.evaluate answers the decision itself
        return Outcome(200, None, result.as_dict())
    status = 201 if isinstance(result, WRITTEN) else 200
    return Outcome(status, None, result.as_json(), {}, isinstance(result, Replayable) and result.replayed)


def junit(tests: int = 3) -> str:
    return (
        "<testsuite>"
        + "".join(f'<testcase classname="c" name="t{n}"/>' for n in range(tests))
        + "</testsuite>"
    )


@dataclass
class Flow:
    """API.md's ready flow against one gate, a step at a time, every POST with its own Idempotency-Key (so a
    client can retry any of them after a lost answer). Its state is what a client would remember."""

    candidate_id: str = ""
    scopes: dict[str, str] = field(default_factory=dict)  # obligation id -> scope, as the gate derived them
    proposal: dict[str, Any] = field(default_factory=dict)
    digest: str = ""
    evidence: dict[str, str] = field(default_factory=dict)

    STEPS = (
        "create",
        "attest",
        "propose",
        "amend",
        "approve",
        "execute",
        "evidence 1",
        "evidence 2",
        "report 1",
        "report 2",
        "decide",
        "read decision",
    )

    def tasks(self) -> list[dict[str, Any]]:
        return self.proposal["plan"]["tasks"]

    def plan(self) -> dict[str, Any]:
        checks = [c["check_id"] for t in self.tasks() for c in t["checks"]]
        return dict(
            self.proposal["plan"],
            actions=[
                {
                    "action_id": "A1",
                    "type": "dispatch_checks",
                    "params": {"checks": checks},
                    "max_executions": 1,
                }
            ],
        )

    def run(self, gate: Gate, step: str) -> Outcome:
        cid = self.candidate_id
        if step == "create":
            request = CandidateRequest.model_validate(
                {
                    "subject": "payments",
                    "base_revision": BASE,
                    "revision": REV,
                    "environment": "staging",
                    "change": {"files": FILES},
                }
            )
            out = outcome(lambda: gate.create_candidate(PROJECT, REQUESTER, request, "k-create"))
            if out.accepted:
                self.candidate_id = out.body["candidate_id"]
                self.scopes = {o["obligation_id"]: o["scope"] for o in out.body["obligations"]}
            return out
        if step == "attest":
            return outcome(
                lambda: gate.add_change_context(
                    PROJECT,
                    cid,
                    CI,
                    ChangeContextRequest.model_validate({"change": {"files": FILES}}),
                    "k-attest",
                )
            )
        if step == "propose":
            out = outcome(lambda: gate.propose(PROJECT, cid, REQUESTER, None, "k-propose"))
            if out.accepted:
                self.proposal = out.body
            return out
        if step == "amend":
            out = outcome(
                lambda: gate.put_plan(
                    PROJECT, cid, REQUESTER, self.plan(), f'"{self.proposal["plan_digest"]}"'
                )
            )
            if out.accepted:
                self.digest = out.body["plan_digest"]
            return out
        if step == "approve":
            return outcome(
                lambda: gate.review(
                    PROJECT,
                    cid,
                    REVIEWER,
                    ReviewRequest(decision="approve", plan_digest=self.digest, revision=REV),
                    "k-approve",
                )
            )
        if step == "execute":
            params = self.plan()["actions"][0]["params"]
            return outcome(
                lambda: gate.execute(
                    PROJECT,
                    cid,
                    "A1",
                    REQUESTER,
                    ExecutionRequest(plan_digest=self.digest, params=params),
                    "k-execute",
                )
            )
        if step.startswith("evidence"):
            return self.post_evidence(gate, step)
        if step.startswith("report"):
            return self.report_task(gate, step)
        if step == "decide":
            return outcome(lambda: gate.record_decision(PROJECT, cid, REQUESTER, "k-decide"))
        if step == "read decision":
            return outcome(lambda: gate.evaluate(PROJECT, cid, REQUESTER))
        raise ValueError(step)

    def post_evidence(self, gate: Gate, step: str) -> Outcome:
        """`evidence N`: CI posts evidence for the first check of task N."""
        cid = self.candidate_id
        task = self.tasks()[int(step[-1]) - 1]
        check = task["checks"][0]
        scopes = [self.scope_of(o) for o in check["covers"]]
        body: dict[str, Any] = {
            "check_id": check["check_id"],
            "subject": "payments",
            "revision": REV,
            "environment": "staging",
            "scope": scopes,
            "observed_at": format_time(gate.clock.now()),
            "source": {"system": "ci"},
        }
        if check["policy_ref"] == "lint":
            body["result"] = {"exit_code": 0, "artifacts": []}
        else:
            body["junit_xml"] = junit()
        out = outcome(
            lambda: gate.post_evidence(PROJECT, cid, CI, EvidenceRequest.model_validate(body), f"k-{step}")
        )
        if out.accepted:
            self.evidence[check["check_id"]] = out.body["evidence_id"]
        return out

    def report_task(self, gate: Gate, step: str) -> Outcome:
        """`report N`: the requester reports task N completed, each check with the evidence posted for it."""
        cid = self.candidate_id
        task = self.tasks()[int(step[-1]) - 1]
        claims = [
            {"check_id": c["check_id"], "evidence_id": self.evidence.get(c["check_id"], "ev_none")}
            for c in task["checks"]
        ]
        return outcome(
            lambda: gate.report(
                PROJECT,
                cid,
                task["task_id"],
                REQUESTER,
                ReportRequest.model_validate(
                    {"plan_digest": self.digest, "status": "completed", "checks": claims}
                ),
                f"k-{step}",
            )
        )

    def scope_of(self, obligation_id: str) -> str:
        return self.scopes[obligation_id]


@dataclass
class Frozen:
    """Everything needed to start again from one point of the flow: the table, the clock, the ids, the
    flow."""

    items: list[dict[str, Any]]
    now: Any
    ids: int
    flow: Flow


class DynamoWorld:
    """The shared test world (support/world.py) on a DynamoDB table behind a FaultyClient."""

    def __init__(self, client: Any, tables: Tables, frozen: Frozen | None = None) -> None:
        self.raw = client
        self.tables = tables
        self.faulty = FaultyClient(client)
        self.table = tables.new(frozen.items if frozen else None)
        self.store = DynamoStateStore(self.faulty, self.table)
        if frozen is None:
            self.world = World(store=self.store)
            self.clock, self.ids = self.world.clock, self.world.ids
            self.flow = Flow()
        else:
            self.clock, self.ids = FixedClock(frozen.now), SequentialIds()
            self.ids.counter = frozen.ids
            self.flow = copy.deepcopy(frozen.flow)
        # AWS's way with the witness: only release paths read it, and checkpoints reach it through the
        # outbox (`deliver_checkpoints`, standing in for the witness writer).
        self.witness = MemoryWitness(SEAL)
        self.gate = Gate(
            self.store,
            self.clock,
            self.ids,
            witness=self.witness,
            seal=SEAL,
            reads_witness=False,
            appends_witness=False,
            receipt_signer=RECEIPT_SIGNER,
        )

    def deliver_checkpoints(self) -> int:
        """What the witness writer does in AWS: every pending checkpoint outbox item to the witness, after
        its tag verifies (forged ones are recorded as tampering instead)."""
        from sentinel_runner.relay import EventLog, OutboxRelay

        return OutboxRelay(self.store, EventLog(), witness=self.witness).run_once()

    def freeze(self) -> Frozen:
        return Frozen(
            scan(self.raw, self.table), self.clock.now(), self.ids.counter, copy.deepcopy(self.flow)
        )

    def step(self, name: str) -> Outcome:
        return self.flow.run(self.gate, name)

    def clean_store(self) -> DynamoStateStore:
        return DynamoStateStore(self.raw, self.table)

    def items(self) -> list[dict[str, Any]]:
        return scan(self.raw, self.table)

    def release_leases(self) -> None:
        """Let every in-progress idempotency lease lapse (a client retrying later than LEASE_SECONDS)."""
        self.clock.advance(LEASE_SECONDS + 1)

    def drop(self) -> None:
        self.tables.drop(self.table)


# ---- what a table must look like, whatever failed --------------------------------------------------------


def _s(item: dict[str, Any], name: str) -> str:
    return item.get(name, {}).get("S", "")


def _plain(attribute: dict[str, Any]) -> Any:
    """The attribute types events and heads use: S, N, NULL, BOOL."""
    if "S" in attribute:
        return attribute["S"]
    if "N" in attribute:
        return int(attribute["N"])
    if "BOOL" in attribute:
        return attribute["BOOL"]
    return None


def streams_of(items: list[dict[str, Any]]) -> dict[StreamRef, Stream]:
    """The chains as the table holds them, read from one scan (no second read path to trust)."""
    out: dict[StreamRef, Stream] = {}
    by_pk: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_pk.setdefault(_s(item, "pk"), []).append(item)
    for pk, group in by_pk.items():
        head_item = next((i for i in group if _s(i, "sk") == "HEAD"), None)
        if head_item is None:
            continue
        project, _, candidate = pk[2:].partition("#C#")
        ref = StreamRef(project, candidate or None)
        events, facts = [], {}
        for item in sorted(group, key=lambda i: _s(i, "sk")):
            sk = _s(item, "sk")
            if not sk.startswith("E#"):
                continue
            seq_text, _, part = sk[2:].partition("#")
            if part:
                facts[int(seq_text)] += _s(item, "fact")
                continue
            events.append(
                {k: _plain(v) for k, v in item.items() if k not in ("pk", "sk", "fact", "fact_parts")}
            )
            facts[int(seq_text)] = _s(item, "fact")
        head = {k: _plain(v) for k, v in head_item.items() if k not in ("pk", "sk")}
        out[ref] = Stream(ref, events, facts, head)
    return out


def _n(item: dict[str, Any], name: str) -> int:
    return int(item.get(name, {}).get("N", "0"))


def _body(item: dict[str, Any]) -> dict[str, Any] | None:
    if "response_body_zlib" in item:
        raw = item["response_body_zlib"]["B"]
        return json.loads(zlib.decompress(raw if isinstance(raw, bytes) else base64.b64decode(raw)))
    if "response_body" in item:
        return json.loads(item["response_body"]["S"])
    return None


@dataclass
class Audit:
    chains: dict[str, int]  # partition -> length
    events: dict[str, list[dict[str, Any]]]  # partition -> facts, in order
    outbox: list[dict[str, Any]]
    in_progress: int
    streams: dict[StreamRef, Stream]

    def decision(self, candidate_id: str, at: Any) -> str:
        """The gate's verdict on exactly what the table holds (the same core, over a copy in memory)."""
        store = MemoryStore()
        store.streams = copy.deepcopy(self.streams)
        return (
            Gate(store, FixedClock(at), SequentialIds()).evaluate(PROJECT, candidate_id, REQUESTER).decision
        )


def audit_table(world: DynamoWorld, *, allow_in_progress: bool = False) -> Audit:
    """Every chain verifies; every item belongs to a whole change: events 1..head without gaps, every fact
    part present, no part or outbox item without its event, every outbox item an audited execution, every
    claim a created candidate, every completed idempotency record an appended event."""
    items = world.items()
    by_pk: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_pk.setdefault(_s(item, "pk"), []).append(item)
    chains: dict[str, int] = {}
    facts: dict[str, list[dict[str, Any]]] = {}
    outbox: list[dict[str, Any]] = []
    in_progress = 0
    streams = streams_of(items)
    for pk, group in by_pk.items():
        head = next((i for i in group if _s(i, "sk") == "HEAD"), None)
        events = {
            int(_s(i, "sk")[2:]): i
            for i in group
            if _s(i, "sk").startswith("E#") and "#" not in _s(i, "sk")[2:]
        }
        parts = [i for i in group if _s(i, "sk").startswith("E#") and "#" in _s(i, "sk")[2:]]
        length = _n(head, "seq") if head else 0
        assert sorted(events) == list(range(1, length + 1)), (
            f"{pk}: events {sorted(events)} under head {length}"
        )
        for part in parts:
            seq, number = (int(x) for x in _s(part, "sk")[2:].split("#"))
            assert seq in events and number < _n(events[seq], "fact_parts"), (
                f"{pk}: a stray fact part {part['sk']}"
            )
        for seq, event in events.items():
            wanted = {f"E#{seq:010d}#{n:03d}" for n in range(1, _n(event, "fact_parts"))}
            assert wanted <= {_s(p, "sk") for p in parts}, f"{pk}: event {seq} lost a fact part"
        if head is not None:
            project, _, candidate = pk[2:].partition("#C#")
            stream = streams[StreamRef(project, candidate or None)]
            verdict = AuditChain.verify(
                project, candidate or None, stream.events, stream.facts, stream.head, seal=SEAL
            )
            assert verdict.valid, f"{pk}: {verdict}"
            chains[pk] = length
            facts[pk] = [json.loads(stream.facts[s]) for s in sorted(stream.facts)]
        for item in group:
            sk = _s(item, "sk")
            if sk.startswith("O#"):
                entry = json.loads(_s(item, "item"))
                seq = _n(item, "seq")
                assert head is not None and 1 <= seq <= length, f"{pk}: an outbox item without its event"
                checkpoint = checkpoint_from_outbox(entry)
                if checkpoint is not None:  # the head's checkpoint, written with it: never a side effect
                    assert SEAL.checkpoint_verifies(checkpoint), f"{pk}: a checkpoint the gate did not write"
                    continue
                outbox.append(entry)
            elif sk.startswith("I#"):
                if _s(item, "status") == "in_progress":
                    in_progress += 1
                    continue
                body = _body(item) or {}
                target = (
                    f"{pk}#C#{body['candidate_id']}" if "#C#" not in pk and "candidate_id" in body else pk
                )
                if "seq" in body:
                    assert (
                        chains.get(
                            target,
                            _n(next((i for i in by_pk.get(target, []) if _s(i, "sk") == "HEAD"), {}), "seq"),
                        )
                        >= body["seq"]
                    ), f"{pk}: a kept answer without its event"
            elif sk.startswith("U#"):
                target = f"{pk}#C#{_s(item, 'candidate_id')}"
                assert any(_s(i, "sk") == "HEAD" for i in by_pk.get(target, [])), (
                    f"{pk}: a claim without its candidate"
                )
    executed = [
        (pk, f["execution_id"]) for pk, fs in facts.items() for f in fs if f["type"] == "action.executed"
    ]
    assert sorted(executed) == sorted(
        (f"P#{o['project']}#C#{o['candidate_id']}", o["execution_id"]) for o in outbox
    ), "every side effect is exactly one audited execution"
    assert allow_in_progress or in_progress == 0, "an idempotency claim was left in progress"
    return Audit(chains, facts, outbox, in_progress, streams)


def decision_of(world: DynamoWorld) -> str:
    return world.gate.evaluate(PROJECT, world.flow.candidate_id, REQUESTER).decision
