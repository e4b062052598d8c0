"""Fixtures of the integration layer: module-scoped DynamoDB on moto for the suites that drive the ready flow
on the real store adapter (faults/, races/, tampering/): one moto per module, and the tables it holds, dropped
when the module is done; and the state store contract's `kit` and `store`, once on each store (SQLite in a
fresh file, DynamoDB in fresh tables on the module's moto)."""

from pathlib import Path
from typing import Any

import pytest

from support.moto_world import Tables, moto_dynamodb
from support.stores import STORES, DynamoKit, SqliteKit, StoreKit


@pytest.fixture(scope="module")
def moto() -> Any:
    with moto_dynamodb() as client:
        yield client


@pytest.fixture(scope="module")
def tables(moto: Any) -> Any:
    made = Tables(moto)
    yield made
    made.drop_all()


@pytest.fixture(params=STORES)
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """One state store, empty, with a raw view of what it holds."""
    made: StoreKit
    if request.param == "sqlite":
        made = SqliteKit(tmp_path / "state.db")
    else:
        made = DynamoKit(request.getfixturevalue("moto"))
    yield made
    made.close()


@pytest.fixture
def store(kit: StoreKit) -> Any:
    return kit.store
