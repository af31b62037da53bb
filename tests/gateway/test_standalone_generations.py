"""A client's standalone streams across replicas: each fresh ``GET`` is a stream of its
own, whichever replica it reaches, so a resume of one never reaches the state of another
that a replica named alike (each replica numbers the generations it opens)."""

from __future__ import annotations

import json
import secrets
from typing import Any

import anyio
import httpx2
import pytest

from fsm.gateway.app import GatewayLimits
from fsm.gateway.ids import EventIdKeys
from fsm.gateway.redis_store import RedisStore
from support.gateway import running_gateway
from tests.gateway import scripted_upstream as scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

GET = {**scripted.HEAD, "accept": "text/event-stream"}


def note(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": n}}


class TwoStandalones(scripted.SessionApp):
    """The first fresh ``GET`` ends at once, with no event (the stream cannot be resumed:
    it ends, ``no-cursor``); the second sends ``s1`` and stays open until its reader
    goes; a resume from ``s1`` replays ``s2``. A ``ping`` gets its result; anything
    else ``202``."""

    def __init__(self) -> None:
        super().__init__()
        self.fresh = 0

    async def serve(
        self, scope: Any, headers: dict[str, str], msg: Any, receive: Any, send: Any
    ) -> None:
        if msg.get("method") == "ping":  # the gateway's question: these credentials?
            await scripted.json_reply(send, 200, json.dumps(scripted.result(msg["id"])).encode())
        elif scope["method"] != "GET":
            await scripted.json_reply(send, 202, b"")
        elif headers.get("last-event-id") == "s1":
            await scripted.sse_start(send)
            await scripted.sse_piece(send, scripted.sse("s2", note(2)))
            await scripted.until_left(receive, anyio.sleep_forever)
        elif "last-event-id" in headers:
            await scripted.json_reply(send, 404, b"{}")
        else:
            self.fresh += 1
            if self.fresh == 1:
                await scripted.sse_reply(send, [])
                return
            await scripted.sse_start(send)
            await scripted.sse_piece(send, scripted.sse("s1", note(1)))
            await scripted.until_left(receive, anyio.sleep_forever)


async def test_a_resume_of_a_fresh_get_through_another_replica_resumes_it(redis: Any) -> None:
    """A's first standalone stream ends on replica 1; A's next fresh ``GET`` reaches
    replica 2, which reads ``s1``; A's connection breaks and its resume from that event
    reaches replica 1. The resume goes upstream from ``s1`` (A gets ``s2``), as it does
    directly, not the ending of the first stream replica 1 ended."""
    up = TwoStandalones()
    keys = EventIdKeys.generate()
    prefix = f"generations-{secrets.token_hex(4)}:"
    stores = [RedisStore.from_url(redis.url, prefix=prefix) for _ in range(2)]
    limits = GatewayLimits(standalone_hold_s=0)
    async with (
        scripted.gateway_for(up, store=stores[0], id_keys=keys, limits=limits) as r1,
        running_gateway(r1.gateway.upstream, store=stores[1], id_keys=keys, limits=limits) as r2,
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        with anyio.fail_after(scripted.GUARD):
            init = await http.post(r1.url, json=scripted.INIT, headers=scripted.HEAD)
            head = {**GET, "mcp-session-id": init.headers["mcp-session-id"]}
            first = await http.get(r1.url, headers=head)  # ends: nothing to resume from
            async with http.stream("GET", r2.url, headers=head) as r:
                pieces = r.aiter_raw()
                seen = b""
                while b"\n\n" not in seen:
                    seen += await pieces.__anext__()
            last = scripted.parse(seen)[0][0]
            assert last is not None
            async with http.stream("GET", r1.url, headers={**head, "last-event-id": last}) as r:
                status, got = r.status_code, b""
                async for piece in r.aiter_raw():
                    got += piece
                    if b"\n\n" in got:
                        break
    assert first.status_code == 200  # it ended: nothing of it to resume from
    assert (status, [json.loads(d) for _, d in scripted.parse(got) if d]) == (200, [note(2)]), got
