"""The composition root: every caller builds the gate and its collaborators here, and nowhere else.

`compose(settings, **overrides)` returns `Services`, whose parts are built on first use: a handler that
never touches the store builds no client, and the authorizer (which needs only the principal directory and
the token key) never imports the use cases or pydantic. Lambda calls `lambda_services()` once per cold start;
the local runner, the operator's commands, acceptance, bench, evaluation and tests call `compose` with their
own clients, clocks, ids, proposers, seals and witnesses.

The audit chains' seal and witness (sentinel_domain.integrity) are built here too: the seal from the chain key
the settings name (never a default: no key, and every write is refused), the witness from the settings in AWS
(an S3 Object Lock bucket) or handed in by the local runner (a file in its data directory). The runtime
decides how the gate uses the witness: locally every read compares with it and every write appends its
checkpoint before answering; in AWS only release paths read it and the outbox carries checkpoints to it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

from sentinel_service import names
from sentinel_service.settings import Settings

if TYPE_CHECKING:
    from sentinel_domain.forge import Forge
    from sentinel_domain.integrity import ChainSeal
    from sentinel_domain.models import GitHubForge
    from sentinel_domain.ports import Clock, Ids, Proposer, StateStore, StreamRef, Witness
    from sentinel_domain.receipts import ReceiptSigner
    from sentinel_domain.usecases import Gate
    from sentinel_domain.usecases.forge_checks import ForgeChecks
    from sentinel_domain.usecases.project_reads import ChainCache
    from sentinel_service.adapters.principal_rules import PrincipalReader, PrincipalWriter
    from sentinel_service.operator import Operator

# Tight timeouts and few retries: a slow store becomes STATE_UNAVAILABLE well inside API Gateway's limit.
API_TIMEOUTS = {"connect_timeout": 2, "read_timeout": 5, "retries": {"max_attempts": 3, "mode": "standard"}}
# The authorizer answers within its own short budget; a slow directory is a refusal, never a wait.
AUTHORIZER_TIMEOUTS = {
    "connect_timeout": 2,
    "read_timeout": 2,
    "retries": {"max_attempts": 2, "mode": "standard"},
}
# The operator's commands run by hand: a little more patience.
OPERATOR_TIMEOUTS = {
    "connect_timeout": 5,
    "read_timeout": 10,
    "retries": {"max_attempts": 3, "mode": "standard"},
}


def dynamodb_client(
    settings: Settings,
    timeouts: Mapping[str, Any] = API_TIMEOUTS,
    credentials: Mapping[str, str] | None = None,
) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "dynamodb",
        region_name=settings.region,
        endpoint_url=settings.dynamodb_endpoint,
        config=Config(**timeouts),
        **dict(credentials or {}),
    )


def build_proposer(s: Settings, environ: Mapping[str, str] | None = None) -> Proposer:
    """The model adapter the settings name. An incomplete configuration is no model at all: proposals then
    fall back with MODEL_NOT_CONFIGURED rather than fail. No client is built here, only on first use."""
    from sentinel_service.adapters.proposers import (
        BedrockProposer,
        ModelLimits,
        NoModel,
        OpenAICompatibleProposer,
        bedrock_runtime_client,
    )

    limits = ModelLimits.from_settings(s)
    if s.model_provider == "bedrock" and s.model_id:
        region = s.model_region or s.region
        return BedrockProposer(
            s.model_id, lambda: bedrock_runtime_client(region, limits, s.model_endpoint_url), limits
        )
    if s.model_provider == "openai" and s.model_id and s.model_endpoint_url:
        env = os.environ if environ is None else environ
        # Read at call time: the key is never held in the settings, so neither repr nor health can show it.
        return OpenAICompatibleProposer(
            s.model_id, s.model_endpoint_url, lambda: env.get(s.model_api_key_env), limits
        )
    return NoModel()


class Services:
    """What the composition root hands to endpoints, the authorizer, the operator's commands and the runner.
    Each part is built once, on first use, from the settings and whatever the caller supplied."""

    def __init__(
        self,
        settings: Settings,
        *,
        dynamodb: Any = None,
        store: StateStore | None = None,
        directory: PrincipalReader | None = None,
        admin: PrincipalWriter | None = None,
        clock: Clock | None = None,
        ids: Ids | None = None,
        proposer: Proposer | None = None,
        witness: Witness | None = None,
        seal: ChainSeal | None = None,
        token_key: bytes | None = None,
        create_token_key: bool = False,
        create_chain_key: bool = False,
        s3: Any = None,
        environ: Mapping[str, str] | None = None,
        timeouts: Mapping[str, Any] = API_TIMEOUTS,
        hold_chains: bool | None = None,
        receipt_signer: ReceiptSigner | None = None,
        kms: Any = None,
        forge: Forge | None = None,
        forge_builder: Callable[[GitHubForge], Forge] | None = None,
        secrets_client: Any = None,
        check_publisher: Callable[[str, str], Any] | None = None,
        webhook_secret: bytes | None = None,
    ) -> None:
        self.settings = settings
        self._dynamodb = dynamodb
        self._store = store
        self._directory = directory
        self._admin = admin
        self._clock = clock
        self._ids = ids
        self._proposer = proposer
        self._witness = witness
        self._seal = seal
        self._s3 = s3
        self._token_key = token_key
        self._create_token_key = create_token_key
        self._create_chain_key = create_chain_key
        self._environ = environ
        self._timeouts = timeouts
        self._hold_chains = hold_chains
        self._receipt_signer = receipt_signer
        self._kms = kms
        self._check_publisher = check_publisher
        self._webhook_secret = webhook_secret
        self._key_lock = threading.Lock()
        self._forge = forge
        self._forge_builder = forge_builder
        self._secrets_client = secrets_client
        self._forges: dict[tuple[int, int], Forge] = {}

    # ---- adapters --------------------------------------------------------------------------------------

    @cached_property
    def dynamodb(self) -> Any:
        return (
            self._dynamodb if self._dynamodb is not None else dynamodb_client(self.settings, self._timeouts)
        )

    @cached_property
    def directory_dynamodb(self) -> Any:
        """The authorizer's client: the caller's when one was given, else one with the authorizer's budget."""
        if self._dynamodb is not None:
            return self._dynamodb
        return dynamodb_client(self.settings, AUTHORIZER_TIMEOUTS)

    @cached_property
    def store(self) -> StateStore:
        if self._store is not None:
            return self._store
        from sentinel_service.adapters.dynamodb_store import DynamoStateStore

        return DynamoStateStore(self.dynamodb, self.settings.state_table)

    @cached_property
    def clock(self) -> Clock:
        if self._clock is not None:
            return self._clock
        from sentinel_service.adapters.system_ports import SystemClock

        return SystemClock()

    @cached_property
    def ids(self) -> Ids:
        if self._ids is not None:
            return self._ids
        from sentinel_service.adapters.system_ports import RandomIds

        return RandomIds()

    @cached_property
    def proposer(self) -> Proposer:
        return self._proposer if self._proposer is not None else build_proposer(self.settings, self._environ)

    @cached_property
    def directory(self) -> PrincipalReader:
        if self._directory is not None:
            return self._directory
        from sentinel_service.adapters.principals import PrincipalDirectory

        return PrincipalDirectory(self.directory_dynamodb, self.settings.principals_table)

    @cached_property
    def admin(self) -> PrincipalWriter:
        if self._admin is not None:
            return self._admin
        from sentinel_service.adapters.principals import PrincipalAdmin

        return PrincipalAdmin(self.dynamodb, self.settings.principals_table)

    def token_key(self) -> bytes:
        """The key tokens are hashed under. A key that cannot be read raises (and is tried again next time):
        every caller refuses rather than guesses."""
        with self._key_lock:
            if self._token_key is None:
                from sentinel_service.adapters.token_key import load_token_key

                self._token_key = load_token_key(self.settings, create=self._create_token_key)
            return self._token_key

    def chain_seal(self) -> ChainSeal:
        """The seal over the chain key. A key that cannot be read raises ChainKeyUnavailable (and is tried
        again next time): the gate refuses every write and holds every decision meanwhile."""
        with self._key_lock:
            if self._seal is None:
                from sentinel_service.adapters.chain_key import load_chain_seal

                self._seal = load_chain_seal(self.settings, create=self._create_chain_key)
            return self._seal

    def webhook_secret(self) -> bytes:
        """The GitHub webhook's secret (adapters.webhook_secret); raises when it cannot be read, and every
        delivery is refused meanwhile."""
        if self._webhook_secret is not None:
            return self._webhook_secret
        from sentinel_service.adapters.webhook_secret import load_webhook_secret

        return load_webhook_secret(self.settings)

    @property
    def local_witness(self) -> bool:
        """The local runner's way: every read compares with the witness, every write appends to it."""
        return self.settings.runtime == "local"

    @cached_property
    def witness(self) -> Witness:
        """The one handed in; else, in AWS, the S3 witness over `settings.witness_bucket`, built on first use
        (it needs the seal); with neither, a witness that cannot be read (release paths hold, never pass)."""
        if self._witness is not None:
            return self._witness
        if self.settings.witness_bucket:
            bucket = self.settings.witness_bucket
            return DeferredWitness(lambda: self._s3_witness(bucket))
        return DeferredWitness(None)

    def _s3_witness(self, bucket: str) -> Witness:
        # Imported here: the S3 adapter (and boto3) load only where a bucket is configured.
        from sentinel_service.adapters.s3_witness import S3Witness

        witness: Witness = S3Witness(self.s3, bucket, self.chain_seal())
        return witness

    @cached_property
    def receipt_signer(self) -> ReceiptSigner | None:
        """The key receipts are signed with: the one handed in; else the KMS key `receipt_key_id` names (in
        AWS), else the key file `receipt_key_file` names (locally); else none, and no `ready` decision is
        recorded (never a default key). Nothing is read or built until a receipt is signed."""
        if self._receipt_signer is not None:
            return self._receipt_signer
        if self.settings.receipt_key_id:
            from sentinel_service.adapters.receipt_signer import KmsReceiptSigner

            return KmsReceiptSigner(lambda: self.kms, self.settings.receipt_key_id)
        if self.settings.receipt_key_file:
            from sentinel_service.adapters.receipt_signer import FileReceiptSigner

            return FileReceiptSigner(self.settings.receipt_key_file)
        return None

    @cached_property
    def kms(self) -> Any:
        if self._kms is not None:
            return self._kms
        import boto3
        from botocore.config import Config

        return boto3.client("kms", region_name=self.settings.region, config=Config(**self._timeouts))

    @cached_property
    def s3(self) -> Any:
        if self._s3 is not None:
            return self._s3
        import boto3
        from botocore.config import Config

        return boto3.client("s3", region_name=self.settings.region, config=Config(**self._timeouts))

    def now(self) -> datetime:
        return self.clock.now()

    def forge(self, github: GitHubForge) -> Forge:
        """The forge for a project's GitHub App (its `github` configuration): the one handed in (a Forge, or
        a builder given the configuration), else the GitHub App adapter for the app and installation it
        names, built on first use and kept per installation. Building reads no key and calls nothing: the
        key is read (file or Secrets Manager) when the first installation token is minted."""
        if self._forge is not None:
            return self._forge
        if self._forge_builder is not None:
            return self._forge_builder(github)
        key = (github.app_id, github.installation_id)
        with self._key_lock:
            built = self._forges.get(key)
            if built is None:
                from sentinel_service.adapters.github_app import GitHubApp
                from sentinel_service.adapters.github_auth import key_source

                built = GitHubApp.build(
                    self.settings.github_api_url,
                    github.app_id,
                    github.installation_id,
                    key_source(self.settings, self._secrets_client),
                    self.now,
                )
                self._forges[key] = built
            return built

    # ---- what the process holds between requests ---------------------------------------------------------

    @cached_property
    def chain_cache(self) -> ChainCache | None:
        """The verified chains (projects' and candidates') decision reads reuse while their HEAD is
        unchanged: one per Services, so one per Lambda container (bounded; see
        sentinel_domain.usecases.project_reads). Held only in AWS Lambda, where a hook read's partition
        Query is most of its price; there an edit behind an unchanged head changes no answer until the
        chain's head moves or the scheduled verifier marks it. Elsewhere (the local gate, the emulations)
        every decision read verifies both chains in full, so tampering is seen at once."""
        hold = self._hold_chains
        if hold is None:
            hold = self.settings.runtime == names.RUNTIME_AWS_LAMBDA
        if not hold:
            return None
        from sentinel_domain.usecases.project_reads import ChainCache

        return ChainCache()

    # ---- the application ---------------------------------------------------------------------------------

    @cached_property
    def gate(self) -> Gate:
        from sentinel_domain.usecases import Gate

        return Gate(
            self.store,
            self.clock,
            self.ids,
            proposer=self.proposer,
            witness=self.witness,
            chain_cache=self.chain_cache,
            seal=self.chain_seal,
            reads_witness=self.local_witness,
            appends_witness=self.local_witness,
            receipt_signer=self.receipt_signer,
            receipt_max_seconds=self.settings.receipt_max_seconds,
            notify=self.settings.notifications,
        )

    @cached_property
    def forge_checks(self) -> ForgeChecks:
        """The forge check publisher (sentinel_domain.usecases.forge_checks) over the gate's chain and the
        state store's check records, publishing through each project's GitHub App (`forge`)."""
        from sentinel_domain.usecases.forge_checks import ForgeChecks

        return ForgeChecks(self.gate.chain, self.forge, self.store)  # type: ignore[arg-type]

    @property
    def check_publisher(self) -> Callable[[str, str], Any]:
        """(project, candidate_id): publish that candidate's check run now (forge_worker.publish_checks calls
        it for the candidates a redelivery names); by default the forge check publisher itself."""
        return self._check_publisher or self.forge_checks.publish

    @cached_property
    def operator(self) -> Operator:
        from sentinel_service.adapters.principal_changes import principal_changes
        from sentinel_service.operator import Operator

        changes = principal_changes(self.store, self.admin)
        # Both state stores list project heads; a store that cannot (a test's) leaves the listing refused.
        projects: Any = self.store if hasattr(self.store, "project_heads") else None
        return Operator(self.gate, self.admin, self.token_key, self.clock, changes, projects)


