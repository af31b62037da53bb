"""What a session's IO holds on its streams and calls: a stream's :class:`Tee` (to stop
its body from outside), the call in flight (:data:`CURRENT_CALL`), and :class:`Recent`,
the bounded memory of what already happened.
"""

from __future__ import annotations

import contextvars
import logging
from collections import OrderedDict
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
    """One raced call in flight (:meth:`GuardedConnection.call`): the JSON-RPC ``method``
    of the request it waits for (``None``: the first request it sends), that request's
    id once sent (``origin``), and its failure."""

    origin: Any = None
    error: InteractionFailed | None = None
    failed: anyio.Event = field(default_factory=anyio.Event)
    method: str | None = "tools/call"

    def binds(self, method: object) -> bool:
        """Whether a request of JSON-RPC ``method``, sent in this call's context, is the
        one the call waits for (it is, once, while ``origin`` is unset)."""
        return self.origin is None and (
            isinstance(method, str) if self.method is None else method == self.method
        )


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


_K = TypeVar("_K")
_V = TypeVar("_V")


class Recent(OrderedDict[_K, _V]):
    """A mapping that keeps its newest ``cap`` entries: a write makes its key the newest,
    and past ``cap`` the oldest are forgotten. What a session remembers of the past (its
    failures, withdrawn prompts, relayed answers) is bounded by it, so a long session's
    memory does not grow with its calls."""

    def __init__(self, cap: int) -> None:
        if cap < 1:
            raise ValueError("cap must be >= 1")
        super().__init__()
        self.cap = cap

    def __setitem__(self, key: _K, value: _V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.cap:
            self.popitem(last=False)
