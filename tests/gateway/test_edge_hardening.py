"""Hostile requests at the gateway's HTTP edge, each against a real gateway (or a uvicorn
server with the edge) on 127.0.0.1: a malformed ``Origin`` or ``Host`` gets its refusal
(never ``500`` and a traceback), a WebSocket upgrade is served as plain HTTP (or refused
by the app when a server hands it a ``websocket`` scope), the bytes of request bodies
being received at once are bounded over every connection (``503`` past
``GatewayLimits.max_receiving_bytes``, given back however a body ends) and per client
address (``max_receiving_bytes_per_peer``: one client cannot hold them all), a body cut
off by a disconnect is never forwarded, and a chunked request's trailers are neither
counted as header lines nor passed to the app.

Every wait is on an event (a response arriving, a socket reaching EOF, a count the gateway
holds reaching a value); the timeouts around them only stop a hang."""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
import uvicorn

from fsm.gateway.app import GatewayLimits
from fsm.gateway.edge import BodyBudget, EdgeLimits, HostPolicy, uvicorn_settings
from fsm.wire.serving import serving, tcp_socket, whole_body
from support.gateway import RunningGateway, running_gateway
from tests.gateway import raw_http
from tests.gateway import scripted_upstream as scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


# --------------------------------------------------------------------------- the rig


@contextlib.asynccontextmanager
async def gateway(
    http: str = "auto", app: Any = scripted.empty_results, **kwargs: Any
) -> AsyncIterator[tuple[RunningGateway, int]]:
    """A gateway (keywords: :class:`~fsm.gateway.app.Gateway`'s) in front of ``app``
    (default :func:`scripted_upstream.empty_results`); yields it and its port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    up = sock.getsockname()[1]
    try:
        async with (
            serving(app, sock, log_level="critical"),
            running_gateway(f"http://127.0.0.1:{up}/mcp", http=http, **kwargs) as gw,
        ):
            yield gw, gw.port
    finally:
        sock.close()


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


# --------------------------------------------------------------------------- Origin, Host

MALFORMED_ORIGINS = ["http://[", "http://[::1", "http://[zz]:80", "https://[::1", "http://[]"]
MALFORMED_HOSTS = ["[", "[::1", "[zz]:80", "a:b:c", "[::1]:x", ":"]


@pytest.mark.parametrize("origin", MALFORMED_ORIGINS)
@pytest.mark.parametrize("host", ["localhost", "127.0.0.1:8100", "*"])
def test_a_malformed_origin_is_refused_not_raised(origin: str, host: str) -> None:
    policy = HostPolicy(("*",)) if host == "*" else HostPolicy()
    headers = {"host": "mcp.example.com" if host == "*" else host, "origin": origin}
    assert policy.refusal(headers) == (403, "Invalid Origin header")


@pytest.mark.parametrize("host", MALFORMED_HOSTS)
def test_a_malformed_host_is_refused_not_raised(host: str) -> None:
    assert HostPolicy().refusal({"host": host}) == (421, "Invalid Host header")


@scripted.PARSERS
async def test_malformed_origins_and_hosts_get_403_and_421_over_http(
    http: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        async with gateway(http) as (_gw, port):
            origins = [
                await raw_http.exchange(port, raw_http.request(port, f"Origin: {o}"))
                for o in MALFORMED_ORIGINS
            ]
            hosts = [
                await raw_http.exchange(port, raw_http.request(port, host=h))
                for h in MALFORMED_HOSTS
            ]
    assert [raw_http.status(a) for a in origins] == [403] * len(MALFORMED_ORIGINS)
    assert all(b"Invalid Origin header" in a for a in origins)
    assert [raw_http.status(a) for a in hosts] == [421] * len(MALFORMED_HOSTS)
    assert not errors(caplog), caplog.text


# --------------------------------------------------------------------------- WebSocket

UPGRADE = (
    "Connection: Upgrade",
    "Upgrade: websocket",
    "Sec-WebSocket-Version: 13",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
)


def test_uvicorn_settings_turn_websockets_off() -> None:
    assert uvicorn_settings(EdgeLimits())["ws"] == "none"
    assert uvicorn_settings(EdgeLimits(), "h11", relay=True)["ws"] == "none"


@scripted.PARSERS
async def test_a_websocket_upgrade_is_served_as_plain_http(
    http: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        async with gateway(http) as (_gw, port):
            health = await raw_http.exchange(
                port, raw_http.request(port, *UPGRADE, method="GET", path="/-/healthz")
            )
            other = await raw_http.exchange(
                port, raw_http.request(port, *UPGRADE, method="GET", path="/x")
            )
    assert raw_http.status(health) == 200 and health.endswith(b'{"status": "ok"}')
    assert raw_http.status(other) == 404
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


@scripted.PARSERS
async def test_the_gateway_refuses_a_websocket_scope(
    http: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Served by a uvicorn with WebSocket support on (not as the CLI serves it), an
    upgrade reaches the app as a ``websocket`` scope: it is refused, ``403``."""
    from fsm.gateway.app import Gateway

    app = Gateway("http://127.0.0.1:9/mcp")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    settings = {**uvicorn_settings(EdgeLimits(), http, relay=True), "ws": "websockets-sansio"}
    config = uvicorn.Config(app, lifespan="off", log_level="warning", **settings)
    server = uvicorn.Server(config)
    try:
        with caplog.at_level(logging.WARNING):
            async with anyio.create_task_group() as tg:

                async def serve() -> None:
                    with tcp_socket(sock) as listening:
                        await server.serve([listening])

                tg.start_soon(serve)
                with anyio.fail_after(10):
                    while not server.started:  # startup poll, not test synchronisation
                        await anyio.sleep(0.005)
                try:
                    answer = await raw_http.exchange(
                        port, raw_http.request(port, *UPGRADE, method="GET", body=b"")
                    )
                finally:
                    server.should_exit = True
    finally:
        sock.close()
    assert raw_http.status(answer) == 403
    assert not errors(caplog), caplog.text


