"""The operator's acts through the composition root, on DynamoDB (moto): each recorded on its project's
chain."""

from collections.abc import Iterator
from typing import Any

import pytest

from sentinel_domain.ports import StreamRef
from sentinel_service.adapters.principals import PrincipalRefused
from sentinel_service.adapters.tables import ensure_tables
from sentinel_service.compose import compose
from sentinel_service.operator import Operator
from sentinel_service.settings import Settings
from support.moto_world import moto_dynamodb
from support.world import CONFIG, LINT_POLICY, UNIT_POLICY, sealed

KEY = bytes(range(32))


@pytest.fixture
def operator() -> Iterator[Operator]:
    with moto_dynamodb() as client:
        settings = Settings.from_env({"AWS_REGION": "us-east-1"})
        ensure_tables(client, settings.state_table, settings.principals_table)
        yield compose(settings, dynamodb=client, token_key=KEY, **sealed()).operator


def chain(operator: Operator, project: str) -> list[str]:
    stream: Any = operator.gate.store.load(StreamRef(project))
    return [event["type"] for event in stream.events]


def test_provisioning_is_idempotent(operator: Operator) -> None:
    # Given a project provisioned with its policies and configuration
    assert (
        operator.provision_project("shop", {"unit-tests": UNIT_POLICY, "lint": LINT_POLICY}, CONFIG) is True
    )
    # When it is provisioned again
    again = operator.provision_project("shop", {"unit-tests": UNIT_POLICY}, {})
    # Then nothing is written the second time
    assert again is False
    assert chain(operator, "shop") == ["project.created", "policy.set", "policy.set", "config.set"]


def test_issuing_adds_then_rotates_and_records_both(operator: Operator) -> None:
    # Given a project
    operator.create_project("shop")
    # When a principal is issued a token twice with the same kind and roles
    first = operator.issue("hank", "human", None, {"shop": ["reviewer"]})
    second = operator.issue("hank", "human", None, {"shop": ["reviewer"]})
    # Then it was added, then rotated, and both acts are on the chain
    assert (first.created, second.created) == (True, False) and first.token != second.token
    assert chain(operator, "shop") == ["project.created", "principal.added", "principal.rotated"]


@pytest.mark.parametrize(
    ("kind", "sponsor", "roles"),
    [
        ("ci", None, {"shop": ["publisher"]}),
        ("human", None, {"shop": ["reviewer", "admin"]}),
    ],
)
def test_issuing_never_changes_who_an_existing_principal_is(
    operator: Operator, kind: str, sponsor: str | None, roles: dict[str, list[str]]
) -> None:
    # Given a human reviewer
    operator.create_project("shop")
    operator.issue("hank", "human", None, {"shop": ["reviewer"]})
    # When a token is asked for it as another kind or with other roles
    with pytest.raises(PrincipalRefused) as refused:
        operator.issue("hank", kind, sponsor, roles)
    # Then it is refused and nothing more is recorded
    assert refused.value.code == "PRINCIPAL_EXISTS"
    assert chain(operator, "shop") == ["project.created", "principal.added"]


def test_a_revoked_principal_is_never_issued_a_token_again(operator: Operator) -> None:
    # Given a principal revoked as compromised
    operator.create_project("shop")
    operator.issue("ci-bot", "ci", None, {"shop": ["publisher"]})
    assert operator.revoke("ci-bot", compromised=True)["compromised"] is True
    # When it is issued a token again
    with pytest.raises(PrincipalRefused) as refused:
        operator.issue("ci-bot", "ci", None, {"shop": ["publisher"]})
    # Then it is refused, and the revocation is on the chain
    assert refused.value.code == "PRINCIPAL_REVOKED"
    assert chain(operator, "shop")[-1] == "principal.revoked"
