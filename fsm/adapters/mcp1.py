"""Guard an unmodified mcp 1.x client (the maintenance line): ``guarded_session(url, ...)``.

::

    from fsm.adapters.mcp1 import guarded_session

    async with guarded_session(url, elicitation_callback=on_elicit) as session:
        result = await session.call_tool("delete_files", {"files": [...]})

The SDK's own ``ClientSession`` over its ``streamable_http_client`` runs unmodified on an
``httpx.AsyncClient`` whose transport is the guarded-transport core
(:mod:`fsm.adapters.core`), the same core as :mod:`fsm.adapters.mcp2`: at most one
presentation per request key, resumes never backwards and bounded, answers classified and
resubmitted without re-prompting, one typed error per failed call. Accepts
:data:`SUPPORTED_SDK` (``mcp>=1.24.0,<2.0.0``; 1.24 is the first with
``streamable_http_client(url, http_client=...)``).

What 1.x does that 2.x does not, and what the adapter does about it
-------------------------------------------------------------------
* **Hangs.** When its reconnects run out, or a POST stream dies before an event id, the
  1.x transport returns without an error and the call (``read_timeout_seconds=None`` by
  default) waits forever. The core owns resumption, so the SDK's reconnect loop is never
  entered for a tracked stream; when the guard gives up, the body ends with a JSON-RPC
  error for the call and :meth:`~fsm.adapters.core.GuardedSession.call_tool` raises the
  typed error.
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

from contextlib import AbstractAsyncContextManager
from typing import Any

from fsm._extras import missing_extra

try:
    from fsm.adapters import core
    from fsm.adapters.core import GuardedConnection, GuardedSession
except ModuleNotFoundError as exc:
    raise missing_extra("mcp1", "fsm.adapters.mcp1", exc) from exc

from fsm.adapters.sdkerrors import SdkErrorType
from fsm.adapters.sdkversion import MCP1, MCP2
from fsm.adapters.sdkversion import check_sdk_version as _check

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


def guarded_connection(url: str, **kwargs: Any) -> AbstractAsyncContextManager[GuardedConnection]:
    """The guard for one mcp 1.x session on ``url``, for a client that opens the SDK
    session itself, such as fastmcp 3.x's ``Client`` (a :class:`GuardedConnection`; see
    :func:`fsm.adapters.mcp2.guarded_connection`). Keywords as
    :func:`fsm.adapters.core.open_guarded_connection`."""
    return core.open_guarded_connection(binding(), url, **kwargs)


def guarded_session(url: str, **kwargs: Any) -> AbstractAsyncContextManager[GuardedSession]:
    """Open an initialized, guarded mcp 1.x session on ``url`` (streamable HTTP).

    Keywords as :func:`fsm.adapters.core.open_guarded_session` (``elicitation_callback``,
    ``http_client``, ``config``, ``clock``, ``log``, ``strict_sdk``; the rest go to
    ``ClientSession``). Raises ``RuntimeError`` for an SDK release outside
    :data:`SUPPORTED_SDK` unless ``strict_sdk=False``.
    """
    return core.open_guarded_session(binding(), url, **kwargs)