# --------------------------------------------------------------------------- request bodies

MAX_BODY = 8192
RECEIVING = 12288


async def held_reaches(gw: RunningGateway, value: Callable[[int], bool]) -> None:
    """Wait until the bytes of request bodies the gateway holds satisfy ``value``."""
    budget: BodyBudget = gw.gateway._bodies
    with anyio.fail_after(scripted.GUARD):
        while not value(budget.held):  # a count the gateway reaches: polled
            await anyio.sleep(0.005)


async def past_the_bound(port: int, size: int) -> tuple[bytes, bytes]:
    """The answers to two requests of ``size`` body bytes that pass a bound: one that
    declares its length (refused before its body is sent), one sent chunked."""
    declared = await raw_http.exchange(port, raw_http.request(port, body=b"", length=size))
    chunk = b" " * size
    chunked = await raw_http.exchange(
        port,
        raw_http.request(port, "Transfer-Encoding: chunked", body=b"", length=-1)
        + b"%x\r\n" % len(chunk)
        + chunk
        + b"\r\n",
    )
    return declared, chunked


def bounded(**kwargs: Any) -> GatewayLimits:
    return GatewayLimits(max_body=MAX_BODY, max_receiving_bytes=RECEIVING, **kwargs)


@scripted.PARSERS
async def test_bodies_being_received_are_bounded_over_every_connection(http: str) -> None:
    async with gateway(http, limits=bounded()) as (gw, port):
        stall = await anyio.connect_tcp("127.0.0.1", port)
        try:  # 7000 of 8000 declared bytes, the rest never sent
            await stall.send(raw_http.request(port, body=b" " * 7000, length=8000))
            await held_reaches(gw, lambda held: held == 7000)
            # a declared length that does not fit: refused before its body is sent
            # and one without a length (chunked), refused once a piece would pass it
            declared, chunked = await past_the_bound(port, 6000)
            assert gw.gateway._bodies.held == 7000  # the refused ones gave theirs back
            fits = await raw_http.exchange(port, raw_http.request(port, body=b" " * 5000 + b"{}"))
        finally:
            await stall.aclose()
        await held_reaches(gw, lambda held: held == 0)  # the stalled client left
        after = await raw_http.exchange(
            port, raw_http.request(port, body=b" " * 7000 + b"{}", length=7002)
        )
    for refused in (declared, chunked):
        assert raw_http.status(refused) == 503, refused
        assert b"retry-after: 1" in refused.lower()
        assert b'"code": -32000' in refused and b"retry" in refused
    assert raw_http.status(fits) != 503 and raw_http.status(after) != 503


