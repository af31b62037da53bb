"""Gateway replicas on loopback for the end-to-end tests, the demo and the bench.

:func:`running_gateway` serves one :class:`fsm.gateway.app.Gateway` replica with uvicorn on
127.0.0.1 (ephemeral port) in this event loop; :meth:`RunningGateway.kill` stops it at once
(open connections dropped, as a crashed replica drops them), for the fault "a replica dies
mid-stream". asyncio only (uvicorn).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from fsm.gateway.app import Gateway
from fsm.gateway.edge import EdgeLimits
from fsm.harness.serving import serving

__all__ = ["RunningGateway", "running_gateway"]


@dataclass
class RunningGateway:
    """A started replica: ``url`` is its MCP endpoint; ``gateway`` the app (its sessions'
    guards: :meth:`~fsm.gateway.app.Gateway.session_guard`)."""

    url: str
    gateway: Gateway
    _stop: anyio.Event = field(default_factory=anyio.Event)

    def kill(self) -> None:
        """Stop now, as a crashed replica stops: every open connection of this replica
        is dropped and its background work (answer submissions, lease renewals, store
        writes) ends at once."""
        self.gateway.halt()
        self._stop.set()


@contextlib.asynccontextmanager
async def running_gateway(
    upstream: str, *, edge: EdgeLimits | None = None, http: str = "auto", **kwargs: Any
) -> AsyncIterator[RunningGateway]:
    """A :class:`~fsm.gateway.app.Gateway` for ``upstream`` (other keywords go to it)
    served on 127.0.0.1 until the block exits or :meth:`RunningGateway.kill`, its client
    connections bounded by ``edge`` and parsed by ``http`` (as
    :func:`~fsm.harness.serving.serving`)."""
    gateway = Gateway(upstream, **kwargs)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    path = gateway.path
    running = RunningGateway(f"http://127.0.0.1:{port}{path}", gateway)
    try:
        async with anyio.create_task_group() as tg:

            async def serve(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
                async with serving(gateway, sock, shutdown_timeout=0.0, edge=edge, http=http):
                    task_status.started()
                    await running._stop.wait()

            await tg.start(serve)
            try:
                yield running
            finally:
                running.kill()
    finally:
        sock.close()
