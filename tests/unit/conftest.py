"""The unit layer: the domain core and pure client code, in process, without I/O.

Every test here runs with sockets disabled (pytest-socket): opening one, even on loopback, raises
`pytest_socket.SocketBlockedError`, so a unit test cannot quietly come to depend on a server. A test that
needs a socket belongs to a higher layer (a stand-in HTTP server: integration; a real process: e2e)."""

import pytest

from support.world import World


@pytest.fixture(autouse=True)
def _no_sockets(socket_disabled: None) -> None:
    """Requesting pytest-socket's `socket_disabled` makes its setup hook block sockets before any other
    fixture of the test is set up; its teardown restores them for the next test on this worker."""


@pytest.fixture
def world() -> World:
    return World()