@scripted.PARSERS
async def test_a_body_that_times_out_gives_its_bytes_back(http: str) -> None:
    async with gateway(http, limits=bounded(body_timeout_s=0.5)) as (gw, port):
        async with await anyio.connect_tcp("127.0.0.1", port) as stall:
            await stall.send(raw_http.request(port, body=b" " * 7000, length=8000))
            answer = await raw_http.read_to_eof(stall)  # the body timeout's 408
        await held_reaches(gw, lambda held: held == 0)
    assert raw_http.status(answer) == 408


def test_max_receiving_bytes_is_at_least_max_body() -> None:
    assert GatewayLimits().max_receiving_bytes == 256 * 1024 * 1024
    with pytest.raises(ValueError, match="max_receiving_bytes"):
        GatewayLimits(max_body=4096, max_receiving_bytes=4095)
    with pytest.raises(ValueError):
        BodyBudget(0)


def test_body_budget_counts_what_fits() -> None:
    budget = BodyBudget(10)
    assert budget.take(6) and not budget.take(5) and budget.held == 6
    assert budget.take(4) and budget.held == 10 and not budget.fits(1)
    budget.give(10)
    assert budget.held == 0


def test_body_budget_gives_each_peer_a_share() -> None:
    budget = BodyBudget(10, per_peer=6)
    assert budget.take(5, "a") and not budget.take(2, "a") and budget.over(2, "a") == "peer"
    assert budget.take(5, "b") and budget.over(1, "c") == "all" and not budget.take(1, "c")
    assert budget.take(0, "c") and budget.peers == {"a": 5, "b": 5}
    budget.give(5, "a")
    budget.give(0, "c")
    assert budget.peers == {"b": 5} and budget.held == 5  # no entry for a peer at 0
    budget.give(5, "b")
    assert budget.peers == {} and budget.held == 0
    with pytest.raises(ValueError):
        BodyBudget(10, per_peer=11)


def test_max_receiving_bytes_per_peer_is_within_max_body_and_max_receiving_bytes() -> None:
    assert GatewayLimits().max_receiving_bytes_per_peer is None
    for share in (4095, 8193):
        with pytest.raises(ValueError, match="max_receiving_bytes_per_peer"):
            GatewayLimits(
                max_body=4096, max_receiving_bytes=8192, max_receiving_bytes_per_peer=share
            )
    from fsm.gateway.app import Gateway

    def share(**kwargs: Any) -> int:
        return Gateway("http://127.0.0.1:9/mcp", limits=GatewayLimits(**kwargs))._bodies.per_peer

    assert share() == 16 * 1024 * 1024 == BodyBudget.PEER_SHARE
    assert share(max_body=4096, max_receiving_bytes=8192) == 8192
    assert share(max_body=32 << 20, max_receiving_bytes=64 << 20) == 32 << 20
    assert share(max_receiving_bytes_per_peer=1 << 30, max_receiving_bytes=1 << 30) == 1 << 30


