"""What one peer can make a gateway replica hold after it left, or for longer than its
bounds say, on loopback: a client that leaves before the response's head releases its
request upstream; a refusal whose body never ends is judged by what came within
``RESULT_READ_S``; a session in use keeps its record in the store.

Every wait is on an event (a request reaching the upstream, the upstream seeing its
reader go, a response arriving); the timeouts around them only stop a hang, or are the
bound under test."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import anyio
import httpx2
import pytest

from fsm.adapters._transport import http as http_core
from fsm.gateway.app import GATEWAY_GUARD, GatewayLimits
from fsm.gateway.edge import EdgeLimits
from fsm.gateway.store import MemoryStore
from support.changes import Changes
from tests.gateway import raw_http
from tests.gateway import scripted_upstream as scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


async def initialize(url: str) -> None:
    """:func:`scripted_upstream.initialize` through ``url``, on a client of its own."""
    async with httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        await scripted.initialize(http, url)


# --------------------------------------------------------------------------- a client that
# leaves before the upstream's response head


class SlowHead(scripted.SessionApp):
    """``initialize`` gets :data:`SID`; a ``tools/call`` gets no response head until the
    gateway leaves it (a server in JSON-response mode whose tool runs long, or waits on a
    person): ``arrived`` counts those that reached it, ``left`` those whose reader went."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = 0
        self.left = 0
        self.changes = Changes()

    async def serve(
        self, scope: Any, headers: dict[str, str], msg: Any, receive: Any, send: Any
    ) -> None:
        if msg.get("method") != "tools/call":
            await scripted.json_reply(send, 202, b"")
            return
        self.arrived += 1
        self.changes.note()
        while (await receive())["type"] != "http.disconnect":
            pass
        self.left += 1
        self.changes.note()


async def calls_that_leave(up: SlowHead, port: int, bodies: Iterable[bytes]) -> None:
    """Send each of ``bodies`` (a ``tools/call``) in the held session, one connection at a
    time, each connection closed once the upstream has the call (before its response
    head: :class:`SlowHead` never sends one)."""
    for i, body in enumerate(bodies):
        async with await anyio.connect_tcp("127.0.0.1", port) as client:
            await client.send(raw_http.request(port, scripted.IN_SESSION, body=body))
            with anyio.fail_after(scripted.GUARD):
                await up.changes.until(lambda n=i + 1: up.arrived == n)


def tool_calls(ids: range) -> list[bytes]:
    """The bodies of a ``tools/call`` of each id in ``ids``."""
    return [json.dumps(scripted.tool_call(rid)).encode() for rid in ids]


async def test_a_client_that_leaves_before_the_response_head_releases_its_upstream_request() -> (
    None
):
    """Clients send a call and close their connections while the upstream has not begun
    its response. Directly, the upstream sees each reader go at once. Through the
    gateway it must too: the gateway's request upstream (its connection, its task, the
    client's flight) must not outlive the client, or clients that come and go hold
    upstream connections and flights past every edge bound (``max_connections`` counts
    only connections still open)."""
    up = SlowHead()
    async with scripted.gateway_for(up) as gw:
        port = gw.port
        await initialize(gw.url)
        n = 5
        await calls_that_leave(up, port, tool_calls(range(100, 100 + n)))
        with anyio.move_on_after(5):
            await up.changes.until(lambda: up.left == n)
        left, in_flight = up.left, gw.gateway.in_flight
    assert left == n, f"the upstream saw {left} of {n} readers go; {in_flight} flights left"
    assert in_flight == 0


async def test_clients_that_left_before_the_response_head_do_not_lock_others_out() -> None:
    """With the edge bound at 4 connections, one client sends 5 calls, one connection at
    a time, closing each at once. None of its connections is open; another client's ``initialize``
    must still be served, not refused ``503`` because the departed clients' requests
    still count against the edge (uvicorn counts the app's tasks with its connections)."""
    up = SlowHead()
    async with scripted.gateway_for(up, edge=EdgeLimits(max_connections=4)) as gw:
        port = gw.port
        await initialize(gw.url)
        await calls_that_leave(up, port, tool_calls(range(200, 205)))
        async with httpx2.AsyncClient(timeout=scripted.GUARD) as other:
            resp = await other.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
    assert resp.status_code == 200, (resp.status_code, resp.text)


