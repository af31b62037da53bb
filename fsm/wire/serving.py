"""Serve an ASGI app with uvicorn on an already-bound socket, in this event loop.

Shared by the demo servers of both protocol eras (:mod:`fsm.wire.server`,
:mod:`fsm.wire.mrtr_server`) and the test bed's gateway replicas, with the HTTP edge's
limits (:mod:`fsm.gateway.edge`) applied. asyncio only (uvicorn).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import uvicorn
from starlette.types import ASGIApp

from fsm.gateway.edge import EdgeLimits, uvicorn_settings


async def lifespan(receive: Any, send: Any) -> None:
    """Answer an ASGI ``lifespan`` scope for an app with nothing to start or stop."""
    while (message := await receive())["type"] != "lifespan.shutdown":
        await send({"type": message["type"] + ".complete"})
    await send({"type": "lifespan.shutdown.complete"})


async def whole_body(receive: Any) -> bytes:
    """An ASGI request's whole body (as far as it came, if the client left)."""
    body = bytearray()
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body") or message["type"] == "http.disconnect":
            return bytes(body)


@contextlib.contextmanager
def tcp_socket(sock: socket.socket) -> Iterator[socket.socket]:
    """``sock`` as a socket whose protocol says TCP (a duplicate of it, closed on exit).
    asyncio turns Nagle's algorithm off (``TCP_NODELAY``) only on connections accepted
    from such a socket; a socket made with protocol 0 gets connections that hold a small
    response back until the peer's delayed acknowledgement, some 40 ms per request."""
    if sock.proto == socket.IPPROTO_TCP or sock.family not in (socket.AF_INET, socket.AF_INET6):
        yield sock
        return
    dup = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=os.dup(sock.fileno()))
    try:
        yield dup
    finally:
        dup.close()


@contextlib.asynccontextmanager
async def serving(
    app: ASGIApp,
    sock: socket.socket,
    *,
    log_level: str = "warning",
    shutdown_timeout: float = 5.0,
    edge: EdgeLimits | None = None,
    http: str = "auto",
    relay: bool = False,
) -> AsyncIterator[None]:
    """Serve ``app`` on ``sock`` (bound, not yet listening) until the block exits.

    Each client connection is bounded by ``edge`` (default ``EdgeLimits()``), parsed by
    ``http`` (``"h11"``, ``"httptools"``, or ``"auto"``: httptools when installed), as
    :func:`fsm.gateway.edge.uvicorn_settings` says; ``relay`` (an app that passes on
    another server's responses: the gateway) adds no ``Date`` or ``Server`` of uvicorn's.

    uvicorn's loggers are left to the process's logging configuration (none of its own
    is installed): what it logs, a traceback of the app included, reaches the root
    logger's handlers, ``log_level`` and up.

    Returns once uvicorn accepts connections (``RuntimeError`` if it fails to start within
    10 s). On exit the server is asked to stop; open connections are closed after
    ``shutdown_timeout`` at the latest. The caller owns (and closes) ``sock``.
    """
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        log_config=None,  # the process's logging as it is: uvicorn's loggers propagate
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=max(1, int(shutdown_timeout)),
        **uvicorn_settings(edge if edge is not None else EdgeLimits(), http, relay=relay),
    )
    server = uvicorn.Server(config)
    stopped = anyio.Event()

    async def serve() -> None:
        try:
            with tcp_socket(sock) as listening:
                await server.serve([listening])
        finally:
            stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        with anyio.fail_after(10):
            while not server.started:  # startup poll, not test synchronisation
                if stopped.is_set():
                    raise RuntimeError("uvicorn failed to start")
                await anyio.sleep(0.005)
        try:
            yield
        finally:
            server.should_exit = True
            with anyio.move_on_after(shutdown_timeout + 2, shield=True):
                await stopped.wait()
            tg.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def on_loopback(app: ASGIApp, path: str = "/mcp", **settings: Any) -> AsyncIterator[str]:
    """Serve ``app`` on a port of 127.0.0.1 the system picks until the block exits;
    yields its URL (``http://127.0.0.1:<port>`` and ``path``). ``settings`` go to
    :func:`serving` (``log_level`` defaults to ``"critical"`` here: a test bed's servers
    stay quiet)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    settings.setdefault("log_level", "critical")
    try:
        async with serving(app, sock, **settings):
            yield f"http://127.0.0.1:{sock.getsockname()[1]}{path}"
    finally:
        sock.close()