@scripted.PARSERS
async def test_one_client_cannot_hold_every_body_being_received(http: str) -> None:
    """One address's stalled bodies hold at most its share: its next request gets ``503``
    although the whole bound has room, and another address's request still fits (as the
    reviewer's attack, scaled down: without a share it held the whole bound)."""
    # body_timeout_s: without a share, the refused requests would wait for their bodies
    limits = bounded(max_receiving_bytes_per_peer=MAX_BODY, body_timeout_s=2)
    async with gateway(http, limits=limits) as (gw, port):
        stall = await anyio.connect_tcp("127.0.0.1", port)
        try:  # 7000 of 8000 declared bytes from 127.0.0.1, the rest never sent
            await stall.send(raw_http.request(port, body=b" " * 7000, length=8000))
            await held_reaches(gw, lambda held: held == 7000)
            assert gw.gateway._bodies.peers == {"127.0.0.1": 7000}
            # 7000 + 2000 fits the whole bound (12288), not 127.0.0.1's share (8192)
            declared, chunked = await past_the_bound(port, 2000)
            assert gw.gateway._bodies.held == 7000  # the refused ones gave theirs back
            async with await anyio.connect_tcp(
                "127.0.0.1", port, local_host="127.0.0.2"
            ) as other:  # another address: its share is whole
                await other.send(raw_http.request(port, body=b" " * 5000 + b"{}"))
                fits = await raw_http.read_to_eof(other)
        finally:
            await stall.aclose()
        await held_reaches(gw, lambda held: held == 0)
        assert gw.gateway._bodies.peers == {}  # nothing kept for peers holding nothing
        after = await raw_http.exchange(
            port, raw_http.request(port, body=b" " * 7000 + b"{}", length=7002)
        )
    for refused in (declared, chunked):
        assert raw_http.status(refused) == 503, refused
        assert b"retry-after: 1" in refused.lower()
        assert b"this client's request bodies: retry" in refused
    assert raw_http.status(fits) == 202, fits  # forwarded (a notification: 202)
    assert raw_http.status(after) == 202, after


# --------------------------------------------------------------------------- cut bodies


@scripted.PARSERS
async def test_a_body_cut_off_by_a_disconnect_is_not_forwarded(http: str) -> None:
    """The client sends 7000 of 8000 declared bytes and leaves: the gateway ends the
    request once it sees the disconnect (its bytes given back, its flight over) and the
    upstream receives nothing of it; a whole request after it does reach the upstream."""
    received: list[bytes] = []

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            body = await whole_body(receive)
            received.append(body)

            async def again() -> Any:  # the body, read whole above, for ``empty_results``
                return {"type": "http.request", "body": body, "more_body": False}

            await scripted.empty_results(scope, again, send)
            return
        await scripted.empty_results(scope, receive, send)

    async with gateway(http, app=recording, limits=bounded()) as (gw, port):
        body = raw_http.INITIALIZE
        async with await anyio.connect_tcp("127.0.0.1", port) as cut:
            await cut.send(raw_http.request(port, body=body + b" " * 7000, length=8000))
            await held_reaches(gw, lambda held: held == len(body) + 7000)
        await held_reaches(gw, lambda held: held == 0)  # it saw the disconnect
        with anyio.fail_after(scripted.GUARD):
            while gw.gateway._flights:  # the cut request's handling ends: polled
                await anyio.sleep(0.005)
        cut_received = list(received)
        whole = await raw_http.exchange(port, raw_http.request(port, body=body))
    assert cut_received == []
    assert raw_http.status(whole) == 200 and received == [body]


# --------------------------------------------------------------------------- trailers


async def header_count(scope: Any, receive: Any, send: Any) -> None:
    """Answers a request ``200`` with the number of header fields its scope holds once its
    body has been read whole."""
    if scope["type"] == "lifespan":
        await scripted.empty_results(scope, receive, send)
        return
    await whole_body(receive)
    body = str(len(scope["headers"])).encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@scripted.PARSERS
@pytest.mark.parametrize("trailers", [1, 99, 150, 1000])
async def test_trailers_are_not_counted_as_header_lines_nor_passed_on(
    http: str, trailers: int
) -> None:
    head = (
        b"POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
        b"Connection: close\r\n\r\n"
    )
    body = b"5\r\nhello\r\n0\r\n" + b"".join(b"X-T%d: v\r\n" % i for i in range(trailers))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        async with serving(header_count, sock, log_level="critical", http=http):
            answer = await raw_http.exchange(sock.getsockname()[1], head + body + b"\r\n")
    finally:
        sock.close()
    assert raw_http.status(answer) == 200
    assert answer.endswith(b"\r\n\r\n3")  # Host, Transfer-Encoding, Connection
