"""The gateway's bounds under load a client or the upstream makes on purpose: a real
gateway replica (uvicorn, in this process) on loopback in front of the scripted upstream
(:mod:`scripted_upstream`).

Each test proves one bound: header values that cannot be forwarded are refused at the
edge and harm no session; streams no client reads do not fill the session's stream cap,
and a full cap refuses only the new stream; an SSE event over ``max_event_bytes`` ends
its stream without being held whole; the gateway's own upstream requests and queued
refusals per session are bounded under an elicitation flood; made-up session ids leave
no guard and no store entry; invalid UTF-8 in an event reaches nobody as a request; a
body that never comes gets ``408`` and frees its session.

Every wait is for something observed (a byte read, a request the upstream saw); timeouts
only guard against hangs."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from fsm.gateway.app import GatewayLimits  # noqa: E402
from fsm.gateway.standalone import claimant  # noqa: E402
from fsm.gateway.store import MemoryStore  # noqa: E402
from fsm.sse.guard import GuardConfig  # noqa: E402
from tests.gateway import gateway_client as client  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

MiB = 1024 * 1024


# --------------------------------------------------------------------------- the scripts


def calls_by_id(scripts: dict[Any, Sequence[scripted.Piece]]) -> Any:
    """An upstream script: the pieces of each call by its request id (a result alone for
    any other id)."""

    def script(msg: dict[str, Any], headers: dict[str, str]) -> Sequence[scripted.Piece]:
        rid = msg["id"]
        return scripts.get(rid, [scripted.sse(f"r{rid}", scripted.result(rid))])

    return script


# --------------------------------------------------------------------------- 1. headers


ANSWER = {"jsonrpc": "2.0", "id": 1, "result": {"action": "accept", "content": {}}}


@pytest.mark.parametrize("kind", ["call", "answer"])
@pytest.mark.parametrize(
    "name, value",
    [
        ("authorization", "Bearer caf\u00e9".encode()),  # UTF-8: bytes >= 0x80
        ("authorization", b"Bearer \xff\xfe"),
        ("cookie", "who=\u00e9l\u00e8ve".encode()),
        ("cookie", b"who=\x80"),
    ],
)
async def test_a_header_byte_over_0x7f_gets_400_and_harms_no_session(
    name: str, value: bytes, kind: str
) -> None:
    """Session A's call has an elicitation showing. A request of A whose credential
    header holds a byte >= 0x80 (uvicorn's parsers pass such bytes on): a new call, or
    the answer to that elicitation, whose submission would carry the header upstream.
    It is answered 400 with a JSON-RPC error at the gateway's edge: nothing reaches the
    upstream, nothing is written to the store. The replica keeps serving: session B's
    call completes, and A's own valid answer is taken (202), reaches the upstream, and
    A's call ends with its result."""
    store = MemoryStore()
    answered = anyio.Event()  # set by the first answer POST the upstream receives
    first: list[scripted.Piece] = [
        scripted.sse("e1", scripted.elicit(1)),
        answered,
        scripted.sse("e2", scripted.result(7)),
    ]
    up = scripted.Upstream(script=calls_by_id({7: first}), issue_sessions=True, answered=answered)
    async with scripted.gateway_for(up, store=store) as gw, client.unlimited() as http:
        mine = await client.begin(http, gw.url, authorization="Bearer a")
        other = await client.begin(http, gw.url, authorization="Bearer b")
        h = {**scripted.HEAD, "mcp-session-id": mine, "authorization": "Bearer a"}
        shown = anyio.Event()
        got: list[client.Read] = []

        async def call_a() -> None:
            raw = bytearray()
            async with http.stream("POST", gw.url, json=scripted.tool_call(7), headers=h) as r:
                async for chunk in r.aiter_raw():
                    raw += chunk
                    shown.set()  # the elicitation reached the client
            got.append(client.Read(r.status_code, bytes(raw), len(raw), None))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call_a)
            with anyio.fail_after(client.HANG):
                await shown.wait()
            seen, stored = len(up.requests), len(store)
            body = scripted.tool_call(5) if kind == "call" else ANSWER
            refused = await http.post(gw.url, json=body, headers={**h, name: value})
            assert (len(up.requests), len(store)) == (seen, stored)  # nothing forwarded, stored
            theirs = await client.call(http, gw.url, other, 6, authorization="Bearer b")
            taken = await http.post(gw.url, json=ANSWER, headers=h)
    assert refused.status_code == 400
    assert refused.json()["id"] in (None, 5 if kind == "call" else None)
    assert refused.json()["error"]["code"] == -32600
    assert theirs.status == 200 and theirs.results(6) == 1
    assert taken.status_code == 202
    assert up.responses("result") == [ANSWER]
    assert got[0].status == 200 and got[0].results(7) == 1


