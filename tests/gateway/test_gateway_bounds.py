"""Every peer of the gateway is bounded, and one session's trouble stays in that session.

A real replica (uvicorn on 127.0.0.1) in front of a scripted upstream that sends what no
SDK server sends on command: a huge or never-ending event, a flood of server requests,
bytes that are not UTF-8, answers ``404`` to session ids it never issued. Clients send
what a hostile client sends. Each test fails without the defence it names (the
gateway buffered a whole event, answered a flood with as many POSTs at once, made a
guard per made-up session id, died on invalid UTF-8, waited forever for a body, and
refused every request of a session past 64 streams).
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from fsm.gateway.app import GatewayLimits  # noqa: E402
from fsm.gateway.store import MemoryStore  # noqa: E402
from fsm.guard import GuardConfig  # noqa: E402
from fsm.harness.gateway import RunningGateway, running_gateway  # noqa: E402
from fsm.harness.serving import serving  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

SID = "bounded-session"
HEAD = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
Send = Callable[[dict[str, Any]], Awaitable[None]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def sse(event_id: str, data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    return f"id: {event_id}\ndata: {text}\n\n".encode()


def elicit(rid: int) -> dict[str, Any]:
    schema = {"type": "object", "properties": {}}
    params = {"message": f"Delete {rid}?", "requestedSchema": schema}
    return {"jsonrpc": "2.0", "id": rid, "method": "elicitation/create", "params": params}


def result(rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [], "isError": False}}


Stream = Callable[[Send, dict[str, Any]], Awaitable[None]]
"""Writes the body of a tools/call's event stream (the call's JSON-RPC message given)."""


@dataclass
class Upstream:
    """A streamable-HTTP endpoint: ``initialize`` begins one session per call (ids
    ``bounded-session``, then ``bounded-session-2``, ...); a tools/call streams what
    ``call`` writes; any other request with an id gets an empty result; a POST without a
    method (an answer or a refusal) waits for ``posts_open`` when given, and counts how
    many are served at once; a session id it never issued gets ``404``."""

    call: Stream | None = None
    posts_open: anyio.Event | None = None
    sessions: list[str] = field(default_factory=list)
    answers: int = 0
    in_flight: int = 0
    most_in_flight: int = 0
    unknown: int = 0

    async def __call__(self, scope: Any, receive: Any, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (m := await receive())["type"] != "lifespan.shutdown":
                await send({"type": m["type"] + ".complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        msg = json.loads(body) if body else {}
        sid = headers.get("mcp-session-id")
        if msg.get("method") == "initialize":
            sid = SID if not self.sessions else f"{SID}-{len(self.sessions) + 1}"
            self.sessions.append(sid)
            await _json(send, 200, result(msg["id"]), [(b"mcp-session-id", sid.encode())])
        elif sid not in self.sessions:
            self.unknown += 1
            error = {"code": -32600, "message": "Session not found"}
            await _json(send, 404, {"jsonrpc": "2.0", "id": None, "error": error})
        elif msg.get("method") == "tools/call" and self.call is not None:
            await send(_start(200, b"text/event-stream"))
            await self.call(send, msg)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        elif "method" in msg:
            await _json(send, 200, {"jsonrpc": "2.0", "id": msg["id"], "result": {}})
        else:  # an answer or a refusal
            self.answers += 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            try:
                if self.posts_open is not None:
                    await self.posts_open.wait()
            finally:
                self.in_flight -= 1
            await send(_start(202, None))
            await send({"type": "http.response.body", "body": b""})


def _start(status: int, ctype: bytes | None, extra: list[Any] | None = None) -> dict[str, Any]:
    headers = [(b"content-type", ctype)] if ctype else []
    return {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}


async def _json(send: Send, status: int, payload: Any, extra: list[Any] | None = None) -> None:
    body = json.dumps(payload).encode()
    length = [(b"content-length", str(len(body)).encode())]
    await send(_start(status, b"application/json", length + (extra or [])))
    await send({"type": "http.response.body", "body": body})


async def _piece(send: Send, data: bytes) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": True})


@contextlib.asynccontextmanager
async def gateway_for(upstream: Upstream, **kwargs: Any) -> AsyncIterator[RunningGateway]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    kwargs.setdefault("config", GuardConfig(backoff_initial_s=0.01, backoff_max_s=0.02))
    try:
        async with (
            serving(upstream, sock, log_level="critical"),
            running_gateway(f"http://127.0.0.1:{port}/mcp", **kwargs) as gw,
        ):
            yield gw
    finally:
        sock.close()


async def initialize(http: Any, url: str) -> str:
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    r = await http.post(url, json=body, headers=HEAD)
    assert r.status_code == 200
    return str(r.headers["mcp-session-id"])


def call_body(rid: int = 7) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "x"}}


async def call(http: Any, url: str, sid: str, rid: int = 7) -> list[dict[str, Any]]:
    """A tools/call's event stream read to its end: the JSON messages in it."""
    h = {**HEAD, "mcp-session-id": sid}
    async with http.stream("POST", url, json=call_body(rid), headers=h) as r:
        raw = b"".join([c async for c in r.aiter_raw()])
    out = []
    for block in raw.decode("utf-8", "replace").split("\n\n"):
        data = "\n".join(line[6:] for line in block.split("\n") if line.startswith("data: "))
        with contextlib.suppress(ValueError):
            msg = json.loads(data)
            if isinstance(msg, dict):
                out.append(msg)
    return out