CALLS_WRITTEN_OTHERWISE = {
    # the same JSON, its key escaped
    "escaped-key": b'{"jsonrpc":"2.0","id":%d,"\\u006dethod":"tools/call","params":{}}',
    # a byte that is not UTF-8, which Python's json refuses and Node or Go read as U+FFFD
    "not-utf-8": b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"s":"caf\xe9"}}',
}


@pytest.mark.parametrize("written", list(CALLS_WRITTEN_OTHERWISE))
async def test_a_call_written_otherwise_is_still_cancelled_when_its_client_leaves(
    written: str,
) -> None:
    """With the edge bound at 4 connections, one client sends 5 calls that are not
    written plainly (a key escaped, ``"\\u006dethod"``; a byte that is not UTF-8, which
    an upstream on Node or Go serves), one connection at a time, closing each at once.
    Only a body read as answers or notifications is handled whole: the upstream sees
    each reader go, as it does directly, and another client's ``initialize`` is served,
    not refused ``503``."""
    up = SlowHead()
    up.lenient = True
    async with scripted.gateway_for(up, edge=EdgeLimits(max_connections=4)) as gw:
        port = gw.port
        async with httpx2.AsyncClient(timeout=scripted.GUARD) as http:
            assert (
                await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
            ).status_code == 200
        n = 5
        calls = [CALLS_WRITTEN_OTHERWISE[written] % (300 + i) for i in range(n)]
        await calls_that_leave(up, port, calls)
        with anyio.move_on_after(5):
            await up.changes.until(lambda: up.left == n)
        left = up.left
        async with httpx2.AsyncClient(timeout=scripted.GUARD) as other:
            resp = await other.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
    assert left == n, f"the upstream saw {left} of {n} readers go"
    assert resp.status_code == 200, (resp.status_code, resp.text)


class SlowAnswerStore(MemoryStore):
    """A memory store whose ``save_answer`` (the gateway's write-ahead of an answer)
    waits for ``release`` (a Redis round trip, held open by the test); ``saving`` is set
    once one began, ``cancelled`` if one was cancelled while it waited."""

    def __init__(self) -> None:
        super().__init__()
        self.saving = anyio.Event()
        self.release = anyio.Event()
        self.cancelled = anyio.Event()

    async def save_answer(self, session: str, request_id: Any, answer: Any) -> None:
        self.saving.set()
        try:
            await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            raise
        await super().save_answer(session, request_id, answer)