async def asgi_request(
    gw: Any, headers: list[tuple[bytes, bytes]], body: bytes
) -> tuple[int, bytes]:
    """One request handed to the gateway's ASGI app directly (no HTTP parser before it,
    as another ASGI server might pass it): its status and body."""
    port = urlsplit(gw.url).port
    done = anyio.Event()
    first = True
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", f"127.0.0.1:{port}".encode()), *headers],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", port),
    }
    with anyio.fail_after(client.HANG):
        await gw.gateway(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.parametrize("name", ["authorization", "cookie", "x-trace"])
@pytest.mark.parametrize(
    "value", [b"a\x00b", b"a\x01b", b"a\rb", b"a\nb", b"a\x1bb", b"a\x7fb", b"a\x80b"]
)
async def test_a_header_with_a_control_character_gets_400_at_the_gateway(
    name: str, value: bytes
) -> None:
    """The gateway itself refuses a header value holding a control character (HTAB
    aside) or a byte >= 0x80, whichever ASGI server passed it on (uvicorn's parsers
    refuse most control characters first; this hands the request to the app directly):
    400 with a JSON-RPC error, nothing sent upstream or stored, the session unharmed."""
    store = MemoryStore()
    up = scripted.Upstream(script=calls_by_id({}), issue_sessions=True)
    async with scripted.gateway_for(up, store=store) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        seen, stored = len(up.requests), len(store)
        headers = [(k.encode(), v.encode()) for k, v in scripted.HEAD.items()]
        headers += [(b"mcp-session-id", sid.encode()), (name.encode(), value)]
        status, body = await asgi_request(gw, headers, json.dumps(scripted.tool_call(5)).encode())
        assert (len(up.requests), len(store)) == (seen, stored)
        again = await client.call(http, gw.url, sid, 7)
    assert status == 400 and json.loads(body)["error"]["code"] == -32600
    assert again.status == 200 and again.results(7) == 1


async def test_a_tab_in_a_header_value_is_forwarded() -> None:
    """HTAB is the one control character a header value may hold: forwarded as it came."""
    up = scripted.Upstream(script=calls_by_id({}), issue_sessions=True)
    async with scripted.gateway_for(up) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        headers = [(k.encode(), v.encode()) for k, v in scripted.HEAD.items()]
        headers += [(b"mcp-session-id", sid.encode()), (b"x-trace", b"a\tb")]
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        status, _ = await asgi_request(gw, headers, note.encode())
    assert status == 202
    [note_sent] = [h for m, h, body in up.requests if b"notifications/initialized" in body]
    assert note_sent["x-trace"] == "a\tb"


# --------------------------------------------------------------------------- 2. streams


def left_at_least(n: int) -> Any:
    """Whether the gateway left ``n`` of the upstream's streams before their end."""
    return lambda up: up.left >= n


@pytest.mark.parametrize("kind", ["post", "get"])
async def test_streams_no_client_reads_do_not_fill_the_stream_cap(kind: str) -> None:
    """A client opens 70 streams of one session (``post``: tools/call streams; ``get``:
    the standalone GET, reopened again and again), reads the first event of each and
    drops its connection for good. The guard's cap is 64 live streams; a stream with no
    client connection does not hold a place in it: every one of the 70 is opened, and a
    call after them completes with its result."""
    never = anyio.Event()  # the abandoned streams' upstream side waits for the gateway
    opened: dict[Any, Sequence[scripted.Piece]] = {
        100 + i: [scripted.sse(f"c{100 + i}", ""), never] for i in range(70)
    }
    up = scripted.Upstream(script=calls_by_id(opened), standalone=[scripted.sse("g1", "")])
    assert GuardConfig().max_streams == 64
    async with scripted.gateway_for(up) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        h = {**scripted.HEAD, "mcp-session-id": sid}
        for i in range(70):
            method, body = (
                ("POST", scripted.tool_call(100 + i)) if kind == "post" else ("GET", None)
            )
            with anyio.fail_after(client.HANG):
                async with http.stream(method, gw.url, json=body, headers=h) as r:
                    assert (i, r.status_code) == (i, 200)
                    async for _ in r.aiter_raw():
                        break  # the stream is open: its first event arrived
                # the connection is dropped with the stream unfinished
                await up.wait_until(left_at_least(i + 1))
        final = await client.call(http, gw.url, sid, 7)
    assert final.status == 200 and final.results(7) == 1 and final.errors() == []


A, A2, B = "Bearer a", "Bearer a2", "Bearer b"
"""A's token, the token A's client refreshes to, and a stranger's."""


async def _at_the_cap(up: scripted.Upstream, http: Any, gw: Any) -> tuple[str, Any]:
    """A's session (token :data:`A`) holding the guard's live-stream cap, none of its
    streams read (A's connections dropped, its calls resumable): its id and its guard."""
    sid = await client.begin(http, gw.url, authorization=A)
    h = {**scripted.HEAD, "mcp-session-id": sid, "authorization": A}
    for i in range(GuardConfig().max_streams):
        with anyio.fail_after(client.HANG):
            async with http.stream(
                "POST", gw.url, json=scripted.tool_call(100 + i), headers=h
            ) as r:
                assert (i, r.status_code) == (i, 200)
                async for _ in r.aiter_raw():
                    break
            await up.wait_until(left_at_least(i + 1))
    guard = gw.gateway._sessions[sid].engine.guard
    assert len(guard.live_streams()) == GuardConfig().max_streams
    return sid, guard


def _capped_upstream(tokens: set[str]) -> scripted.Upstream:
    """An upstream whose 64 calls stream until the gateway leaves them, accepting only
    ``tokens``."""
    never = anyio.Event()
    opened: dict[Any, Sequence[scripted.Piece]] = {
        100 + i: [scripted.sse(f"c{100 + i}", ""), never] for i in range(GuardConfig().max_streams)
    }
    return scripted.Upstream(
        script=calls_by_id(opened),
        standalone=[scripted.sse("g1", "")],
        accepts=lambda headers: headers.get("authorization") in tokens,
    )


def _reached(up: scripted.Upstream, before: int) -> list[tuple[str, str | None, str | None]]:
    """(HTTP method, JSON-RPC method, credentials) of each request since ``before``."""
    out = []
    for method, headers, body in up.requests[before:]:
        msg = json.loads(body) if body else {}
        out.append((method, msg.get("method"), headers.get("authorization")))
    return out


@pytest.mark.parametrize("method", ["POST", "GET"])
async def test_a_stranger_at_the_stream_cap_ends_no_stream_of_the_owner(method: str) -> None:
    """A's session holds the guard's 64 live streams, none read. A call or a fresh
    standalone GET with A's session id and credentials the upstream does not accept for
    it makes no room: the gateway asks the upstream with a ``ping`` carrying them, which
    it refuses; the request gets ``503`` and never reaches the upstream, and A's oldest
    stream stays live. A's own next call makes room as before."""
    up = _capped_upstream({A})
    async with scripted.gateway_for(up) as gw, client.unlimited() as http:
        sid, guard = await _at_the_cap(up, http, gw)
        before = len(up.requests)
        if method == "POST":
            stranger = await client.call(http, gw.url, sid, 999, authorization=B)
        else:
            h = {**scripted.HEAD, "mcp-session-id": sid, "authorization": B}
            stranger = await client.read(http, "GET", gw.url, h)
        reached = _reached(up, before)
        oldest = guard.stream_state("post:100")
        owner = await client.call(http, gw.url, sid, 7, authorization=A)
    assert stranger.status == 503 and reached == [("POST", "ping", B)]
    assert oldest not in (None, "dead", "done")
    assert owner.status == 200 and owner.results(7) == 1


@pytest.mark.parametrize("method", ["POST", "GET"])
async def test_the_owner_with_a_refreshed_token_makes_room_at_the_stream_cap(
    method: str,
) -> None:
    """A's session holds the guard's 64 live streams, none read, and A's client has
    refreshed its token (the upstream accepts the new one, which the gateway has not
    seen yet). Its next call or standalone GET is asked about with a ``ping`` carrying
    the new token, which the upstream accepts: the oldest stream no client reads is
    abandoned for it, and the request goes through instead of getting ``503``."""
    up = _capped_upstream({A, A2})
    async with scripted.gateway_for(up) as gw, client.unlimited() as http:
        sid, guard = await _at_the_cap(up, http, gw)
        before = len(up.requests)
        h = {**scripted.HEAD, "mcp-session-id": sid, "authorization": A2}
        if method == "POST":
            owner = await client.call(http, gw.url, sid, 7, authorization=A2)
        else:
            with anyio.fail_after(client.HANG):
                async with http.stream("GET", gw.url, headers=h) as r:
                    status = r.status_code
                    async for _ in r.aiter_raw():
                        break  # the standalone stream's first event arrived
        reached = _reached(up, before)
        live = guard.live_streams()
    wanted = ("POST", "tools/call", A2) if method == "POST" else ("GET", None, A2)
    assert reached == [("POST", "ping", A2), wanted]
    assert "post:100" not in live and "post:101" in live
    if method == "POST":
        assert owner.status == 200 and owner.results(7) == 1
    else:
        assert status == 200


async def test_a_stream_past_the_cap_gets_503_and_the_session_goes_on() -> None:
    """64 calls of one session stream at once, each read by its client: the cap is
    full. A 65th call gets 503 with a JSON-RPC error for its id, a fresh standalone GET
    gets 503, and neither reaches the upstream (no tool runs for a refused call);
    nothing else changes. Once one call ends, a new call completes, and so do the 64."""
    first, rest = anyio.Event(), anyio.Event()
    scripts: dict[Any, Sequence[scripted.Piece]] = {
        100: [scripted.sse("c100", ""), first, scripted.sse("r100", scripted.result(100))]
    }
    scripts.update(
        {
            rid: [scripted.sse(f"c{rid}", ""), rest, scripted.sse(f"r{rid}", scripted.result(rid))]
            for rid in range(101, 164)
        }
    )
    up = scripted.Upstream(script=calls_by_id(scripts), standalone=[scripted.sse("g1", "")])
    reads: dict[int, client.Read] = {}
    async with scripted.gateway_for(up) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        h = {**scripted.HEAD, "mcp-session-id": sid}
        opened = 0
        all_open = anyio.Event()
        ended = {rid: anyio.Event() for rid in scripts}

        async def stream(rid: int) -> None:
            nonlocal opened
            raw = bytearray()
            async with http.stream("POST", gw.url, json=scripted.tool_call(rid), headers=h) as r:
                async for chunk in r.aiter_raw():
                    if not raw:
                        opened += 1
                        if opened == len(scripts):
                            all_open.set()
                    raw += chunk
                reads[rid] = client.Read(r.status_code, bytes(raw), len(raw), None)
            ended[rid].set()

        async with anyio.create_task_group() as tg:
            for rid in scripts:
                tg.start_soon(stream, rid)
            with anyio.fail_after(client.HANG):
                await all_open.wait()
            past = await http.post(gw.url, json=scripted.tool_call(999), headers=h)
            get = await client.read(http, "GET", gw.url, h)
            first.set()
            with anyio.fail_after(client.HANG):
                await ended[100].wait()
            after = await client.call(http, gw.url, sid, 7)
            rest.set()
    assert past.status_code == 503
    assert past.json()["id"] == 999 and isinstance(past.json()["error"]["code"], int)
    assert get.status == 503
    sent = [json.loads(b) for m, _, b in up.requests if m == "POST" and b]
    assert 999 not in [msg.get("id") for msg in sent]  # refused before it was sent: no tool ran
    assert [m for m, _, _ in up.requests].count("GET") == 0
    assert after.status == 200 and after.results(7) == 1
    assert all(reads[rid].results(rid) == 1 for rid in scripts)


# --------------------------------------------------------------------------- 3. event size


@pytest.mark.parametrize("end", [True, False], ids=["huge", "endless"])
async def test_an_event_over_max_event_bytes_ends_its_stream_unheld(end: bool) -> None:
    """The upstream writes one 64 MiB SSE event (``huge``), or 64 MiB of one that never
    ends (``endless``: no blank line, the stream stays open), with ``max_event_bytes`` at
    1 MiB: the call ends with one JSON-RPC error for it, ``data.reason`` ==
    ``event-too-large``, none of the event reaches the client, the gateway stops
    reading it, and this process's resident memory (gateway, upstream and client alike)
    grows by well under the event's size (< 32 MiB, peak)."""
    flood = scripted.Flood(size=64 * MiB, end=end)
    tail: list[scripted.Piece] = (
        [scripted.sse("e2", scripted.result(7))] if end else [anyio.Event()]
    )
    up = scripted.Upstream(call=[scripted.sse("e1", ""), flood, *tail])
    limits = GatewayLimits(max_event_bytes=1 * MiB)
    async with scripted.gateway_for(up, limits=limits) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        before = scripted.rss()
        exact = scripted.reset_peak_rss()
        with anyio.fail_after(client.HANG):
            got = await client.call(http, gw.url, sid, 7)
        peak = max(scripted.peak_rss() if exact else 0, flood.rss_max, scripted.rss())
    assert got.status == 200 and got.broken is None
    [err] = got.errors()
    assert err["id"] == 7 and err["error"]["data"]["reason"] == "event-too-large"
    assert got.results(7) == 0
    assert got.received < 1 * MiB  # the event was not passed on
    assert flood.written < flood.size // 2  # the gateway stopped reading it
    assert peak - before < 32 * MiB


async def test_other_sessions_are_served_while_one_receives_an_oversized_event() -> None:
    """Session A's call receives a 64 MiB event; half a MiB of it is written, and the
    upstream waits there. Meanwhile session B makes 20 calls: all 20 complete. Then the
    rest of A's event comes, and A's call ends with ``event-too-large``."""
    go_on = anyio.Event()
    flood = scripted.Flood(size=64 * MiB, pause_at=MiB // 2, resume=go_on)
    up = scripted.Upstream(script=calls_by_id({}), issue_sessions=True)

    def script(msg: dict[str, Any], headers: dict[str, str]) -> Sequence[scripted.Piece]:
        rid = msg["id"]
        if headers.get("mcp-session-id") == "session-1":
            return [scripted.sse("a1", ""), flood, scripted.sse("a2", scripted.result(rid))]
        return [scripted.sse(f"b{rid}", scripted.result(rid))]

    up.script = script
    limits = GatewayLimits(max_event_bytes=1 * MiB)
    served = 0
    async with scripted.gateway_for(up, limits=limits) as gw, client.unlimited() as http:
        a, b = await client.begin(http, gw.url), await client.begin(http, gw.url)
        got: list[client.Read] = []

        async def call_a() -> None:
            got.append(await client.call(http, gw.url, a, 7))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call_a)
            with anyio.fail_after(client.HANG):
                await flood.paused.wait()
            for rid in range(1, 21):
                with anyio.fail_after(client.HANG):
                    r = await client.call(http, gw.url, b, rid)
                served += r.status == 200 and r.results(rid) == 1
            go_on.set()
    assert served == 20
    [err] = got[0].errors()
    assert err["id"] == 7 and err["error"]["data"]["reason"] == "event-too-large"


# --------------------------------------------------------------------------- 4. refusals


async def test_an_elicitation_flood_bounds_the_gateways_own_upstream_requests() -> None:
    """One call's stream carries 2,000 elicitation requests (a smaller flood than the
    10,000 measured: the bound is reached either way). Past the guard's
    ``max_live_requests`` each is refused with a POST upstream; the upstream holds every
    such POST open until released. The gateway has at most
    ``upstream_requests_per_session`` (8) of them in flight at once and queues at most
    ``max_pending_refusals`` (64) refusals: the upstream receives no more than 64 (+ the
    8 in flight) in all, the rest are not sent. The stream goes on to its result, the
    session to its next call, and memory stays flat (< 32 MiB more during the flood)."""
    flood = 2_000
    release = anyio.Event()
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "sent"}}
    flooded: list[scripted.Piece] = [
        scripted.sse(f"e{i}", scripted.elicit(i)) for i in range(1, flood + 1)
    ]
    scripts: dict[Any, Sequence[scripted.Piece]] = {
        7: [*flooded, scripted.sse("note", note), release, scripted.sse("done", scripted.result(7))]
    }
    up = scripted.Upstream(script=calls_by_id(scripts), answer_hold=release)
    limits = GatewayLimits(upstream_requests_per_session=8, max_pending_refusals=64)
    live = GuardConfig().max_live_requests
    assert live < flood - 64 - 8
    async with scripted.gateway_for(up, limits=limits) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        before = scripted.rss()
        all_sent = anyio.Event()
        got: list[client.Read] = []

        async def flooded_call() -> None:
            raw = bytearray()
            h = {**scripted.HEAD, "mcp-session-id": sid}
            async with http.stream("POST", gw.url, json=scripted.tool_call(7), headers=h) as r:
                async for chunk in r.aiter_raw():
                    raw += chunk
                    if b'"data": "sent"' in raw[-len(chunk) - 32 :]:
                        all_sent.set()  # every elicitation of the flood was read
                got.append(client.Read(r.status_code, bytes(raw), len(raw), None))

        async with anyio.create_task_group() as tg:
            tg.start_soon(flooded_call)
            with anyio.fail_after(client.HANG):
                await all_sent.wait()
                await up.wait_until(lambda u: u.response_posts >= 8)
            during = scripted.rss()
            release.set()
            with anyio.fail_after(client.HANG):
                await up.wait_until(lambda u: len(u.responses("error")) >= 64)
        nxt = await client.call(http, gw.url, sid, 8)
        refused = len(up.responses("error"))
    assert up.response_posts_max <= 8
    assert refused <= 64 + 8
    [done] = got
    assert done.status == 200 and done.results(7) == 1
    presented = [m for m in done.messages() if "method" in m and "id" in m]
    assert len(presented) == live
    assert nxt.status == 200 and nxt.results(8) == 1
    assert during - before < 32 * MiB


