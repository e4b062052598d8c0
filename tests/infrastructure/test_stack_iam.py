"""Roles: one per function, each allowed exactly the table actions its code issues, no wildcard on data, no
function writing the principals table, and the token key readable by the authorizer alone."""

import ast
from pathlib import Path
from typing import Any

import pytest

from sentinel_infra.stack import PRINCIPAL_READER_ACTIONS, STATE_PROBE_ACTIONS, STATE_WRITER_ACTIONS
from sentinel_service import names
from support.infra import (
    ALL_FUNCTIONS,
    EVERY_FUNCTION,
    REPO,
    Synthesized,
    as_list,
    functions_by_name,
    ref_name,
    resource_key,
    statements,
)

# The DynamoDB calls the local runner's relay makes; on AWS the relay is the stream and the pipes.
RELAY_ONLY = {"_scan", "pending_outbox", "mark_relayed", "chain_heads"}
VERIFIER_ONLY = {"mark_head_tampered"}  # the chain verifier's, granted STATE_VERIFIER_ACTIONS
TRANSACTION_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
PASCAL = {
    "get_item": "GetItem",
    "query": "Query",
    "put_item": "PutItem",
    "delete_item": "DeleteItem",
    "update_item": "UpdateItem",
    "scan": "Scan",
    "transact_write_items": "TransactWriteItems",
    "batch_get_item": "BatchGetItem",
    "batch_write_item": "BatchWriteItem",
}


