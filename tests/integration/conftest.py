"""Fixtures of the integration layer: module-scoped DynamoDB on moto for the suites that drive the ready flow
on the real store adapter (faults/, races/, tampering/): one moto per module, and the tables it holds, dropped
when the module is done."""

from typing import Any

import pytest

from support.moto_world import Tables, moto_dynamodb


@pytest.fixture(scope="module")
def moto() -> Any:
    with moto_dynamodb() as client:
        yield client


@pytest.fixture(scope="module")
def tables(moto: Any) -> Any:
    made = Tables(moto)
    yield made
    made.drop_all()
