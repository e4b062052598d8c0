"""Concurrent requests through the emulated gateway never see each other's caller (Powertools keeps the
current event on a class attribute shared by every resolver in the process)."""

import json
import sys
import threading
from typing import Any

from sentinel_gateway.gateway import LocalGateway
from support.world import World


def authorizer(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    principal = event["headers"]["authorization"].removeprefix("Bearer ")
    return {
        "isAuthorized": True,
        "context": {"principal_id": principal, "kind": "human", "sponsor": "", "roles": "{}"},
    }


def test_concurrent_callers_through_two_gateways_each_see_only_themselves() -> None:
    # Given two gateways over one world, and eight callers sharing them, with thread switches forced often
    world = World()
    gateways = [LocalGateway(lambda: world.services, authorizer) for _ in range(2)]
    swaps: list[tuple[str, str]] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)

    def caller(n: int) -> None:
        me = f"p{n}"
        for _ in range(40):
            status, _headers, body = gateways[n % 2].invoke(
                "GET", "/v1/whoami", {"authorization": f"Bearer {me}"}
            )
            seen = json.loads(body).get("principal_id") if status == 200 else f"status {status}"
            if seen != me:
                swaps.append((me, str(seen)))

    try:
        # When each asks who it is, again and again, all at once
        threads = [threading.Thread(target=caller, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    # Then every answer named the caller that asked
    assert swaps == []