def issued_by(
    path: Path, class_name: str, skip: set[str] = frozenset(), helpers: tuple[Path, ...] = ()
) -> set[str]:
    """The IAM actions the methods of one class need, read from its source: `_call("Op")` and
    `_client.op(...)` calls, and the kinds of items its transactions hold (IAM checks each one). The
    functions of each `helpers` module (what the class builds its items with) are read the same way."""
    tree = ast.parse(path.read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    functions = [*cls.body, *(n for h in helpers for n in ast.parse(h.read_text()).body)]
    actions = set()
    for method in functions:
        if not isinstance(method, ast.FunctionDef) or method.name in skip:
            continue
        for node in ast.walk(method):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "_call" and node.args and isinstance(node.args[0], ast.Constant):
                    actions.add(node.args[0].value)
                elif node.func.attr in PASCAL and getattr(node.func.value, "attr", "") in (
                    "_client",
                    "client",
                ):
                    actions.add(PASCAL[node.func.attr])
            if isinstance(node, ast.Dict):
                actions |= {
                    TRANSACTION_ACTIONS[k.value]
                    for k in node.keys
                    if isinstance(k, ast.Constant) and k.value in TRANSACTION_ACTIONS
                }
    actions.discard("TransactWriteItems")  # not an IAM action: each item inside is authorised by its own kind
    return {"dynamodb:" + a for a in actions}


def policies_of(synth: Synthesized, role_id: str) -> list[dict[str, Any]]:
    return [
        s
        for p in synth.of_type("AWS::IAM::Policy").values()
        if role_id in [ref_name(r) for r in p["Properties"]["Roles"]]
        for s in statements(p)
    ]


def role_of(synth: Synthesized, function: str) -> str:
    _, props = functions_by_name(synth)[function]
    return ref_name(props["Role"])


def grants(synth: Synthesized, function: str) -> dict[str, set[str]]:
    """{resource logical id or literal: actions} over every Allow statement of the function's role."""
    found: dict[str, set[str]] = {}
    for statement in policies_of(synth, role_of(synth, function)):
        assert statement["Effect"] == "Allow"
        for resource in as_list(statement["Resource"]):
            key = resource_key(resource)
            found.setdefault(key, set()).update(as_list(statement["Action"]))
    return found


def token_key_id(synth: Synthesized) -> str:
    (secret,) = [k for k in synth.of_type("AWS::SecretsManager::Secret") if k.startswith("TokenKey")]
    return secret


def receipt_key(synth: Synthesized) -> str:
    (key,) = [k for k in synth.of_type("AWS::KMS::Key") if k.startswith("ReceiptKey")]
    return key


def witness_reads(synth: Synthesized) -> dict[str, set[str]]:
    """What a function that appends to chains may do to compare them with the witness (integrity.py)."""
    (chain_key,) = [k for k in synth.of_type("AWS::SecretsManager::Secret") if k.startswith("Integrity")]
    (bucket,) = synth.of_type("AWS::S3::Bucket")
    return {
        chain_key: {"secretsmanager:GetSecretValue"},
        bucket: {"s3:ListBucket", "s3:ListBucketVersions"},
        f"{bucket}/*": {"s3:GetObject", "s3:GetObjectVersion"},
    }


def table_ids(synth: Synthesized) -> tuple[str, str]:
    tables = synth.of_type("AWS::DynamoDB::Table")
    state = next(k for k, t in tables.items() if len(t["Properties"]["KeySchema"]) == 2)
    principals = next(k for k in tables if k != state)
    return state, principals


def test_the_granted_state_actions_are_exactly_what_the_store_issues() -> None:
    # Given the store's source (what a request can make it do, the local relay's helpers aside) and that of
    # the items it writes
    adapters = REPO / "src" / "sentinel_service" / "adapters"
    store, items = adapters / "dynamodb_store.py", (adapters / "dynamodb_items.py",)
    # When its DynamoDB calls are read, then the writers' grant is exactly that set: nothing missing (a
    # missing action would hold every request with STATE_UNAVAILABLE) and nothing more
    not_a_writers = RELAY_ONLY | VERIFIER_ONLY
    assert issued_by(store, "DynamoStateStore", not_a_writers, items) == set(STATE_WRITER_ACTIONS)
    # And the health probe (a chain load) is a Query
    assert set(STATE_PROBE_ACTIONS) <= set(STATE_WRITER_ACTIONS)
    # And the authorizer's directory reads principals with GetItem alone
    principals = REPO / "src" / "sentinel_service" / "adapters" / "principals.py"
    assert issued_by(principals, "PrincipalDirectory") == set(PRINCIPAL_READER_ACTIONS)


@pytest.mark.parametrize("function", EVERY_FUNCTION)
def test_each_function_has_its_own_role_with_only_its_actions(
    synthesized: Synthesized, function: str
) -> None:
    # Given one function's role and the tables
    state, principals = table_ids(synthesized)
    secret = token_key_id(synthesized)
    allowed = grants(synthesized, function)
    log_group = ref_name(functions_by_name(synthesized)[function][1]["LoggingConfig"]["LogGroup"])
    # Then its role is its own and carries no managed policy
    roles = [role_of(synthesized, f) for f in EVERY_FUNCTION]
    assert roles.count(role_of(synthesized, function)) == 1
    assert "ManagedPolicyArns" not in synthesized.resources[role_of(synthesized, function)]["Properties"]
    # And it may write its own log group and traces, and nothing else outside its data
    assert allowed.pop(log_group) == {"logs:CreateLogStream", "logs:PutLogEvents"}
    assert allowed.pop("*") == {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
    if function == names.AUTHORIZER_FUNCTION:
        # And the authorizer only reads principals and the token key
        assert allowed == {
            principals: set(PRINCIPAL_READER_ACTIONS),
            secret: {"secretsmanager:GetSecretValue"},
        }
    elif function == "health":
        # And health probes the table and reads the receipt key's public half (GET /v1/keys)
        assert allowed == {state: set(STATE_PROBE_ACTIONS), receipt_key(synthesized): {"kms:GetPublicKey"}}
    elif function == "gating":
        # And the gating function signs the receipts of the decisions it records
        receipts = {receipt_key(synthesized): {"kms:Sign"}}
        assert allowed == {state: set(STATE_WRITER_ACTIONS), **witness_reads(synthesized), **receipts}
    elif function == names.FORGE_FUNCTION:
        # And the webhook's function reads the webhook secret too, and nothing of GitHub's app key
        (webhook_secret,) = [k for k in synthesized.of_type("AWS::SecretsManager::Secret") if "Webhook" in k]
        assert allowed == {
            state: set(STATE_WRITER_ACTIONS),
            **witness_reads(synthesized),
            webhook_secret: {"secretsmanager:GetSecretValue"},
        }
    elif function == "plans":
        bedrock = {k: v for k, v in allowed.items() if "bedrock" in k}
        assert allowed == {state: set(STATE_WRITER_ACTIONS), **bedrock, **witness_reads(synthesized)}
        assert set().union(*bedrock.values()) == {"bedrock:InvokeModel"}
    else:
        # And every chain writer reads the chain key and the witness, and writes no witness record
        assert allowed == {state: set(STATE_WRITER_ACTIONS), **witness_reads(synthesized)}


def test_no_function_may_write_the_principals_table_or_read_the_token_key_but_the_authorizer(
    synthesized: Synthesized,
) -> None:
    _, principals = table_ids(synthesized)
    secret = token_key_id(synthesized)
    for function in ALL_FUNCTIONS:
        # Given each function's grants
        allowed = grants(synthesized, function)
        # Then none holds a write on the principals table
        assert not {a for a in allowed.get(principals, set()) if a != "dynamodb:GetItem"}, function
        # And only the authorizer touches the token key, and only it and the forge worker (which reads the
        # app's principal as it is now, GetItem alone) the principals table
        if function != names.AUTHORIZER_FUNCTION:
            assert secret not in allowed, function
        if function not in (names.AUTHORIZER_FUNCTION, names.FORGE_WORKER_FUNCTION):
            assert principals not in allowed, function


def test_no_data_action_has_a_wildcard_action_or_resource(synthesized: Synthesized) -> None:
    # Given every policy statement in the stack
    for policy in synthesized.of_type("AWS::IAM::Policy").values():
        for statement in statements(policy):
            actions = as_list(statement["Action"])
            # Then no action is a wildcard
            assert not [a for a in actions if "*" in a.split(":")[1] or a == "*"], statement
            # And only X-Ray and DynamoDB's ListStreams, which have no resource-level permissions, are granted
            # on "*"
            if "*" in as_list(statement["Resource"]):
                assert set(actions) <= {
                    "xray:PutTraceSegments",
                    "xray:PutTelemetryRecords",
                    "dynamodb:ListStreams",
                }, statement


def test_the_plans_function_may_call_only_the_configured_bedrock_model(synthesized: Synthesized) -> None:
    # Given the plans role's Bedrock grant (the test context names a cross-region inference profile)
    bedrock = {k: v for k, v in grants(synthesized, "plans").items() if "bedrock" in k}
    text = " ".join(bedrock)
    # Then it names the inference profile and its foundation model, and no other
    assert "inference-profile/eu.anthropic.claude-sonnet-4-5-20250929-v1:0" in text
    assert "foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0" in text
    assert len(bedrock) == 2
