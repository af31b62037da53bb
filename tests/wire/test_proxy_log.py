"""What the fault proxy logs of an event stream it relays: every event the body holds,
the last one included when its last line end is a bare CR and the body ends cleanly
(the end of the body completes it, as it does for an SSE reader)."""

from __future__ import annotations

from typing import Any

import pytest

httpx2 = pytest.importorskip("httpx2")
pytest.importorskip("uvicorn")

from fsm.wire.proxy import FaultProxy  # noqa: E402
from fsm.wire.serving import lifespan, on_loopback  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

BODY = b'id: e1\rdata: {"n": 1}\r\rid: e2\rdata: {"n": 2}\r\r'


async def bare_cr_stream(scope: Any, receive: Any, send: Any) -> None:
    """Every request: ``200``, an event stream whose lines end with a bare CR, its last
    byte the CR that ends its last event."""
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    head = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": head})
    await send({"type": "http.response.body", "body": BODY})


async def test_the_last_event_of_a_bare_cr_stream_is_logged() -> None:
    async with (
        on_loopback(bare_cr_stream) as url,
        FaultProxy(url) as proxy,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        got = await http.get(proxy.url, headers={"accept": "text/event-stream"})
        await proxy.wait_for(lambda e: e.kind == "end")  # logged after the body's end
        logged = [e.event_id for e in proxy.log if e.kind == "sse_event"]
    assert got.content == BODY
    assert logged == ["e1", "e2"]
