"""A stream the upstream opens for credentials it has not accepted for the session is
relayed, never tracked in the session's guard: a stranger who knows A's session id, A's
next request id or A's stream names cannot take A's places under the stream cap, have its
refused result kept as A's, or move A's cursor. Each test runs the same requests direct
and through the gateway and expects the same.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest

pytest.importorskip("uvicorn")

from fsm.gateway.app import GatewayLimits
from fsm.gateway.ids import EventIdKeys
from fsm.gateway.redis_store import RedisStore
from support.gateway import RunningGateway, running_gateway
from tests.gateway import scripted_upstream as scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

STEP = 15.0


@contextlib.asynccontextmanager
async def gateway_and_client(
    up: Any,
) -> AsyncIterator[tuple[RunningGateway, httpx2.AsyncClient]]:
    """``up`` behind a gateway replica that opens no standalone stream ahead
    (``standalone_hold_s=0``: every ``GET`` the upstream sees is one a client sent, as
    direct), and a client: a test sends the same requests to ``gw.gateway.upstream``
    (direct) and to ``gw.url``."""
    limits = GatewayLimits(standalone_hold_s=0)
    async with (
        scripted.gateway_for(up, limits=limits) as gw,
        httpx2.AsyncClient(timeout=STEP) as http,
    ):
        yield gw, http


# --------------------------------------------------------------------------------------
# 1. A stranger's standalone GETs, which the upstream lets through (its check is on
#    POSTs: the upstream of docs/gateway.md's row "a server that checks POSTs but lets a
#    GET through"), as many as the session's stream cap (GuardConfig.max_streams, 64):
#    A's next call is served, as it is direct.


def get_through_upstream() -> scripted.Upstream:
    return scripted.Upstream(
        accepts=scripted.only_a,
        unchecked=frozenset({"GET"}),
        standalone=[scripted.sse("s1", scripted.PROGRESS)],
        call=[scripted.sse("e1", scripted.result(7))],
    )


async def strangers_gets_then_a_call(url: str, a_head: dict[str, str], n: int) -> Any:
    """B opens ``n`` standalone GETs in A's session and keeps reading them; meanwhile A
    calls a tool: B's statuses, A's status and A's messages (or body)."""
    b_get = {**scripted.B_HEAD, "accept": "text/event-stream"}
    limits = httpx2.Limits(max_connections=n + 8)
    async with httpx2.AsyncClient(timeout=STEP, limits=limits) as http:
        opened = anyio.Event()
        done = anyio.Event()
        statuses: list[int] = []

        async def b_reads() -> None:
            async with http.stream("GET", url, headers=b_get) as r:
                statuses.append(r.status_code)
                pieces = r.aiter_raw()  # kept: a dropped iterator closes the stream
                await pieces.__anext__()  # B reads its stream: it is not idle
                if len(statuses) == n:
                    opened.set()
                await done.wait()

        with anyio.fail_after(STEP):
            async with anyio.create_task_group() as tg:
                for _ in range(n):
                    tg.start_soon(b_reads)
                await opened.wait()
                a = await http.post(url, json=scripted.CALL, headers=a_head)
                done.set()
    got = (
        [json.loads(d) for _, d in scripted.parse(a.content) if d]
        if a.status_code == 200
        else a.text
    )
    return set(statuses), a.status_code, got


async def test_strangers_get_streams_do_not_lock_the_owner_out_of_its_calls() -> None:
    up = get_through_upstream()
    async with gateway_and_client(up) as (gw, http):
        n = gw.gateway.config.max_streams  # 64 by default
        upstream_url = gw.gateway.upstream
        a_head = await scripted.a_session(http, upstream_url)
        direct = await strangers_gets_then_a_call(upstream_url, a_head, n)
        a_head = await scripted.a_session(http, gw.url)
        through = await strangers_gets_then_a_call(gw.url, a_head, n)
    assert direct == ({200}, 200, [scripted.result(7)])
    assert through == direct


# --------------------------------------------------------------------------------------
# 2. An upstream that refuses another principal in its protocol layer, on the request's
#    own event stream (an mcp SDK server answers a request POST with an event stream, so
#    a refusal from its request handling comes as a JSON-RPC error event there). B sends
#    a tools/call with the id A will use next (clients number their requests 1, 2, ...):
#    B gets its refusal; A's own call 8 gets its result, and A's resume of it (the
#    client lost the final event) gets A's result again, never B's error.


def _refusal(rid: Any) -> dict[str, Any]:
    error = {"code": -32001, "message": "The session belongs to another principal"}
    return {"jsonrpc": "2.0", "id": rid, "error": error}


class RpcStreamUpstream(scripted.SessionApp):
    """Binds the session to tok-a (its ``initialize``'s token) and refuses anyone else in
    its protocol layer: a request POST gets an event stream either way (``ping``
    included), with the result for tok-a (a progress event, then the result) and one
    JSON-RPC error event for anyone else. A resume GET of tok-a replays the result; of
    anyone else gets ``403``. Anything else: ``202``."""

    async def serve(
        self, scope: Any, headers: dict[str, str], msg: Any, receive: Any, send: Any
    ) -> None:
        owner = headers.get("authorization") == "Bearer tok-a"
        if scope["method"] == "GET" and "last-event-id" in headers:
            if not owner:
                await scripted.json_reply(send, 403, b"{}")
                return
            await scripted.sse_reply(send, [scripted.sse("a2", scripted.result(8))])
            return
        if not ("method" in msg and "id" in msg):
            await scripted.json_reply(send, 202, b"")
            return
        rid = msg["id"]
        if not owner:
            await scripted.sse_reply(send, [scripted.sse("b1", _refusal(rid))])
        elif msg["method"] == "ping":
            await scripted.sse_reply(
                send, [scripted.sse(None, {"jsonrpc": "2.0", "id": rid, "result": {}})]
            )
        else:
            await scripted.sse_reply(
                send,
                [scripted.sse("a1", scripted.PROGRESS), scripted.sse("a2", scripted.result(rid))],
            )


