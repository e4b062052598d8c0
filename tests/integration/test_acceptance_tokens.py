"""The acceptance principals' tokens live only as long as a run: minted short-lived, voided at its end.
On DynamoDB (moto), through the operator, as `make acceptance` does against AWS."""

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from sentinel_acceptance.tokens import PRINCIPALS, RETIRED_TTL_SECONDS, NotSynthetic, mint, retire
from sentinel_domain.integrity import ChainSeal
from sentinel_domain.memory import MemoryWitness
from sentinel_service.adapters.tables import ensure_tables
from sentinel_service.compose import compose
from sentinel_service.operator import Operator
from sentinel_service.settings import Settings
from support.moto_world import moto_dynamodb

KEY = bytes(range(32))


@pytest.fixture
def services() -> Iterator[Any]:
    with moto_dynamodb() as client:
        settings = Settings.from_env({"AWS_REGION": "us-east-1"})
        ensure_tables(client, settings.state_table, settings.principals_table)
        seal = ChainSeal(bytes(range(32, 64)))
        yield compose(settings, dynamodb=client, token_key=KEY, seal=seal, witness=MemoryWitness(seal))


@pytest.fixture
def operator(services: Any) -> Operator:
    return services.operator


@pytest.fixture
def who(services: Any) -> Callable[[str], bool]:
    """Whether a token stands for a principal now, as the authorizer reads it."""
    return lambda token: services.directory.authenticate(token, KEY, datetime.now(UTC)) is not None


def test_the_tokens_a_run_used_stop_working_when_it_ends_and_the_next_run_mints_again(
    operator: Operator, who: Callable[[str], bool]
) -> None:
    # Given the acceptance principals minted fifteen-minute tokens for a run
    minted = mint(operator, "acceptance", 15 * 60)
    assert all(who(token) for token in minted.tokens.values())
    # When the run ends and its tokens are retired
    retired = retire(operator)
    # Then every token it used stands for nobody any more
    assert sorted(retired) == sorted(p for p, _, _ in PRINCIPALS.values())
    assert not any(who(token) for token in minted.tokens.values())
    # And the principals remain, not revoked, with a token nobody holds that expires within a minute
    for principal_id, _, _ in PRINCIPALS.values():
        view = operator.principal(principal_id) or {}
        assert view and not view.get("revoked"), view
        expires = datetime.fromisoformat(str(view["token_expires_at"]).replace("Z", "+00:00"))
        assert (expires - datetime.now(UTC)).total_seconds() <= RETIRED_TTL_SECONDS
    # And the next run mints working tokens again
    again = mint(operator, "acceptance", 15 * 60)
    assert all(who(token) for token in again.tokens.values())


def test_retiring_before_any_mint_voids_nothing_and_creates_nothing(operator: Operator) -> None:
    # Given no acceptance principal yet, when a retire runs, then it retires nobody and creates no one
    assert retire(operator) == []
    assert all(operator.principal(p) is None for p, _, _ in PRINCIPALS.values())


def test_a_live_runs_operator_reads_the_chain_key_and_witness_the_stack_outputs() -> None:
    # Given a deployed stack's outputs
    from sentinel_acceptance.tokens import operator_env
    from sentinel_service import names

    outputs = {
        names.OUTPUT_STATE_TABLE: "state",
        names.OUTPUT_PRINCIPALS_TABLE: "principals",
        names.OUTPUT_TOKEN_KEY_SECRET_ARN: "arn:token",
        names.OUTPUT_CHAIN_KEY_SECRET_ARN: "arn:chain",
        names.OUTPUT_WITNESS_BUCKET: "witness-bucket",
    }
    # When the operator's settings are built for a live run (no key files)
    settings = Settings.from_env(operator_env(outputs, "eu-west-1"))
    # Then its writes are sealed with the stack's chain key and checked against its witness
    assert (settings.chain_key_secret_arn, settings.witness_bucket) == ("arn:chain", "witness-bucket")
    assert settings.token_key_secret_arn == "arn:token" and not settings.chain_key_file


def test_mint_creates_the_acceptance_project_synthetic(operator: Operator) -> None:
    # Given no acceptance project yet
    # When the first run mints
    minted = mint(operator, "acceptance", 15 * 60)
    # Then it created the project, and created it synthetic (its side effects reach no consumer)
    assert "project acceptance" in minted.created
    assert operator.project_synthetic("acceptance") is True


def test_mint_refuses_an_existing_acceptance_project_that_is_not_synthetic(operator: Operator) -> None:
    # Given an acceptance project created before acceptance projects were synthetic (a plain project)
    operator.create_project("acceptance")
    # When a run mints its tokens there
    with pytest.raises(NotSynthetic) as refused:
        mint(operator, "acceptance", 15 * 60)
    # Then it is refused, saying why and what to do next, and no acceptance principal was created or issued
    assert "not synthetic" in str(refused.value)
    assert "--project acceptance-2" in refused.value.next_step
    assert all(operator.principal(p) is None for p, _, _ in PRINCIPALS.values())
    # And a new acceptance project, as the next step says, is created synthetic and mints
    assert mint(operator, "acceptance-2", 15 * 60).tokens
    assert operator.project_synthetic("acceptance-2") is True
