"""What both SDK adapters share (:mod:`fsm.adapters.mcp2`, :mod:`fsm.adapters.mcp1`):
the guarded session and connection, the transport the SDK's client is given, and the
binding of an SDK line (:class:`SdkBinding`). How it works: ``docs/adapter.md``; the
parts: :mod:`fsm.adapters._transport`.
"""

from __future__ import annotations

from fsm.adapters._transport.session import (
    NOT_RACED,
    NOT_TAKEN,
    RACED_METHODS,
    Connect,
    ElicitationFn,
    GuardedConnection,
    GuardedSession,
    LogTarget,
    SdkBinding,
    non_default,
    open_guarded_connection,
    open_guarded_session,
    raced_method,
    sdk_streams,
)
from fsm.adapters._transport.transport import Bound, GuardedTransport, bind

__all__ = [
    "NOT_RACED",
    "NOT_TAKEN",
    "RACED_METHODS",
    "Bound",
    "Connect",
    "ElicitationFn",
    "GuardedConnection",
    "GuardedSession",
    "GuardedTransport",
    "LogTarget",
    "SdkBinding",
    "bind",
    "non_default",
    "open_guarded_connection",
    "open_guarded_session",
    "raced_method",
    "sdk_streams",
]
