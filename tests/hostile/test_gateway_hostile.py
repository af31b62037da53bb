"""Hostile input through the guarding gateway (fsm.gateway): a real gateway replica on
loopback in front of a scripted upstream that misbehaves on purpose (no SDK server sends
garbage, repeats requests or replays forever on command), and clients that send what no
SDK client would (oversized bodies, malformed headers, forged or foreign resume ids).

Each row of docs/hostile.md's gateway table is one test here."""

from __future__ import annotations

import contextlib
import importlib.util
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from fsm.gateway.app import GatewayLimits  # noqa: E402
from fsm.sse.guard import GuardConfig  # noqa: E402
from tests.gateway import gateway_client as client  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def call_events(http: Any, url: str, **headers: str) -> list[tuple[str | None, str]]:
    """POST a tools/call (id 7) and read its SSE body to the end: (id, data) per event."""
    h = {**scripted.HEAD, "mcp-session-id": scripted.SID, **headers}
    async with http.stream("POST", url, json=scripted.CALL, headers=h) as r:
        return scripted.parse(b"".join([c async for c in r.aiter_raw()]))


def requests_of(events: list[tuple[str | None, str]], rid: Any) -> int:
    n = 0
    for _, data in events:
        with contextlib.suppress(ValueError, RecursionError):
            msg = json.loads(data)
            if isinstance(msg, dict) and msg.get("id") == rid and "method" in msg:
                n += 1
    return n


def errors(events: list[tuple[str | None, str]]) -> list[dict[str, Any]]:
    out = []
    for _, data in events:
        with contextlib.suppress(ValueError, RecursionError):
            msg = json.loads(data)
            if isinstance(msg, dict) and "error" in msg:
                out.append(msg)
    return out


async def test_the_guards_hostile_table_holds_through_the_gateway() -> None:
    """Garbage, bad retry values, a request repeated, an id reused with other params, a
    response for another request, deeply nested JSON: the client sees the request once,
    every other event passes or is blanked with its id kept, and one result."""
    up = scripted.Upstream(
        call=[
            scripted.sse("e1", ""),
            scripted.sse("e2", scripted.elicit(1)),
            scripted.sse("e3", scripted.elicit(1)),  # repeated
            scripted.sse("e4", scripted.elicit(1, "Something else?")),  # id reused, other params
            scripted.sse("e5", "\xff not json {"),
            scripted.sse("e6", "[" * 10_000 + "]" * 10_000),
            scripted.sse("e7", "", retry=-5),
            scripted.sse("e8", "", retry="soon"),
            scripted.sse("e9", scripted.result(99)),  # a response for another request
            scripted.sse("e10", scripted.result(7)),
        ]
    )
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        await scripted.initialize(http, gw.url)
        events = await call_events(http, gw.url)
    assert requests_of(events, 1) == 1
    assert [e[0].rsplit(".", 1)[-1] for e in events if e[0]] == [f"e{i}" for i in range(1, 11)]
    results = [d for _, d in events if d.startswith('{"jsonrpc"') and json.loads(d)["id"] == 7]
    assert len(results) == 1 and "result" in results[0]


async def test_a_server_that_replays_forever_gets_one_error_and_bounded_resumes() -> None:
    """The upstream cuts every connection and replays the same events on every resume
    (never anything new): the gateway resumes within the guard's budget, then ends the
    call with one JSON-RPC error for it (code -32000, data.reason)."""
    same = [scripted.sse("e1", ""), scripted.sse("e2", scripted.elicit(1))]
    up = scripted.Upstream(call=same, replay=lambda cursor: same, complete=False)
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        await scripted.initialize(http, gw.url)
        events = await call_events(http, gw.url)
    resumes = [r for r in up.requests if r[0] == "GET"]
    assert 1 <= len(resumes) <= GuardConfig().max_resumes_without_progress
    assert {h["last-event-id"] for _, h, _ in resumes} == {"e2"}  # never behind the newest
    assert requests_of(events, 1) == 1
    [err] = errors(events)
    assert err["id"] == 7 and err["error"]["code"] == -32000
    assert err["error"]["data"]["reason"] == "resume-budget-spent"