async def owner_call_after_strangers(url: str, http: Any) -> tuple[Any, Any, Any]:
    """B's tools/call 8 in A's session, then A's own call 8, then A's resume of it from
    its first event: what each got."""
    call8 = {**scripted.CALL, "id": 8}
    a_head = await scripted.a_session(http, url)
    b = await http.post(url, json=call8, headers=scripted.B_HEAD)
    a = await http.post(url, json=call8, headers=a_head)
    a_events = scripted.parse(a.content)
    get = {**a_head, "accept": "text/event-stream", "last-event-id": a_events[0][0] or ""}
    resumed = await http.get(url, headers=get)
    return (
        [json.loads(d) for _, d in scripted.parse(b.content) if d],
        [json.loads(d) for _, d in a_events if d],
        [json.loads(d) for _, d in scripted.parse(resumed.content) if d][-1:],
    )


async def test_a_strangers_refused_call_is_not_kept_as_the_owners_result() -> None:
    up = RpcStreamUpstream()
    async with gateway_and_client(up) as (gw, http):
        direct = await owner_call_after_strangers(gw.gateway.upstream, http)
        through = await owner_call_after_strangers(gw.url, http)
    assert direct == ([_refusal(8)], [scripted.PROGRESS, scripted.result(8)], [scripted.result(8)])
    assert through == direct


# --------------------------------------------------------------------------------------
# 3. Two replicas on one Redis, no session affinity, the upstream of row 6 (lets a GET
#    through the check it applies to POSTs). Standalone streams are named by a counter
#    of each replica ("get", "get/2", ...). A's standalone GET is "get" on replica 1; a
#    stranger's GET on replica 2 reads events of its own. A's resume of its own "get"
#    landing on replica 2 goes upstream from A's own event id, as it does direct.


def note(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": n}}


async def test_a_strangers_get_on_another_replica_does_not_move_the_owners_cursor(
    redis: Any,
) -> None:
    gate = anyio.Event()
    up = scripted.Upstream(
        accepts=scripted.only_a,
        unchecked=frozenset({"GET"}),
        standalone=[
            scripted.sse("s1", note(1)),
            gate,
            scripted.sse("s2", note(2)),
            scripted.sse("s3", note(3)),
        ],
        replay=lambda cursor: (
            [scripted.sse("s2", note(2)), scripted.sse("s3", note(3))] if cursor == "s1" else []
        ),
        call=[scripted.sse("c1", scripted.result(7))],
    )
    keys = EventIdKeys.generate()
    prefix = f"tracking-{secrets.token_hex(4)}:"
    stores = [RedisStore.from_url(redis.url, prefix=prefix) for _ in range(2)]
    get = {**scripted.HEAD, "accept": "text/event-stream"}
    async with (
        scripted.gateway_for(up, store=stores[0], id_keys=keys) as r1,
        running_gateway(r1.gateway.upstream, store=stores[1], id_keys=keys) as r2,
        httpx2.AsyncClient(timeout=STEP) as http,
    ):
        with anyio.fail_after(STEP):
            a_head = await scripted.a_session(http, r1.url)
            # A's own GET on replica 1: it reads s1, then its connection breaks
            async with http.stream("GET", r1.url, headers={**get, **a_head}) as r:
                pieces = r.aiter_raw()
                seen = b""
                while b"\n\n" not in seen:
                    seen += await pieces.__anext__()
            a_last = scripted.parse(seen)[0][0]
            # A calls through replica 2 (so replica 2 holds A's session)
            call = await http.post(r2.url, json=scripted.CALL, headers=a_head)
            assert [json.loads(d) for _, d in scripted.parse(call.content)] == [scripted.result(7)]
            # B's GET on replica 2, read to s3, then B leaves
            async with http.stream("GET", r2.url, headers={**get, **scripted.B_HEAD}) as r:
                pieces = r.aiter_raw()
                seen = await pieces.__anext__()
                gate.set()
                while b'"n": 3' not in seen:
                    seen += await pieces.__anext__()
            # A resumes its GET from s1 through replica 2
            resume = {**get, **a_head, "last-event-id": a_last or ""}
            async with http.stream("GET", r2.url, headers=resume) as r:
                status = r.status_code
                await up.wait_until(
                    lambda u: any(
                        m == "GET"
                        and h.get("authorization") == "Bearer tok-a"
                        and "last-event-id" in h
                        for m, h, _ in u.requests
                    )
                )
    sent = [
        h["last-event-id"]
        for m, h, _ in up.requests
        if m == "GET" and h.get("authorization") == "Bearer tok-a" and "last-event-id" in h
    ]
    assert (status, sent[:1]) == (200, ["s1"])
