"""The gateway's upstream transport (:mod:`fsm.gateway.upstream`) keeps its contract against
a scripted HTTP/1.1 server on 127.0.0.1 that writes exactly the bytes a test gives:
requests go as given, nothing is followed or kept, connections are reused only after a
body's end, every failure is one of ``httpx2``'s exceptions, and a cap holds."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
import trustme

from fsm.gateway.app import Gateway, GatewayLimits
from fsm.gateway.upstream import MAX_FIELD, MAX_HEADERS, AiohttpTransport

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


Reply = Callable[[asyncio.StreamReader, asyncio.StreamWriter, "Seen"], Awaitable[None]]


@dataclass
class Seen:
    """What the scripted server saw: request heads (name -> value, lower-case names, in
    order), bodies, connections accepted and connections the client closed."""

    heads: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    accepted: int = 0
    closed_by_client: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)


async def read_request(reader: asyncio.StreamReader, seen: Seen) -> bool:
    """One request off the connection into ``seen``; ``False`` at the client's EOF."""
    head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
    if not head:
        return False
    line, *rest = head.decode("latin-1").split("\r\n")[:-2]
    headers = [(k.strip().lower(), v.strip()) for k, v in (h.split(":", 1) for h in rest)]
    seen.heads.append((line, headers))
    size = int(dict(headers).get("content-length", "0"))
    seen.bodies.append(await reader.readexactly(size) if size else b"")
    return True


@contextlib.asynccontextmanager
async def scripted(
    *replies: Reply, tls: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[str, Seen]]:
    """A server answering the n-th request with ``replies[n]`` (the last one repeats);
    over HTTPS with ``tls``."""
    seen = Seen()
    count = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        seen.accepted += 1
        try:
            while True:
                try:
                    if not await read_request(reader, seen):
                        seen.closed_by_client += 1
                        return
                except (asyncio.IncompleteReadError, ConnectionError):
                    seen.closed_by_client += 1
                    return
                reply = replies[min(count, len(replies) - 1)]
                count += 1
                await reply(reader, writer, seen)
                if writer.is_closing():
                    return
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}/mcp", seen


def plain(status: int = 200, body: bytes = b"ok", *headers: bytes) -> Reply:
    async def reply(_: asyncio.StreamReader, writer: asyncio.StreamWriter, __: Seen) -> None:
        extra = b"".join(h + b"\r\n" for h in headers)
        writer.write(
            b"HTTP/1.1 %d X\r\ncontent-length: %d\r\n%s\r\n%s" % (status, len(body), extra, body)
        )
        await writer.drain()

    return reply


def raw(data: bytes, *, close: bool = True) -> Reply:
    async def reply(_: asyncio.StreamReader, writer: asyncio.StreamWriter, __: Seen) -> None:
        writer.write(data)
        await writer.drain()
        if close:
            writer.close()

    return reply


def held_stream() -> Reply:
    """A chunked event stream: one event, then open until ``seen.release`` is set."""

    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, s: Seen) -> None:
        event = b"data: 1\n\n"
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (len(event), event)
        )
        await writer.drain()
        ended = asyncio.ensure_future(reader.read(1))  # b"": the client closed
        released = asyncio.ensure_future(s.release.wait())
        done, _ = await asyncio.wait({ended, released}, return_when=asyncio.FIRST_COMPLETED)
        for waiting in (ended, released):
            waiting.cancel()
        await asyncio.gather(ended, released, return_exceptions=True)
        if ended in done:
            s.closed_by_client += 1
            writer.close()
            return
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    return reply


TIMEOUT = httpx2.Timeout(10.0)


@contextlib.asynccontextmanager
async def client(
    *,
    timeout: httpx2.Timeout = TIMEOUT,
    connections: int | None = None,
    tls: ssl.SSLContext | None = None,
) -> AsyncIterator[httpx2.AsyncClient]:
    transport = AiohttpTransport(connections=connections, tls=tls)
    async with httpx2.AsyncClient(transport=transport, timeout=timeout) as http:
        yield http


async def send(
    http: httpx2.AsyncClient, method: str, url: str, content: bytes | None = None
) -> httpx2.Response:
    """``method url`` sent as the gateway sends: a request made directly, with none of the
    client's defaults merged in."""
    return await http.send(httpx2.Request(method, url, content=content), stream=True)


