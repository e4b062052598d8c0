"""The names the deployment, the functions and the acceptance suite must agree on, in one small module.

Standard library only and free of side effects: the CDK app (infra/) imports it, the acceptance suite imports
it to read the stack's outputs, and the functions may import it to emit the metrics the dashboard draws.
Nothing here may import infra, boto3 or aws_cdk. Change a value here and every reader follows; an output key
or a metric name is part of the deployment's contract, so add names rather than rename them.
"""

SERVICE = "sentinel"

# ---- the tables' key schema (adapters/tables.py builds the tables; infra defines the deployed ones) --------
PK = "pk"
SK = "sk"
# The outbox relay on AWS reads the state table's stream: new images only.
STATE_STREAM_VIEW = "NEW_IMAGE"


def stack_name(stage: str) -> str:
    """The CloudFormation stack of one stage (`dev` -> `Sentinel-dev`)."""
    return f"Sentinel-{stage}"


# ---- CloudFormation outputs of the stack -------------------------------------------------------------------
OUTPUT_API_URL = "ApiUrl"  # the API base without /v1, e.g. https://abc123.execute-api.eu-west-1.amazonaws.com
OUTPUT_NEXT_API_URL = "NextApiUrl"  # the acceptance API: every route on the `next` aliases
OUTPUT_STATE_TABLE = "StateTableName"
OUTPUT_PRINCIPALS_TABLE = "PrincipalsTableName"
OUTPUT_TOKEN_KEY_SECRET_ARN = "TokenKeySecretArn"
OUTPUT_EVENT_BUS = "EventBusName"
OUTPUT_EVENT_ARCHIVE = "EventArchiveName"
OUTPUT_RELAY_DLQ_URL = "RelayDeadLetterQueueUrl"
OUTPUT_ALARM_TOPIC_ARN = "AlarmTopicArn"
OUTPUT_DASHBOARD = "DashboardName"
OUTPUT_WITNESS_BUCKET = "WitnessBucketName"
OUTPUT_WITNESS_SIGNING_KEY_ID = "WitnessSigningKeyId"
OUTPUT_CHAIN_KEY_SECRET_ARN = "ChainKeySecretArn"
OUTPUT_RECEIPT_KEY_ID = "ReceiptSigningKeyId"  # the KMS key that signs decision receipts (its ARN)
OUTPUT_PACKAGE_DIGEST = "PackageDigest"  # what /v1/health reports as package_digest
# `make deploy` writes the outputs here ({stack name: {output key: value}}), relative to the repository.
STACK_OUTPUTS_FILE = "build/stack-outputs.json"


def function_output_key(function: str) -> str:
    """The output holding one function's physical name (`gating` -> `GatingFunctionName`)."""
    return "".join(part.capitalize() for part in function.split("_")) + "FunctionName"


# ---- functions ---------------------------------------------------------------------------------------------
AUTHORIZER_FUNCTION = "authorizer"  # with routes.FUNCTIONS, the complete set of deployed functions
LIVE_ALIAS = "live"  # API Gateway invokes this alias of a published version, never $LATEST
# The version a deployment just published, served only by the acceptance API until a passing acceptance run
# promotes it to `live` (docs/deploy.md, "Acceptance before traffic").
NEXT_ALIAS = "next"
# The alarm the live acceptance run sets to ALARM to see a notification arrive (`sentinel-<stage>-<this>`):
# it watches a metric nothing emits, and the operator's e-mail subscription filters it out.
CANARY_ALARM = "acceptance-canary"

