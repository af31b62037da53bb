"""What a session's IO holds on its streams and calls: a stream's :class:`Tee` (to stop
its body from outside) and the call in flight (:data:`CURRENT_CALL`).
"""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

from fsm.errors import (
    InteractionFailed,
)

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


@dataclass
class CallSlot:
    """One :meth:`GuardedSession.call_tool` in flight: its origin id and its failure."""

    origin: Any = None
    error: InteractionFailed | None = None
    failed: anyio.Event = field(default_factory=anyio.Event)


CURRENT_CALL: contextvars.ContextVar[CallSlot | None] = contextvars.ContextVar(
    "fsm_guarded_call", default=None
)


class Tee:
    """What the engine knows of one tracked stream's body, to stop it from outside."""

    def __init__(self) -> None:
        self.resp: Any = None
        self.killed = False

    def kill(self) -> Any:
        """Mark the body dead; returns the connection to close (a blocked read ends)."""
        self.killed = True
        return self.resp