class DeferredWitness:
    """A witness built on first use, and rebuilt after a failure: its construction needs the chain key, which
    may not be readable yet. Whatever fails (no witness configured, no key, the adapter itself) is
    StoreUnavailable, so the gate holds or refuses rather than going on without it."""

    def __init__(self, build: Callable[[], Witness] | None) -> None:
        self._build = build
        self._built: Witness | None = None
        self._lock = threading.Lock()

    def _target(self) -> Witness:
        from sentinel_domain.errors import StoreUnavailable

        with self._lock:
            if self._built is None:
                if self._build is None:
                    raise StoreUnavailable("no witness is configured (SENTINEL_WITNESS_BUCKET)")
                try:
                    self._built = self._build()
                except Exception as error:
                    raise StoreUnavailable(f"the witness cannot be used: {type(error).__name__}") from None
            return self._built

    def newest(self, ref: StreamRef) -> dict[str, Any] | None:
        return self._target().newest(ref)

    def append(self, checkpoint: dict[str, Any]) -> bool:
        return self._target().append(checkpoint)

    def mark_tampered(self, ref: StreamRef, finding: dict[str, Any]) -> None:
        self._target().mark_tampered(ref, finding)

    def tampered(self, ref: StreamRef) -> dict[str, Any] | None:
        return self._target().tampered(ref)


def compose(settings: Settings, **overrides: Any) -> Services:
    """The one way to build the gate: `overrides` are the keyword arguments of `Services`."""
    return Services(settings, **overrides)


ServicesProvider = Callable[[], Services]


@lru_cache(maxsize=1)
def lambda_services() -> Services:
    """The Lambda container's services, built once per cold start from its environment."""
    return compose(Settings.from_env())
