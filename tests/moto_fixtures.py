"""Module-scoped DynamoDB on moto for the suites that drive the ready flow on the real store adapter (faults,
races, tampering): one moto per module, and the tables it holds, dropped when the module is done."""

from typing import Any

import pytest


@pytest.fixture(scope="module")
def moto() -> Any:
    from faults.moto_world import moto_dynamodb

    with moto_dynamodb() as client:
        yield client


@pytest.fixture(scope="module")
def tables(moto: Any) -> Any:
    from faults.moto_world import Tables

    made = Tables(moto)
    yield made
    made.drop_all()
