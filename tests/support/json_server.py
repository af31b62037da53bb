"""A 2026-07-28 server on a test's own terms, on loopback: each JSON-RPC request is
answered in one ``application/json`` body that a handler makes (the one-call adapters
read nothing else of it)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fsm.wire.serving import lifespan, on_loopback, whole_body

__all__ = ["Handler", "JsonRpcServer", "json_rpc_server"]

Handler = Callable[[dict[str, Any]], dict[str, Any]]
"""A request message -> what its response holds besides ``jsonrpc`` and ``id``
(``{"result": ...}`` or ``{"error": ...}``)."""


class JsonRpcServer:
    """Each JSON-RPC request ``POST`` answered (``200``, ``application/json``) with
    ``handler(message)`` merged into the response envelope, and logged (``log``); a
    notification gets ``202``, another HTTP method ``405``. ``url`` once served."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.log: list[dict[str, Any]] = []
        self.url = ""

    @property
    def methods(self) -> list[str]:
        """The methods of the requests answered, in order."""
        return [str(msg["method"]) for msg in self.log]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        body = await whole_body(receive)
        msg = json.loads(body) if scope["method"] == "POST" else None
        if msg is None or "id" not in msg:  # 405 to any other method, 202 to a notification
            status = 202 if msg is not None else 405
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        self.log.append(msg)
        raw = json.dumps({"jsonrpc": "2.0", "id": msg["id"], **self.handler(msg)}).encode()
        head = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        await send({"type": "http.response.body", "body": raw})


@contextlib.asynccontextmanager
async def json_rpc_server(handler: Handler) -> AsyncIterator[JsonRpcServer]:
    """A :class:`JsonRpcServer` of ``handler`` served on 127.0.0.1 until the block exits."""
    server = JsonRpcServer(handler)
    async with on_loopback(server, shutdown_timeout=1) as url:
        server.url = url
        yield server
