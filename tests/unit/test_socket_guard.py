"""The unit layer's socket guard (tests/unit/conftest.py) fires: a unit test cannot open a connection."""

import socket

import pytest
from pytest_socket import SocketBlockedError


def test_a_loopback_connect_in_a_unit_test_is_refused_by_the_guard() -> None:
    # Given a unit test (the guard is on for every test under tests/unit)
    # When it connects to a port on loopback
    # Then the guard refuses it before anything is sent (at the address lookup), naming itself
    with (
        pytest.warns(UserWarning, match="A test tried to use socket"),
        pytest.raises(SocketBlockedError, match="A test tried to use socket"),
    ):
        socket.create_connection(("127.0.0.1", 9), timeout=0.5)
