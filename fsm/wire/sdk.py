"""The installed mcp SDK line, as the test bed needs it: one place that knows 1.x from 2.x.

mcp 1.x and 2.x cannot share an environment (1.x needs ``httpx``, 2.x ``httpx2``; both
install the package ``mcp``). The test bed runs on whichever is installed: this module
names the line (:data:`MCP_MAJOR`), its HTTP library (:data:`hx`, ``httpx2`` or ``httpx``:
one API, distinct types), its server class and the few calls whose shape differs. Type
checking runs against 2.x; the 1.x branches are exercised by the 1.x suite.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import TYPE_CHECKING, Any

from fsm.adapters.core import sdk_streams
from fsm.adapters.sdkversion import release_of

if TYPE_CHECKING:
    from mcp.client.client import Client

__all__ = [
    "MCP_MAJOR",
    "MCP_VERSION",
    "MODERN_PROTOCOL",
    "PRIMES_REPLAYS",
    "McpError",
    "adapter",
    "http_client",
    "hx",
    "modern_client",
    "open_client_streams",
    "request_headers",
    "server_class",
]

MCP_VERSION = metadata.version("mcp")
"""The installed mcp release."""

MCP_MAJOR = (release_of(MCP_VERSION) or (2, 0, 0))[0]
"""1 or 2: the SDK line the test bed runs on."""

hx: Any = importlib.import_module("httpx2" if MCP_MAJOR >= 2 else "httpx")
"""The SDK line's HTTP library module (``httpx2`` for 2.x, ``httpx`` for 1.x)."""

PRIMES_REPLAYS = MCP_MAJOR >= 2 or (release_of(MCP_VERSION) or (0, 0, 0)) >= (1, 28, 1)
"""Whether the server primes a resumed (replayed) stream with an event of its own, which
the scenarios wait for to know the resume attached (1.x from 1.28.1; every 2.x). On older
1.x servers the scenarios that cut resumed streams cannot synchronise; the 1.x client's
transport is the same in 1.28.0 and 1.28.1."""

McpError: type[Exception] = getattr(
    importlib.import_module("mcp"), "MCPError" if MCP_MAJOR >= 2 else "McpError"
)
"""The SDK's JSON-RPC error exception (``MCPError`` in 2.x, ``McpError`` in 1.x)."""


def http_client(**kwargs: Any) -> Any:
    """An ``AsyncClient`` of the SDK line's HTTP library (:data:`hx`) with the test bed's
    timeouts: 30 s to connect, write or wait for the pool, 300 s between two reads (an
    SSE stream is quiet while a person thinks). httpx's default, 5 s each, is not a hang
    guard but a behaviour: on a loaded machine a quiet stream reaches it, and the SDK
    takes the timeout for a broken stream and reconnects."""
    return hx.AsyncClient(timeout=hx.Timeout(30.0, read=300.0), **kwargs)


def server_class() -> tuple[Any, Any]:
    """``(ServerClass, Context)``: ``MCPServer`` (2.x) or ``FastMCP`` (1.x) and its context."""
    if MCP_MAJOR >= 2:
        module = importlib.import_module("mcp.server.mcpserver")
        return module.MCPServer, module.Context
    module = importlib.import_module("mcp.server.fastmcp")
    return module.FastMCP, module.Context


def request_headers(ctx: Any) -> Any:
    """The HTTP headers of the request a tool runs for (a mapping, possibly empty)."""
    if MCP_MAJOR >= 2:
        return ctx.headers or {}
    request = getattr(ctx.request_context, "request", None)
    return request.headers if request is not None else {}


def adapter() -> Any:
    """The installed line's adapter module, :mod:`fsm.adapters.mcp2` or
    :mod:`fsm.adapters.mcp1` (for its ``guarded_session`` and ``guarded_connection``,
    whose signatures are each its own line's: typed ``Any`` here)."""
    return importlib.import_module("fsm.adapters.mcp2" if MCP_MAJOR >= 2 else "fsm.adapters.mcp1")


open_client_streams = sdk_streams
"""The SDK's ``streamable_http_client`` as ``(read, write)`` on either line."""


MODERN_PROTOCOL = "2026-07-28"
"""The protocol version the test bed's 2026 servers speak and its 2026 clients name."""


def modern_client(server: Any, **kwargs: Any) -> Client:
    """mcp 2.x's ``Client(server, **kwargs)`` at :data:`MODERN_PROTOCOL`, named outright.

    ``mode=`` the version makes the SDK adopt it with no ``server/discover`` probe. The
    default, ``mode="auto"``, gives its probe 10 s and, when they run out, falls back to
    the ``initialize`` handshake at 2025-11-25; on a loaded machine a 2026 server is then
    spoken to as an old one, and a tool's ``InputRequiredResult`` fails the old schema.
    Every server of the test bed speaks 2026-07-28, so its clients do not negotiate (a
    test of negotiation itself uses ``Client`` as it is). mcp 2.x only.
    """
    from mcp.client.client import Client

    return Client(server, mode=MODERN_PROTOCOL, **kwargs)