# Environment variables the deployment sets (sentinel_service.settings reads the SENTINEL_* ones).
ENV_STATE_TABLE = "SENTINEL_STATE_TABLE"
ENV_PRINCIPALS_TABLE = "SENTINEL_PRINCIPALS_TABLE"
ENV_TOKEN_KEY_SECRET_ARN = "SENTINEL_TOKEN_KEY_SECRET_ARN"
ENV_CHAIN_KEY_SECRET_ARN = "SENTINEL_CHAIN_KEY_SECRET_ARN"  # the audit chains' key, never the token key
ENV_CHAIN_KEY_FILE = "SENTINEL_CHAIN_KEY_FILE"  # the local runner's chain key file
ENV_WITNESS_BUCKET = "SENTINEL_WITNESS_BUCKET"  # the checkpoints' Object Lock bucket
ENV_WITNESS_SIGNING_KEY_ID = "SENTINEL_WITNESS_SIGNING_KEY_ID"  # the KMS key that signs witness records
ENV_MODEL_PROVIDER = "SENTINEL_MODEL_PROVIDER"
ENV_MODEL_ID = "SENTINEL_MODEL_ID"
ENV_MODEL_REGION = "SENTINEL_MODEL_REGION"
ENV_MODEL_BUDGET_SECONDS = "SENTINEL_MODEL_BUDGET_SECONDS"
ENV_PACKAGE_DIGEST = "SENTINEL_PACKAGE_DIGEST"
# Read by nobody: changing it (after a token key rotation) makes the authorizer a new version, so no warm
# environment keeps the old key.
ENV_TOKEN_KEY_GENERATION = "SENTINEL_TOKEN_KEY_GENERATION"
ENV_RUNTIME = "SENTINEL_RUNTIME"
# The chain key (a Secrets Manager secret apart from the token key), the witness bucket and the witness's
# asymmetric signing key (issue 13: tamper evidence in AWS).
ENV_CHAIN_KEY_SECRET_ARN = "SENTINEL_CHAIN_KEY_SECRET_ARN"
ENV_WITNESS_BUCKET = "SENTINEL_WITNESS_BUCKET"
ENV_WITNESS_SIGNING_KEY_ID = "SENTINEL_WITNESS_SIGNING_KEY_ID"
# Signed decision receipts (docs/receipts.md): the KMS key in AWS, a key file locally, and their maximum
# lifetime in seconds.
ENV_RECEIPT_KEY_ID = "SENTINEL_RECEIPT_KEY_ID"
ENV_RECEIPT_KEY_FILE = "SENTINEL_RECEIPT_KEY_FILE"
ENV_RECEIPT_MAX_SECONDS = "SENTINEL_RECEIPT_MAX_SECONDS"
ENV_NOTIFICATIONS = "SENTINEL_NOTIFICATIONS"  # "on" where the stack routes notification items
# The GitHub App's private key (a Secrets Manager secret in AWS; a 0600 PEM file locally) and the REST API's
# base URL (GitHub Enterprise Server: https://HOST/api/v3); issue 15, docs/github.md.
ENV_GITHUB_APP_KEY_SECRET_ARN = "SENTINEL_GITHUB_APP_KEY_SECRET_ARN"
ENV_GITHUB_APP_KEY_FILE = "SENTINEL_GITHUB_APP_KEY_FILE"
ENV_GITHUB_API_URL = "SENTINEL_GITHUB_API_URL"
RUNTIME_AWS_LAMBDA = "aws_lambda"
# The forge (docs/github.md): the webhook's secret (read by the forge function only) and the GitHub App's
# private key (read by whatever calls GitHub: the forge worker), both Secrets Manager secrets the operator
# fills.
ENV_GITHUB_WEBHOOK_SECRET_ARN = "SENTINEL_GITHUB_WEBHOOK_SECRET_ARN"
ENV_GITHUB_WEBHOOK_SECRET_FILE = "SENTINEL_GITHUB_WEBHOOK_SECRET_FILE"  # the local runner's
ENV_GITHUB_APP_KEY_SECRET_ARN = "SENTINEL_GITHUB_APP_KEY_SECRET_ARN"
FORGE_FUNCTION = "forge"  # the webhook route (never calls GitHub)
FORGE_WORKER_FUNCTION = "forge_worker"  # fed by the bus: calls GitHub, creates candidates
OUTBOX_KIND_FORGE_DELIVERY = "forge_delivery"  # a verified delivery, for the forge worker
OUTBOX_KIND_FORGE_CHECK = "forge_check"  # a candidate whose check run must be (re)published

# ---- tables ------------------------------------------------------------------------------------------------
# DynamoDB TTL attribute (number, epoch seconds) on the principals table. TOKEN# items may carry it so expired
# token hashes are swept; the authorizer never relies on the sweep (it compares expires_at itself, and TTL
# deletion can lag by days). The state table has no TTL: chains, idempotency records and outbox items live as
# long as their candidate.
PRINCIPALS_TTL_ATTRIBUTE = "ttl_epoch"