# --------------------------------------------------------------------------- 5. unknown ids


async def test_session_ids_the_upstream_refuses_leave_no_guard_and_no_store_entry() -> None:
    """1,000 calls with made-up session ids (the measured flood had 10,500; a thousand
    show the same), each refused by the upstream with 404: every client gets the
    upstream's own 404, each id reached the upstream once, and the gateway holds no
    session and has written nothing to its store. A session the upstream does accept is
    then held and stored (the counts are live)."""
    count, workers = 1_000, 8
    store = MemoryStore()
    up = scripted.Upstream(script=calls_by_id({}), issue_sessions=True, refuse_unknown=True)
    made_up = [f"made-up-{i}" for i in range(count)]
    answers: list[tuple[int, bytes]] = []
    async with scripted.gateway_for(up, store=store) as gw, client.unlimited() as http:

        async def worker(ids: list[str]) -> None:
            for sid in ids:
                r = await http.post(
                    gw.url,
                    json=scripted.tool_call(1),
                    headers={**scripted.HEAD, "mcp-session-id": sid},
                )
                answers.append((r.status_code, r.content))

        with anyio.fail_after(client.HANG):
            async with anyio.create_task_group() as tg:
                for w in range(workers):
                    tg.start_soon(worker, made_up[w::workers])
        held, stored = gw.gateway.sessions, len(store)
        real = await client.begin(http, gw.url)
        ok = await client.call(http, gw.url, real, 7)
        held_after, stored_after = gw.gateway.sessions, len(store)
    assert len(answers) == count
    assert {status for status, _ in answers} == {404}
    assert {body for _, body in answers} == {scripted.UNKNOWN_SESSION_BODY}
    assert sorted(str(sid) for sid in up.session_ids[:count]) == sorted(made_up)
    assert (held, stored) == (0, 0)
    assert ok.results(7) == 1 and held_after == 1 and stored_after > 0