async def ping(http: Any, url: str, sid: str) -> int:
    h = {**HEAD, "mcp-session-id": sid}
    r = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=h)
    return int(r.status_code)


def rss() -> int:
    """This process's resident memory in bytes (Linux)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


MIB = 1024 * 1024


@pytest.mark.parametrize("ends", [True, False], ids=["one-event", "never-ends"])
async def test_an_event_over_max_event_bytes_ends_its_stream_only(ends: bool) -> None:
    """A 64 MiB event (or one that never ends) with ``max_event_bytes`` 1 MiB: the call
    gets one error, ``event-too-large``, and the gateway holds no copy of it (resident
    memory grows by far less than the event); meanwhile another session is served."""
    sent = anyio.Event()

    async def huge(send: Send, msg: dict[str, Any]) -> None:
        await _piece(send, b'id: e1\ndata: "')
        chunk = b"x" * (256 * 1024)
        for _ in range(256):  # 64 MiB, in pieces
            await _piece(send, chunk)
        if ends:
            await _piece(send, b'"\n\n')
        sent.set()
        await anyio.sleep_forever()

    up = Upstream(call=huge)
    limits = GatewayLimits(max_event_bytes=MIB)
    async with gateway_for(up, limits=limits) as gw, httpx2.AsyncClient(timeout=60) as http:
        a = await initialize(http, gw.url)
        b = await initialize(http, gw.url)
        before = rss()
        served = 0
        async with anyio.create_task_group() as tg:
            got: list[dict[str, Any]] = []

            async def run() -> None:
                got.extend(await call(http, gw.url, a))

            tg.start_soon(run)
            while not got:  # another session goes on while the big event flows
                assert await ping(http, gw.url, b) == 200
                served += 1
                await anyio.sleep(0.01)
        grown = rss() - before
    assert served >= 1
    [error] = [m for m in got if "error" in m]
    assert error["id"] == 7 and error["error"]["data"]["reason"] == "event-too-large"
    assert grown < 32 * MIB, f"resident memory grew by {grown / MIB:.1f} MiB"


async def test_a_flood_of_server_requests_is_refused_with_bounded_posts() -> None:
    """100 elicitations on one stream with room for 2 (``max_live_requests``): the 98
    refusals are sent at most ``upstream_requests_per_session`` (3) at once, at most
    ``max_pending_refusals`` (8) are ever queued (the rest not sent: the server's own
    deadline ends them), and the call still completes."""
    opened = anyio.Event()

    async def flood(send: Send, msg: dict[str, Any]) -> None:
        for rid in range(1, 101):
            await _piece(send, sse(f"e{rid}", elicit(rid)))
        await opened.wait()
        await _piece(send, sse("e101", result(msg["id"])))

    up = Upstream(call=flood, posts_open=anyio.Event())
    config = GuardConfig(max_live_requests=2, backoff_initial_s=0.01, backoff_max_s=0.02)
    limits = GatewayLimits(upstream_requests_per_session=3, max_pending_refusals=8)
    async with gateway_for(up, config=config, limits=limits) as gw, httpx2.AsyncClient() as http:
        sid = await initialize(http, gw.url)
        async with anyio.create_task_group() as tg:
            got: list[dict[str, Any]] = []

            async def run() -> None:
                got.extend(await call(http, gw.url, sid))

            tg.start_soon(run)
            with anyio.fail_after(30):
                while up.in_flight < 3:  # the POSTs held open pile up to the bound
                    await anyio.sleep(0.01)
            assert up.posts_open is not None
            up.posts_open.set()
            with anyio.fail_after(30):
                while up.answers < 8:
                    await anyio.sleep(0.01)
            opened.set()
        guard = gw.gateway.session_guard(sid)
    assert up.most_in_flight == 3
    assert up.answers == 8  # the queued refusals, no more
    assert guard is not None
    assert [m["id"] for m in got if "result" in m and m.get("id") == 7] == [7]
    presented = [m for m in got if m.get("method") == "elicitation/create"]
    assert len(presented) == 2


async def test_made_up_session_ids_get_the_upstreams_404_and_cost_nothing() -> None:
    """1,000 requests with session ids the upstream never issued: each gets the
    upstream's ``404``; the gateway holds no session for any of them and writes nothing
    to its store (a guard exists only for a session the upstream accepted)."""
    up = Upstream()
    store = MemoryStore()
    limits = httpx2.Limits(max_connections=50)
    async with (
        gateway_for(up, store=store) as gw,
        httpx2.AsyncClient(limits=limits, timeout=60) as http,
    ):
        statuses: list[int] = []

        async def made_up(n: int) -> None:
            h = {**HEAD, "mcp-session-id": f"made-up-{n}"}
            body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            statuses.append((await http.post(gw.url, json=body, headers=h)).status_code)

        async with anyio.create_task_group() as tg:  # 50 at once
            for n in range(1000):
                tg.start_soon(made_up, n)
        assert statuses == [404] * 1000
        assert gw.gateway.sessions == 0 and len(store) == 0
        sid = await initialize(http, gw.url)  # a real session is held, and recorded
        assert await ping(http, gw.url, sid) == 200
        assert gw.gateway.sessions == 1 and len(store) == 1
    assert up.unknown == 1000


async def test_invalid_utf8_from_the_upstream_does_not_end_the_stream() -> None:
    """An event whose bytes are not UTF-8: it reaches the client as it came, never as a
    request, and the call goes on to its result."""

    async def garbled(send: Send, msg: dict[str, Any]) -> None:
        await _piece(send, b'id: e1\ndata: {"jsonrpc": "2.0", "id": 3, "\xff\xfe": 1}\n\n')
        await _piece(send, sse("e2", result(msg["id"])))

    up = Upstream(call=garbled)
    async with gateway_for(up) as gw, httpx2.AsyncClient() as http:
        sid = await initialize(http, gw.url)
        got = await call(http, gw.url, sid)
    assert [m for m in got if "result" in m] == [result(7)]
    assert not [m for m in got if "error" in m]


async def test_a_body_that_never_comes_gets_408_and_frees_the_session() -> None:
    """A client declares a body and sends none: ``408`` after ``body_timeout_s``, and the
    session is not left busy (its next request is served)."""
    up = Upstream()
    limits = GatewayLimits(body_timeout_s=0.3)
    async with gateway_for(up, limits=limits) as gw, httpx2.AsyncClient() as http:
        sid = await initialize(http, gw.url)
        host, port = gw.url.split("//")[1].split("/")[0].split(":")
        with anyio.fail_after(30):
            async with await anyio.connect_tcp(host, int(port)) as conn:
                head = (
                    f"POST /mcp HTTP/1.1\r\nhost: {host}:{port}\r\n"
                    f"mcp-session-id: {sid}\r\ncontent-type: application/json\r\n"
                    "content-length: 100\r\n\r\n"
                )
                await conn.send(head.encode())
                reply = b""
                while b"\r\n\r\n" not in reply:
                    reply += await conn.receive()
        assert reply.startswith(b"HTTP/1.1 408")
        assert await ping(http, gw.url, sid) == 200


async def test_unread_streams_make_room_and_a_full_session_refuses_only_the_stream() -> None:
    """With room for 4 live streams: 6 calls whose clients left mid-stream (and never
    resumed) do not fill the session: a 7th call completes. With 4 calls genuinely open
    (clients reading), a 5th new stream gets ``503``, the session is not harmed, and
    once one call ends a new one is served."""
    release = anyio.Event()

    async def held(send: Send, msg: dict[str, Any]) -> None:
        await _piece(send, sse(f"e{msg['id']}.1", {"jsonrpc": "2.0", "method": "x/p"}))
        if msg["id"] < 100:
            await release.wait()
        await _piece(send, sse(f"e{msg['id']}.2", result(msg["id"])))

    up = Upstream(call=held)
    config = GuardConfig(max_streams=4, backoff_initial_s=0.01, backoff_max_s=0.02)
    async with gateway_for(up, config=config) as gw, httpx2.AsyncClient() as http:
        sid = await initialize(http, gw.url)
        h = {**HEAD, "mcp-session-id": sid}
        for rid in range(1, 7):  # the client reads the first event, then leaves
            async with http.stream("POST", gw.url, json=call_body(rid), headers=h) as r:
                async for _ in r.aiter_raw():
                    break
        assert [m["id"] for m in await call(http, gw.url, sid, 100) if "result" in m] == [100]
        async with anyio.create_task_group() as tg:
            opened = 0

            async def reader(rid: int) -> None:
                nonlocal opened
                async with http.stream("POST", gw.url, json=call_body(rid), headers=h) as r:
                    pieces = r.aiter_raw()
                    await pieces.__anext__()
                    opened += 1
                    async for _ in pieces:
                        pass

            for rid in range(11, 15):
                tg.start_soon(reader, rid)
            with anyio.fail_after(30):
                while opened < 4:
                    await anyio.sleep(0.01)
            r = await http.post(gw.url, json=call_body(20), headers=h)
            assert r.status_code == 503
            assert r.json()["error"]["data"]["reason"] == "too-many-streams"
            assert await ping(http, gw.url, sid) == 200  # the session goes on
            release.set()
        assert [m["id"] for m in await call(http, gw.url, sid, 101) if "result" in m] == [101]


async def test_a_long_session_keeps_bounded_state_per_stream() -> None:
    """200 calls in one session: what the gateway keeps per stream (id tables, kept
    results, the credentials a stream acted with) stays bounded by the streams still
    live and the newest ``max_finals`` results, not by the calls made."""

    async def quick(send: Send, msg: dict[str, Any]) -> None:
        await _piece(send, sse(f"e{msg['id']}", result(msg["id"])))

    up = Upstream(call=quick)
    limits = GatewayLimits(max_finals=4)
    async with gateway_for(up, limits=limits) as gw, httpx2.AsyncClient() as http:
        sid = await initialize(http, gw.url)
        for rid in range(1, 201):
            assert [m["id"] for m in await call(http, gw.url, sid, rid) if "result" in m] == [rid]
        held = gw.gateway._sessions[sid]
        # the newest kept results, and the last call's stream if its end is not filed yet
        assert len(held.finals) <= 4 and len(held.ids) <= 5
        assert len(held.engine._creds_by_stream) <= 5