# ---- the outbox relay: DynamoDB Streams -> EventBridge Pipes -> bus ----------------------------------------
# Each relayed stream record becomes one event whose `detail` is the DynamoDB stream record itself (its
# `dynamodb.NewImage` holds the item in DynamoDB JSON), so no field is lost in a transformation.
EVENT_SOURCE = "sentinel.outbox-relay"
DETAIL_TYPE_OUTBOX = "sentinel.outbox"  # an outbox item (sk begins with "O#", outbox_pending present)
DETAIL_TYPE_CHECKPOINT = "sentinel.checkpoint"  # no longer relayed: checkpoints feed the witness writer
# The outbox kind of a chain checkpoint (the ChainSeal checkpoint, written in the accepted write's
# transaction): the stream hands these to the witness writer, never to the bus.
OUTBOX_KIND_CHECKPOINT = "checkpoint"
# The forge check items (sentinel_domain.forge_checks): the bus's rule hands them to the publisher function.
OUTBOX_KIND_FORGE_CHECK = "forge_check"
OUTBOX_KIND_FORGE_RECHECK = "forge_recheck"
# Notifications (docs/notifications.md) are outbox items of this kind, relayed like every side effect; their
# event name and chat text are also attributes of the item, so an EventBridge rule can route and transform
# them (the `item` JSON reaches the bus as one string).
OUTBOX_KIND_NOTIFICATION = "notification"
NOTIFICATION_EVENT_ATTRIBUTE = "notification_event"
NOTIFICATION_TEXT_ATTRIBUTE = "notification_text"
# A synthetic project's side effects (the acceptance suite's; sentinel_domain.usecases.chain.SYNTHETIC) carry
# this attribute, a string "1", beside their item: every consumer rule on the bus excludes items that have it
# (sentinel_infra.constructs.events.consumer_pattern); the archive keeps them like any other.
OUTBOX_SYNTHETIC_ATTRIBUTE = "outbox_synthetic"

# ---- the witness (S3 under Object Lock) and the chain verifier ---------------------------------------------
WITNESS_WRITER_FUNCTION = "witness_writer"  # fed by the state table's stream (a pipe), never by the API
CHAIN_VERIFIER_FUNCTION = "chain_verifier"  # runs every VERIFIER_SCHEDULE_MINUTES
VERIFIER_SCHEDULE_MINUTES = 5
# The forge check publisher (issue 15): fed by the bus's rule for forge_check/forge_recheck outbox items, and
# by its own schedule (the sweep); never by the API.
FORGE_CHECKS_FUNCTION = "forge_checks"
FORGE_SWEEP_SCHEDULE_MINUTES = 5  # sentinel_domain.usecases.forge_checks.SWEEP_SECONDS

# ---- metrics -----------------------------------------------------------------------------------------------
# Decisions by outcome, emitted by the decision endpoints as embedded metric format (one line per decision):
# namespace "Sentinel", metric "Decisions" (Count), one dimension set [["Outcome"]].
DECISIONS_NAMESPACE = "Sentinel"
DECISIONS_METRIC = "Decisions"
DECISIONS_DIMENSION = "Outcome"
DECISION_OUTCOMES = ("ready", "hold", "hold_error")

# Requests the authorizer refused (403 without reaching a function), counted from the API's access log by a
# metric filter, per API (dimension ApiId), so that two stages in one account never add up.
GATEWAY_NAMESPACE = "Sentinel/Gateway"
AUTHORIZER_DENIALS_METRIC = "AuthorizerDenials"
GATEWAY_API_DIMENSION = "ApiId"

# The witness writer and the chain verifier, as embedded metric format: namespace "Sentinel/Integrity", one
# dimension set [["Service"]] (value SERVICE). TamperedChains (a chain failed verification against the
# witness, or a fork was refused by it) and ForgedCheckpoints (an outbox checkpoint whose tag does not
# verify) each page on their first count.
INTEGRITY_NAMESPACE = "Sentinel/Integrity"
INTEGRITY_DIMENSION = "Service"
TAMPERED_CHAINS_METRIC = "TamperedChains"
FORGED_CHECKPOINTS_METRIC = "ForgedCheckpoints"
WITNESSED_CHECKPOINTS_METRIC = "WitnessedCheckpoints"
VERIFIED_CHAINS_METRIC = "VerifiedChains"