# --------------------------------------------------------------------------- 6. UTF-8


def _raw(msg: dict[str, Any]) -> bytes:
    """``msg`` as JSON text in UTF-8, its lone surrogates U+DC80-U+DCFF written as the
    bytes 0x80-0xFF they stand for (invalid UTF-8)."""
    return json.dumps(msg, ensure_ascii=False).encode("utf-8", "surrogateescape")


INVALID_UTF8 = {
    # an elicitation whose message holds a byte that is never UTF-8
    "in-a-string": _raw(scripted.elicit(1, "Delete\udcff?")),
    # one before the JSON
    "before-the-json": b"\xff" + json.dumps(scripted.elicit(1)).encode(),
    # a multi-byte sequence cut short, inside a string
    "cut-sequence": _raw(scripted.elicit(1, "Pay 5 \udce2\udc82?")),
    # an overlong encoding of '"'
    "overlong": json.dumps(scripted.elicit(1, "Delete?"))
    .encode()
    .replace(b'"Delete?"', b'"\xc0\xa2"'),
}


@pytest.mark.parametrize("data", INVALID_UTF8.values(), ids=INVALID_UTF8.keys())
async def test_invalid_utf8_in_an_event_reaches_nobody_as_a_request(data: bytes) -> None:
    """An upstream event holding invalid UTF-8 (RFC 8259: JSON is UTF-8; such an event is
    malformed) in the middle of a call's stream: the stream goes on, the call completes
    with its result, and the request in the bad event reaches nobody as a request: the
    client, decoding as HTTP clients do (invalid bytes as U+FFFD), gets no request 1,
    and the gateway claimed none."""
    store = MemoryStore()
    up = scripted.Upstream(
        call=[
            scripted.sse("e1", ""),
            b"id: e2\ndata: " + data + b"\n\n",
            scripted.sse("e3", scripted.result(7)),
        ]
    )
    async with scripted.gateway_for(up, store=store) as gw, client.unlimited() as http:
        await client.begin(http, gw.url)
        with anyio.fail_after(client.HANG):
            got = await client.call(http, gw.url, scripted.SID, 7)
    assert got.status == 200 and got.broken is None
    assert got.results(7) == 1 and got.errors() == []
    assert got.requests(1) == 0
    assert not (await store.claim_status(scripted.SID, 1)).claimed


