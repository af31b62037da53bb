"""Gateway replicas on loopback for the end-to-end tests and the bench.

:func:`running_gateway` serves one :class:`fsm.gateway.app.Gateway` replica with uvicorn on
127.0.0.1 (ephemeral port) in this event loop; :meth:`RunningGateway.kill` stops it at once
(open connections dropped, as a crashed replica drops them), for the fault "a replica dies
mid-stream". :func:`gateway_tier` runs replicas as a rig's middle tier
(:data:`fsm.wire.rig.MiddleTier`). asyncio only (uvicorn).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio

from fsm.gateway.app import Gateway
from fsm.gateway.edge import EdgeLimits
from fsm.gateway.ids import EventIdKeys
from fsm.wire.proxy import FaultProxy
from fsm.wire.serving import serving

__all__ = ["GatewayTier", "RunningGateway", "gateway_tier", "running_gateway"]


@dataclass
class RunningGateway:
    """A started replica: ``url`` is its MCP endpoint; ``gateway`` the app (its sessions'
    guards: :meth:`~fsm.gateway.app.Gateway.session_guard`)."""

    url: str
    gateway: Gateway
    _stop: anyio.Event = field(default_factory=anyio.Event)

    @property
    def port(self) -> int:
        """The port it listens on (127.0.0.1)."""
        return int(urlsplit(self.url).port or 80)

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
    :func:`~fsm.wire.serving.serving`)."""
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
                async with serving(
                    gateway, sock, shutdown_timeout=0.0, edge=edge, http=http, relay=True
                ):
                    task_status.started()
                    await running._stop.wait()

            await tg.start(serve)
            try:
                yield running
            finally:
                running.kill()
    finally:
        sock.close()


@dataclass
class GatewayTier:
    """Gateway replicas between a rig's fault proxy and its server: ``url`` is the first
    replica's (where the proxy relays); ``upstream_proxy`` a second fault proxy between
    the replicas and the server, if asked for."""

    gateways: list[RunningGateway]
    upstream_proxy: FaultProxy | None = None

    @property
    def url(self) -> str:
        return self.gateways[0].url


@contextlib.asynccontextmanager
async def gateway_tier(
    upstream: str,
    gateway: Mapping[str, Any],
    *,
    replicas: int = 1,
    upstream_faults: bool = False,
) -> AsyncIterator[GatewayTier]:
    """``replicas`` gateways for ``upstream`` (the keywords in ``gateway`` go to each
    :class:`~fsm.gateway.app.Gateway`; replicas behind one balancer share whatever store
    they give, and the key that signs their event ids); with ``upstream_faults``, through a
    second fault proxy, for faults on the gateways' own traffic."""
    async with contextlib.AsyncExitStack() as stack:
        upstream_proxy: FaultProxy | None = None
        if upstream_faults:
            upstream_proxy = await stack.enter_async_context(FaultProxy(upstream))
            upstream = upstream_proxy.url
        shared = {"id_keys": EventIdKeys.generate(), **gateway}
        gateways = [
            await stack.enter_async_context(running_gateway(upstream, **shared))
            for _ in range(replicas)
        ]
        yield GatewayTier(gateways, upstream_proxy)
