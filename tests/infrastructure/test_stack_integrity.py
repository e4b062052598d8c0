"""Tamper evidence in the template (issue 13): the chain key apart from the token key, the witness bucket
under Object Lock in compliance mode, a create-only witness writer (moto enforces no IAM, so this is where
the permission is checked), the signing key, the verifier's schedule and the alarms on its metrics."""

import json
from typing import Any

from test_stack_iam import grants, role_of

from sentinel_infra.config import DeploymentConfig
from sentinel_infra.constructs.integrity import NEVER_ALLOWED
from sentinel_service import names
from support.infra import ALL_FUNCTIONS, EVERY_FUNCTION, Synthesized, as_list, functions_by_name, ref_name

# Actions that would let anyone undo or shorten the witness; an Allow of any of them (or of a wildcard that
# covers one) anywhere in the template is a defect.
FORBIDDEN = (*NEVER_ALLOWED, "s3:PutBucketObjectLockConfiguration", "s3:PutBucketVersioning")


def covers(action: str, forbidden: str) -> bool:
    """True when an IAM action pattern (with * and ?) grants the forbidden action."""
    import fnmatch

    return fnmatch.fnmatchcase(forbidden.lower(), action.lower())


def every_statement(synth: Synthesized) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for logical_id, resource in synth.resources.items():
        props = resource.get("Properties", {})
        documents = [
            props.get("PolicyDocument"),
            props.get("KeyPolicy"),
            props.get("AssumeRolePolicyDocument"),
        ]
        documents += [p.get("PolicyDocument") for p in props.get("Policies", [])]
        for document in documents:
            if isinstance(document, dict):
                found += [(logical_id, s) for s in document.get("Statement", [])]
    return found


def bucket(synth: Synthesized) -> tuple[str, dict[str, Any]]:
    ((logical_id, resource),) = synth.of_type("AWS::S3::Bucket").items()
    return logical_id, resource


def test_no_statement_anywhere_allows_deleting_or_shortening_the_witness(synthesized: Synthesized) -> None:
    # Given every policy statement of the template (roles, bucket, key and queue policies)
    for where, statement in every_statement(synthesized):
        if statement["Effect"] != "Allow":
            continue
        # Then none allows a deletion, a retention change, a governance bypass or a lock reconfiguration
        for action in as_list(statement.get("Action", [])):
            assert not [f for f in FORBIDDEN if covers(action, f)], (where, action)
    # And no custom resource empties the bucket when the stack goes (autoDeleteObjects would)
    assert not synthesized.of_type("Custom::S3AutoDeleteObjects")


