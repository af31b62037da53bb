"""Scripted SSE bodies for the tests that drive the guarded transport without a server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2


class ScriptedBody(httpx2.AsyncByteStream):
    """A response body that yields ``chunks`` in order, then ends, or breaks with
    ``error`` (an abrupt cut, say ``httpx2.ReadError``)."""

    def __init__(self, chunks: list[bytes], error: Exception | None = None) -> None:
        self.chunks = chunks
        self.error = error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.error is not None:
            raise self.error

    async def aclose(self) -> None:
        pass


def sse_event(
    event_id: str | None, message: Any = None, *, crlf: bool = False, compact: bool = False
) -> bytes:
    """One SSE ``message`` event: an ``id:`` line (none for ``event_id`` ``None``) and one
    ``data:`` line: ``message`` as JSON (``compact``: no spaces, as the mcp server
    writes it), a string as it is, ``None`` as empty data."""
    nl = "\r\n" if crlf else "\n"
    if message is None or isinstance(message, str):
        data = message or ""
    else:
        data = json.dumps(message, separators=(",", ":") if compact else None)
    head = f"id: {event_id}{nl}" if event_id is not None else ""
    return f"{head}event: message{nl}data: {data}{nl}{nl}".encode()
