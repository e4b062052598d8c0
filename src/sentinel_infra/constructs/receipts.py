"""The key decision receipts are signed with (docs/receipts.md): an asymmetric KMS key, ECC_NIST_P256 for
SIGN_VERIFY, whose private half never leaves KMS.

Its key policy says who may use it, so that no IAM policy added later elsewhere in the account can widen it:

- the account root, with kms:* (AWS's default key policy: without it the key could become unmanageable, and
  it lets IAM administer the key), but a Deny on kms:Sign for every principal except the gating function's
  role, so nobody else (not even an administrator's IAM policy) can sign a receipt;
- the gating function's role: kms:Sign (it records decisions, so it signs their receipts);
- the health function's role: kms:GetPublicKey (it serves GET /v1/keys, anonymously).

Both functions also get the same actions through their own IAM policy (KMS needs the key policy and, for a
role, allows either to grant). Automatic key rotation is not available for asymmetric KMS keys (AWS rotates
only symmetric encryption keys): replacing this key is a planned operator action, and receipts signed under
the old key stay checkable with its public half (keep it beside the new one in what deploy steps trust)."""

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from sentinel_infra.constructs.service_function import ServiceFunction
from sentinel_service import names
from sentinel_service.http.routes import ROUTES

SIGN_ACTIONS = ("kms:Sign",)
PUBLIC_KEY_ACTIONS = ("kms:GetPublicKey",)


def serving(operation: str) -> str:
    """The function the route table says serves an operation."""
    return next(r.function for r in ROUTES if r.operation == operation)


class ReceiptKey(Construct):
    """The key, its policy, the two functions' grants and settings: the function that records decisions
    signs, the one that serves GET /v1/keys reads the public key (both found in the route table)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, functions: Mapping[str, ServiceFunction]
    ) -> None:
        super().__init__(scope, construct_id)
        signer, reader = functions[serving("record_decision")], functions[serving("keys")]
        stack = cdk.Stack.of(self)
        policy = iam.PolicyDocument(
            statements=[
                iam.PolicyStatement(
                    sid="AccountAdministersTheKey",
                    principals=[iam.AccountRootPrincipal()],
                    actions=["kms:*"],
                    resources=["*"],
                ),
                iam.PolicyStatement(
                    sid="OnlyTheGatingFunctionSigns",
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=list(SIGN_ACTIONS),
                    resources=["*"],
                    conditions={"ArnNotEquals": {"aws:PrincipalArn": signer.role.role_arn}},
                ),
                iam.PolicyStatement(
                    sid="GatingFunctionSigns",
                    principals=[iam.ArnPrincipal(signer.role.role_arn)],
                    actions=list(SIGN_ACTIONS),
                    resources=["*"],
                ),
                iam.PolicyStatement(
                    sid="HealthFunctionReadsThePublicKey",
                    principals=[iam.ArnPrincipal(reader.role.role_arn)],
                    actions=list(PUBLIC_KEY_ACTIONS),
                    resources=["*"],
                ),
            ]
        )
        self.key = kms.Key(
            self,
            "SigningKey",
            key_spec=kms.KeySpec.ECC_NIST_P256,
            key_usage=kms.KeyUsage.SIGN_VERIFY,
            policy=policy,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            description="Sentinel decision receipts: ECDSA P-256 signatures a deploy step checks offline "
            "with the public key (GET /v1/keys)",
        )
        signer.grant(SIGN_ACTIONS, [self.key.key_arn])
        reader.grant(PUBLIC_KEY_ACTIONS, [self.key.key_arn])
        for fn in (signer, reader):
            fn.function.add_environment(names.ENV_RECEIPT_KEY_ID, self.key.key_arn)
        cdk.CfnOutput(
            stack,
            names.OUTPUT_RECEIPT_KEY_ID,
            value=self.key.key_arn,
            description="The KMS key that signs decision receipts (its public half: GET /v1/keys)",
        )
