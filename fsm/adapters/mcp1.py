"""Guard an unmodified mcp 1.x client (the maintenance line): ``guarded_session(url, ...)``.

::

    from fsm.adapters.mcp1 import guarded_session

    async with guarded_session(url, elicitation_callback=on_elicit) as session:
        result = await session.call_tool("delete_files", {"files": [...]})
        prompt = await session.get_prompt("review", {"path": "a.txt"})

The SDK's own ``ClientSession`` over its ``streamable_http_client`` runs unmodified on an
``httpx.AsyncClient`` whose transport is the guarded-transport core
(:mod:`fsm.adapters.core`), the same core as :mod:`fsm.adapters.mcp2`: at most one
presentation per request key, resumes never backwards and bounded, answers classified and
resubmitted without re-prompting, one typed error per failed call. Accepts
:data:`SUPPORTED_SDK` (``mcp>=1.24.0,<2.0.0``; 1.24 is the first with
``streamable_http_client(url, http_client=...)``). The yielded :class:`GuardedSession`
stands in for the 1.x ``ClientSession``: its request methods
(:data:`fsm.adapters.core.RACED_METHODS`) with 1.x's signatures, each raced against the
guard; what it leaves out is :data:`fsm.adapters.core.NOT_RACED`.

What 1.x does that 2.x does not, and what the adapter does about it
-------------------------------------------------------------------
* **Hangs.** When its reconnects run out, or a POST stream dies before an event id, the
  1.x transport returns without an error and the call (``read_timeout_seconds=None`` by
  default) waits forever. The core owns resumption, so the SDK's reconnect loop is never
  entered for a tracked stream; when the guard gives up, the body ends with a JSON-RPC
  error for the call and :meth:`GuardedSession.call_tool` (or any other request method) raises
  the typed error.
* **Writer death.** An answer POST answered with any status >= 400 but 404, or failing
  to connect, raises inside the SDK's ``post_writer`` and closes the session; so does a
  request POST answered with such a status. Answers never reach the SDK's writer (the core
  submits them), and a request POST's HTTP error is answered locally with a JSON-RPC error
  for its id (``errors_as_responses``): that call fails with ``McpError``, the session
  lives on.
* **Serial dispatch (not fixable from outside).** ``BaseSession._receive_loop`` awaits
  each server request's handler inline: while the elicitation callback waits for a human,
  the session reads nothing else (no tool result, no progress, no cancellation, no second
  request). The core works around what a seam allows: it sees a
  ``notifications/cancelled`` (or a session expiry, or a rejection) on the wire even while
  the SDK's loop is blocked, and withdraws the prompt by cancelling the callback; and it
  never lets a replayed duplicate reach the SDK, which would otherwise present it again
  after the first answer. What stays serial: a second, distinct request waits until the
  first prompt is answered, and so does everything else the session receives.
* **Deadlines** of 1.x are internal (``McpError`` code 408, no cancellation sent); the
  guard's own deadlines are unaffected.
* **Typed errors are McpErrors.** Every typed error a guarded session or connection
  raises is a ``McpError`` too (code -32000, ``error.data["reason"]`` its reason:
  :mod:`fsm.adapters.sdkerrors`), so an application's ``except McpError`` still catches it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, TypeVar, cast

from fsm._extras import missing_extra

try:
    from fsm.adapters import core
    from fsm.adapters._transport.session import SameOnBothLines
    from fsm.adapters.core import GuardedConnection
except ModuleNotFoundError as exc:
    raise missing_extra("mcp1", "fsm.adapters.mcp1", exc) from exc

from fsm.adapters.sdkerrors import SdkErrorType
from fsm.adapters.sdkversion import MCP1, MCP2
from fsm.adapters.sdkversion import check_sdk_version as _check
from fsm.sse.guard import GuardConfig

if TYPE_CHECKING:  # names 1.x defines too; type checking resolves them against 2.x
    from datetime import timedelta

    from mcp import types
    from mcp.client.session import (
        ElicitationFnT,
        ListRootsFnT,
        LoggingFnT,
        MessageHandlerFnT,
        SamplingFnT,
    )
    from mcp.shared.message import MessageMetadata
    from pydantic import AnyUrl, BaseModel

    from fsm.adapters.core import LogTarget

__all__ = [
    "SUPPORTED_SDK",
    "GuardedConnection",
    "GuardedSession",
    "binding",
    "check_sdk_version",
    "guarded_connection",
    "guarded_session",
]

SUPPORTED_SDK = MCP1
"""The mcp releases this adapter accepts (``mcp>=1.24.0,<2.0.0``)."""

_M = TypeVar("_M", bound="BaseModel")
_ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
"""1.x's ``mcp.shared.session.ProgressFnT``: ``async (progress, total, message) -> None``."""