async def test_oversized_bodies_get_413_and_reach_nobody() -> None:
    up = scripted.Upstream()
    async with (
        scripted.gateway_for(up, limits=GatewayLimits(max_body=1024)) as gw,
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        big = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"x": "a" * 2000}}
        declared = await http.post(gw.url, json=big, headers=scripted.HEAD)

        async def chunks() -> AsyncIterator[bytes]:  # no content-length: counted as read
            for _ in range(8):
                yield b"x" * 512

        streamed = await http.post(gw.url, content=chunks(), headers=scripted.HEAD)
    assert (declared.status_code, streamed.status_code) == (413, 413)
    assert up.requests == []


async def test_requests_go_upstream_with_the_clients_headers_only() -> None:
    """A forwarded request carries the client's headers (hop-by-hop ones aside) and none
    that the gateway's HTTP client would add by default (``Accept-Encoding``,
    ``User-Agent``): the upstream answers what the client asked for."""
    up = scripted.Upstream(call=[scripted.sse("e1", scripted.result(7))])
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        del http.headers["accept-encoding"], http.headers["user-agent"]
        await scripted.initialize(http, gw.url)
        await call_events(http, gw.url, **{"x-client": "yes"})
        upstream_host = gw.gateway.upstream.split("/")[2]
    (_, first, _), (_, second, _) = up.requests
    for headers in (first, second):
        assert "accept-encoding" not in headers and "user-agent" not in headers
        assert headers["host"] == upstream_host  # the upstream's, not the gateway's
    assert second["x-client"] == "yes" and second["mcp-session-id"] == scripted.SID


async def test_the_gateway_keeps_no_upstream_cookie() -> None:
    """A cookie the upstream sets reaches the client, whose requests carry it or not; the
    gateway keeps none (its upstream client is shared by sessions: a kept cookie would go
    out with other sessions' requests, its own answer submissions and resumes included).
    The call's stream breaks, so the gateway's own resume goes upstream too."""
    up = scripted.Upstream(
        call=[scripted.sse("e1", "")],
        replay=lambda cursor: [scripted.sse("e2", scripted.result(7))],
        complete=False,
        set_cookie=b"affinity=a1; Path=/",
    )
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        r = await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
        assert r.headers["set-cookie"] == "affinity=a1; Path=/"
        http.cookies.clear()  # this client does not send it back
        events = await call_events(http, gw.url)
        assert [data for _, data in events] == ["", json.dumps(scripted.result(7))]
        with_cookie = {**scripted.HEAD, "mcp-session-id": scripted.SID, "cookie": "affinity=a1"}
        await http.post(gw.url, json={"jsonrpc": "2.0", "method": "x"}, headers=with_cookie)
    sent = [(method, headers.get("cookie")) for method, headers, _ in up.requests]
    assert sent == [("POST", None), ("POST", None), ("GET", None), ("POST", "affinity=a1")]


@pytest.mark.parametrize(
    "name, value",
    [
        ("mcp-session-id", "caf\xe9"),
        ("mcp-session-id", "a b"),
        ("last-event-id", "\x7f"),
        ("mcp-protocol-version", ""),
    ],
)
async def test_malformed_headers_get_400_and_reach_nobody(name: str, value: str) -> None:
    """The gateway answers a header it must read that is not visible ASCII with a JSON-RPC
    400; a control character breaks HTTP itself, and httptools (uvicorn's parser when it
    is installed, as the gateway extra does) refuses it first with its own plain 400."""
    up = scripted.Upstream()
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        r = await http.get(gw.url, headers={**scripted.HEAD, name: value.encode("latin-1")})
    assert r.status_code == 400 and up.requests == []
    if value == "\x7f" and importlib.util.find_spec("httptools") is not None:
        assert r.text == "Invalid HTTP request received."
    else:
        assert r.json()["error"]["code"] == -32600


@pytest.mark.parametrize(
    "value",
    [
        "e1",  # the server's own id: not issued by the gateway
        "cG9zdDo3.1",  # no upstream id
        "bm90LWEtc3RyZWFt.1.e1",  # a tag that names no stream kind ("not-a-stream")
        "cG9zdDo3.0.e1",  # position 0
        "cG9zdDo3.99999999999999999999.e1",  # position out of range
        "!!!.1.e1",  # not base64
    ],
)
async def test_resume_ids_the_gateway_did_not_issue_get_400(value: str) -> None:
    up = scripted.Upstream()
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        await scripted.initialize(http, gw.url)
        r = await http.get(
            gw.url,
            headers={**scripted.HEAD, "mcp-session-id": scripted.SID, "last-event-id": value},
        )
    assert r.status_code == 400 and "not issued by this gateway" in r.json()["error"]["message"]
    assert [m for m, _, _ in up.requests] == ["POST"]


