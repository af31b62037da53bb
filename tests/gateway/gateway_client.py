"""A client of a gateway in front of the scripted upstream (:mod:`scripted_upstream`), on
httpx2: :func:`begin` opens a session, :func:`call` makes a ``tools/call`` in it and
:func:`read` sends any request; each response is read to its end, as a :class:`Read`.

:func:`unlimited` is the client they take: no cap on its connections (a test may hold
many streams open at once) and :data:`HANG` as its timeout."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

import httpx2

from tests.gateway import scripted_upstream as scripted

__all__ = ["HANG", "READ_CAP", "Read", "begin", "call", "read", "unlimited"]

HANG = 60.0
"""Seconds: a hang guard, never a measurement."""
READ_CAP = 4 * 1024 * 1024
"""The bytes of a response body a :class:`Read` keeps unless told otherwise (4 MiB)."""


@dataclass
class Read:
    """What a client read of one response: its status, the SSE events of its body (at
    most ``cap`` bytes of it kept, decoded as an HTTP client decodes text: invalid UTF-8
    as U+FFFD), how many body bytes arrived, and the transport error that broke it."""

    status: int
    raw: bytes
    received: int
    broken: str | None

    @property
    def events(self) -> list[tuple[str | None, str]]:
        return scripted.parse(self.raw)

    def messages(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages among the events."""
        out = []
        for _, data in self.events:
            with contextlib.suppress(ValueError, RecursionError):
                msg = json.loads(data)
                if isinstance(msg, dict):
                    out.append(msg)
        return out

    def requests(self, rid: Any) -> int:
        """How many requests of the server's with id ``rid`` came."""
        return sum(m.get("id") == rid and "method" in m for m in self.messages())

    def errors(self) -> list[dict[str, Any]]:
        return [m for m in self.messages() if "error" in m]

    def results(self, rid: Any) -> int:
        """How many of :func:`scripted_upstream.result` for ``rid`` came."""
        return sum(m == scripted.result(rid) for m in self.messages())


def unlimited() -> httpx2.AsyncClient:
    """An HTTP client with no cap on its connections, its timeout :data:`HANG`."""
    return httpx2.AsyncClient(limits=httpx2.Limits(max_connections=None), timeout=HANG)


async def read(
    http: httpx2.AsyncClient,
    method: str,
    url: str,
    headers: dict[str, Any],
    body: Any = None,
    cap: int = READ_CAP,
) -> Read:
    """Send a request (``body`` as JSON) and read its response to the end, keeping at most
    ``cap`` bytes of it; a transport error ends the reading (:attr:`Read.broken`)."""
    raw, received, broken, status = bytearray(), 0, None, 0
    try:
        async with http.stream(method, url, json=body, headers=headers) as r:
            status = r.status_code
            async for chunk in r.aiter_raw():
                received += len(chunk)
                raw += chunk[: max(0, cap - len(raw))]
    except httpx2.TransportError as exc:
        broken = type(exc).__name__
    return Read(status, bytes(raw), received, broken)


async def call(http: httpx2.AsyncClient, url: str, sid: str, rid: Any, **headers: Any) -> Read:
    """A ``tools/call`` ``rid`` (:func:`scripted_upstream.tool_call`) of session ``sid``
    with the ``headers`` added, read to the end."""
    head = {**scripted.HEAD, "mcp-session-id": sid, **headers}
    return await read(http, "POST", url, head, scripted.tool_call(rid))


async def begin(http: httpx2.AsyncClient, url: str, **headers: Any) -> str:
    """Initialize a session through the gateway at ``url`` (:data:`scripted_upstream.INIT`,
    with the ``headers`` added); its id."""
    r = await http.post(url, json=scripted.INIT, headers={**scripted.HEAD, **headers})
    assert r.status_code == 200
    return str(r.headers["mcp-session-id"])