# --------------------------------------------------------------------------- 7. bodies


async def stalled_body(gw: Any, sid: str, *, to_end: bool = False) -> tuple[bytes, bool]:
    """Send a request's head declaring a 64-byte body for session ``sid``, then nothing
    of the body: the response (its head, and its body if it has a length), and, if
    ``to_end``, whether the gateway then closed the connection (read to its end; the
    hang guard bounds the wait)."""
    port = urlsplit(gw.url).port
    assert port is not None
    request = (
        f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        f"content-type: application/json\r\naccept: {scripted.HEAD['accept']}\r\n"
        f"mcp-session-id: {sid}\r\ncontent-length: 64\r\n\r\n"
    )
    answer, closed = b"", False
    async with await anyio.connect_tcp("127.0.0.1", port) as conn:
        await conn.send(request.encode())
        with anyio.fail_after(client.HANG):
            while b"\r\n\r\n" not in answer:
                answer += await conn.receive()
            head, _, body = answer.partition(b"\r\n\r\n")
            size = re.search(rb"\r\ncontent-length: *(\d+)", head.lower())
            while size is not None and len(body) < int(size[1]):
                body += await conn.receive()
            answer = head + b"\r\n\r\n" + body
            try:
                while to_end:
                    await conn.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                closed = True
    return answer, closed


