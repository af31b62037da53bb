"""A server request sent on the standalone GET is not lost because the client's GET
reached the server after its next POST.

The upstream here behaves as the TypeScript SDK's server and mcp 2.3.0's do: a message
for the standalone stream sent while no GET is attached is dropped. The order is set by
the test, not by timing: the client sends its tool call before its GET (the order a
proxy's two connections can give), and the upstream sends its request on the standalone
stream as the call arrives. The gateway opened the session's GET when the upstream
accepted ``notifications/initialized``, so the request waits there for the client's GET.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from fsm.gateway.app import GatewayLimits  # noqa: E402
from fsm.gateway.redis_store import RedisStore  # noqa: E402
from fsm.wire.serving import lifespan  # noqa: E402
from support.changes import Changes  # noqa: E402
from support.redis_server import RedisServer  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

TOKEN = "Bearer tok-a"
OTHER = "Bearer tok-b"
ASK = 900


class DropsBeforeGet:
    """A session whose server sends request ``ASK`` on the standalone stream when a tool
    call arrives: delivered if a GET is attached, else dropped (counted). The call's
    stream then waits for the answer POST and ends with its result. Only ``accepted``
    tokens (``TOKEN``) are accepted (``403`` for any other); a second GET while one is
    attached gets ``409``."""

    def __init__(self, accepted: frozenset[str] = frozenset({TOKEN})) -> None:
        self.accepted = accepted
        self.attached: Any = None
        self.delivered = 0
        self.dropped = 0
        self.gets: list[dict[str, str]] = []
        self.detached = 0
        self.answered = anyio.Event()
        self.changes = Changes()

    async def wait_until(self, predicate: Any) -> None:
        await self.changes.until(lambda: predicate(self))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        headers, msg = await scripted.read_request(scope, receive)
        try:
            await self._serve(scope["method"], headers, msg, receive, send)
        finally:
            self.changes.note()

    async def _serve(
        self, method: str, headers: dict[str, str], msg: Any, receive: Any, send: Any
    ) -> None:
        if headers.get("authorization") not in self.accepted:
            await scripted.json_reply(send, 403, b"forbidden")
            return
        if msg.get("method") == "initialize":
            head = [(b"mcp-session-id", scripted.SID.encode())]
            await scripted.json_reply(
                send, 200, json.dumps(scripted.result(msg["id"])).encode(), head
            )
        elif method == "GET":
            await self._standalone(headers, receive, send)
        elif msg.get("method") == "tools/call":
            if self.attached is not None:
                await self.attached.send(scripted.elicit(ASK))
                self.delivered += 1
            else:
                self.dropped += 1
            self.changes.note()
            await scripted.sse_start(send)
            await self.answered.wait()
            await scripted.sse_piece(
                send, b"id: c1\ndata: " + json.dumps(scripted.result(msg["id"])).encode() + b"\n\n"
            )
            await scripted.sse_end(send)
        else:  # the answer, or a notification
            if "method" not in msg:
                self.answered.set()
            await scripted.json_reply(send, 202, b"")

    async def _standalone(self, headers: dict[str, str], receive: Any, send: Any) -> None:
        if self.attached is not None:
            await scripted.json_reply(
                send, 409, b"Conflict: only one SSE stream is allowed per session"
            )
            return
        self.gets.append(headers)
        out, pending = anyio.create_memory_object_stream[Any](16)
        self.attached = out
        self.changes.note()
        await scripted.sse_start(send)

        async def pump() -> None:
            n = 0
            async for message in pending:
                n += 1
                event = f"id: g{n}\ndata: {json.dumps(message)}\n\n".encode()
                await scripted.sse_piece(send, event)

        try:
            await scripted.until_left(receive, pump)
        finally:
            self.attached = None
            self.detached += 1


H = {
    **scripted.HEAD,
    "authorization": TOKEN,
    "mcp-session-id": scripted.SID,
    "mcp-protocol-version": "2025-06-18",
}
GET = {"accept": "text/event-stream", **{k: v for k, v in H.items() if k not in scripted.HEAD}}


class KeyInTheUrl(DropsBeforeGet):
    """Authenticates by ``?key=K`` in the URL: a request carrying it counts as ``TOKEN``,
    any other as no token at all (``403``)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = [(k, v) for k, v in scope["headers"] if k != b"authorization"]
            if scope.get("query_string") == b"key=K":
                headers.append((b"authorization", TOKEN.encode()))
            scope = {**scope, "headers": headers}
        await super().__call__(scope, receive, send)


