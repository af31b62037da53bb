"""What a message looks like after the gateway passed it on, each way, seen on the raw
wire: an upstream that gives no response is answered ``502`` with a JSON-RPC error; a
response keeps the upstream's fields (one ``Date``, its ``Server``, its
``Content-Length`` when its body passes as it came); hop-by-hop fields, those a message's
``Connection`` names included, go no further (RFC 9110 section 7.6.1); a request goes
upstream with ``X-Forwarded-For`` and ``Forwarded`` appended; an HTTP/1.0 client gets no
chunked framing.

Faults are explicit: an upstream port bound but never listening (connections refused),
an upstream that resets each connection once it read a request head."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from fsm.wire.serving import lifespan, serving, whole_body  # noqa: E402
from support.gateway import running_gateway  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

UPSTREAM_DATE = b"Mon, 01 Jan 2001 00:00:00 GMT"


# --------------------------------------------------------------------------- raw HTTP


def request(
    method: str,
    port: int,
    body: bytes = b"",
    *fields: str,
    version: str = "1.1",
    target: str = "/mcp",
) -> bytes:
    """A request head for ``target`` (``Host``, ``Connection: close`` on HTTP/1.1,
    ``fields``) and body."""
    lines = [f"Host: 127.0.0.1:{port}", *fields]
    if version == "1.1":
        lines.append("Connection: close")
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    head = f"{method} {target} HTTP/{version}\r\n" + "".join(f"{line}\r\n" for line in lines)
    return head.encode() + b"\r\n" + body


async def exchange(port: int, data: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    """Send ``data`` on a fresh connection, read until the server closes it: the status,
    the fields as they came (lower-case names, repeats kept) and the body as framed."""
    out = bytearray()
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(data)
        with anyio.fail_after(scripted.GUARD):
            while True:
                try:
                    out += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                    break
    top, _, body = bytes(out).partition(b"\r\n\r\n")
    status_line, *lines = top.decode("latin-1").split("\r\n")
    fields = []
    for line in lines:
        name, _, value = line.partition(":")
        fields.append((name.strip().lower(), value.strip()))
    return int(status_line.split()[1]), fields, body


def values(fields: list[tuple[str, str]], name: str) -> list[str]:
    return [value for field, value in fields if field == name]


def unchunked(body: bytes) -> bytes:
    """A chunked body's data."""
    out = bytearray()
    while True:
        size, _, body = body.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            return bytes(out)
        out += body[:n]
        body = body[n + 2 :]


# --------------------------------------------------------------------------- upstreams


@pytest.fixture
def refusing() -> Iterator[str]:
    """An upstream URL whose port is bound but never listens: connections are refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        sock.close()


@contextlib.asynccontextmanager
async def resetting() -> AsyncIterator[str]:
    """An upstream that reads each request head, then resets the connection (RST)."""

    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
        raw = writer.get_extra_info("socket")
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        writer.transport.abort()

    server = await asyncio.start_server(reset, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
    finally:
        server.close()
        await server.wait_closed()


class Recording:
    """An upstream that records each request's fields and answers ``initialize`` with
    fields of its own (its ``Date``, its ``Server``, a ``Content-Length``, hop-by-hop
    fields and one its ``Connection`` names), a ``tools/call`` with a two-event stream."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        self.queries: list[bytes] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        body = await whole_body(receive)
        self.seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        self.queries.append(scope["query_string"])
        msg = json.loads(body) if body else {}
        common = [(b"date", UPSTREAM_DATE), (b"server", b"scripted/1")]
        if msg.get("method") == "initialize":
            payload = json.dumps(scripted.result(msg["id"])).encode()
            fields = [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(payload)),
                (b"mcp-session-id", scripted.SID.encode()),
                (b"connection", b"x-hop"),
                (b"x-hop", b"hop only"),
                (b"keep-alive", b"timeout=5"),
                (b"x-end-to-end", b"kept"),
                *common,
            ]
            await send({"type": "http.response.start", "status": 200, "headers": fields})
            await send({"type": "http.response.body", "body": payload})
            return
        fields = [(b"content-type", b"text/event-stream"), *common]
        await send({"type": "http.response.start", "status": 200, "headers": fields})
        for piece in (
            scripted.sse("e1", scripted.PROGRESS),
            scripted.sse("e2", scripted.result(msg.get("id"))),
        ):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


