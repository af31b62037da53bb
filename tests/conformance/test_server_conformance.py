"""The official conformance suite, server mode, against the test bed's server
(:mod:`support.conformance_server`) three ways at once: directly, through one
``fsm gateway`` replica, and through two replicas sharing a loopback Redis behind a
balancer. The gateway must be transparent to the suite: the three results are identical
check by check (the status of every check of every scenario, the verdicts in order and the
``INFO`` log entries counted: :func:`support.conformance_suite.differences`), and the direct
run fails exactly the checks ``expected-failures.json`` lists.

The two replicas (:func:`alternate`): a balancer without session affinity sends each
request to the replica the one before it did not go to, so a session is created on one
replica, its calls, streams, answers and resumes land on either, and what the replicas
must agree on goes through Redis (the gateway's defaults for a shared store: no
standalone ``GET`` opened ahead).
"""

from __future__ import annotations

import itertools
import json
import uuid
from pathlib import Path

import anyio
import pytest

from fsm.gateway.redis_store import RedisStore
from fsm.wire.proxy import ConnectionFault, Exchange, FaultProxy, HttpFault
from support.conformance_server import conformance_server
from support.conformance_suite import (
    Results,
    differences,
    installed,
    off_baseline,
    run_server_suite,
)
from support.gateway import gateway_tier, running_gateway
from support.redis_fixtures import redis_fixture  # noqa: F401
from support.redis_server import RedisServer

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.anyio,
    pytest.mark.timeout(150),
    pytest.mark.skipif(not installed(), reason="make conformance installs the suite"),
]

EXPECTED = Path(__file__).with_name("expected-failures.json")


def alternate(proxy: FaultProxy, urls: list[str]) -> list[int]:
    """Make ``proxy`` a balancer without session affinity: each request goes to the next
    of ``urls`` in turn (a fault rule that never matches sees each request before it is
    relayed). Returns the count of requests each one was sent, kept up to date."""
    sent = [0] * len(urls)
    turn = itertools.cycle(range(len(urls)))

    def route(ex: Exchange) -> bool:
        replica = next(turn)
        sent[replica] += 1
        proxy.retarget(urls[replica])
        return False

    proxy.fail_next(ConnectionFault(), route, times=1)
    return sent


def expected_failures() -> dict[str, dict[str, str]]:
    """``expected-failures.json``: per scenario, the failing check ids with a reason each."""
    data = json.loads(EXPECTED.read_text())
    server: dict[str, dict[str, str]] = data["server"]
    assert all(reason.strip() for checks in server.values() for reason in checks.values())
    return server


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
            sent = alternate(balancer, [g.url for g in two.gateways])

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
    assert off_baseline(direct, expected_failures()) == []
    assert min(sent) >= 50  # both replicas served the sessions' requests, turn about
    for name in ("one replica", "two replicas"):
        assert differences(direct, runs[name]) == [], f"{name} differs from direct"


async def test_a_relay_that_changes_an_answer_is_a_difference() -> None:
    """The comparison sees what a middle box changes: a relay that answers one
    ``prompts/get`` with a JSON-RPC error of its own makes that scenario differ from the
    direct run, and nothing else."""
    scenarios = ("prompts-get-simple", "ping")
    runs: dict[str, Results] = {}
    async with conformance_server() as url, FaultProxy(url) as relay:
        error = HttpFault.jsonrpc_error(500, -32603, "the relay's own error", 1)
        relay.fail_next(error, lambda ex: ex.rpc_method == "prompts/get")

        async def run(name: str, target: str) -> None:
            runs[name] = await run_server_suite(target, scenarios, timeout_s=60)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "direct", url)
            tg.start_soon(run, "relay", relay.url)
    [line] = differences(runs["direct"], runs["relay"])
    assert line.startswith("prompts-get-simple: ")
    assert runs["relay"]["prompts-get-simple"] == (("prompts-get-simple", "FAILURE"),)
