"""The Sentinel stack: composes one construct per concern and states what each function may touch."""

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from sentinel_infra.config import LOG_RETENTION_DAYS, DeploymentConfig
from sentinel_infra.constructs.api import Api
from sentinel_infra.constructs.budget import CostBudget
from sentinel_infra.constructs.events import OutboxRelay
from sentinel_infra.constructs.forge import Forge
from sentinel_infra.constructs.forge_checks import ForgeChecks
from sentinel_infra.constructs.integrity import Integrity
from sentinel_infra.constructs.layers import Layers
from sentinel_infra.constructs.monitoring import Monitoring
from sentinel_infra.constructs.notifications import Notifications, enabled
from sentinel_infra.constructs.receipts import ReceiptKey
from sentinel_infra.constructs.service_function import ServiceFunction
from sentinel_infra.constructs.tables import Tables
from sentinel_infra.packaging import Package, package_path
from sentinel_service import names
from sentinel_service.http.routes import FUNCTIONS

# What each function may do to the state table, and nothing more (no function may write the principals
# table; only the authorizer reads it). Transactions need no action of their own: IAM authorises each item
# inside a TransactWriteItems by its kind (a Put as PutItem, a ConditionCheck as ConditionCheckItem).
# tests/infrastructure/test_stack_iam.py derives the set the store really issues from
# sentinel_service/adapters/dynamodb_store.py (with the items it builds, dynamodb_items.py) and fails when the
# two drift apart.
STATE_WRITER_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
)
STATE_PROBE_ACTIONS = ("dynamodb:Query",)  # health: one read of a partition no project can have
PRINCIPAL_READER_ACTIONS = ("dynamodb:GetItem",)
# The chain verifier loads chains, and puts its finding on a tampered chain's HEAD (UpdateItem of one
# attribute, `DynamoStateStore.mark_head_tampered`): where advisory decision reads see it.
STATE_VERIFIER_ACTIONS = ("dynamodb:Query", "dynamodb:UpdateItem")
PLANS_FUNCTION = "plans"
# Bedrock's geographic inference profiles route a call to a foundation model in any region of the geography.
INFERENCE_PROFILE_PREFIXES = ("us.", "eu.", "apac.", "jp.", "au.", "ca.", "us-gov.", "global.")


class SentinelStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        packages: Mapping[str, Package],
        live_versions: Mapping[str, str] | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        cdk.Tags.of(self).add("sentinel:stage", config.stage)
        retention = _retention(config.log_retention_days)

        self.tables = Tables(self, "Tables")
        self.layers = Layers(self, "Layers", core=packages["core_layer"], deps=packages["deps_layer"])
        self.token_key = secretsmanager.Secret(
            self,
            "TokenKey",
            description="Sentinel: the key under which token HMACs are stored (never the tokens). Replacing "
            "it voids every token.",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True, include_space=False
            ),
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        cdk.Validations.of(self.token_key).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-SMG4",
                reason="Rotating this key voids every issued token at once (only HMACs are stored, keyed by "
                "it), so rotation is a planned operator action with re-issued tokens (docs/deploy.md), never "
                "a timer. It is readable only by the authorizer and the operator.",
            )
        )

        functions_zip = packages["functions"]
        code = lambda_.Code.from_asset(str(package_path(functions_zip)))
        common_env = {
            names.ENV_RUNTIME: names.RUNTIME_AWS_LAMBDA,
            names.ENV_PACKAGE_DIGEST: functions_zip.sha256,
            names.ENV_MODEL_PROVIDER: config.model_provider,
            names.ENV_MODEL_ID: config.model_id,
            # Notification items only where something routes them (each costs a transaction item).
            names.ENV_NOTIFICATIONS: "on" if enabled(config) else "off",
        }
        self.functions: dict[str, ServiceFunction] = {}
        for name in FUNCTIONS:
            env = {**common_env, names.ENV_STATE_TABLE: self.tables.state.table_name}
            if name == PLANS_FUNCTION:
                env.update(_model_env(config))
            self.functions[name] = ServiceFunction(
                self,
                _title(name),
                name=name,
                code=code,
                layers=self.layers.all,
                environment=env,
                log_retention=retention,
                description=f"Sentinel {name} routes",
                reserved_concurrency=config.plans_reserved_concurrency if name == PLANS_FUNCTION else None,
                live_version=(live_versions or {}).get(name),
            )
            actions = STATE_PROBE_ACTIONS if name == "health" else STATE_WRITER_ACTIONS
            self.functions[name].grant(actions, [self.tables.state.table_arn])
        self.authorizer = ServiceFunction(
            self,
            "Authorizer",
            name=names.AUTHORIZER_FUNCTION,
            code=code,
            layers=self.layers.all,
            environment={
                **common_env,
                names.ENV_PRINCIPALS_TABLE: self.tables.principals.table_name,
                names.ENV_TOKEN_KEY_SECRET_ARN: self.token_key.secret_arn,
                names.ENV_TOKEN_KEY_GENERATION: str(config.token_key_generation),
            },
            log_retention=retention,
            description="Sentinel token authorizer (reads principals, never writes)",
            live_version=(live_versions or {}).get(names.AUTHORIZER_FUNCTION),
        )
        self.authorizer.grant(PRINCIPAL_READER_ACTIONS, [self.tables.principals.table_arn])
        self.authorizer.grant(["secretsmanager:GetSecretValue"], [self.token_key.secret_arn])
        self.receipt_key = ReceiptKey(self, "ReceiptKey", functions=self.functions)
        if config.model_provider == "bedrock":
            self.functions[PLANS_FUNCTION].grant(["bedrock:InvokeModel"], self._model_arns(config))

        # Acceptance before traffic, on a first deploy too: a function with no version production already
        # serves (every function, on a stack's first deploy) has its production routes closed until the
        # promote step and the deploy after it (docs/deploy.md, "The first deploy").
        unserved = (
            frozenset()
            if live_versions is None
            else frozenset(n for n in [*self.functions, names.AUTHORIZER_FUNCTION] if n not in live_versions)
        )
        self.api = Api(
            self,
            "Api",
            config=config,
            functions=self.functions,
            authorizer=self.authorizer,
            log_retention=retention,
            unserved=unserved,
        )
        # The same routes on the `next` aliases: where acceptance runs before the promote step moves `live`.
        # Its own access log and metrics, so acceptance traffic never counts toward production's alarms.
        self.next_api = Api(
            self,
            "NextApi",
            config=config,
            functions=self.functions,
            authorizer=self.authorizer,
            log_retention=retention,
            alias=names.NEXT_ALIAS,
        )
        self.relay = OutboxRelay(
            self,
            "OutboxRelay",
            stage=config.stage,
            table=self.tables.state,
            archive_retention_days=config.event_archive_retention_days,
        )
        self.integrity = Integrity(
            self,
            "Integrity",
            retention_days=config.witness_retention_days,
            table=self.tables.state,
            dead_letters=self.relay.dead_letters,
        )
        for name, fn in self.functions.items():
            if name != "health":  # every other function appends to chains: it verifies them first
                self.integrity.grant_read(fn)
                for key, value in self.integrity.environment(signing=False).items():
                    fn.function.add_environment(key, value)
        self.forge_worker = ServiceFunction(
            self,
            _title(names.FORGE_WORKER_FUNCTION),
            name=names.FORGE_WORKER_FUNCTION,
            code=code,
            layers=self.layers.all,
            environment={
                **common_env,
                names.ENV_STATE_TABLE: self.tables.state.table_name,
                names.ENV_PRINCIPALS_TABLE: self.tables.principals.table_name,
                **self.integrity.environment(signing=False),
            },
            log_retention=retention,
            description="Sentinel forge worker (GitHub deliveries to candidates; never behind the API)",
            live_version=(live_versions or {}).get(names.FORGE_WORKER_FUNCTION),
        )
        self.forge_worker.grant(STATE_WRITER_ACTIONS, [self.tables.state.table_arn])
        self.forge_worker.grant(PRINCIPAL_READER_ACTIONS, [self.tables.principals.table_arn])
        self.integrity.grant_read(self.forge_worker)
        self.forge = Forge(
            self,
            "GitHub",
            stage=config.stage,
            bus=self.relay.bus,
            webhook=self.functions[names.FORGE_FUNCTION],
            worker=self.forge_worker,
        )
        self.integrity_functions = {
            name: ServiceFunction(
                self,
                _title(name),
                name=name,
                code=code,
                layers=self.layers.all,
                environment={
                    **common_env,
                    names.ENV_STATE_TABLE: self.tables.state.table_name,
                    **self.integrity.environment(signing=True),
                },
                log_retention=retention,
                description=description,
                # Behind the gate too: they run the same functions zip, so `live` moves only on promotion.
                live_version=(live_versions or {}).get(name),
            )
            for name, description in (
                (names.WITNESS_WRITER_FUNCTION, "Sentinel witness writer (checkpoints to the witness)"),
                (names.CHAIN_VERIFIER_FUNCTION, "Sentinel chain verifier (chains against the witness)"),
            )
        }
        self.integrity.feed_writer(self.integrity_functions[names.WITNESS_WRITER_FUNCTION])
        verifier = self.integrity_functions[names.CHAIN_VERIFIER_FUNCTION]
        verifier.grant(STATE_VERIFIER_ACTIONS, [self.tables.state.table_arn])
        self.integrity.schedule_verifier(verifier)
        # The publisher signs in as the GitHub App with the key the forge construct keeps.
        self.forge_checks = ForgeChecks(
            self,
            "ForgeChecks",
            code=code,
            layers=self.layers.all,
            environment={
                **common_env,
                names.ENV_STATE_TABLE: self.tables.state.table_name,
                **self.integrity.environment(signing=False),
            },
            log_retention=retention,
            table=self.tables.state,
            bus=self.relay.bus,
            chain_key_secret_arn=self.integrity.chain_key.secret_arn,
            app_key_secret_arn=self.forge.app_key.secret_arn,
            live_version=(live_versions or {}).get(names.FORGE_CHECKS_FUNCTION),
        )
        # Its check lets a change merge: it compares chains with the witness, as the release paths do.
        self.integrity.grant_read(self.forge_checks.function)
        every_function = {
            **self.functions,
            names.AUTHORIZER_FUNCTION: self.authorizer,
            **self.integrity_functions,
            names.FORGE_CHECKS_FUNCTION: self.forge_checks.function,
            names.FORGE_WORKER_FUNCTION: self.forge_worker,
        }
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            config=config,
            functions=every_function,
            api=self.api,
            tables={"state": self.tables.state, "principals": self.tables.principals},
            dead_letters=self.relay.dead_letters,
        )
        self.forge_checks.alarm(self.monitoring.topic, self.monitoring.prefix)
        self.forge.alarm_to(self.monitoring.topic, self.monitoring.prefix)
        self.budget = CostBudget(
            self,
            "Budget",
            stage=config.stage,
            monthly_limit_usd=config.monthly_budget_usd,
            topic=self.monitoring.topic,
            email=config.alarm_email,
        )
        self.budget.node.add_dependency(self.monitoring.topic)  # Budgets checks it may publish when created
        self.notifications = (
            Notifications(
                self, "Notifications", config=config, bus=self.relay.bus, alarm_topic=self.monitoring.topic
            )
            if enabled(config)
            else None
        )
        self._outputs(every_function, functions_zip)

    def _model_arns(self, config: DeploymentConfig) -> list[str]:
        region = config.model_region or self.region
        model = config.model_id
        if model.startswith(INFERENCE_PROFILE_PREFIXES):
            foundation = model.split(".", 1)[1]
            self._acknowledge_cross_region_model(foundation)
            return [
                self.format_arn(
                    service="bedrock", region=region, resource="inference-profile", resource_name=model
                ),
                self.format_arn(
                    service="bedrock",
                    region="*",
                    account="",
                    resource="foundation-model",
                    resource_name=foundation,
                ),
            ]
        return [
            self.format_arn(
                service="bedrock", region=region, account="", resource="foundation-model", resource_name=model
            )
        ]

    def _acknowledge_cross_region_model(self, foundation: str) -> None:
        cdk.Validations.of(self.functions[PLANS_FUNCTION].role).acknowledge(
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*::foundation-model/{foundation}]",
                reason="A geographic inference profile sends each call to the named foundation model in "
                "whichever region of its geography has capacity; the region is the only wildcard, and the "
                "model and the profile are named exactly.",
            )
        )

    def _outputs(self, functions: Mapping[str, ServiceFunction], functions_zip: Package) -> None:
        def output(key: str, value: str, description: str) -> None:
            cdk.CfnOutput(self, key, value=value, description=description)

        output(names.OUTPUT_API_URL, self.api.url, "API base URL (without /v1): SENTINEL_URL for clients")
        output(names.OUTPUT_NEXT_API_URL, self.next_api.url, "Acceptance API: the routes on the next aliases")
        output(names.OUTPUT_STATE_TABLE, self.tables.state.table_name, "SENTINEL_STATE_TABLE for the CLI")
        output(
            names.OUTPUT_PRINCIPALS_TABLE,
            self.tables.principals.table_name,
            "SENTINEL_PRINCIPALS_TABLE for the CLI",
        )
        output(
            names.OUTPUT_TOKEN_KEY_SECRET_ARN,
            self.token_key.secret_arn,
            "SENTINEL_TOKEN_KEY_SECRET_ARN for the CLI (the token HMAC key)",
        )
        output(
            names.OUTPUT_EVENT_BUS,
            self.relay.bus.event_bus_name,
            "Bus of relayed side effects and checkpoints",
        )
        output(names.OUTPUT_EVENT_ARCHIVE, self.relay.archive.archive_name, "Archive of the bus")
        output(names.OUTPUT_RELAY_DLQ_URL, self.relay.dead_letters.queue_url, "Relay dead-letter queue")
        output(names.OUTPUT_ALARM_TOPIC_ARN, self.monitoring.topic.topic_arn, "SNS topic of every alarm")
        output(names.OUTPUT_DASHBOARD, self.monitoring.dashboard.dashboard_name, "CloudWatch dashboard")
        for key, (value, description) in self.integrity.outputs().items():
            output(key, value, description)
        output(names.OUTPUT_PACKAGE_DIGEST, functions_zip.sha256, "sha256 of functions.zip (/v1/health)")
        for name, fn in functions.items():
            output(names.function_output_key(name), fn.function.function_name, f"The {name} function")


def _title(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _retention(days: int) -> logs.RetentionDays:
    # CDK's enum lists CloudWatch's periods in ascending order, the same order as LOG_RETENTION_DAYS.
    periods = [r for r in logs.RetentionDays if r.name != "INFINITE"]
    if len(periods) != len(LOG_RETENTION_DAYS):
        raise RuntimeError("aws_logs.RetentionDays changed: update sentinel_infra.config.LOG_RETENTION_DAYS")
    return dict(zip(LOG_RETENTION_DAYS, periods, strict=True))[days]


def _model_env(config: DeploymentConfig) -> dict[str, str]:
    env = {names.ENV_MODEL_BUDGET_SECONDS: str(config.model_budget_seconds)}
    if config.model_region:
        env[names.ENV_MODEL_REGION] = config.model_region
    return env
