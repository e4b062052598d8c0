"""The one place that decides how a Sentinel function runs: runtime, architecture, memory, timeouts, logging,
tracing, its own role and log group, and the alias API Gateway invokes. Every function is built here."""

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from sentinel_infra import runtime
from sentinel_service import names

RUNTIME = getattr(lambda_.Runtime, "PYTHON_" + runtime.PYTHON_VERSION.replace(".", "_"))
ARCHITECTURE = (
    lambda_.Architecture.ARM_64 if runtime.LAMBDA_ARCHITECTURE == "arm64" else lambda_.Architecture.X86_64
)

# API Gateway abandons an HTTP API integration after 30 s and answers 503 itself; every function must answer
# (even if only with its own 503 problem) well before that.
API_GATEWAY_LIMIT_SECONDS = 30
DEFAULT_TIMEOUT_SECONDS = 20  # store reads (2 s connect, 5 s read, 3 attempts) and one transaction
TIMEOUT_SECONDS = {
    names.AUTHORIZER_FUNCTION: 5,  # one key fetch per cold start and two GetItems, 2 s timeouts each
    "health": 10,  # one store probe
    "plans": 28,  # the model's budget (at most 25 s, settings.MODEL_BUDGET_CEILING_SECONDS) plus store calls
    # Not behind API Gateway: the verifier reads every chain changed in the last windows, well inside its
    # 5-minute schedule.
    names.CHAIN_VERIFIER_FUNCTION: 240,
    # A sweep publishes every check due before the next one, each a chain read and one forge call.
    names.FORGE_CHECKS_FUNCTION: 120,
    # Not behind API Gateway either: a compare and a few file reads on GitHub, each with its own timeout.
    names.FORGE_WORKER_FUNCTION: 60,
}
# Functions no API route invokes (the stream and the schedule do), so API Gateway's limit does not bind them.
NOT_BEHIND_API = frozenset(
    {
        names.WITNESS_WRITER_FUNCTION,
        names.CHAIN_VERIFIER_FUNCTION,
        names.FORGE_CHECKS_FUNCTION,
        names.FORGE_WORKER_FUNCTION,
    }
)
# Memory buys CPU on Lambda: at 1024 MB, importing pydantic and Powertools on a cold start takes about half
# the time it takes at 512 MB, for the same cost per request at this service's volume.
MEMORY_MB = 1024


def timeout_seconds(function: str) -> int:
    return TIMEOUT_SECONDS.get(function, DEFAULT_TIMEOUT_SECONDS)


class ServiceFunction(Construct):
    """A function running `sentinel_service.handlers.<name>.handler` from the shared functions zip, with its
    own role (no managed policy: only its log group, X-Ray, and what the stack grants it), a log group with a
    retention period, JSON logs, active tracing, and a `live` alias on the version published for this
    deployment."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        code: lambda_.Code,
        layers: Sequence[lambda_.ILayerVersion],
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
        description: str,
        reserved_concurrency: int | None = None,
        live_version: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.name = name
        self.timeout = Duration.seconds(timeout_seconds(name))
        if name not in NOT_BEHIND_API and timeout_seconds(name) >= API_GATEWAY_LIMIT_SECONDS:
            raise ValueError(
                f"{name}: a timeout of {timeout_seconds(name)} s is not inside API Gateway's limit"
            )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Sentinel {name} function: its log group, X-Ray and the table actions it needs",
        )
        self.log_group = logs.LogGroup(
            self, "Logs", retention=log_retention, removal_policy=RemovalPolicy.RETAIN
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=f"sentinel_service.handlers.{name}.handler",
            code=code,
            layers=list(layers),
            role=self.role,
            memory_size=MEMORY_MB,
            timeout=self.timeout,
            environment=dict(environment),
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE,
            reserved_concurrent_executions=reserved_concurrency,
            description=description,
        )
        self.log_group.grant_write(self.role)
        # A new version is published whenever code, layers or configuration change. `next` always names it:
        # the acceptance API calls it. `live`, which the production API calls, stays on the version it
        # served (`live_version`, read from Lambda by `make deploy`) until the promote step moves it after a
        # passing acceptance run; only a stack's first deployment, with nothing serving yet, starts it on the
        # new version. So a deploy never gives production traffic to an unaccepted version, and a rollback
        # is a pointer move.
        self.next_alias = lambda_.Alias(
            self, "Next", alias_name=names.NEXT_ALIAS, version=self.function.current_version
        )
        live: lambda_.IVersion = self.function.current_version
        if live_version:
            live = lambda_.Version.from_version_attributes(
                self, "LiveVersion", lambda_=self.function, version=live_version
            )
        self.alias = lambda_.Alias(self, "Live", alias_name=names.LIVE_ALIAS, version=live)
        cdk.Validations.of(self.role).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="X-Ray's PutTraceSegments and PutTelemetryRecords support no resource-level "
                "permissions (the service authorization reference lists only '*'); Lambda adds them for "
                "active tracing. Every data action of this role names its table or secret.",
            )
        )
        cdk.Validations.of(self.function).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-L1",
                reason=f"Python {runtime.PYTHON_VERSION} is chosen, not stale: the deps layer holds compiled "
                f"cp{runtime.PYTHON_VERSION.replace('.', '')} wheels (pydantic-core, PyYAML) pinned by hash "
                "in infra/deps-layer.txt, so the runtime moves only together with a relock and a full test "
                "run (infra/runtime.py). Lambda supports this runtime with security patches until 2029.",
            )
        )

    def grant(self, actions: Sequence[str], resources: Sequence[str]) -> None:
        """Allow exactly these actions on exactly these resources (never a wildcard)."""
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions), resources=list(resources))
        )
