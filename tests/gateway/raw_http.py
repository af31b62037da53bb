"""A client that speaks HTTP/1.1 as bytes, for the gateway tests whose requests no HTTP
client library sends (malformed heads, cut bodies, trailers, ``Expect: 100-continue``):
:func:`request` writes a request, :func:`exchange` sends it on a fresh loopback
connection and reads the answer until the server closes, :func:`status` reads the
answer's status.

Every read is guarded by :data:`scripted_upstream.GUARD`: it only elapses when the server
never closes."""

from __future__ import annotations

import anyio
from anyio.abc import SocketStream

from tests.gateway import scripted_upstream as scripted

__all__ = ["INITIALIZE", "exchange", "read_to_eof", "request", "status"]

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