# -- what goes upstream --------------------------------------------------------------


async def test_a_request_goes_as_given() -> None:
    """Method, path, query and headers as the request has them; the only header added is
    the body's length (no User-Agent, Accept, Accept-Encoding or Content-Type of its own)."""
    async with scripted(plain()) as (url, seen), client() as http:
        request = httpx2.Request(
            "POST",
            url + "?a=%2F",
            headers=[("x-one", "1"), ("mcp-session-id", "s")],
            content=b'{"a":1}',
        )
        resp = await http.send(request)
        await send(http, "GET", url)  # no body: no length either
    assert resp.status_code == 200 and resp.text == "ok"
    (post_line, post), (get_line, get) = seen.heads
    assert post_line == "POST /mcp?a=%2F HTTP/1.1" and get_line == "GET /mcp HTTP/1.1"
    assert sorted(name for name, _ in post) == [
        "content-length",
        "host",
        "mcp-session-id",
        "x-one",
    ]
    assert sorted(name for name, _ in get) == ["host"]
    assert dict(post)["host"] == url.split("/")[2] and seen.bodies[0] == b'{"a":1}'


async def test_a_redirect_is_passed_on_not_followed() -> None:
    async with scripted(plain(307, b"", b"location: /elsewhere")) as (url, seen), client() as h:
        resp = await send(h, "POST", url, content=b"{}")
        await resp.aclose()
    assert resp.status_code == 307 and resp.headers["location"] == "/elsewhere"
    assert len(seen.heads) == 1


async def test_no_cookie_is_kept() -> None:
    async with (
        scripted(plain(200, b"", b"set-cookie: affinity=a1; Path=/")) as (url, seen),
        client() as http,
    ):
        for _ in range(2):
            await (await send(http, "GET", url)).aread()
    assert all("cookie" not in dict(head) for _, head in seen.heads)


async def test_the_body_is_passed_raw_and_decoded_on_request() -> None:
    """No decoding in the transport: ``aiter_raw`` gives the bytes as sent,
    ``aiter_bytes`` decodes them (``httpx2`` does, from ``Content-Encoding``)."""
    packed = gzip.compress(b"data: 1\n\n")
    async with (
        scripted(plain(200, packed, b"content-encoding: gzip")) as (url, _),
        client() as http,
    ):
        first = await send(http, "GET", url)
        raw_body = b"".join([piece async for piece in first.aiter_raw()])
        second = await send(http, "GET", url)
        decoded = b"".join([piece async for piece in second.aiter_bytes()])
    assert raw_body == packed and decoded == b"data: 1\n\n"


# -- connections ----------------------------------------------------------------------


async def test_a_body_read_to_its_end_returns_the_connection() -> None:
    async with scripted(plain()) as (url, seen), client() as http:
        for _ in range(3):
            resp = await send(http, "GET", url)
            await resp.aread()
            await resp.aclose()
    assert seen.accepted == 1 and len(seen.heads) == 3


async def test_a_body_closed_early_closes_its_connection() -> None:
    """The upstream sees the client go (a stream it holds open ends), and the next
    request gets a new connection."""
    async with scripted(held_stream(), plain()) as (url, seen), client() as http:
        resp = await send(http, "GET", url)
        pieces = resp.aiter_raw()
        assert await pieces.__anext__() == b"data: 1\n\n"
        await resp.aclose()
        await (await send(http, "GET", url)).aread()
    assert seen.closed_by_client >= 1 and seen.accepted == 2


async def test_the_cap_holds() -> None:
    """With one connection allowed and it held by an open stream, a second request
    waits for it (past ``pool`` + ``connect``: ``ConnectTimeout``), then gets it."""
    timeout = httpx2.Timeout(10.0, connect=0.2, pool=0.2)
    async with (
        scripted(held_stream(), plain()) as (url, seen),
        client(connections=1, timeout=timeout) as http,
    ):
        held = await send(http, "GET", url)
        with pytest.raises(httpx2.ConnectTimeout):
            await send(http, "GET", url)
        seen.release.set()
        await held.aread()
        await (await send(http, "GET", url)).aread()
    assert seen.accepted == 1 and len(seen.heads) == 2


