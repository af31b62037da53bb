"""The HTTP edge (fsm.gateway.edge) against a real uvicorn server on 127.0.0.1, with each
parser: what a hostile client's request heads and connections get, that requests within
the limits still pass, and that the gateway is served with the edge. Then the
``HostPolicy`` and ``EdgeLimits`` contracts as plain functions.

Every wait is on an event (a response arriving, a socket reaching EOF); the timeouts
around them only stop a hang."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import tracemalloc
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio
import pytest
import uvicorn
from anyio.abc import SocketStream
from uvicorn.server import ServerState

from fsm.gateway import edge as edge_module
from fsm.gateway.edge import (
    HAS_HTTPTOOLS,
    EdgeH11Protocol,
    EdgeLimits,
    HostPolicy,
    protocol_class,
    uvicorn_settings,
)
from fsm.wire.serving import serving
from tests.gateway import raw_http
from tests.gateway import scripted_upstream as scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

MIB = 1 << 20


# --------------------------------------------------------------------------- the servers


async def app(scope: Any, receive: Any, send: Any) -> None:
    """Answers every request ``200`` with its header count as the body; ``GET /stream``
    sends one chunk, then the rest once ``STREAM_GO`` is set."""
    if scope["type"] == "lifespan":
        while (m := await receive())["type"] != "lifespan.shutdown":
            await send({"type": m["type"] + ".complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    while (await receive()).get("more_body"):
        pass
    body = str(len(scope["headers"])).encode()
    if scope["path"] == "/stream":  # chunked
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first,", "more_body": True})
        await STREAM_GO.wait()
    else:
        length = [(b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": length})
    await send({"type": "http.response.body", "body": body})


STREAM_GO: anyio.Event


@contextlib.asynccontextmanager
async def served(
    http: str, edge: EdgeLimits | None = None, the_app: Any = app
) -> AsyncIterator[int]:
    """``the_app`` served with ``edge`` and ``http`` on 127.0.0.1; yields the port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        async with serving(the_app, sock, log_level="critical", edge=edge, http=http):
            yield sock.getsockname()[1]
    finally:
        sock.close()


def head(*lines: str, path: str = "/", close: bool = True) -> bytes:
    """A GET head to ``path`` with ``Host``, ``lines`` and (``close``) ``Connection: close``."""
    fields = ["Host: localhost", *lines, *(["Connection: close"] if close else [])]
    return (
        f"GET {path} HTTP/1.1\r\n".encode() + "".join(f"{f}\r\n" for f in fields).encode() + b"\r\n"
    )


async def read_response(stream: SocketStream) -> bytes:
    """One response with a ``Content-Length`` (the connection stays open)."""
    out = bytearray()
    with anyio.fail_after(scripted.GUARD):
        while b"\r\n\r\n" not in out:
            out += await stream.receive()
        top, _, rest = bytes(out).partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in top.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(rest) < length:
            rest += await stream.receive()
    return top + b"\r\n\r\n" + rest


async def push(port: int, pieces: Iterable[bytes]) -> bytes:
    """Send ``pieces`` on a fresh connection while reading; stop sending as soon as the
    server answered or closed. Returns what it sent before closing."""
    answer = bytearray()
    over = anyio.Event()
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:

        async def reader() -> None:
            try:
                answer.extend(await raw_http.read_to_eof(stream))
            finally:
                over.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            with contextlib.suppress(anyio.BrokenResourceError, ConnectionError):
                for piece in pieces:
                    if over.is_set():
                        break
                    await stream.send(piece)
            with anyio.fail_after(scripted.GUARD):
                await over.wait()
    return bytes(answer)


# --------------------------------------------------------------------------- request heads


