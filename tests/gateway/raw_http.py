"""HTTP/1.1 as bytes, both sides, for the gateway tests whose requests no HTTP client
library sends (malformed heads, cut bodies, trailers, ``Expect: 100-continue``) and whose
upstream answers no HTTP server writes (a status outside 100-599, a head that does not
parse, a body cut short of its ``Content-Length``, no answer at all).

The client: :func:`request` writes a request, :func:`exchange` sends it on a fresh
loopback connection and reads the answer until the server closes, :func:`status` reads
the answer's status.

The upstream: :class:`RawUpstream` answers each request with the bytes a :data:`Respond`
gives, as they are (:func:`http_response` and :func:`json_response` write them;
:func:`answering_calls_with` is an MCP upstream's session around a call's answer);
:func:`upstream` serves it on loopback.

Every client read is guarded by :data:`scripted_upstream.GUARD`: it only elapses when the
server never closes."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.abc
from anyio.abc import SocketStream

from tests.gateway import scripted_upstream as scripted

__all__ = [
    "INITIALIZE",
    "RawUpstream",
    "Respond",
    "answering_calls_with",
    "exchange",
    "http_response",
    "json_response",
    "read_to_eof",
    "request",
    "status",
    "upstream",
]

INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'
"""An ``initialize`` (id 1) as compact JSON: the body of a :func:`request` unless given."""


def request(
    port: int,
    *lines: str,
    body: bytes = INITIALIZE,
    method: str = "POST",
    path: str = "/mcp",
    host: str | None = None,
    length: int | None = None,
) -> bytes:
    """A request to ``127.0.0.1:port``: its head (``Host`` unless ``host`` is given, the
    JSON and event-stream ``Accept``, ``Connection: close``, then ``lines``) and ``body``;
    ``length``: the declared ``Content-Length`` (default ``len(body)``; ``-1``: none)."""
    fields = [
        f"Host: {host if host is not None else f'127.0.0.1:{port}'}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        "Connection: close",
        *lines,
    ]
    declared = len(body) if length is None else length
    if declared >= 0:
        fields.append(f"Content-Length: {declared}")
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{f}\r\n" for f in fields) + "\r\n"
    return head.encode() + body


async def exchange(port: int, data: bytes) -> bytes:
    """Send ``data`` on a fresh connection to ``127.0.0.1:port`` and read until the server
    closes it."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(data)
        return await read_to_eof(stream)


async def read_to_eof(stream: SocketStream) -> bytes:
    """What the server sends until it closes (a reset counts as a close)."""
    out = bytearray()
    with anyio.fail_after(scripted.GUARD):
        while True:
            try:
                out += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                return bytes(out)


def status(response: bytes) -> int:
    """The status of an HTTP/1.1 ``response`` (it must be one)."""
    assert response.startswith(b"HTTP/1.1 "), response[:200]
    return int(response.split(b" ", 2)[1])


# ------------------------------------------------------------------------ the upstream

Respond = Callable[[str, str, dict[str, str], bytes], bytes | None]
"""What a :class:`RawUpstream` answers a request (its method, target, headers with lower
case names, and body): the bytes it writes, or ``None`` to hold the connection open
without an answer."""


def http_response(status: str, fields: list[tuple[str, Any]], body: bytes = b"") -> bytes:
    """A response as bytes: the status line's ``status`` (``"200 OK"``, or one no server
    writes), the header ``fields`` (name, value) as given, and ``body``."""
    head = "".join(f"{name}: {value}\r\n" for name, value in fields)
    return f"HTTP/1.1 {status}\r\n{head}\r\n".encode() + body


def json_response(message: Any, *more: tuple[str, Any], status: str = "200 OK") -> bytes:
    """``message`` as a JSON response (with its ``Content-Type`` and ``Content-Length``,
    then the header fields ``more``)."""
    body = json.dumps(message).encode()
    fields = [("content-type", "application/json"), ("content-length", len(body)), *more]
    return http_response(status, fields, body)


class RawUpstream:
    """A TCP upstream that answers each request (its head and ``Content-Length`` body)
    with the bytes ``respond(method, target, headers, body)`` gives, as they are
    (``None``: no answer, the connection held open until the server stops); the
    connection stays open for the next request unless the answer says ``connection:
    close``. ``seen``: every request read, (method, target, headers, body), in order."""

    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []

    async def handle(self, stream: anyio.abc.ByteStream) -> None:
        async with stream:
            buf = b""
            while True:
                try:
                    while b"\r\n\r\n" not in buf:
                        buf += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    return
                head, _, rest = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target = lines[0].split(" ")[:2]
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                size = int(headers.get("content-length", "0"))
                try:
                    while len(rest) < size:  # a body it waits for, whatever is expected
                        rest += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    return
                body, buf = rest[:size], rest[size:]
                self.seen.append((method, target, headers, body))
                answer = self.respond(method, target, headers, body)
                if answer is None:
                    await anyio.sleep_forever()  # until the server stops
                await stream.send(answer)
                if b"connection: close" in answer.lower():
                    return


def answering_calls_with(call: Callable[[], bytes | None]) -> Respond:
    """What an MCP upstream in one session answers: an ``initialize`` begins session
    :data:`scripted_upstream.SID`, a ``ping`` gets its empty result, a ``tools/call``
    gets ``call()`` (``None``: no answer) and anything else ``202``."""

    def respond(method: str, target: str, headers: dict[str, str], body: bytes) -> bytes | None:
        msg: Any = json.loads(body) if body else None
        name = msg.get("method") if isinstance(msg, dict) else None
        if name == "initialize":
            return json_response(scripted.result(msg["id"]), ("mcp-session-id", scripted.SID))
        if name == "ping":
            return json_response({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
        if name == "tools/call":
            return call()
        return http_response("202 Accepted", [("content-length", 0)])

    return respond


@contextlib.asynccontextmanager
async def upstream(respond: Respond) -> AsyncIterator[tuple[str, RawUpstream]]:
    """A :class:`RawUpstream` answering with ``respond`` on 127.0.0.1 while the block
    runs: its MCP endpoint's URL, and it."""
    up = RawUpstream(respond)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, up.handle)
        try:
            yield f"http://127.0.0.1:{port}/mcp", up
        finally:
            tg.cancel_scope.cancel()
