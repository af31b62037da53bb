"""fastmcp's ``Client`` as scenario clients, plain and guarded (extra ``fastmcp``).

fastmcp opens the SDK session itself: its ``StreamableHttpTransport`` builds the HTTP
client through ``httpx_client_factory`` and runs the SDK's own ``streamable_http_client``
and ``ClientSession``. fastmcp 4.x sits on mcp 2.x (``httpx2``), 3.x on mcp 1.x (``httpx``).
The guarded factory gives it a :class:`~fsm.adapters.core.GuardedConnection`'s
``http_client`` as that factory, holds each prompt inside ``conn.prompt(request_id)`` and
runs each call through ``conn.call``. Both connect with the handshake protocol versions
(fastmcp 4.x: ``mode="legacy"``; its default ``"auto"`` negotiates 2026-07-28 with a 2.x
server, which has no server-to-client requests on streams).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from mcp import types

from fsm.adapters.core import GuardedConnection
from fsm.sse.guard import GuardConfig
from fsm.wire.rig import (
    GUARDED_SCENARIO_CONFIG_KW,
    ClientEnv,
    PresentationRequest,
    ScenarioClient,
)
from fsm.wire.sdk import MCP_MAJOR, adapter, hx

__all__ = ["CLIENT_MODE", "guarded_fastmcp", "plain_fastmcp"]

CLIENT_MODE: dict[str, Any] = {"mode": "legacy"} if MCP_MAJOR >= 2 else {}
"""The keywords of a fastmcp ``Client`` that connects with the handshake protocol versions."""


class _Fast:
    """A fastmcp ``Client`` as a scenario client; ``conn`` races each call when guarded."""

    def __init__(self, client: Any, conn: GuardedConnection | None) -> None:
        self.client, self.conn = client, conn

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        def run() -> Any:
            return self.client.call_tool(name, arguments, raise_on_error=False)

        return await (self.conn.call(run) if self.conn is not None else run())


def _handler(env: ClientEnv, conn: GuardedConnection | None) -> Any:
    """fastmcp's ``elicitation_handler``: present to the user (within the guard's prompt
    scope when guarded; a withdrawn prompt answers "cancel", which is never sent)."""

    async def ask(message: str, context: Any) -> Any:
        answer = await env.on_present(
            PresentationRequest(env.session_id(), context.request_id, message)
        )
        return types.ElicitResult(action=answer.action, content=answer.content)

    async def on_elicit(message: str, response_type: Any, params: Any, context: Any) -> Any:
        if conn is None:
            return await ask(message, context)
        with conn.prompt(context.request_id):
            return await ask(message, context)
        return types.ElicitResult(action="cancel")

    return on_elicit


@contextlib.asynccontextmanager
async def plain_fastmcp(env: ClientEnv) -> AsyncIterator[ScenarioClient]:
    """fastmcp's ``Client`` as shipped (its own HTTP client, to the proxy)."""

    def factory(**kw: Any) -> Any:  # fastmcp closes the client it gets: a new one
        kw.setdefault("timeout", hx.Timeout(30.0, read=300.0))
        return hx.AsyncClient(**kw)

    transport = StreamableHttpTransport(env.url, httpx_client_factory=cast(Any, factory))
    async with Client(transport, elicitation_handler=_handler(env, None), **CLIENT_MODE) as client:
        yield _Fast(client, None)


@contextlib.asynccontextmanager
async def guarded_fastmcp(env: ClientEnv) -> AsyncIterator[ScenarioClient]:
    """fastmcp's ``Client`` with the installed line's adapter in front of its session."""
    config = GuardConfig(**GUARDED_SCENARIO_CONFIG_KW)
    async with adapter().guarded_connection(
        env.url, http_client=env.http_client, config=config
    ) as conn:
        factory = cast(Any, conn.http_client)  # fastmcp types it for its own HTTP library
        transport = StreamableHttpTransport(env.url, httpx_client_factory=factory)
        async with Client(transport, elicitation_handler=_handler(env, conn), **CLIENT_MODE) as c:
            yield _Fast(c, conn)
