"""The receipt signing key in the template (docs/receipts.md): an asymmetric ECC key that only the gating
function may sign with and only the health function reads the public half of, by its key policy and by IAM;
the two functions learn it from their environment; the stack outputs it."""

from typing import Any

from test_stack_iam import grants, role_of

from sentinel_service import names
from support.infra import ALL_FUNCTIONS, Synthesized, as_list, functions_by_name, ref_name


def receipt_key(synth: Synthesized) -> tuple[str, dict[str, Any]]:
    keys = synth.of_type("AWS::KMS::Key").items()
    ((key_id, key),) = [(k, r) for k, r in keys if k.startswith("ReceiptKey")]
    return key_id, key


def role_arn_of(value: Any) -> str | None:
    """The role a key policy principal names ({"Fn::GetAtt": [role, "Arn"]})."""
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return str(value["Fn::GetAtt"][0])
    return None


def test_the_receipt_key_is_an_ecc_p256_signing_key_kept_on_deletion(synthesized: Synthesized) -> None:
    _, key = receipt_key(synthesized)
    props = key["Properties"]
    assert (props["KeySpec"], props["KeyUsage"]) == ("ECC_NIST_P256", "SIGN_VERIFY")
    assert key["DeletionPolicy"] == "Retain"
    # Asymmetric keys cannot rotate automatically: the template does not pretend they do
    assert not props.get("EnableKeyRotation")


def test_only_the_gating_function_signs_and_only_health_reads_the_public_key(
    synthesized: Synthesized,
) -> None:
    key_id, _ = receipt_key(synthesized)
    # By IAM: of every function, exactly these two may use the key, each for one action
    users = {f: grants(synthesized, f).get(key_id, set()) for f in ALL_FUNCTIONS}
    assert {f: a for f, a in users.items() if a} == {
        "gating": {"kms:Sign"},
        "health": {"kms:GetPublicKey"},
    }


def test_the_key_policy_names_the_two_roles_and_denies_signing_to_everyone_else(
    synthesized: Synthesized,
) -> None:
    _, key = receipt_key(synthesized)
    statements = {s["Sid"]: s for s in key["Properties"]["KeyPolicy"]["Statement"]}
    gating, health = role_of(synthesized, "gating"), role_of(synthesized, "health")
    # The account root administers it, as AWS's default key policy says
    root = statements["AccountAdministersTheKey"]
    assert root["Effect"] == "Allow" and root["Action"] == "kms:*"
    assert ":root" in str(root["Principal"]["AWS"])
    # The gating function's role signs; the health function's role reads the public key
    assert role_arn_of(statements["GatingFunctionSigns"]["Principal"]["AWS"]) == gating
    assert as_list(statements["GatingFunctionSigns"]["Action"]) == ["kms:Sign"]
    assert role_arn_of(statements["HealthFunctionReadsThePublicKey"]["Principal"]["AWS"]) == health
    assert as_list(statements["HealthFunctionReadsThePublicKey"]["Action"]) == ["kms:GetPublicKey"]
    # And every other principal is denied Sign, whatever IAM policy it holds
    deny = statements["OnlyTheGatingFunctionSigns"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
    assert as_list(deny["Action"]) == ["kms:Sign"]
    assert role_arn_of(deny["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]) == gating
    # And no statement allows anything else to anyone but the root
    allowed = [s for s in statements.values() if s["Effect"] == "Allow" and s is not root]
    assert {a for s in allowed for a in as_list(s["Action"])} == {"kms:Sign", "kms:GetPublicKey"}


def test_the_signing_and_serving_functions_learn_the_key_from_their_environment(
    synthesized: Synthesized,
) -> None:
    key_id, _ = receipt_key(synthesized)
    for name, (_, props) in functions_by_name(synthesized).items():
        env = props["Environment"]["Variables"]
        knows = name in ("gating", "health")
        assert (names.ENV_RECEIPT_KEY_ID in env) == knows, name
        if knows:
            assert ref_name(env[names.ENV_RECEIPT_KEY_ID]) == key_id
        assert names.ENV_RECEIPT_KEY_FILE not in env  # never a key file in AWS


def test_the_stack_outputs_the_receipt_key(synthesized: Synthesized) -> None:
    key_id, _ = receipt_key(synthesized)
    output = synthesized.template["Outputs"][names.OUTPUT_RECEIPT_KEY_ID]
    assert ref_name(output["Value"]) == key_id