async def _initialized(http: Any, url: str, headers: dict[str, str] = H) -> None:
    session_less = {k: v for k, v in headers.items() if k != "mcp-session-id"}
    init = await http.post(url, json=scripted.INIT, headers=session_less)
    assert init.status_code == 200
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=note, headers=headers)).status_code == 202


async def _first_event(resp: Any) -> dict[str, Any]:
    buf = b""
    async for piece in resp.aiter_raw():
        buf += piece
        events = [d for _, d in scripted.parse(buf) if d]
        if events:
            msg: dict[str, Any] = json.loads(events[0])
            return msg
    raise AssertionError(f"the stream ended with no event: {buf!r}")


@pytest.mark.parametrize("hold_s", [10.0, 0.0], ids=["opened-ahead", "off"])
async def test_a_request_sent_on_the_standalone_get_before_the_clients_get_arrives(
    hold_s: float,
) -> None:
    """The client's tool call reaches the upstream before its GET. Opened ahead: the
    server's request waits on the session's GET, the client's GET takes it and gets the
    request, the answer goes up, the call ends with its result; the GET the gateway
    sent carried the notification's credentials and the session's headers only. Off
    (``standalone_hold_s=0``): the server drops it, as it would for a client talking to
    it directly in that order."""
    up = DropsBeforeGet()
    limits = GatewayLimits(standalone_hold_s=hold_s)
    async with (
        scripted.gateway_for(up, limits=limits) as gw,
        httpx2.AsyncClient(timeout=20) as http,
    ):
        await _initialized(http, gw.url)
        async with http.stream("POST", gw.url, json=scripted.CALL, headers=H) as called:
            await up.wait_until(lambda u: u.delivered + u.dropped == 1)
            if hold_s == 0:
                assert (up.dropped, up.gets) == (1, [])
                up.answered.set()  # nothing will ask: let the call end
                return
            assert (up.delivered, up.dropped) == (1, 0)
            [sent] = up.gets
            assert sent["authorization"] == TOKEN and sent["mcp-session-id"] == scripted.SID
            assert sent["mcp-protocol-version"] == "2025-06-18"
            assert "x-forwarded-for" not in sent and "forwarded" not in sent
            async with http.stream("GET", gw.url, headers=GET) as standalone:
                assert standalone.status_code == 200
                asked = await _first_event(standalone)
                assert asked["id"] == ASK and asked["method"] == "elicitation/create"
                answer = {"jsonrpc": "2.0", "id": ASK, "result": {"action": "accept"}}
                assert (await http.post(gw.url, json=answer, headers=H)).status_code == 202
                assert await _first_event(called) == scripted.result(7)
        assert len(up.gets) == 1  # the client's GET took the one opened ahead


async def test_a_get_with_credentials_the_upstream_refuses_does_not_take_the_held_stream() -> None:
    """Another client's GET (a token the upstream refuses for the session) is sent
    upstream as it came and gets the upstream's refusal; the stream opened ahead stays
    for the session's client, whose GET then gets the server's request."""
    up = DropsBeforeGet()
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=20) as http:
        await _initialized(http, gw.url)
        async with http.stream("POST", gw.url, json=scripted.CALL, headers=H) as called:
            await up.wait_until(lambda u: u.delivered == 1)
            other = await http.get(gw.url, headers={**GET, "authorization": OTHER})
            assert other.status_code == 403
            async with http.stream("GET", gw.url, headers=GET) as standalone:
                assert (await _first_event(standalone))["id"] == ASK
                answer = {"jsonrpc": "2.0", "id": ASK, "result": {"action": "accept"}}
                assert (await http.post(gw.url, json=answer, headers=H)).status_code == 202
                assert await _first_event(called) == scripted.result(7)


async def test_a_stream_opened_ahead_that_no_client_takes_is_closed_after_its_hold() -> None:
    """A client that never opens its GET: the one opened ahead is closed after
    ``standalone_hold_s`` (the server sees its reader go), and the client's GET
    afterwards goes upstream itself."""
    up = DropsBeforeGet()
    limits = GatewayLimits(standalone_hold_s=0.05)
    async with (
        scripted.gateway_for(up, limits=limits) as gw,
        httpx2.AsyncClient(timeout=20) as http,
    ):
        await _initialized(http, gw.url)
        assert len(up.gets) == 1
        with anyio.fail_after(10):
            await up.wait_until(lambda u: u.detached == 1)
        async with http.stream("GET", gw.url, headers=GET) as standalone:
            assert standalone.status_code == 200
            await up.wait_until(lambda u: len(u.gets) == 2)


