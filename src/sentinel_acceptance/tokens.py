"""The acceptance principals and their tokens.

The suite acts through three principals that hold roles only in a dedicated acceptance project, so a run can
touch nothing else. Their tokens come from the environment (`SENTINEL_ACCEPTANCE_TOKEN_<ROLE>`) or from one
AWS Secrets Manager secret holding `{"tokens": {role: token}, "expires_at": {role: time}}`; never from a file
in the repository, never from a command line. `mint()` is the operator's side: it provisions the project and
the principals when missing and issues each principal a fresh short-lived token (one hour by default).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentinel_service import names

if TYPE_CHECKING:
    from sentinel_service.operator import Operator

# The flow's three roles: (principal id, kind, roles in the acceptance project). The reviewer is a human who
# sponsors no one, so its approval is never a self-approval; the publisher is the project's one trusted CI.
PRINCIPALS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "requester": ("acceptance-requester", "agent", ("requester",)),
    "publisher": ("acceptance-publisher", "ci", ("publisher",)),
    "reviewer": ("acceptance-reviewer", "human", ("reviewer",)),
}
ROLES = tuple(PRINCIPALS)
ENV_TOKEN = "SENTINEL_ACCEPTANCE_TOKEN_{role}"
ENV_SECRET = "SENTINEL_ACCEPTANCE_TOKENS_SECRET"
DEFAULT_TTL = "1h"
# A token that outlives this is not short-lived: the suite refuses to run with it (when its expiry is known).
MAX_LIFETIME = timedelta(hours=24)

POLICIES = {
    "unit-tests": {
        "check_type": "junit",
        "command": "pytest -q {scope}",
        "expected_exit_code": 0,
        "expected_artifacts": [],
        "fail_message": "Unit tests failed",
        "remediation_hint": "Run pytest -q locally and read the first failure",
        "max_evidence_age_seconds": 86400,
        "trusted_publishers": [PRINCIPALS["publisher"][0]],
        "min_tests": 1,
    },
}
# What sentinel_client.flow.run_ready_flow expects of its project: its default files derive unit-tests
# obligations (services/payments/** by rule, scripts/release.sh as unclassified), the publisher attests change
# context, and dispatch_checks is allowed.
CONFIG = {
    "environments": ["staging"],
    "derivation_rules": [
        {"files": ["services/payments/**"], "policy_id": "unit-tests", "scope": "payments-api"}
    ],
    "unclassified_policy": "unit-tests",
    "change_context_publishers": [PRINCIPALS["publisher"][0]],
    "allowed_action_types": ["dispatch_checks"],
    "notify_channels": [],
    "approvals_required": 1,
    "approval_ttl_seconds": 3600,
    "settlement_required": False,
}


def default_secret_id(stage: str) -> str:
    return f"sentinel/{stage}/acceptance-tokens"


class TokensUnavailable(Exception):
    """No complete set of acceptance tokens: the suite fails closed and says where it looked."""


@dataclass
class Tokens:
    tokens: dict[str, str]
    source: str  # "environment" or "secret <id>" (never a token)
    expires_at: dict[str, str] = field(default_factory=dict)

    def secrets(self) -> list[str]:
        """Every token, so checks can assert none of them appears in an answer or a report."""
        return list(self.tokens.values())


def load_tokens(env: Mapping[str, str], stage: str, secrets_client: Any = None) -> Tokens:
    """From the environment when every role's variable is set, else from the Secrets Manager secret named by
    SENTINEL_ACCEPTANCE_TOKENS_SECRET (default sentinel/<stage>/acceptance-tokens)."""
    from_env = {role: env.get(ENV_TOKEN.format(role=role.upper()), "").strip() for role in ROLES}
    if all(from_env.values()):
        return Tokens(from_env, "environment")
    partial = [ENV_TOKEN.format(role=role.upper()) for role, token in from_env.items() if token]
    if partial:
        raise TokensUnavailable(
            f"only {', '.join(partial)} is set: set all of "
            + ", ".join(ENV_TOKEN.format(role=r.upper()) for r in ROLES)
        )
    secret_id = env.get(ENV_SECRET) or default_secret_id(stage)
    if secrets_client is None:
        raise TokensUnavailable(
            f"no {ENV_TOKEN.format(role='<ROLE>')} variables and no AWS access to read the secret {secret_id}"
        )
    try:
        answer = secrets_client.get_secret_value(SecretId=secret_id)
        payload = json.loads(answer["SecretString"])
    except Exception as error:  # any failure to read the secret is "no tokens", never a guess
        code = getattr(error, "response", {}).get("Error", {}).get("Code", type(error).__name__)
        raise TokensUnavailable(
            f"no {ENV_TOKEN.format(role='<ROLE>')} variables, and the secret {secret_id} cannot be read "
            f"({code}): run `make acceptance-tokens` (python -m sentinel_acceptance mint) or set the "
            "variables"
        ) from None
    tokens = {role: str(payload.get("tokens", {}).get(role, "")) for role in ROLES}
    if not all(tokens.values()):
        raise TokensUnavailable(
            f"the secret {secret_id} lacks a token for " + ", ".join(r for r, t in tokens.items() if not t)
        )
    return Tokens(
        tokens, f"secret {secret_id}", {r: str(t) for r, t in payload.get("expires_at", {}).items()}
    )


# ---- minting (the operator's side) -----------------------------------------------------------------------


@dataclass
class Minted:
    tokens: dict[str, str]
    expires_at: dict[str, str]
    created: list[str]  # what did not exist before: the project, principals


def operator_runtime(
    outputs: Mapping[str, str | None],
    region: str,
    endpoint: str | None = None,
    token_key_file: str | None = None,
    chain_key_file: str | None = None,
    witness_file: str | None = None,
) -> Operator:
    """The operator's acts on the deployed tables, composed from the stack's outputs rather than the
    environment, with the operator's own AWS credentials (or the emulation's endpoint)."""
    from sentinel_runner.embedded import LockedClient
    from sentinel_service.compose import OPERATOR_TIMEOUTS, compose, dynamodb_client
    from sentinel_service.settings import Settings

    settings = Settings.from_env(operator_env(outputs, region, endpoint, token_key_file, chain_key_file))
    credentials = (
        {"aws_access_key_id": "acceptance", "aws_secret_access_key": "acceptance"} if endpoint else {}
    )
    client = LockedClient(dynamodb_client(settings, OPERATOR_TIMEOUTS, credentials))
    if witness_file:  # the emulation's runner keeps its witness in a file: the operator's writes check it too
        from sentinel_service.adapters.chain_key import load_chain_seal
        from sentinel_service.adapters.file_witness import FileWitness, create_witness_file

        create_witness_file(Path(witness_file))
        witness = FileWitness(Path(witness_file), lambda: load_chain_seal(settings))
        return compose(settings, dynamodb=client, witness=witness).operator
    return compose(settings, dynamodb=client).operator


def operator_env(
    outputs: Mapping[str, str | None],
    region: str,
    endpoint: str | None = None,
    token_key_file: str | None = None,
    chain_key_file: str | None = None,
) -> dict[str, str]:
    """The settings the operator's runtime reads, from the stack's outputs (or the emulation's files)."""
    env = {
        "SENTINEL_STATE_TABLE": outputs.get(names.OUTPUT_STATE_TABLE) or "",
        "SENTINEL_PRINCIPALS_TABLE": outputs.get(names.OUTPUT_PRINCIPALS_TABLE) or "",
        "AWS_REGION": region,
        "SENTINEL_RUNTIME": "operator",
    }
    if endpoint:
        env["SENTINEL_DYNAMODB_ENDPOINT"] = endpoint
    if token_key_file:
        env["SENTINEL_TOKEN_KEY_FILE"] = token_key_file
    else:
        env["SENTINEL_TOKEN_KEY_SECRET_ARN"] = outputs.get(names.OUTPUT_TOKEN_KEY_SECRET_ARN) or ""
    # The project chain's events are authenticated under the chain key, and every write is checked against
    # the witness first: the emulation's file and witness, or the stack's secret and Object Lock bucket.
    if chain_key_file:
        env["SENTINEL_CHAIN_KEY_FILE"] = chain_key_file
    else:
        env["SENTINEL_CHAIN_KEY_SECRET_ARN"] = outputs.get(names.OUTPUT_CHAIN_KEY_SECRET_ARN) or ""
        env["SENTINEL_WITNESS_BUCKET"] = outputs.get(names.OUTPUT_WITNESS_BUCKET) or ""
    if not env["SENTINEL_STATE_TABLE"] or not env["SENTINEL_PRINCIPALS_TABLE"]:
        raise TokensUnavailable("the stack's outputs name no state or principals table")
    return env


class NotSynthetic(TokensUnavailable):
    """The acceptance project exists but was not created synthetic: a run there would hand its side effects
    (a dispatched check, a notification) to production's consumers. Nothing was minted."""

    def __init__(self, project: str) -> None:
        super().__init__(
            f"the acceptance project {project!r} exists but is not synthetic: a run there would deliver its "
            "side effects to production's consumers (it was created before acceptance projects were "
            "synthetic, or by hand); projects are never deleted, and none is made synthetic after the fact"
        )
        self.next_step = (
            f"run with a new acceptance project (--project {project}-2, or SENTINEL_ACCEPTANCE_PROJECT), "
            "which mint creates synthetic"
        )


def mint(operator: Operator, project: str, ttl_seconds: int) -> Minted:
    """Provision the acceptance project (synthetic: its side effects reach the event log or archive and no
    consumer) and principals where missing; issue each principal a new token. Rotating voids the previous
    token at once, so a leaked token from an earlier run is worthless. An existing project that is not
    synthetic is refused before anything is issued (NotSynthetic)."""
    created = []
    if operator.provision_project(project, POLICIES, CONFIG, synthetic=True):
        created.append(f"project {project}")
    elif not operator.project_synthetic(project):
        raise NotSynthetic(project)
    tokens, expires = {}, {}
    for role, (principal_id, kind, roles) in PRINCIPALS.items():
        issued = operator.issue(principal_id, kind, None, {project: list(roles)}, ttl_seconds)
        tokens[role] = issued.token
        if issued.created:
            created.append(f"principal {principal_id}")
        view = operator.principal(principal_id) or {}
        expires[role] = str(view.get("token_expires_at") or "")
    return Minted(tokens, expires, created)


# What a retired principal's discarded token lives: the shortest a token may be issued for, and never kept.
RETIRED_TTL_SECONDS = 60


def retire(operator: Operator) -> list[str]:
    """Void the tokens a run used, at its end: each acceptance principal is issued a token nobody keeps (it
    expires within a minute), which voids its previous one at once. The principals and their project stay
    for the next run's mint (a revocation is for good), and the rotation is recorded in the acceptance
    project's own audit chain."""
    retired = []
    for principal_id, _kind, _roles in PRINCIPALS.values():
        if operator.principal(principal_id) is not None:
            operator.rotate(principal_id, RETIRED_TTL_SECONDS)  # the new token is dropped unread
            retired.append(principal_id)
    return retired


def store_in_secret(secrets_client: Any, secret_id: str, minted: Minted) -> str:
    """Put the tokens in the secret (created on first use); returns the secret's id. Nothing is printed."""
    payload = json.dumps({"tokens": minted.tokens, "expires_at": minted.expires_at})
    try:
        secrets_client.put_secret_value(SecretId=secret_id, SecretString=payload)
    except secrets_client.exceptions.ResourceNotFoundException:
        secrets_client.create_secret(
            Name=secret_id,
            SecretString=payload,
            Description="Sentinel acceptance principals' short-lived tokens "
            "(python -m sentinel_acceptance mint)",
        )
    return secret_id


def append_github_env(path: str, minted: Minted) -> None:
    """For GitHub Actions: mask each token in the log, then hand it to later steps through $GITHUB_ENV."""
    for token in minted.tokens.values():
        print(f"::add-mask::{token}", flush=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(descriptor, "a", encoding="utf-8") as out:
        for role, token in minted.tokens.items():
            out.write(f"{ENV_TOKEN.format(role=role.upper())}={token}\n")


def lifetime_problems(tokens: Tokens, now: datetime | None = None) -> list[str]:
    """Roles whose recorded expiry is past or further away than MAX_LIFETIME (unknown expiry: not judged)."""
    moment = now or datetime.now(UTC)
    problems = []
    for role, text in tokens.expires_at.items():
        if not text:
            continue
        try:
            expiry = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            problems.append(f"{role}: unreadable expiry {text!r}")
            continue
        if expiry <= moment:
            problems.append(f"{role}: token expired at {text}")
        elif expiry - moment > MAX_LIFETIME:
            problems.append(f"{role}: token lives until {text}, longer than {MAX_LIFETIME} (not short-lived)")
    return problems
