"""What a client is told when the gateway's store is down: the operation that failed,
never the store's address (redis-py's cause, ``Error 111 connecting to HOST:PORT``) nor
its URL's password. Operators read the cause in the log (``WARNING``), which holds no
password and no session id either.

Every client-facing path of a store error is covered: the ``503`` a peer with no
credentials gets (the gateway answers it before the upstream checks anything), the
ending error of a resume whose session the store cannot vouch for, and the ending error
of a call whose prompt could not be claimed.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from fsm.gateway.redis_store import RedisStore  # noqa: E402
from support.log_records import Records, captured  # noqa: E402
from support.redis_server import RedisServer, redis_server  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

PASSWORD = "pw-0d1e2a7c-outage"
STRANGER = "made-up-by-a-stranger"


@pytest.fixture
def guarded() -> Iterator[RedisServer]:
    """A Redis of the test's own (to stop) that requires :data:`PASSWORD`."""
    with redis_server(password=PASSWORD) as running:
        assert PASSWORD in running.url
        yield running


@contextlib.asynccontextmanager
async def store_on(server: RedisServer) -> AsyncIterator[RedisStore]:
    """A gateway store on ``server`` (its URL holds the password), closed after."""
    store = RedisStore.from_url(server.url, timeout_s=0.5)
    try:
        yield store
    finally:
        await store.aclose()


def assert_tells_nothing_of_the_store(told: str, server: RedisServer) -> None:
    """``told`` (what a client received) names neither the store's address nor its
    password."""
    assert f":{server.port}" not in told and "127.0.0.1" not in told, told
    assert PASSWORD not in told, told


def assert_operators_read_the_cause(logged: Records, server: RedisServer) -> None:
    """The log at ``INFO`` or above holds the store's failure with its cause (where it
    failed), and never the URL's password or the stranger's session id."""
    lines = logged.at_info_or_above()
    assert any(f":{server.port}" in line for line in lines), lines
    assert not [line for line in lines if PASSWORD in line or STRANGER in line], lines


async def test_a_strangers_503_names_the_operation_not_the_store(guarded: RedisServer) -> None:
    """Redis is down. A peer with no credentials sends a ``ping`` naming a made-up
    session id: the gateway cannot ask the store whether that session ended and answers
    ``503`` itself (fail closed), before the upstream checks anything. The answer names
    the failed operation; the store's port and password are not in it."""
    up = scripted.Upstream()
    async with (
        store_on(guarded) as store,
        scripted.gateway_for(up, store=store) as gw,
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        await anyio.to_thread.run_sync(guarded.stop)
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {**scripted.HEAD, "mcp-session-id": STRANGER}
        with captured("fsm", logging.DEBUG) as logged:
            r = await http.post(gw.url, json=ping, headers=headers)
    assert r.status_code == 503, r.status_code
    assert r.json()["error"]["message"] == "redis store: session_ended failed"
    assert_tells_nothing_of_the_store(r.text, guarded)
    assert_operators_read_the_cause(logged, guarded)
    assert not [m for _, h, m in up.requests if h.get("mcp-session-id") == STRANGER]


async def test_a_resume_the_store_cannot_vouch_for_ends_without_its_address(
    guarded: RedisServer,
) -> None:
    """A client's call runs on replica A; Redis goes down; its resume (with the event id
    A issued) lands on replica B, which does not hold the session and cannot ask the
    store whether it ended: the call ends with one ``store-unavailable`` error, which
    names the operation and neither the store's port nor its password."""
    release = anyio.Event()
    up = scripted.Upstream(call=[scripted.sse("e1", scripted.PROGRESS)], hold=release)
    async with (
        store_on(guarded) as store,
        scripted.two_replicas_for(up, store=store) as (a, b),
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        await scripted.initialize(http, a.url)
        head = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        try:
            async with http.stream("POST", a.url, json=scripted.CALL, headers=head) as call:
                [(event_id, _)] = scripted.parse(await call.aiter_raw().__anext__())
                assert event_id is not None
                await anyio.to_thread.run_sync(guarded.stop)
                resume = {**head, "accept": "text/event-stream", "last-event-id": event_id}
                with captured("fsm", logging.DEBUG) as logged, anyio.fail_after(scripted.GUARD):
                    r = await http.get(b.url, headers=resume)
        finally:
            release.set()
    assert r.status_code == 200, r.status_code
    [error] = [json.loads(d)["error"] for _, d in scripted.parse(r.content) if d]
    assert error["data"]["reason"] == "store-unavailable"
    assert error["message"] == "store-unavailable: redis store: session_ended failed"
    assert_tells_nothing_of_the_store(r.text, guarded)
    assert_operators_read_the_cause(logged, guarded)


async def test_a_calls_ending_error_names_the_operation_not_the_store(
    guarded: RedisServer,
) -> None:
    """A client's session began while Redis was up; Redis goes down; the server asks
    during the client's call. The gateway cannot claim the prompt, so it never presents
    it and ends the call with one ``store-unavailable`` error, which names the operation
    and neither the store's port nor its password."""
    up = scripted.Upstream(call=[scripted.sse("e1", scripted.elicit(1))])
    async with (
        store_on(guarded) as store,
        scripted.gateway_for(up, store=store) as gw,
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        await scripted.initialize(http, gw.url)
        await anyio.to_thread.run_sync(guarded.stop)
        head = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        with captured("fsm", logging.DEBUG) as logged, anyio.fail_after(scripted.GUARD):
            r = await http.post(gw.url, json=scripted.CALL, headers=head)
    assert r.status_code == 200, r.status_code
    messages = [json.loads(d) for _, d in scripted.parse(r.content) if d]
    assert not [m for m in messages if m.get("method") == "elicitation/create"], messages
    [error] = [m["error"] for m in messages if "error" in m]
    assert error["data"]["reason"] == "store-unavailable"
    assert error["message"].startswith("store-unavailable: redis store: "), error
    assert_tells_nothing_of_the_store(r.text, guarded)
    assert_operators_read_the_cause(logged, guarded)