async def test_a_body_that_never_comes_gets_408_and_frees_its_session() -> None:
    """A client sends a request's head declaring a 64-byte body and then nothing: after
    ``body_timeout_s`` (0.3 s here) it gets 408 with a JSON-RPC error; nothing reached
    the upstream. The session is not left busy: with ``max_sessions=1`` a new session,
    which needs the held one dropped (only an idle one is), is then served."""
    up = scripted.Upstream(script=calls_by_id({}), issue_sessions=True)
    limits = GatewayLimits(max_sessions=1, body_timeout_s=0.3)
    async with scripted.gateway_for(up, limits=limits) as gw, client.unlimited() as http:
        first = await client.begin(http, gw.url)
        seen = len(up.requests)
        answer, _ = await stalled_body(gw, first)
        assert len(up.requests) == seen
        second = await client.begin(http, gw.url)
        held = gw.gateway.sessions
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["code"] == -32600
    assert (first, second, held) == ("session-1", "session-2", 1)


async def test_a_408_for_a_body_that_never_came_closes_its_connection() -> None:
    """A 408 means the server stopped waiting (RFC 9110, 15.5.9: it SHOULD say
    ``Connection: close``): the gateway's 408 for a body that never came says so and
    the connection is closed, not kept for the keep-alive time with the request's
    unread body bytes still to come on it."""
    up = scripted.Upstream(script=calls_by_id({}), issue_sessions=True)
    limits = GatewayLimits(body_timeout_s=0.3)
    async with scripted.gateway_for(up, limits=limits) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        answer, closed = await stalled_body(gw, sid, to_end=True)
    head = answer.partition(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"http/1.1 408 ")
    assert b"\r\nconnection: close" in head
    assert closed


# --------------------------------------------------------------------------- 8. memory


async def test_a_long_session_keeps_bounded_state_per_stream() -> None:
    """200 calls in one session: what the gateway keeps per stream (id tables, kept
    results, the credentials a stream acted with) stays bounded by the streams still
    live and the newest ``max_finals`` results, not by the calls made."""
    up = scripted.Upstream(
        script=lambda msg, headers: [scripted.sse(f"e{msg['id']}", scripted.result(msg["id"]))]
    )
    async with (
        scripted.gateway_for(up, limits=GatewayLimits(max_finals=4)) as gw,
        client.unlimited() as http,
    ):
        sid = await client.begin(http, gw.url)
        for rid in range(1, 201):
            assert (await client.call(http, gw.url, sid, rid)).results(rid) == 1
        held = gw.gateway._sessions[sid]
    # the newest kept results, and the last call's stream if its end is not filed yet
    assert gw.gateway._kept.count(held) <= 4 and len(held.ids) <= 5
    assert len(held.engine._creds_by_stream) <= 5


