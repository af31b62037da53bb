"""The gateway's upstream connection pools: how many, their limits, and which session
uses which. One pool for every session made each request scan every session's
connections; the pools are what keep that scan short."""

from __future__ import annotations

import itertools

import anyio
import pytest

from fsm.gateway.app import Gateway, GatewayLimits, _pool_limits


@pytest.mark.parametrize(
    ("cap", "pools", "shares"),
    [
        (None, 3, [None, None, None]),
        (10, 4, [3, 3, 2, 2]),
        (8, 4, [2, 2, 2, 2]),
        (2, 64, [1, 1]),  # at most one pool per connection
        (1, 1, [1]),
    ],
)
def test_a_cap_is_shared_out_and_adds_up(cap: int | None, pools: int, shares: list[int]) -> None:
    got = _pool_limits(GatewayLimits(upstream_connections=cap, upstream_pools=pools))
    assert [limits.max_connections for limits in got] == shares
    assert [limits.max_keepalive_connections for limits in got] == shares
    assert {limits.keepalive_expiry for limits in got} == {GatewayLimits().upstream_idle_s}
    if cap is not None:
        assert sum(s for s in shares if s is not None) == cap


@pytest.mark.parametrize(
    ("limits", "named"),
    [
        (GatewayLimits(upstream_pools=0), "upstream_pools"),
        (GatewayLimits(upstream_connections=0), "upstream_connections"),
    ],
)
def test_no_pool_and_no_connection_are_refused(limits: GatewayLimits, named: str) -> None:
    """A gateway that could never reach its upstream is refused at construction."""
    with pytest.raises(ValueError, match=named):
        Gateway("http://127.0.0.1:1/mcp", limits=limits)


def test_sessions_are_dealt_the_pools_in_turn() -> None:
    async def main() -> list[int]:
        gateway = Gateway("http://127.0.0.1:1/mcp", limits=GatewayLimits(upstream_pools=3))
        async with gateway.running():
            pools = [id(p) for p in gateway._pools]
            assert len(set(pools)) == 3
            return [pools.index(id(gateway._new_session(None).engine.http)) for _ in range(7)]

    dealt = anyio.run(main, backend="asyncio")
    assert dealt == list(itertools.islice(itertools.cycle([0, 1, 2]), 7))