@scripted.PARSERS
async def test_a_64_mib_header_line_gets_431_and_is_not_held(http: str) -> None:
    chunk = b"a" * MIB
    pieces = [b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: ", *([chunk] * 64)]
    async with served(http) as port:
        tracemalloc.start()
        try:
            answer = await push(port, pieces)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert raw_http.status(answer) == 431
    assert b"connection: close" in answer.lower()
    assert peak < 16 * MIB, f"{peak / MIB:.1f} MiB allocated while the line was sent"


@scripted.PARSERS
async def test_10000_headers_get_431(http: str) -> None:
    lines = [f"X-H{i}: v" for i in range(10_000)]
    async with served(http) as port:
        answer = await push(port, [head(*lines)])
    assert raw_http.status(answer) == 431


@scripted.PARSERS
async def test_one_header_too_many_gets_431_though_the_head_is_small(http: str) -> None:
    limits = EdgeLimits(max_headers=20)  # Host and Connection are two of them
    async with served(http, limits) as port:
        at_limit = await raw_http.exchange(port, head(*(f"X-H{i}: v" for i in range(18))))
        over = await raw_http.exchange(port, head(*(f"X-H{i}: v" for i in range(19))))
    assert raw_http.status(at_limit) == 200 and at_limit.endswith(b"\r\n\r\n20")
    assert raw_http.status(over) == 431


@scripted.PARSERS
async def test_a_refused_head_with_more_bytes_behind_it_is_answered_once(
    http: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The bytes after a refused head (a body, a next request) are dropped, not parsed."""
    lines = [f"X-H{i}: v" for i in range(30)]
    body = b"b" * 200_000
    request = head(*lines, f"Content-Length: {len(body)}").replace(b"GET", b"POST", 1) + body
    with caplog.at_level("WARNING"):
        async with served(http, EdgeLimits(max_headers=20)) as port:
            answer = await push(port, [request + head()])
    assert raw_http.status(answer) == 431
    assert answer.count(b"HTTP/1.1") == 1
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.text


def padded(size: int) -> bytes:
    """A head of exactly ``size`` bytes."""
    bare = head("X-Pad: ")
    pad = "p" * (size - len(bare))
    out = head(f"X-Pad: {pad}")
    assert len(out) == size
    return out


@scripted.PARSERS
async def test_a_head_of_the_limit_passes_one_byte_more_gets_431_even_in_one_read(
    http: str,
) -> None:
    limit = 4096
    async with served(http, EdgeLimits(max_header_bytes=limit)) as port:
        at_limit = await raw_http.exchange(port, padded(limit))
        over = await raw_http.exchange(port, padded(limit + 1))
    assert raw_http.status(at_limit) == 200
    assert raw_http.status(over) == 431


class Transport(asyncio.Transport):
    """A connection's transport that keeps what the protocol writes: the protocol is fed
    reads exactly as they are cut here, which a socket cannot promise."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closing = self.eof = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 1), "peername": ("127.0.0.1", 2)}.get(name, default)

    def write(self, data: Any) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def is_reading(self) -> bool:
        return True


@scripted.PARSERS
async def test_a_head_cut_across_reads_is_counted_whole(http: str) -> None:
    """The last read alone would hold a complete head within the limit (h11 itself only
    bounds an incomplete one)."""
    limits = EdgeLimits(max_header_bytes=4096)
    settings = uvicorn_settings(limits, http)
    config = uvicorn.Config(app, **settings)
    config.load()
    protocol = settings["http"](config=config, server_state=ServerState(), app_state={})
    transport = Transport()
    protocol.connection_made(transport)
    request = padded(4097)
    protocol.data_received(request[:100])
    protocol.data_received(request[100:])
    assert raw_http.status(bytes(transport.written)) == 431
    assert transport.eof
    protocol.connection_lost(None)


@scripted.PARSERS
async def test_a_client_that_writes_all_before_reading_still_reads_its_431(
    http: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More than the loopback's socket buffers hold: a server that closed at once, with
    the client's bytes unread, would reset the connection under the client's send."""
    monkeypatch.setattr(edge_module, "LINGER_S", scripted.GUARD)  # no race with a slow machine
    request = b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * (32 * MIB)
    async with served(http) as port, await anyio.connect_tcp("127.0.0.1", port) as stream:
        with anyio.fail_after(scripted.GUARD):
            await stream.send(request)
        answer = await raw_http.read_to_eof(stream)
    assert raw_http.status(answer) == 431


# --------------------------------------------------------------------------- slow clients


@scripted.PARSERS
async def test_slow_heads_get_408_while_a_fresh_request_is_served(http: str) -> None:
    limits = EdgeLimits(header_timeout_s=1.0)
    async with served(http, limits) as port, contextlib.AsyncExitStack() as stack:
        slow = [
            await stack.enter_async_context(await anyio.connect_tcp("127.0.0.1", port))
            for _ in range(50)
        ]
        for stream in slow:
            await stream.send(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        normal = await raw_http.exchange(port, head())
        answers: list[bytes] = []

        async def wait(stream: SocketStream) -> None:
            answers.append(await raw_http.read_to_eof(stream))

        async with anyio.create_task_group() as tg:
            for stream in slow:
                tg.start_soon(wait, stream)
    assert raw_http.status(normal) == 200
    assert len(answers) == 50
    assert all(raw_http.status(a) == 408 and b"connection: close" in a.lower() for a in answers)


@scripted.PARSERS
async def test_a_connection_that_sends_nothing_is_closed_unanswered(http: str) -> None:
    async with (
        served(http, EdgeLimits(header_timeout_s=0.3)) as port,
        await anyio.connect_tcp("127.0.0.1", port) as stream,
    ):
        assert await raw_http.read_to_eof(stream) == b""


async def kept_then(http: str, limits: EdgeLimits, then: bytes) -> tuple[bytes, bytes]:
    """On one kept connection: the response to a first request, then what the server
    sends until it closes after ``then`` (nothing: the connection left idle)."""
    async with served(http, limits) as port, await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(head(close=False))
        first = await read_response(stream)
        if then:
            await stream.send(then)
        return first, await raw_http.read_to_eof(stream)


@scripted.PARSERS
async def test_a_next_head_stalled_on_a_kept_connection_gets_408(http: str) -> None:
    limits = EdgeLimits(header_timeout_s=0.3, keep_alive_s=scripted.GUARD)
    first, second = await kept_then(http, limits, b"GET / HTTP/1.1\r\nHost: localh")
    assert raw_http.status(first) == 200
    assert raw_http.status(second) == 408


@scripted.PARSERS
async def test_an_idle_kept_connection_is_closed_after_keep_alive(http: str) -> None:
    limits = EdgeLimits(keep_alive_s=0.3, header_timeout_s=scripted.GUARD)
    first, rest = await kept_then(http, limits, b"")
    assert raw_http.status(first) == 200
    assert rest == b""


@scripted.PARSERS
async def test_a_response_longer_than_the_header_timeout_is_not_cut(http: str) -> None:
    """The stream's head came before a slow client's: when that client's timer has fired,
    the stream's would have too, had it been left running."""
    global STREAM_GO
    STREAM_GO = anyio.Event()
    async with (
        served(http, EdgeLimits(header_timeout_s=0.3)) as port,
        await anyio.connect_tcp("127.0.0.1", port) as stream,
    ):
        await stream.send(head(path="/stream"))
        got = b""
        with anyio.fail_after(scripted.GUARD):
            while b"first," not in got:
                got += await stream.receive()
        late = await raw_http.exchange(port, b"GET / HTTP/1.1\r\n")  # times out after the stream's
        STREAM_GO.set()
        got += await raw_http.read_to_eof(stream)
    assert raw_http.status(late) == 408
    assert raw_http.status(got) == 200 and got.endswith(b"0\r\n\r\n")


@scripted.PARSERS
async def test_a_connection_over_max_connections_gets_503(http: str) -> None:
    limits = EdgeLimits(max_connections=2, keep_alive_s=scripted.GUARD)
    async with served(http, limits) as port, contextlib.AsyncExitStack() as stack:
        answers = []
        for _ in range(2):  # kept open: both count
            stream = await stack.enter_async_context(await anyio.connect_tcp("127.0.0.1", port))
            await stream.send(head(close=False))
            answers.append(await read_response(stream))
        third = await raw_http.exchange(port, head())
    assert [raw_http.status(a) for a in answers] == [200, 200]
    assert raw_http.status(third) == 503


# --------------------------------------------------------------------------- the gateway


@scripted.PARSERS
async def test_the_gateway_is_served_with_the_edge(http: str) -> None:
    from support.gateway import running_gateway

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    up = sock.getsockname()[1]
    limits = EdgeLimits(max_headers=20)
    try:
        async with (
            serving(scripted.empty_results, sock, log_level="critical"),
            running_gateway(f"http://127.0.0.1:{up}/mcp", edge=limits, http=http) as gw,
        ):
            port = gw.port
            fine = await raw_http.exchange(port, raw_http.request(port))
            crowded = await raw_http.exchange(
                port, raw_http.request(port, *(f"X-H{i}: v" for i in range(20)))
            )
            rebinding = await raw_http.exchange(
                port,
                raw_http.request(port).replace(
                    f"Host: 127.0.0.1:{port}".encode(),
                    b"Host: evil.example.com\r\nOrigin: http://evil.example.com",
                ),
            )
    finally:
        sock.close()
    assert raw_http.status(fine) == 200 and b'"id":1' in fine.replace(b" ", b"")
    assert raw_http.status(crowded) == 431
    assert raw_http.status(rebinding) == 421


# --------------------------------------------------------------------------- settings


def test_uvicorn_settings_carry_every_limit() -> None:
    limits = EdgeLimits(
        max_header_bytes=8192,
        max_headers=10,
        header_timeout_s=2.5,
        keep_alive_s=0.25,
        max_connections=7,
    )
    settings = uvicorn_settings(limits, "h11")
    assert settings["timeout_keep_alive"] == 0.25
    assert settings["limit_concurrency"] == 8  # uvicorn refuses at it: 7 are served
    assert settings["h11_max_incomplete_event_size"] == 8192
    cls = settings["http"]
    assert issubclass(cls, EdgeH11Protocol) and cls.limits == limits
    config = uvicorn.Config(app, **settings)
    config.load()
    assert config.http_protocol_class is cls and config.timeout_keep_alive == 0.25
    assert uvicorn_settings(EdgeLimits(max_connections=None))["limit_concurrency"] is None


def test_the_parser_is_chosen_by_name() -> None:
    auto = protocol_class(EdgeLimits())
    if HAS_HTTPTOOLS:
        from fsm.gateway.edge import EdgeHttpToolsProtocol

        assert issubclass(auto, EdgeHttpToolsProtocol)
    else:
        assert issubclass(auto, EdgeH11Protocol)
    assert protocol_class(EdgeLimits(), "h11") is protocol_class(EdgeLimits(), "h11")
    with pytest.raises(ValueError, match="http must be"):
        protocol_class(EdgeLimits(), "h2")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_header_bytes": 1023},
        {"max_headers": 0},
        {"header_timeout_s": 0},
        {"header_timeout_s": float("nan")},
        {"keep_alive_s": -1.0},
        {"keep_alive_s": float("inf")},
        {"max_connections": 0},
    ],
)
def test_edge_limits_out_of_range_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        EdgeLimits(**kwargs)


def test_edge_limits_defaults() -> None:
    assert EdgeLimits() == EdgeLimits(32 * 1024, 100, 10.0, 5.0, 4096)


# --------------------------------------------------------------------------- Host, Origin


@pytest.mark.parametrize(
    ("policy", "headers", "refusal"),
    [
        (HostPolicy(), {"host": "localhost"}, None),
        (HostPolicy(), {"host": "LocalHost:8100"}, None),
        (HostPolicy(), {"host": "127.0.0.1:1"}, None),
        (HostPolicy(), {"host": "[::1]:8100"}, None),
        (HostPolicy(), {"host": "[::1]"}, None),
        (HostPolicy(), {"host": "evil.example.com"}, (421, "Invalid Host header")),
        (HostPolicy(), {"host": "localhost.evil.example.com"}, (421, "Invalid Host header")),
        (HostPolicy(), {"host": "[::2]:8100"}, (421, "Invalid Host header")),
        (HostPolicy(), {}, (400, "Missing Host header")),
        (HostPolicy(), {"host": ""}, (400, "Missing Host header")),
        # the conformance suite's dns-rebinding-protection request: foreign Host and Origin
        (
            HostPolicy(),
            {"host": "evil.example.com", "origin": "http://evil.example.com"},
            (421, "Invalid Host header"),
        ),
        (HostPolicy(("example.com:8443",)), {"host": "example.com:8443"}, None),
        (HostPolicy(("Example.COM:8443",)), {"host": "example.com:8443"}, None),
        (HostPolicy(("example.com:8443",)), {"host": "example.com"}, (421, "Invalid Host header")),
        (
            HostPolicy(("example.com:8443",)),
            {"host": "example.com:443"},
            (421, "Invalid Host header"),
        ),
        (HostPolicy(("::1",)), {"host": "[::1]:9"}, None),
        (HostPolicy(("[::1]:9",)), {"host": "[::1]:10"}, (421, "Invalid Host header")),
        (HostPolicy(("*",)), {"host": "anything.example"}, None),
        # Origin
        (HostPolicy(), {"host": "localhost:8100", "origin": "http://localhost:3000"}, None),
        (HostPolicy(), {"host": "localhost", "origin": "https://127.0.0.1"}, None),
        (HostPolicy(), {"host": "localhost", "origin": "http://[::1]:3000"}, None),
        (
            HostPolicy(),
            {"host": "localhost", "origin": "http://evil.example.com"},
            (403, "Invalid Origin header"),
        ),
        (HostPolicy(), {"host": "localhost", "origin": "null"}, (403, "Invalid Origin header")),
        (
            HostPolicy(),
            {"host": "localhost", "origin": "ftp://localhost"},
            (403, "Invalid Origin header"),
        ),
        (
            HostPolicy(allowed_origins=("https://app.example.com",)),
            {"host": "localhost", "origin": "https://App.example.com/"},
            None,
        ),
        (
            HostPolicy(allowed_origins=("https://app.example.com",)),
            {"host": "localhost", "origin": "http://app.example.com"},
            (403, "Invalid Origin header"),
        ),
        # "*" admits any Host, not any Origin: the request's own host, or a named one
        (
            HostPolicy(("*",)),
            {"host": "mcp.example.com", "origin": "https://mcp.example.com"},
            None,
        ),
        (
            HostPolicy(("*",)),
            {"host": "mcp.example.com", "origin": "https://evil.example.com"},
            (403, "Invalid Origin header"),
        ),
        (
            HostPolicy(("*", "localhost")),
            {"host": "mcp.example.com", "origin": "http://localhost:3000"},
            None,
        ),
    ],
)
def test_host_policy(
    policy: HostPolicy, headers: dict[str, str], refusal: tuple[int, str] | None
) -> None:
    assert policy.refusal(headers) == refusal
