"""A call still upstream when its session is closed: a real gateway replica (uvicorn, in
this process) on loopback in front of an upstream that holds the call's whole response,
its head included, until the test releases it.

The session is closed as its client's DELETE is answered (or, before the upstream
accepted any request of it, as the replica halts); the call's response arrives after.
The closed session is never held again, and the call ends as every call open at a
DELETE ends: one ``session-closed`` error on its stream, at once, nothing resumed
upstream.

Every wait is for something observed (a request the upstream saw, a response read, the
gateway's table); timeouts only guard against hangs."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

PING = {"jsonrpc": "2.0", "id": 5, "method": "ping"}


async def call_across(
    gw: Any, http: Any, up: scripted.HeldCall, end: Callable[[], Awaitable[None]]
) -> list[dict[str, Any]]:
    """A tools/call of session :data:`SID` through ``gw``: once it is upstream, ``end()``
    runs, then the upstream answers it. The messages of the call's ``200`` response, once
    the call's one outcome came (at once: bounded) and the gateway is done with it."""
    got: list[tuple[int, bytes]] = []

    async def call() -> None:
        h = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        async with http.stream("POST", gw.url, json=scripted.CALL, headers=h) as r:
            got.append((r.status_code, b"".join([piece async for piece in r.aiter_raw()])))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        with anyio.fail_after(scripted.GUARD):
            await up.arrived.wait()
        await end()
        up.release.set()
        with anyio.fail_after(scripted.GUARD):
            while not got or gw.gateway.in_flight:
                await anyio.sleep(0.01)
    [(status, raw)] = got
    assert status == 200
    return [json.loads(data) for _, data in scripted.parse(raw) if data]


ENDINGS = {
    "deleted": ("DELETE", None, 202, "session-closed"),
    "expired": ("POST", PING, 404, "session-expired"),
}
"""How the session ends while the call is upstream: its client's request (a ``DELETE``;
a ``ping`` the upstream answers ``404``, the session gone), the status the client gets
for it, and the reason the call then ends with."""


@pytest.mark.parametrize("then", ["result", "held", "cut"])
@pytest.mark.parametrize("ended", sorted(ENDINGS))
async def test_a_call_upstream_when_its_session_ends_ends_with_it(ended: str, then: str) -> None:
    """A tools/call is upstream, its response not begun, when its session ends: the
    client deletes it, or the upstream answers another request of the client ``404``.
    The session leaves the gateway's table, closed. Then the upstream answers the call:
    its result; or a stream it then holds with no event; or a progress notification and a
    cut. The call's client gets ``200`` and one message, at once whatever the upstream
    does next: the guard's error for the call, ``session-closed`` for a session its
    client ended, ``session-expired`` for one the upstream ended (what every call open at
    the DELETE, or at the ``404``, gets); no resume goes upstream; the closed session is
    not held again once the gateway is done with the call."""
    method, body, status, reason = ENDINGS[ended]
    up = scripted.HeldCall(then, ping_expires=True)
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        await scripted.initialize(http, gw.url)
        gateway = gw.gateway
        session = gateway._sessions[scripted.SID]

        async def end() -> None:
            h = {**scripted.HEAD, "mcp-session-id": scripted.SID}
            assert (await http.request(method, gw.url, json=body, headers=h)).status_code == status
            with anyio.fail_after(scripted.GUARD):  # the session ends as that answer is sent
                while scripted.SID in gateway._sessions or not session.closed:
                    await anyio.sleep(0.01)

        [ending] = await call_across(gw, http, up, end)
        assert ending["id"] == scripted.CALL["id"]
        assert ending["error"]["data"]["reason"] == reason
        assert "GET" not in up.methods  # nothing resumed
        assert scripted.SID not in gateway._sessions and gateway.sessions == 0


async def test_a_session_closed_before_the_upstream_accepted_it_is_never_held() -> None:
    """A tools/call names a session this replica does not hold (another began it): the
    session waits here for the upstream to accept a request of it. The replica halts
    while the call is upstream, closing that session; then the upstream accepts the
    call. The closed session is not held: the replica's table stays empty, and the
    call ends as closed."""
    up = scripted.HeldCall("result")
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        gateway = gw.gateway

        async def halt() -> None:
            gateway.halt()

        [ending] = await call_across(gw, http, up, halt)
        assert ending["error"]["data"]["reason"] == "session-closed"
        assert scripted.SID not in gateway._sessions and gateway.sessions == 0