BIG = {"content": [{"type": "text", "text": "x" * 100_000}]}
"""A 100 KB tool result."""
THREE_BIG = GatewayLimits(max_kept_bytes=350_000)
"""Room for three :data:`BIG` results kept, over every session."""


def big_results() -> scripted.Upstream:
    """An upstream issuing sessions that answers every request with :data:`BIG`."""

    def script(msg: Any, headers: Any) -> list[bytes]:
        return [scripted.sse(f"e{msg['id']}", {"jsonrpc": "2.0", "id": msg["id"], "result": BIG})]

    return scripted.Upstream(script=script, issue_sessions=True)


async def test_results_read_whole_cannot_fill_the_replica() -> None:
    """Five sessions each read a 100 KB result whole. What the replica keeps of them (to
    answer a resume that lost one) stays within ``max_kept_bytes`` over every session,
    the session holding most giving first (here the oldest, as all hold alike): the
    newest resumes from what was kept, an evicted one is told ``result-not-kept``, and a
    session's end lets its result go."""
    up = big_results()
    async with scripted.gateway_for(up, limits=THREE_BIG) as gw, client.unlimited() as http:
        kept, held = gw.gateway._kept, gw.gateway._sessions
        sids, firsts = [], []
        for _ in range(5):
            sid = await client.begin(http, gw.url)
            firsts.append(await client.call(http, gw.url, sid, 1))
            sids.append(sid)
            with anyio.fail_after(client.HANG):  # the gateway files the result as the stream ends
                while kept.count(held[sid]) != 1:
                    await anyio.sleep(0.01)
        assert [kept.count(held[sid]) for sid in sids] == [0, 0, 1, 1, 1]
        assert 300_000 < kept.size <= 350_000
        resumes = []
        for sid, first in ((sids[-1], firsts[-1]), (sids[0], firsts[0])):
            ((event_id, _),) = first.events
            h = {**scripted.HEAD, "mcp-session-id": sid, "last-event-id": event_id}
            resumes.append(await client.read(http, "GET", gw.url, h))
        gets = [method for method, _, _ in up.requests if method == "GET"]
        size, last = kept.size, held[sids[-1]]
        gone = await http.delete(gw.url, headers={**scripted.HEAD, "mcp-session-id": sids[-1]})
        assert gone.status_code == 202
        with anyio.fail_after(client.HANG):  # the session ends as its DELETE's answer is sent
            while sids[-1] in held:
                await anyio.sleep(0.01)
        assert kept.count(last) == 0
        after = kept.size
    newest, evicted = resumes
    assert [m["result"] for m in newest.messages()] == [BIG]  # from what was kept
    assert [e["error"]["data"]["reason"] for e in evicted.errors()] == ["result-not-kept"]
    assert gets == []  # neither resume went upstream
    assert after < size


async def test_one_session_reading_many_results_pushes_out_its_own_not_anothers() -> None:
    """A session keeps one 100 KB result; then another reads four, against a budget of
    three. The reader's oldest results go, not the other session's older one: the kept
    results are shared fairly, so no client takes another's resume away by reading."""
    up = big_results()
    async with scripted.gateway_for(up, limits=THREE_BIG) as gw, client.unlimited() as http:
        kept, held = gw.gateway._kept, gw.gateway._sessions

        async def kept_after_call(sid: str, rid: int) -> Any:
            before = set(kept.of(held[sid]))
            answer = await client.call(http, gw.url, sid, rid)
            with anyio.fail_after(client.HANG):  # the gateway files the result as the stream ends
                while not set(kept.of(held[sid])) - before:
                    await anyio.sleep(0.01)
            return answer

        victim, reader = await client.begin(http, gw.url), await client.begin(http, gw.url)
        first = await kept_after_call(victim, 1)
        for rid in range(1, 5):
            await kept_after_call(reader, rid)
        counts = (kept.count(held[victim]), kept.count(held[reader]))
        ((event_id, _),) = first.events
        h = {**scripted.HEAD, "mcp-session-id": victim, "last-event-id": event_id}
        resumed = await client.read(http, "GET", gw.url, h)
    assert counts == (1, 2)
    assert [m["result"] for m in resumed.messages()] == [BIG]  # from what was kept
    assert [method for method, _, _ in up.requests if method == "GET"] == []


async def test_proven_credentials_are_kept_as_digests() -> None:
    """Ten requests of one session, each with its own 30 KB cookie, all accepted: the
    session keeps a 32-byte digest of the newest eight (``max_credentials``), not the
    cookies; a request is trusted exactly when its credentials are one of them."""
    up = scripted.Upstream(
        script=lambda msg, headers: [scripted.sse("e1", scripted.result(msg["id"]))]
    )
    async with scripted.gateway_for(up) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        cookies = [f"c={n}{'x' * 30_000}" for n in range(10)]
        for rid, cookie in enumerate(cookies, start=1):
            assert (await client.call(http, gw.url, sid, rid, cookie=cookie)).results(rid) == 1
        session = gw.gateway._sessions[sid]
        proven = list(session.proven)
        trusted = [
            session.trusts(httpx2.Request("POST", gw.url, headers={"cookie": c})) for c in cookies
        ]
    assert len(proven) == 8 and {len(p) for p in proven} == {32}
    assert trusted == [False, False, *[True] * 8]  # the oldest two forgotten


