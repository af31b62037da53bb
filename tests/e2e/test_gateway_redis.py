"""Two gateway replicas sharing a real redis-server (fsm.gateway.redis_store), or a real
three-master Redis Cluster, the real mcp server behind them, the unmodified mcp client in
front, faults by explicit command: the resume on the other replica, Redis restarted
mid-run, Redis down. Nothing is presented twice and every call ends once."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest
from gateway_support import gateway_rig, two_replica_resume

from fsm.gateway.redis_store import DEFAULT_TIMEOUT_S, RedisStore
from support.redis_fixtures import cluster_fixture, redis_fixture  # noqa: F401
from support.redis_server import RedisServer, redis_server
from support.scenarios import BackgroundCall, plain_client

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture(params=["redis", "cluster"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[RedisStore]:
    """A store on the module's Redis, or on its Redis Cluster (three masters)."""
    url = request.getfixturevalue("redis" if request.param == "redis" else "cluster").url
    shared = RedisStore.from_url(url, prefix=f"e2e{uuid.uuid4().hex[:8]}:")
    yield shared
    await shared.aclose()


async def test_resume_on_the_other_replica_through_redis(store: RedisStore) -> None:
    """Replica A presented the request (its claim and cursor in Redis) and died; the
    client's stale resume lands on B, which resumes upstream from A's cursor: one
    presentation, the tool's result."""
    r, _ = await two_replica_resume(store)
    assert list(r.presentation_counts.values()) == [1]
    assert r.outcome.kind == "result" and r.outcome.text.startswith("Deleted 3 files")
    first, second = r.resumes
    assert first.cursor == second.cursor  # stale, as the mcp client sends it
    assert not any(i.endswith(".ev4") for i in second.delivered)  # rewritten from Redis


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    with redis_server() as running:
        yield running


@pytest.mark.parametrize(
    ("fault", "timeout_s", "reason"),
    [
        # Redis restarts (no persistence: every claim is gone) while the client is away;
        # its resume lands on B and the server replays the request A presented. B cannot
        # know whether it was presented: it is not shown again.
        ("restart", DEFAULT_TIMEOUT_S, "store-state-lost"),
        # Redis is down when the request reaches B: it cannot claim it, so it does not
        # present it (fails closed).
        ("stop", 0.5, "store-unavailable"),
    ],
)
async def test_a_redis_fault_while_the_client_is_away_fails_the_call_closed(
    own_redis: RedisServer, fault: str, timeout_s: float, reason: str
) -> None:
    """Redis restarted or down between the client's two connections: nothing is
    presented twice, and the call ends with one error whose ``data.reason`` says why."""
    store = RedisStore.from_url(own_redis.url, timeout_s=timeout_s)
    try:

        async def inflict() -> None:
            await anyio.to_thread.run_sync(getattr(own_redis, fault))

        r, _ = await two_replica_resume(store, before_second=inflict, completes=False)
    finally:
        await store.aclose()
    assert list(r.presentation_counts.values()) == [1]
    assert (r.outcome.code, r.outcome.text.split(":")[0]) == (-32000, reason)
    assert r.outcome.reason == reason


async def test_redis_down_when_a_request_arrives_it_is_not_presented(
    own_redis: RedisServer,
) -> None:
    """One replica; Redis stops before the server asks: the gateway cannot claim the
    request, so it blanks it (its id kept) and ends the call with one error,
    ``data.reason`` ``store-unavailable``. The user is never asked."""
    store = RedisStore.from_url(own_redis.url, timeout_s=0.5)
    call = BackgroundCall()
    try:
        async with (
            gateway_rig(store=store) as rig,
            plain_client(rig.env()) as client,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(call.run, client, "delete_files", {"gated": True})
            pending = await rig.controller.wait_pending(state="gated")
            await anyio.to_thread.run_sync(own_redis.stop)
            rig.controller.release(pending)
            await call.wait(20)  # the call ends by the gateway's decision
    finally:
        await store.aclose()
    assert (call.outcome.error_type, call.outcome.code) == ("MCPError", -32000)
    assert call.outcome.reason == "store-unavailable"
    assert rig.user.presentations == []