async def test_an_answer_naming_a_method_is_not_lost_when_its_client_leaves_before_the_202() -> (
    None
):
    """The server asks ``q1``; the client answers ``{"method": "sms"}`` (a form's
    field) and its connection goes while the gateway writes the answer ahead to the
    store. The upstream must get the answer (the gateway's submission), as it gets a
    body that arrived whole directly, and as the gateway submits an answer whose content
    does not happen to hold the text ``"method"``."""
    store = SlowAnswerStore()
    up = scripted.Upstream(call=[scripted.sse("e1", scripted.elicit("q1"))], hold=anyio.Event())
    answer = {"jsonrpc": "2.0", "id": "q1", "result": {"action": "accept"}}
    answer["result"]["content"] = {"method": "sms"}
    async with (
        scripted.gateway_for(up, store=store) as gw,
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
        headers = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        async with http.stream("POST", gw.url, json=scripted.CALL, headers=headers) as r:
            chunks = r.aiter_raw()
            with anyio.fail_after(scripted.GUARD):
                first = await chunks.__anext__()  # the prompt
            assert b"elicitation/create" in first
            port = gw.port
            async with await anyio.connect_tcp("127.0.0.1", port) as client:
                await client.send(
                    raw_http.request(port, scripted.IN_SESSION, body=json.dumps(answer).encode())
                )
                with anyio.fail_after(scripted.GUARD):
                    await store.saving.wait()
            # the client's connection is closed here, before its 202; the write goes on
            # (a Redis round trip ends), unless the gateway cancels it first
            with anyio.move_on_after(5):
                await store.cancelled.wait()
            store.release.set()
            with anyio.move_on_after(5):
                await up.wait_until(lambda u: bool(u.responses("result")))
            submitted = up.responses("result")
            up.hold.set()
    assert [m["id"] for m in submitted] == ["q1"], submitted


# --------------------------------------------------------------------------- an upstream
# that refuses a resume with a body that never ends


class DribbledRefusal(scripted.SessionApp):
    """A call's stream sends ``e1`` and is cut; every resume ``GET`` is refused ``409``
    (the TypeScript SDK's answer while it holds the old connection) with a body that
    comes a byte every ``drip_s`` seconds and never ends."""

    def __init__(self, drip_s: float) -> None:
        super().__init__()
        self.drip_s = drip_s
        self.resumes = 0

    async def serve(
        self, scope: Any, headers: dict[str, str], msg: Any, receive: Any, send: Any
    ) -> None:
        if msg.get("method") == "tools/call":
            await scripted.sse_start(send)
            await scripted.sse_piece(
                send, scripted.sse("e1", {"jsonrpc": "2.0", "method": "x/progress"})
            )
            raise RuntimeError("cut")  # uvicorn drops the connection: an abrupt end
        elif scope["method"] == "GET" and "last-event-id" in headers:
            self.resumes += 1
            head = [(b"content-type", b"text/plain")]
            await send({"type": "http.response.start", "status": 409, "headers": head})
            await scripted.sse_piece(send, b"Conflict: Stream already has an active connection")

            async def drip() -> None:
                while True:  # bounded by the gateway leaving
                    await anyio.sleep(self.drip_s)
                    await scripted.sse_piece(send, b".")

            await scripted.until_left(receive, drip)
        else:
            await scripted.json_reply(send, 202, b"")


async def test_a_refusal_whose_body_never_ends_does_not_outlast_the_patience(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The upstream refuses the gateway's resume with ``409`` and writes its body a byte
    at a time, each well within the gateway's read timeout (2 s here), and never ends it.
    The body is judged by what came within ``RESULT_READ_S`` (0.3 s here), and the
    gateway's patience (0.5 s) runs: the call ends with one error, not waiting for a body
    the upstream never finishes (64 KiB at its pace: hours)."""
    monkeypatch.setattr(http_core, "RESULT_READ_S", 0.3)
    up = DribbledRefusal(drip_s=0.2)
    config = replace(
        GATEWAY_GUARD,
        backoff_initial_s=0.001,
        backoff_max_s=0.002,
        resume_jitter=lambda: 0.0,
        resume_patience_s=0.5,
    )
    timeout = httpx2.Timeout(30.0, read=2.0)
    async with scripted.gateway_for(up, config=config, timeout=timeout) as gw:
        await initialize(gw.url)
        h = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        raw = b""
        async with httpx2.AsyncClient(timeout=scripted.GUARD) as client:
            with anyio.move_on_after(10):
                async with client.stream("POST", gw.url, json=scripted.CALL, headers=h) as resp:
                    async for chunk in resp.aiter_raw():
                        raw += chunk
        resumes = up.resumes
    ending = [json.loads(d) for _, d in scripted.parse(raw) if d and '"error"' in d]
    assert resumes >= 1
    # one ending error (patience spent, or the resume cap if the refusals came fast)
    reasons = [e["error"]["data"]["reason"] for e in ending]
    assert reasons in (["resume-patience-spent"], ["resume-cap"]), raw


# --------------------------------------------------------------------------- a busy
# session whose record in the store expires


async def test_a_session_busy_with_calls_keeps_its_store_record() -> None:
    """A session makes a call every 40 s of the store's clock (its TTL 100 s), none
    bringing a prompt; at 160 s a call brings one. The session is in use all along, so
    the gateway extends its record (each third of the lease, at most every
    ``session_keepalive_s``: every time here): the prompt is presented, not blanked by a
    claim that finds no record of the session."""
    now = [0.0]
    store = scripted.Kept(ttl_s=100.0, clock=lambda: now[0])
    asks = {"on": False}

    def script(msg: dict[str, Any], _headers: dict[str, str]) -> list[bytes]:
        rid = msg["id"]
        if asks["on"]:
            return [
                scripted.sse(f"p{rid}", scripted.elicit("ask-1")),
                scripted.sse(f"r{rid}", scripted.result(rid)),
            ]
        return [
            scripted.sse(f"p{rid}", scripted.PROGRESS),
            scripted.sse(f"r{rid}", scripted.result(rid)),
        ]

    up = scripted.Upstream(script=script)
    limits = GatewayLimits(lease_s=0.3, session_keepalive_s=0.0)
    async with scripted.gateway_for(up, store=store, limits=limits) as gw:
        await initialize(gw.url)
        h = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        async with httpx2.AsyncClient(timeout=scripted.GUARD) as client:
            for rid, at in ((1, 40.0), (2, 80.0), (3, 120.0), (4, 160.0)):
                now[0] = at
                asks["on"] = rid == 4
                call = scripted.tool_call(rid)
                kept = store.kept
                resp = await client.post(gw.url, json=call, headers=h)
                assert resp.status_code == 200
                messages = [json.loads(d) for _, d in scripted.parse(resp.content) if d]
                if rid < 4:  # the call's end is a use: the record is extended after it
                    with anyio.fail_after(scripted.GUARD):
                        await store.kept_once_more(kept)
        held = gw.gateway.sessions
    assert held == 1
    asked = [m for m in messages if isinstance(m, dict) and m.get("method") == "elicitation/create"]
    assert asked, messages  # presented, not blanked by a claim that failed


async def test_an_idle_session_is_not_kept() -> None:
    """A session no request used since its record was last extended is not extended
    again: the store's TTL still ends the records of sessions nobody uses."""
    store = scripted.Kept()
    up = scripted.Upstream(call=[scripted.sse("e1", scripted.result(7))])
    limits = GatewayLimits(lease_s=3600.0, session_keepalive_s=0.0)  # no pass of its own
    async with scripted.gateway_for(up, store=store, limits=limits) as gw:
        await initialize(gw.url)
        gateway = gw.gateway
        assert await gateway._until(lambda: gateway.in_flight == 0, scripted.GUARD)  # served whole
        now = time.monotonic()
        await gateway._keep_alive_once(now)  # its initialize was a use
        await gateway._keep_alive_once(now + 1)
        await gateway._keep_alive_once(now + 2)
    assert store.kept == 1


class StalledKeep(MemoryStore):
    """A memory store whose extension of a session record never comes back (a store
    round trip that stalls); ``renewed`` is set at a lease renewal."""

    def __init__(self) -> None:
        super().__init__()
        self.renewed = anyio.Event()

    async def keep_session(self, session: str) -> None:
        await anyio.sleep_forever()

    async def renew(self, session: str, request_id: Any, owner: str, lease_s: float) -> bool:
        self.renewed.set()
        return await super().renew(session, request_id, owner, lease_s)


async def test_a_lease_is_renewed_before_any_session_record_is_extended() -> None:
    """A prompt waits for its answer in a session in use: a pass of the keep-alive renews
    the prompt's lease before it extends any session's record, so records to extend (a
    store round trip each, 10,000 sessions in use at most) never hold a lease back."""
    store = StalledKeep()
    up = scripted.Upstream(call=[scripted.sse("e1", scripted.elicit("q1"))], hold=anyio.Event())
    limits = GatewayLimits(lease_s=3600.0, session_keepalive_s=0.0)  # no pass of its own
    headers = {**scripted.HEAD, "mcp-session-id": scripted.SID}
    async with scripted.gateway_for(up, store=store, limits=limits) as gw:
        await initialize(gw.url)
        async with (
            httpx2.AsyncClient(timeout=scripted.GUARD) as http,
            http.stream("POST", gw.url, json=scripted.CALL, headers=headers) as r,
        ):
            chunks = r.aiter_raw()
            with anyio.fail_after(scripted.GUARD):
                assert b"elicitation/create" in await chunks.__anext__()  # claimed
            async with anyio.create_task_group() as tg:
                tg.start_soon(gw.gateway._keep_alive_once, time.monotonic())
                with anyio.fail_after(scripted.GUARD):
                    await store.renewed.wait()
                tg.cancel_scope.cancel()
            up.hold.set()