def check_sdk_version(strict: bool = True) -> str:
    """The installed mcp version; raises ``RuntimeError`` naming the supported ranges if it
    is outside :data:`SUPPORTED_SDK` and ``strict``."""
    return _check(SUPPORTED_SDK, others=(MCP2,), strict=strict)


def binding() -> core.SdkBinding:
    """The mcp 1.x line as the core sees it (imports ``httpx`` and ``mcp`` when called:
    type checking runs against 2.x, where ``httpx`` is absent)."""
    import importlib

    hx = importlib.import_module("httpx")
    mcp: Any = importlib.import_module("mcp")
    exceptions: Any = importlib.import_module("mcp.shared.exceptions")
    return core.SdkBinding(
        name="mcp 1.x",
        hx=hx,
        supported=MCP1,
        others=(MCP2,),
        connect=core.sdk_streams,
        session_class=mcp.ClientSession,
        cancel_result=lambda: mcp.types.ElicitResult(action="cancel"),
        errors_as_responses=True,
        context_follows_sends=False,
        errors=SdkErrorType(exceptions.McpError, mcp.types.ErrorData),
    )


class GuardedSession(SameOnBothLines):
    """An initialized mcp 1.x ``ClientSession`` with the guard in front of it, offering
    the session's request methods with 1.x's signatures (as of 1.30; ``list_*``'s
    deprecated ``cursor`` included).

    Each method is ``ClientSession``'s, raced against the guard
    (:meth:`~fsm.adapters.core.GuardedSession.raced`): it returns what the SDK returns, or
    raises exactly one :class:`~fsm.errors.InteractionFailed` subclass (a ``McpError``
    too) when the guard decided the interaction cannot complete, or what the SDK raises
    otherwise. Keywords left at their defaults are not passed on, so a 1.x release
    without one works while it is not used. ``session`` is the raw ``ClientSession``:
    what is not here (:data:`~fsm.adapters.core.NOT_RACED`, ``experimental``'s task
    requests, ``get_server_capabilities()``) is there.
    """

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: timedelta | None = None,
        progress_callback: _ProgressFn | None = None,
        *,
        meta: dict[str, Any] | None = None,
    ) -> types.CallToolResult:
        """``ClientSession.call_tool`` (``tools/call``), raced against the guard."""
        return cast(
            "types.CallToolResult",
            await self.raced(
                "call_tool",
                name=name,
                arguments=arguments,
                read_timeout_seconds=read_timeout_seconds,
                progress_callback=progress_callback,
                meta=meta,
            ),
        )

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None
    ) -> types.GetPromptResult:
        """``ClientSession.get_prompt`` (``prompts/get``), raced against the guard."""
        return cast(
            "types.GetPromptResult",
            await self.raced("get_prompt", name=name, arguments=arguments),
        )

    async def list_prompts(
        self, cursor: str | None = None, *, params: types.PaginatedRequestParams | None = None
    ) -> types.ListPromptsResult:
        """``ClientSession.list_prompts`` (``prompts/list``), raced against the guard."""
        return cast(
            "types.ListPromptsResult",
            await self.raced("list_prompts", cursor=cursor, params=params),
        )

    async def list_resource_templates(
        self, cursor: str | None = None, *, params: types.PaginatedRequestParams | None = None
    ) -> types.ListResourceTemplatesResult:
        """``ClientSession.list_resource_templates`` (``resources/templates/list``), raced
        against the guard."""
        return cast(
            "types.ListResourceTemplatesResult",
            await self.raced("list_resource_templates", cursor=cursor, params=params),
        )

    async def list_resources(
        self, cursor: str | None = None, *, params: types.PaginatedRequestParams | None = None
    ) -> types.ListResourcesResult:
        """``ClientSession.list_resources`` (``resources/list``), raced against the guard."""
        return cast(
            "types.ListResourcesResult",
            await self.raced("list_resources", cursor=cursor, params=params),
        )

    async def list_tools(
        self, cursor: str | None = None, *, params: types.PaginatedRequestParams | None = None
    ) -> types.ListToolsResult:
        """``ClientSession.list_tools`` (``tools/list``), raced against the guard."""
        return cast(
            "types.ListToolsResult", await self.raced("list_tools", cursor=cursor, params=params)
        )

    async def read_resource(self, uri: AnyUrl) -> types.ReadResourceResult:
        """``ClientSession.read_resource`` (``resources/read``), raced against the guard."""
        return cast("types.ReadResourceResult", await self.raced("read_resource", uri=uri))

    async def send_ping(self) -> types.EmptyResult:
        """``ClientSession.send_ping`` (``ping``), raced against the guard."""
        return cast("types.EmptyResult", await self.raced("send_ping"))

    async def send_request(
        self,
        request: types.ClientRequest,
        result_type: type[_M],
        request_read_timeout_seconds: timedelta | None = None,
        metadata: MessageMetadata = None,
        progress_callback: _ProgressFn | None = None,
    ) -> _M:
        """``ClientSession.send_request`` (any request), raced against the guard by the
        request it sends."""
        return cast(
            "_M",
            await self.raced(
                "send_request",
                request=request,
                result_type=result_type,
                request_read_timeout_seconds=request_read_timeout_seconds,
                metadata=metadata,
                progress_callback=progress_callback,
            ),
        )

    async def set_logging_level(self, level: types.LoggingLevel) -> types.EmptyResult:
        """``ClientSession.set_logging_level`` (``logging/setLevel``), raced against the
        guard."""
        return cast("types.EmptyResult", await self.raced("set_logging_level", level=level))

    async def subscribe_resource(self, uri: AnyUrl) -> types.EmptyResult:
        """``ClientSession.subscribe_resource`` (``resources/subscribe``), raced against
        the guard."""
        return cast("types.EmptyResult", await self.raced("subscribe_resource", uri=uri))

    async def unsubscribe_resource(self, uri: AnyUrl) -> types.EmptyResult:
        """``ClientSession.unsubscribe_resource`` (``resources/unsubscribe``), raced
        against the guard."""
        return cast("types.EmptyResult", await self.raced("unsubscribe_resource", uri=uri))


