"""The official conformance suite, server mode, against the test bed's server
(:mod:`support.conformance_server`) three ways at once: directly, through one
``fsm gateway`` replica, and through two replicas sharing a loopback Redis behind a
balancer. The gateway must be transparent to the suite: the three results are identical
check by check (the status of every check of every scenario, in order), and the direct
run fails exactly the checks ``expected-failures.json`` lists.

The two replicas: each session's ``initialize`` goes to the replicas in turn, its later
requests to the replica its first such request was given (session affinity by
``Mcp-Session-Id``, the sessions alternating): a session is created on one replica and
served by either, both serve at once, and what they share goes through Redis.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from fsm.demo.proxy import ConnectionFault, Exchange, FaultProxy
from fsm.gateway.redis_store import RedisStore
from support.conformance_server import conformance_server
from support.conformance_suite import (
    Results,
    differences,
    failures,
    installed,
    run_server_suite,
)
from support.gateway import gateway_tier, running_gateway
from support.redis_server import RedisServer, redis_server

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.anyio,
    pytest.mark.timeout(150),
    pytest.mark.skipif(not installed(), reason="make conformance installs the suite"),
]

EXPECTED = Path(__file__).with_name("expected-failures.json")


def balance(proxy: FaultProxy, urls: list[str]) -> None:
    """Make ``proxy`` a balancer over ``urls``: ``initialize`` requests in turn, every
    other request to the replica its session was first seen on (sessions alternate).
    A rule that never matches sees each request before it is relayed."""
    initializes, sessions = itertools.cycle(urls), itertools.cycle(urls)
    affinity: dict[str, str] = {}

    def route(ex: Exchange) -> bool:
        session = ex.headers.get("mcp-session-id")
        if session is None:
            proxy.retarget(next(initializes))
        else:
            proxy.retarget(affinity.setdefault(session, next(sessions)))
        return False

    proxy.fail_next(ConnectionFault(), route, times=1)


def expected_failures() -> dict[str, dict[str, str]]:
    """``expected-failures.json``: per scenario, the failing check ids with a reason each."""
    data = json.loads(EXPECTED.read_text())
    server: dict[str, dict[str, str]] = data["server"]
    assert all(reason.strip() for checks in server.values() for reason in checks.values())
    return server


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server() as running:
        yield running


async def test_the_gateway_is_transparent_to_the_conformance_suite(redis: RedisServer) -> None:
    """``--suite all`` directly, through one replica and through two on Redis, at once:
    identical results, and the direct run's failures are the expected ones."""
    store = RedisStore.from_url(redis.url, prefix=f"conformance{uuid.uuid4().hex[:8]}:")
    runs: dict[str, Results] = {}
    try:
        async with (
            conformance_server() as url,
            running_gateway(url) as one,
            gateway_tier(url, {"store": store}, replicas=2) as two,
            FaultProxy(two.url) as balancer,
        ):
            balance(balancer, [g.url for g in two.gateways])

            async def run(name: str, target: str) -> None:
                runs[name] = await run_server_suite(target, timeout_s=120)

            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "direct", url)
                tg.start_soon(run, "one replica", one.url)
                tg.start_soon(run, "two replicas", balancer.url)
    finally:
        await store.aclose()

    direct = runs["direct"]
    assert len(direct) == 32  # every server scenario of 0.1.16 ran
    expected = {s: tuple(sorted(c)) for s, c in expected_failures().items()}
    got = {s: tuple(sorted(set(ids))) for s, ids in failures(direct).items()}
    assert got == expected, "the direct run's failures are not expected-failures.json's"
    for name in ("one replica", "two replicas"):
        assert differences(direct, runs[name]) == [], f"{name} differs from direct"
