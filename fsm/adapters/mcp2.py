"""Guard an unmodified mcp 2.x client: ``guarded_session(url, ...)``.

::

    from fsm.adapters.mcp2 import guarded_session

    async with guarded_session(url, elicitation_callback=on_elicit) as session:
        result = await session.call_tool("delete_files", {"files": [...]})

The SDK's own ``ClientSession`` over its ``streamable_http_client`` runs unmodified on an
``httpx2.AsyncClient`` whose transport is the guarded-transport core
(:mod:`fsm.adapters.core`: how it works and what it cannot see). Accepts every mcp 2.x
release (:data:`SUPPORTED_SDK`); each from 2.0.0 to 2.3.0 is tested.

What is specific to 2.x: server requests are dispatched concurrently (a prompt on screen
does not block the session); the SDK ignores the status of an answer POST (the core submits
answers itself, so outcomes are classified all the same); the SDK turns a request POST's
HTTP error into an ``MCPError`` for that request, so the core forwards those unchanged.
Every typed error a guarded session or connection raises is an ``MCPError`` too (code
-32000, ``error.data["reason"]`` its reason: :mod:`fsm.adapters.sdkerrors`), so an
application's ``except MCPError`` keeps catching what the guard ends.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from fsm._extras import missing_extra

try:
    import httpx2
    from mcp import ClientSession, types
    from mcp.shared.exceptions import MCPError

    from fsm.adapters import core
    from fsm.adapters.core import GuardedConnection, GuardedSession, GuardedTransport
except ModuleNotFoundError as exc:
    raise missing_extra("mcp", "fsm.adapters.mcp2", exc) from exc

from fsm.adapters.sdkerrors import SdkErrorType
from fsm.adapters.sdkversion import MCP1, MCP2
from fsm.adapters.sdkversion import check_sdk_version as _check

__all__ = [
    "BINDING",
    "SUPPORTED_SDK",
    "GuardedConnection",
    "GuardedSession",
    "GuardedTransport",
    "check_sdk_version",
    "guarded_connection",
    "guarded_session",
]

SUPPORTED_SDK = MCP2
"""The mcp releases this adapter accepts (``mcp>=2.0.0,<3.0.0``)."""


def check_sdk_version(strict: bool = True) -> str:
    """The installed mcp version; raises ``RuntimeError`` naming the supported ranges if it
    is outside :data:`SUPPORTED_SDK` and ``strict``."""
    return _check(SUPPORTED_SDK, others=(MCP1,), strict=strict)


BINDING = core.SdkBinding(
    name="mcp 2.x",
    hx=httpx2,
    supported=MCP2,
    others=(MCP1,),
    connect=core.sdk_streams,
    session_class=ClientSession,
    cancel_result=lambda: types.ElicitResult(action="cancel"),
    errors=SdkErrorType(MCPError, types.ErrorData),
)
"""The mcp 2.x line as the core sees it."""


def guarded_connection(url: str, **kwargs: Any) -> AbstractAsyncContextManager[GuardedConnection]:
    """The guard for one mcp 2.x session on ``url``, for a client that opens the SDK
    session itself, such as fastmcp 4.x's ``Client`` (a :class:`GuardedConnection`)::

        async with guarded_connection(url) as conn:
            transport = StreamableHttpTransport(url, httpx_client_factory=conn.http_client)
            async with fastmcp.Client(transport, elicitation_handler=handler) as client:
                result = await conn.call(lambda: client.call_tool("delete_files", {}))

    with ``handler`` holding its prompt inside ``conn.prompt(context.request_id)``.
    Keywords as :func:`fsm.adapters.core.open_guarded_connection`.
    """
    return core.open_guarded_connection(BINDING, url, **kwargs)


def guarded_session(url: str, **kwargs: Any) -> AbstractAsyncContextManager[GuardedSession]:
    """Open an initialized, guarded mcp 2.x session on ``url`` (streamable HTTP).

    Keywords as :func:`fsm.adapters.core.open_guarded_session` (``elicitation_callback``,
    ``http_client``, ``config``, ``clock``, ``log``, ``strict_sdk``; the rest go to
    ``ClientSession``). Raises ``RuntimeError`` for an SDK release outside
    :data:`SUPPORTED_SDK` unless ``strict_sdk=False``.
    """
    return core.open_guarded_session(BINDING, url, **kwargs)