def test_a_claimant_digest_tells_every_part_apart() -> None:
    """Equal credentials and query give one digest; moving a byte between parts does
    not (each part is length-prefixed)."""
    same = claimant(("Bearer a", "c=1"), b"key=k")
    assert claimant(("Bearer a", "c=1"), b"key=k") == same
    others = [
        claimant(("Bearer a", "c=2"), b"key=k"),
        claimant(("Bearer a", "c=1"), b"key=j"),
        claimant(("Bearer ", "ac=1"), b"key=k"),
        claimant(("Bearer a", "c=1key=k"), b""),
    ]
    assert same not in others and len(set(others)) == len(others)


async def test_a_resume_of_a_stream_the_guard_forgot_gets_its_kept_result() -> None:
    """The gateway's guards remember few ended streams (``GATEWAY_GUARD``): a client
    resuming a finished call after 10 more gets the result the session kept for it,
    answered here, not a fresh resume of the stream upstream."""
    up = scripted.Upstream(
        script=lambda msg, headers: [scripted.sse(f"e{msg['id']}", scripted.result(msg["id"]))]
    )
    async with scripted.gateway_for(up) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        first = await client.call(http, gw.url, sid, 1)
        ((event_id, _),) = first.events
        for rid in range(2, 12):
            assert (await client.call(http, gw.url, sid, rid)).results(rid) == 1
        held = gw.gateway._sessions[sid]
        assert held.engine.guard.stream_state("post:1") is None  # forgotten by the guard
        gets = sum(method == "GET" for method, _, _ in up.requests)
        h = {**scripted.HEAD, "mcp-session-id": sid, "last-event-id": event_id}
        again = await client.read(http, "GET", gw.url, h)
    assert again.status == 200 and again.results(1) == 1
    assert sum(method == "GET" for method, _, _ in up.requests) == gets


async def test_a_large_result_passed_on_in_pieces_is_kept_whole() -> None:
    """A result of 600 KB (over ``LARGE_EVENT``, under ``max_final``) reaches the client
    whole, passed on in the pieces it was read in, and a resume after the stream ended
    gets it whole again from what the session kept: not its last piece."""
    text = "x" * 600_000
    big = {"content": [{"type": "text", "text": text}]}

    def script(msg: Any, headers: Any) -> list[bytes]:
        return [scripted.sse(f"e{msg['id']}", {"jsonrpc": "2.0", "id": msg["id"], "result": big})]

    up = scripted.Upstream(script=script)
    async with scripted.gateway_for(up) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        first = await client.call(http, gw.url, sid, 1)
        ((event_id, _),) = first.events
        for rid in range(2, 12):  # the guard forgets the stream; the session keeps it
            await client.call(http, gw.url, sid, rid)
        h = {**scripted.HEAD, "mcp-session-id": sid, "last-event-id": event_id}
        again = await client.read(http, "GET", gw.url, h)
    assert [m["result"] for m in first.messages()] == [big]
    assert [m["result"] for m in again.messages()] == [big]
    assert [i for i, _ in again.events] == [event_id]


# --------------------------------------------------------------------------- 9. answers


async def test_an_answer_sent_before_the_server_asks_is_not_kept_for_the_question() -> None:
    """An answer POST for a request id the server has not asked yet: the upstream takes it
    (``202``, as official servers take any answer, and drops it), but the gateway does not
    keep it in the store, where a replica would later submit it for the real question:
    the person asked then answers it. Through the gateway it changes no more than it
    does sent direct."""
    store = MemoryStore()
    up = scripted.Upstream(script=calls_by_id({}))
    async with scripted.gateway_for(up, store=store) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        planted = {"jsonrpc": "2.0", "id": 1, "result": {"action": "accept"}}
        r = await http.post(gw.url, json=planted, headers={**scripted.HEAD, "mcp-session-id": sid})
        assert r.status_code == 202  # the upstream's own answer, relayed
        assert await store.answer_of(sid, 1) is None


async def test_a_long_session_remembers_a_bounded_past() -> None:
    """100 calls in one session, each failed by the guard (its stream ends before any
    event id: nothing to resume from): what the session remembers of failed interactions,
    its monitor's ended interactions and its event log stay within ``remembered`` and
    ``observations``, not the calls made."""
    up = scripted.Upstream(script=lambda msg, headers: [])
    limits = GatewayLimits(remembered=8, observations=16)
    async with scripted.gateway_for(up, limits=limits) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        for rid in range(1, 101):
            assert b"no-cursor" in (await client.call(http, gw.url, sid, rid)).raw
        held = gw.gateway._sessions[sid]
    assert 0 < len(held.engine.failures) <= 8
    assert len(held.engine.og.log) <= 16
    assert len(held.engine.og.monitor._ended) <= 8