@contextlib.asynccontextmanager
async def recorded(http: str = "auto") -> AsyncIterator[tuple[Recording, int]]:
    """A :class:`Recording` upstream (served adding no field of uvicorn's) and a gateway
    in front of it: the upstream and the gateway's port."""
    up = Recording()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    try:
        async with (
            serving(up, sock, log_level="critical", relay=True),
            running_gateway(url, http=http) as gw,
        ):
            yield up, int(gw.url.split(":")[2].split("/")[0])
    finally:
        sock.close()


# --------------------------------------------------------------------------- 502


@pytest.mark.parametrize(
    ("method", "body", "fields", "rid"),
    [
        ("POST", {**scripted.INIT, "id": 7}, (), 7),
        ("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}, ("s1",), None),
        ("GET", None, ("s1",), None),
        ("DELETE", None, ("s1",), None),
    ],
    ids=["request", "notification", "stream", "delete"],
)
async def test_an_upstream_that_refuses_connections_gets_502(
    refusing: str, method: str, body: Any, fields: tuple[str, ...], rid: Any
) -> None:
    """No response from the upstream is a ``502`` with a JSON-RPC error for the request's
    id (``null`` without one), ``data.reason`` ``upstream-unreachable``, whatever the
    request: not a ``200`` with the error (a request POST), a ``202`` (a notification) or
    a ``500`` (a stream, a DELETE). Counted as an upstream error of kind ``connect``."""
    async with running_gateway(refusing) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        headers = {**scripted.HEAD, **({"mcp-session-id": fields[0]} if fields else {})}
        content = json.dumps(body).encode() if body is not None else None
        r = await http.request(method, gw.url, content=content, headers=headers)
        assert r.status_code == 502, r.text
        got = r.json()
        assert got["id"] == rid
        assert got["error"]["data"] == {"reason": "upstream-unreachable"}
        assert r.headers["content-length"] == str(len(r.content))
        errors = gw.gateway.metrics.registry.get_sample_value(
            "fsm_gateway_upstream_errors_total", {"kind": "connect"}
        )
        assert errors == 1


async def test_an_upstream_that_resets_before_answering_gets_502() -> None:
    """A connection reset after the request was sent, before any response, is a
    ``502`` too (the request id kept)."""
    async with (
        resetting() as url,
        running_gateway(url) as gw,
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        r = await http.post(gw.url, json={**scripted.INIT, "id": "r1"}, headers=scripted.HEAD)
        assert r.status_code == 502, r.text
        assert r.json()["id"] == "r1"
        assert r.json()["error"]["data"]["reason"] == "upstream-unreachable"


# --------------------------------------------------------------------------- fidelity


async def test_a_response_keeps_the_upstreams_fields() -> None:
    """The response to ``initialize`` carries the upstream's one ``Date`` and its
    ``Server`` (none of the gateway's server), its ``Content-Length`` (the body passed
    whole, not chunked), its end-to-end fields; not its hop-by-hop ones, nor the field its
    ``Connection`` names."""
    async with recorded() as (_up, port):
        body = json.dumps(scripted.INIT).encode()
        got = request("POST", port, body, "Accept: application/json, text/event-stream")
        status, fields, raw = await exchange(port, got)
    assert status == 200
    assert values(fields, "date") == [UPSTREAM_DATE.decode()]
    assert values(fields, "server") == ["scripted/1"]
    assert values(fields, "content-length") == [str(len(raw))]
    assert values(fields, "transfer-encoding") == []
    assert json.loads(raw) == scripted.result(0)
    assert values(fields, "x-end-to-end") == ["kept"]
    assert values(fields, "mcp-session-id") == [scripted.SID]
    for hop in ("x-hop", "keep-alive"):
        assert values(fields, hop) == [], hop
    assert values(fields, "connection") == ["close"]  # the gateway's own, for this hop


async def test_a_stream_keeps_the_upstreams_date_and_a_made_response_gets_one() -> None:
    """An event stream (its ids rewritten, so no length) keeps the upstream's ``Date``
    and ``Server``; a response the gateway makes itself has one ``Date`` and a length."""
    async with recorded() as (_up, port), httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        url = f"http://127.0.0.1:{port}/mcp"
        assert (await http.post(url, json=scripted.INIT, headers=scripted.HEAD)).status_code == 200
        body = json.dumps(scripted.CALL).encode()
        status, fields, raw = await exchange(
            port,
            request(
                "POST",
                port,
                body,
                "Accept: application/json, text/event-stream",
                "Content-Type: application/json",
                scripted.IN_SESSION,
            ),
        )
        assert status == 200
        assert values(fields, "date") == [UPSTREAM_DATE.decode()]
        assert values(fields, "server") == ["scripted/1"]
        assert values(fields, "content-length") == []
        assert [json.loads(d) for _, d in scripted.parse(unchunked(raw))][-1] == scripted.result(7)
        status, fields, raw = await exchange(port, request("GET", port).replace(b"/mcp", b"/x"))
        assert status == 404
        assert len(values(fields, "date")) == 1 and values(fields, "server") == []
        assert values(fields, "content-length") == [str(len(raw))]


async def test_hop_by_hop_request_fields_stay_and_forwarded_for_is_appended() -> None:
    """A client's ``Connection``, ``Keep-Alive``, ``TE``, ``Proxy-Connection`` and the
    fields its ``Connection`` names do not reach the upstream; its ``X-Forwarded-For``
    and ``Forwarded`` do, with this hop appended (the client's address, the ``Host`` it
    asked for, the scheme)."""
    async with recorded() as (up, port):
        body = json.dumps(scripted.INIT).encode()
        data = request(
            "POST",
            port,
            body,
            "Accept: application/json, text/event-stream",
            "Connection: x-secret",
            "X-Secret: for the gateway alone",
            "Keep-Alive: timeout=300",
            "TE: trailers",
            "Proxy-Connection: keep-alive",
            "X-Forwarded-For: 203.0.113.9",
            "Forwarded: for=203.0.113.9;proto=https",
            "X-End-To-End: yes",
        )
        status, _fields, _raw = await exchange(port, data)
    assert status == 200
    [seen] = up.seen
    for hop in ("x-secret", "keep-alive", "te", "proxy-connection"):
        assert hop not in seen, hop
    assert seen.get("connection", "keep-alive") == "keep-alive"  # the upstream hop's own
    assert seen["x-end-to-end"] == "yes"
    assert seen["x-forwarded-for"] == "203.0.113.9, 127.0.0.1"
    hop = f'for=127.0.0.1;host="127.0.0.1:{port}";proto=http'
    assert seen["forwarded"] == f"for=203.0.113.9;proto=https, {hop}"


async def test_a_query_no_url_can_hold_is_refused_before_anything_is_forwarded() -> None:
    """Only the query of a request's target comes from the client. One that no URL can
    hold (a ``#``, which the h11 parser passes on as query) gets ``400`` naming it, and
    nothing reaches the upstream, not a ``500``; the session and a plain query are
    unharmed."""
    accept = "Accept: application/json, text/event-stream"
    body = json.dumps(scripted.INIT).encode()
    async with recorded("h11") as (up, port):
        for target in ("/mcp?a=b#f", "/mcp?#"):
            sent = request("POST", port, body, accept, target=target)
            status, _fields, raw = await exchange(port, sent)
            assert status == 400, target
            assert b"bad query" in raw, raw
        assert up.queries == []
        status, _fields, _raw = await exchange(
            port, request("POST", port, body, accept, target="/mcp?a=b")
        )
    assert status == 200
    assert up.queries == [b"a=b"]


@scripted.PARSERS
async def test_an_http_1_0_client_gets_no_chunked_framing(http: str) -> None:
    """HTTP/1.0 has no chunked coding: an event stream (no length: its ids are rewritten)
    reaches an HTTP/1.0 client as it comes, ended by the connection's close, and so does
    a body the upstream sent chunked."""
    up = scripted.Upstream(
        call=[scripted.sse("e1", scripted.PROGRESS), scripted.sse("e2", scripted.result(7))]
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    try:
        async with (
            serving(up, sock, log_level="critical"),
            running_gateway(url, http=http) as gw,
        ):
            port = int(gw.url.split(":")[2].split("/")[0])
            accept = "Accept: application/json, text/event-stream"
            begin = json.dumps(scripted.INIT).encode()
            status, fields, raw = await exchange(
                port, request("POST", port, begin, accept, version="1.0")
            )
            assert status == 200 and values(fields, "transfer-encoding") == []
            assert json.loads(raw) == scripted.result(
                0
            )  # the upstream sent no length: to the close
            body = json.dumps(scripted.CALL).encode()
            status, fields, raw = await exchange(
                port, request("POST", port, body, accept, scripted.IN_SESSION, version="1.0")
            )
    finally:
        sock.close()
    assert status == 200
    assert values(fields, "transfer-encoding") == []
    assert values(fields, "content-length") == []
    events = scripted.parse(raw)
    assert [json.loads(d) for _, d in events] == [scripted.PROGRESS, scripted.result(7)]
    assert all(event_id and event_id.endswith((".e1", ".e2")) for event_id, _ in events)
