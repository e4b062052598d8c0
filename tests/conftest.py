"""Fixtures every layer shares."""

import pytest

from world import World


@pytest.fixture
def world() -> World:
    return World()