def test_the_bucket_policy_refuses_deletion_and_writes_without_if_none_match_to_everyone(
    synthesized: Synthesized,
) -> None:
    bucket_id, _ = bucket(synthesized)
    (policy,) = [
        p for p in synthesized.properties("AWS::S3::BucketPolicy") if ref_name(p["Bucket"]) == bucket_id
    ]
    denies = {s.get("Sid"): s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"}
    assert set(as_list(denies["NoDeletionOrRetentionChange"]["Action"])) == set(NEVER_ALLOWED)
    assert denies["NoDeletionOrRetentionChange"]["Principal"] == {"AWS": "*"}
    create_only = denies["CreateOnly"]
    assert as_list(create_only["Action"]) == ["s3:PutObject"]
    assert create_only["Condition"] == {"Null": {"s3:if-none-match": "true"}}
    # And plain HTTP is refused (enforceSSL)
    assert any(
        s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
        for s in policy["PolicyDocument"]["Statement"]
    )


def test_the_witness_bucket_is_locked_in_compliance_mode_versioned_private_and_kept(
    synthesized: Synthesized,
) -> None:
    _, resource = bucket(synthesized)
    props = resource["Properties"]
    assert props["ObjectLockEnabled"] is True
    retention = props["ObjectLockConfiguration"]["Rule"]["DefaultRetention"]
    assert (
        retention
        == {"Mode": "COMPLIANCE", "Days": DeploymentConfig().witness_retention_days}
        == {
            "Mode": "COMPLIANCE",
            "Days": 400,
        }
    )
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert set(props["PublicAccessBlockConfiguration"].values()) == {True}
    assert resource["DeletionPolicy"] == resource["UpdateReplacePolicy"] == "Retain"


def test_the_witness_writer_may_only_create_records_under_its_prefixes(synthesized: Synthesized) -> None:
    bucket_id, _ = bucket(synthesized)
    allowed = grants(synthesized, names.WITNESS_WRITER_FUNCTION)
    (signing_key,) = [k for k, r in synthesized.of_type("AWS::KMS::Key").items() if k.startswith("Integrity")]
    puts = {resource for resource, actions in allowed.items() if "s3:PutObject" in actions}
    assert puts == {f"{bucket_id}/checkpoints/*", f"{bucket_id}/changed/*", f"{bucket_id}/tampered/*"}
    for resource in puts:
        assert allowed[resource] == {"s3:PutObject"}
    assert allowed[signing_key] == {"kms:Sign"}
    # And no table access at all: it learns everything from the stream
    assert not [r for r in allowed if r.startswith("TablesState")]


def test_the_signing_key_is_an_ecc_key_only_the_writer_and_verifier_may_use(synthesized: Synthesized) -> None:
    ((key_id, key),) = [
        (k, r) for k, r in synthesized.of_type("AWS::KMS::Key").items() if k.startswith("Integrity")
    ]
    assert (key["Properties"]["KeySpec"], key["Properties"]["KeyUsage"]) == ("ECC_NIST_P256", "SIGN_VERIFY")
    assert key["DeletionPolicy"] == "Retain"
    users = {f: grants(synthesized, f).get(key_id, set()) for f in ALL_FUNCTIONS}
    assert {f: a for f, a in users.items() if a} == {
        names.WITNESS_WRITER_FUNCTION: {"kms:Sign"},
        names.CHAIN_VERIFIER_FUNCTION: {"kms:Sign", "kms:GetPublicKey"},
    }


def test_the_chain_key_is_its_own_secret_read_only_by_chain_writers_and_verifiers(
    synthesized: Synthesized,
) -> None:
    secrets = synthesized.of_type("AWS::SecretsManager::Secret")
    (chain_key,) = [k for k in secrets if k.startswith("Integrity")]
    generated = secrets[chain_key]["Properties"]["GenerateSecretString"]
    assert generated["PasswordLength"] == 64 and generated["ExcludeUppercase"] is True
    readers = {f for f in ALL_FUNCTIONS if chain_key in grants(synthesized, f)}
    assert readers == (set(ALL_FUNCTIONS) - {"health", names.AUTHORIZER_FUNCTION})


def test_the_functions_learn_the_witness_and_the_chain_key_from_their_environment(
    synthesized: Synthesized,
) -> None:
    functions = functions_by_name(synthesized)
    for name, (_, props) in functions.items():
        env = props["Environment"]["Variables"]
        # (the forge check publisher too: a required check judges both chains against the witness)
        witnessing = name not in ("health", names.AUTHORIZER_FUNCTION)
        assert (names.ENV_WITNESS_BUCKET in env) == witnessing, name
        verifying = name not in ("health", names.AUTHORIZER_FUNCTION)
        assert (names.ENV_CHAIN_KEY_SECRET_ARN in env) == verifying, name
        # Only the functions that sign learn the signing key
        signing = name in (names.WITNESS_WRITER_FUNCTION, names.CHAIN_VERIFIER_FUNCTION)
        assert (names.ENV_WITNESS_SIGNING_KEY_ID in env) == signing, name


def test_checkpoint_items_feed_the_writer_through_its_own_pipe(synthesized: Synthesized) -> None:
    writer_id, _ = functions_by_name(synthesized)[names.WITNESS_WRITER_FUNCTION]
    (pipe,) = [
        p for p in synthesized.properties("AWS::Pipes::Pipe") if "LambdaFunctionParameters" in json.dumps(p)
    ]
    aliases = synthesized.of_type("AWS::Lambda::Alias")
    assert ref_name(pipe["Target"]) in aliases
    assert ref_name(aliases[ref_name(pipe["Target"])]["Properties"]["FunctionName"]) == writer_id
    stream = pipe["SourceParameters"]["DynamoDBStreamParameters"]
    assert stream["StartingPosition"] == "TRIM_HORIZON"
    assert ref_name(stream["DeadLetterConfig"]["Arn"]) in synthesized.of_type("AWS::SQS::Queue")


def test_the_verifier_runs_every_five_minutes_and_tampering_pages(synthesized: Synthesized) -> None:
    verifier_id, _ = functions_by_name(synthesized)[names.CHAIN_VERIFIER_FUNCTION]
    aliases = synthesized.of_type("AWS::Lambda::Alias")

    def invokes(rule: dict[str, Any]) -> set[str]:
        return {ref_name(aliases[ref_name(t["Arn"])]["Properties"]["FunctionName"]) for t in rule["Targets"]}

    (rule,) = [r for r in synthesized.properties("AWS::Events::Rule") if verifier_id in invokes(r)]
    assert rule["ScheduleExpression"] == "rate(5 minutes)"
    assert len(rule["Targets"]) == 1
    # And the tamper and forgery metrics (as the functions emit them) page the alarm topic on the first count
    (topic_id,) = synthesized.of_type("AWS::SNS::Topic")
    watched = {
        a["MetricName"]: a
        for a in synthesized.properties("AWS::CloudWatch::Alarm")
        if a.get("Namespace") == names.INTEGRITY_NAMESPACE
    }
    assert set(watched) == {names.TAMPERED_CHAINS_METRIC, names.FORGED_CHECKPOINTS_METRIC}
    for alarm in watched.values():
        assert alarm["Dimensions"] == [{"Name": names.INTEGRITY_DIMENSION, "Value": names.SERVICE}]
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
        assert [ref_name(a) for a in alarm["AlarmActions"]] == [topic_id]


def test_the_api_functions_are_unchanged_in_number(synthesized: Synthesized) -> None:
    assert set(functions_by_name(synthesized)) == set(EVERY_FUNCTION) | {
        names.WITNESS_WRITER_FUNCTION,
        names.CHAIN_VERIFIER_FUNCTION,
        names.FORGE_CHECKS_FUNCTION,
        names.FORGE_WORKER_FUNCTION,
    }
    assert role_of(synthesized, names.WITNESS_WRITER_FUNCTION) != role_of(
        synthesized, names.CHAIN_VERIFIER_FUNCTION
    )
