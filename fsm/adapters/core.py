"""What both SDK adapters share (:mod:`fsm.adapters.mcp2`, :mod:`fsm.adapters.mcp1`):
the guarded session and connection, the transport the SDK's client is given, and the
binding of an SDK line (:class:`SdkBinding`). How it works: ``docs/adapter.md``; the
parts: :mod:`fsm.adapters._transport`.
"""

from __future__ import annotations

from fsm.adapters._transport.session import (
    GuardedConnection,
    GuardedSession,
    SdkBinding,
    open_guarded_connection,
    open_guarded_session,
    sdk_streams,
)
from fsm.adapters._transport.transport import Bound, GuardedTransport, bind

__all__ = [
    "Bound",
    "GuardedConnection",
    "GuardedSession",
    "GuardedTransport",
    "SdkBinding",
    "bind",
    "open_guarded_connection",
    "open_guarded_session",
    "sdk_streams",
]