async def test_other_paths_get_404() -> None:
    up = scripted.Upstream()
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        r = await http.post(gw.url + "/../admin", json={})
    assert r.status_code == 404 and up.requests == []


async def test_a_flood_of_sessions_keeps_at_most_max_sessions() -> None:
    """Sessions the gateway has not seen are held as the upstream accepts them (another
    replica began them; each call's stream has the gateway ask with a ``ping``); idle
    ones past ``max_sessions`` are dropped, least recently used first."""
    up = scripted.Upstream(call=[scripted.sse("e1", scripted.result(7))])
    async with (
        scripted.gateway_for(up, limits=GatewayLimits(max_sessions=10)) as gw,
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        for i in range(60):
            r = await http.post(
                gw.url, json=scripted.CALL, headers={**scripted.HEAD, "mcp-session-id": f"s{i}"}
            )
            assert r.status_code == 200
        assert gw.gateway.sessions == 10


async def test_max_sessions_is_a_hard_cap_while_every_session_is_busy() -> None:
    """Two sessions held (each began here), each with a call streaming: a third session
    is refused with ``503`` (nothing sent upstream for it); once the calls end, it is
    served."""
    release = anyio.Event()
    up = scripted.Upstream(call=[scripted.sse("e1", "")], hold=release, issue_sessions=True)
    limits = GatewayLimits(max_sessions=2)
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with (
        scripted.gateway_for(up, limits=limits) as gw,
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        sids = [await client.begin(http, gw.url) for _ in range(2)]
        async with anyio.create_task_group() as tg:
            started = [anyio.Event(), anyio.Event()]

            async def busy(i: int) -> None:
                h = {**scripted.HEAD, "mcp-session-id": sids[i]}
                async with http.stream("POST", gw.url, json=scripted.CALL, headers=h) as r:
                    async for _ in r.aiter_raw():
                        started[i].set()

            for i in range(2):
                tg.start_soon(busy, i)
                await started[i].wait()
            h2 = {**scripted.HEAD, "mcp-session-id": "s2"}
            refused = await http.post(gw.url, json=note, headers=h2)
            release.set()
        served = await http.post(gw.url, json=note, headers=h2)
    assert refused.status_code == 503 and "gateway full" in refused.text
    assert served.status_code == 202
    assert [h.get("mcp-session-id") for m, h, _ in up.requests if m == "POST"][-1] == "s2"
    posts = [h for m, h, _ in up.requests if m == "POST"]  # (and the GET opened ahead)
    assert sum(h.get("mcp-session-id") == "s2" for h in posts) == 1


async def test_a_client_resuming_without_progress_gets_the_ending_error() -> None:
    """A client that resumes over and over from the same id while the server brings
    nothing new: within the budget, then one JSON-RPC error for the call, and the same
    error for every later resume of that stream (no upstream traffic)."""
    same = [scripted.sse("e1", ""), scripted.sse("e2", scripted.elicit(1))]
    up = scripted.Upstream(call=same, replay=lambda cursor: [], complete=False)
    config = GuardConfig(backoff_initial_s=0.01, backoff_max_s=0.02, max_resumes_without_progress=1)
    async with (
        scripted.gateway_for(up, config=config) as gw,
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        await scripted.initialize(http, gw.url)
        first = await call_events(http, gw.url)
        cursor = [i for i, _ in first if i][-1]
        bodies = []
        for _ in range(3):
            h = {**scripted.HEAD, "mcp-session-id": scripted.SID, "last-event-id": cursor}
            async with http.stream("GET", gw.url, headers=h) as r:
                bodies.append(scripted.parse(b"".join([c async for c in r.aiter_raw()])))
    [err] = errors(first)
    assert err["error"]["data"]["reason"] == "resume-budget-spent"
    assert all(errors(b) == [err] for b in bodies)
    assert len([m for m, _, _ in up.requests if m == "GET"]) == 1


async def test_a_replica_answers_a_replayed_request_from_the_stored_answer() -> None:
    """The client answered request 1 through another replica (claim and answer in the
    shared store); its resume lands on this replica, and the server replays the request:
    it is blanked, and the stored answer is submitted upstream, not asked again (after
    a ``ping`` proved the client's credentials for the session to this replica)."""
    from fsm.gateway.ids import EventIdKeys, IdRewriter
    from fsm.gateway.store import MemoryStore

    keys = EventIdKeys.generate()  # the replicas' shared key
    store = MemoryStore()
    answer = {"action": "accept", "content": {"confirm": True}}
    await store.begin_session(scripted.SID)
    await store.claim(scripted.SID, 1)
    await store.save_answer(scripted.SID, 1, answer)
    up = scripted.Upstream()
    # the server replays the request and, as a server does, ends the call once answered
    up.replay = lambda cursor: [
        scripted.sse("e2", scripted.elicit(1)),
        up.answered,
        scripted.sse("e3", scripted.result(7)),
    ]
    cursor = IdRewriter("post:7", scripted.SID, keys).rewrite(b"id: e1\n").decode().split()[-1]
    async with (
        scripted.gateway_for(up, store=store, id_keys=keys) as gw,
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        h = {**scripted.HEAD, "mcp-session-id": scripted.SID, "last-event-id": cursor}
        with anyio.fail_after(10):  # the answer is submitted while the stream is open
            async with http.stream("GET", gw.url, headers=h) as r:
                events = scripted.parse(b"".join([c async for c in r.aiter_raw()]))
    assert requests_of(events, 1) == 0
    assert next(d for _, d in events) == ""  # blanked, its id kept
    posts = [json.loads(body) for m, _, body in up.requests if m == "POST"]
    assert [p.get("method") for p in posts] == ["ping", None]
    assert posts[1] == {"jsonrpc": "2.0", "id": 1, "result": answer}
    assert [h["last-event-id"] for m, h, _ in up.requests if m == "GET"] == ["e1"]


@pytest.mark.parametrize(
    "call",
    [
        [scripted.sse("e1", ""), scripted.sse("e2", scripted.result(7))],
        # one upstream write holding a server request and the result (one read, then):
        # the resume gets the result alone, not that request a second time
        [scripted.sse("e1", scripted.elicit(1)) + scripted.sse("e2", scripted.result(7))],
    ],
    ids=["two-writes", "one-write"],
)
async def test_a_resume_of_a_finished_stream_gets_its_result_again(call: list[bytes]) -> None:
    """The call's result was passed on, but the client resumes anyway (its connection
    broke before the result reached it): the gateway answers from the result it kept,
    with no upstream traffic; the result keeps its rewritten id."""
    up = scripted.Upstream(call=call)
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        await scripted.initialize(http, gw.url)
        first = await call_events(http, gw.url)
        h = {**scripted.HEAD, "mcp-session-id": scripted.SID, "last-event-id": first[0][0] or ""}
        async with http.stream("GET", gw.url, headers=h) as r:
            again = scripted.parse(b"".join([c async for c in r.aiter_raw()]))
    assert again == first[-1:] and json.loads(again[0][1]) == scripted.result(7)
    assert [m for m, _, _ in up.requests] == ["POST", "POST"]  # initialize, the call


async def test_a_resume_when_the_store_cannot_give_a_cursor_starts_from_the_clients_id() -> None:
    """A resume of a stream this replica never saw, with the store failing to give the
    stream's cursor: resumed upstream from the client's own id (claims still guard what
    the replay brings), not a 500."""
    from fsm.gateway.ids import EventIdKeys, IdRewriter
    from fsm.gateway.store import MemoryStore, StoreUnavailableError

    keys = EventIdKeys.generate()

    class NoCursors(MemoryStore):
        async def cursor_of(self, session: str, stream: str) -> Any:
            raise StoreUnavailableError("cursor store down")

    up = scripted.Upstream(replay=lambda cursor: [scripted.sse("e2", scripted.result(7))])
    cursor = IdRewriter("post:7", scripted.SID, keys).rewrite(b"id: e1\n").decode().split()[-1]
    store = NoCursors()
    async with (
        scripted.gateway_for(up, store=store, id_keys=keys) as gw,
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        await scripted.initialize(http, gw.url)
        h = {**scripted.HEAD, "mcp-session-id": scripted.SID, "last-event-id": cursor}
        async with http.stream("GET", gw.url, headers=h) as r:
            events = scripted.parse(b"".join([c async for c in r.aiter_raw()]))
    assert [json.loads(d) for _, d in events] == [scripted.result(7)]
    assert [h["last-event-id"] for m, h, _ in up.requests if m == "GET"] == ["e1"]