def test_no_connection_at_all_is_refused() -> None:
    with pytest.raises(ValueError, match="connections"):
        AiohttpTransport(connections=0)
    with pytest.raises(ValueError, match="upstream_connections"):
        Gateway("http://127.0.0.1:1/mcp", limits=GatewayLimits(upstream_connections=0))


# -- TLS ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def server_tls(authority: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    return context


async def test_an_https_upstream_is_verified(
    authority: trustme.CA, server_tls: ssl.SSLContext
) -> None:
    """A certificate the context trusts is taken; one it does not is a ``ConnectError``
    (the system's trust store does not know a private authority)."""
    trusting = ssl.create_default_context()
    authority.configure_trust(trusting)
    async with scripted(plain(), tls=server_tls) as (url, seen):
        async with client(tls=trusting) as http:
            assert (await send(http, "GET", url)).status_code == 200
        async with client() as http:
            with pytest.raises(httpx2.ConnectError):
                await send(http, "GET", url)
    assert len(seen.heads) == 1


async def test_ssl_cert_file_names_the_authorities_by_default(
    authority: trustme.CA,
    server_tls: ssl.SSLContext,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a context of its own (the gateway's case) the transport takes httpx2's
    default one, which reads ``SSL_CERT_FILE``: how a deployment trusts a private CA."""
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    async with scripted(plain(), tls=server_tls) as (url, _), client() as http:
        assert (await send(http, "GET", url)).status_code == 200


# -- failures --------------------------------------------------------------------------


async def test_a_refused_connection_is_a_connect_error() -> None:
    async with scripted(plain()) as (url, _):
        pass  # the port is closed again
    async with client() as http:
        with pytest.raises(httpx2.ConnectError):
            await send(http, "GET", url)


@pytest.mark.parametrize(
    "reply",
    [
        raw(b""),  # closed before any response
        raw(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n"),  # closed inside the head
        raw(b"HTP/1.1 200 OK\r\n\r\n"),  # not HTTP
        raw(b"HTTP/1.1 200 OK\r\nx-big: " + b"a" * MAX_FIELD + b"\r\n\r\n"),
        raw(b"HTTP/1.1 200 OK\r\n" + b"x-h: 1\r\n" * (MAX_HEADERS + 1) + b"\r\n"),
    ],
    ids=["no-response", "cut-head", "not-http", "header-too-long", "too-many-headers"],
)
async def test_a_broken_response_is_a_protocol_error(reply: Reply) -> None:
    async with scripted(reply) as (url, _), client() as http:
        with pytest.raises(httpx2.RemoteProtocolError):
            await send(http, "GET", url)


async def test_headers_just_under_the_limits_are_taken() -> None:
    line = b"x-big: " + b"a" * (MAX_FIELD - 200)
    many = [b"x-h: %d" % i for i in range(MAX_HEADERS - 2)]  # with the other two: the limit
    async with scripted(plain(200, b"", line, *many)) as (url, _), client() as http:
        resp = await send(http, "GET", url)
    assert len(resp.headers["x-big"]) == MAX_FIELD - 200
    assert len(resp.headers.get_list("x-h")) == MAX_HEADERS - 2


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n9\r\ndata: 1\n\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\ndata: 1\n\n",
    ],
    ids=["chunked", "sized"],
)
async def test_a_body_that_breaks_off_is_a_protocol_error_while_read(data: bytes) -> None:
    """What the core tells apart: a stream that ended (``StopAsyncIteration``) from one
    that broke (an exception), here the server closing in the middle of the body."""
    async with scripted(raw(data)) as (url, _), client() as http:
        resp = await send(http, "GET", url)
        got = []
        with pytest.raises(httpx2.RemoteProtocolError):
            async for piece in resp.aiter_raw():
                got.append(piece)
    assert b"".join(got) == b"data: 1\n\n"


async def test_a_silent_server_is_a_read_timeout() -> None:
    async with (
        scripted(raw(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n", close=False)) as (url, _),
        client(timeout=httpx2.Timeout(10.0, read=0.2)) as http,
    ):
        resp = await send(http, "GET", url)
        with pytest.raises(httpx2.ReadTimeout):
            await resp.aread()