def guarded_connection(
    url: str,
    *,
    http_client: Any = None,
    config: GuardConfig | None = None,
    clock: Callable[[], float] = time.monotonic,
    log: LogTarget | None = None,
    strict_sdk: bool = True,
) -> AbstractAsyncContextManager[GuardedConnection]:
    """The guard for one mcp 1.x session on ``url``, for a client that opens the SDK
    session itself, such as fastmcp 3.x's ``Client`` (a :class:`GuardedConnection`; see
    :func:`fsm.adapters.mcp2.guarded_connection`). Keywords as :func:`guarded_session`'s
    of the same names."""
    return core.open_guarded_connection(
        binding(),
        url,
        http_client=http_client,
        config=config,
        clock=clock,
        log=log,
        strict_sdk=strict_sdk,
    )


def guarded_session(
    url: str,
    *,
    read_timeout_seconds: timedelta | None = None,
    sampling_callback: SamplingFnT | None = None,
    elicitation_callback: ElicitationFnT | None = None,
    list_roots_callback: ListRootsFnT | None = None,
    logging_callback: LoggingFnT | None = None,
    message_handler: MessageHandlerFnT | None = None,
    client_info: types.Implementation | None = None,
    sampling_capabilities: types.SamplingCapability | None = None,
    experimental_task_handlers: Any = None,
    http_client: Any = None,
    terminate_on_close: bool = True,
    config: GuardConfig | None = None,
    clock: Callable[[], float] = time.monotonic,
    log: LogTarget | None = None,
    strict_sdk: bool = True,
) -> AbstractAsyncContextManager[GuardedSession]:
    """Open an initialized, guarded mcp 1.x session on ``url`` (streamable HTTP): enter
    the returned context manager for the :class:`GuardedSession`.

    ``ClientSession``'s parameters, with its defaults: ``read_timeout_seconds`` to
    ``experimental_task_handlers`` (an ``ExperimentalTaskHandlers``; its ``read_stream``
    and ``write_stream`` are the guard's: :data:`fsm.adapters.core.NOT_TAKEN`).
    ``streamable_http_client``'s: ``http_client`` (the application's
    ``httpx.AsyncClient``: all HTTP goes through it, it is not closed here; default a
    client with a 30 s timeout and 300 s to read), ``terminate_on_close``. Keywords left
    at their defaults are not passed on (a 1.x release without one works). The guard's:
    ``config``, ``clock``, ``log``, ``strict_sdk`` (as :func:`fsm.adapters.mcp2.guarded_session`).

    The signature is checked at the call: a misspelled keyword is a ``TypeError`` here,
    before any connection (and before the SDK is imported).
    """
    session_options = core.non_default(
        guarded_session,
        {
            "read_timeout_seconds": read_timeout_seconds,
            "sampling_callback": sampling_callback,
            "list_roots_callback": list_roots_callback,
            "logging_callback": logging_callback,
            "message_handler": message_handler,
            "client_info": client_info,
            "sampling_capabilities": sampling_capabilities,
            "experimental_task_handlers": experimental_task_handlers,
        },
    )
    transport_options = core.non_default(
        guarded_session, {"terminate_on_close": terminate_on_close}
    )
    return cast(
        "AbstractAsyncContextManager[GuardedSession]",
        core.open_guarded_session(
            binding(),
            url,
            elicitation_callback=elicitation_callback,
            http_client=http_client,
            config=config,
            clock=clock,
            log=log,
            strict_sdk=strict_sdk,
            session_type=GuardedSession,
            transport_options=transport_options,
            **session_options,
        ),
    )