async def test_replicas_on_a_shared_store_open_no_get_ahead_by_default(
    server: RedisServer,
) -> None:
    """On a shared store (replicas that a balancer may not keep a session on) nothing is
    opened ahead unless ``standalone_hold_s`` is given: the client's GET goes upstream
    itself."""
    up = DropsBeforeGet()
    store = RedisStore.from_url(server.url, prefix="ahead:")
    try:
        async with (
            scripted.gateway_for(up, store=store) as gw,
            httpx2.AsyncClient(timeout=20) as http,
        ):
            assert gw.gateway.standalone_hold_s == 0
            await _initialized(http, gw.url)
            assert up.gets == []
    finally:
        await store.aclose()


async def test_a_get_without_the_openers_url_key_does_not_take_the_held_stream() -> None:
    """An upstream that authenticates by a key in the URL: a client with the session id
    and no key is refused by the upstream (``403``) as it would be directly; the stream
    opened with the key stays for the client that has it."""
    up = KeyInTheUrl()
    bare = {k: v for k, v in H.items() if k != "authorization"}
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=20) as http:
        await _initialized(http, gw.url + "?key=K", bare)
        assert len(up.gets) == 1
        stranger = {k: v for k, v in GET.items() if k != "authorization"}
        assert (await http.get(gw.url, headers=stranger)).status_code == 403
        async with http.stream("GET", gw.url + "?key=K", headers=stranger) as own:
            assert own.status_code == 200
        assert len(up.gets) == 1  # the opener's GET took the one held


async def test_another_principal_of_the_session_does_not_take_the_openers_stream() -> None:
    """A second principal the upstream accepts for the session (its own token, proven by
    a request of its own) gets what the upstream answers its own GET (``409``: a stream
    is attached), never the stream opened with the first one's credentials."""
    up = DropsBeforeGet(accepted=frozenset({TOKEN, OTHER}))
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=20) as http:
        await _initialized(http, gw.url)
        other = {**H, "authorization": OTHER}
        ping = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
        assert (await http.post(gw.url, json=ping, headers=other)).status_code == 202
        theirs = await http.get(gw.url, headers={**GET, "authorization": OTHER})
        assert theirs.status_code == 409
        async with http.stream("GET", gw.url, headers=GET) as own:
            assert own.status_code == 200
        assert len(up.gets) == 1


async def test_only_the_first_initialized_opens_a_stream_ahead() -> None:
    up = DropsBeforeGet()
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=20) as http:
        await _initialized(http, gw.url)
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        for _ in range(5):
            assert (await http.post(gw.url, json=note, headers=H)).status_code == 202
        assert len(up.gets) == 1


async def test_an_initialized_written_with_escapes_opens_a_stream_ahead() -> None:
    """``notifications/initialized`` is read from the parsed body, as the upstream reads
    it: a method name written with a JSON escape (``notifications\\/initialized``) opens
    the standalone stream ahead as the plain one does."""
    up = DropsBeforeGet()
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=20) as http:
        session_less = {k: v for k, v in H.items() if k != "mcp-session-id"}
        assert (await http.post(gw.url, json=scripted.INIT, headers=session_less)).is_success
        note = b'{"jsonrpc": "2.0", "method": "notifications\\/initialized"}'
        headers = {**H, "content-type": "application/json"}
        assert (await http.post(gw.url, content=note, headers=headers)).status_code == 202
        assert len(up.gets) == 1


async def test_a_held_stream_is_closed_when_its_client_deletes_the_session() -> None:
    up = DropsBeforeGet()
    async with (
        scripted.gateway_for(up, limits=GatewayLimits(standalone_hold_s=1000)) as gw,
        httpx2.AsyncClient(timeout=20) as http,
    ):
        await _initialized(http, gw.url)
        assert len(up.gets) == 1 and up.detached == 0
        assert (await http.delete(gw.url, headers=H)).status_code == 202
        with anyio.fail_after(10):
            await up.wait_until(lambda u: u.detached == 1)
