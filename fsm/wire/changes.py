"""A condition to wait on in the test bed: :class:`Changes`.

The scripted user (:class:`fsm.wire.rig.User`) and the server's controller
(:class:`fsm.wire.server.ServerController`) each hold state that changes on the event loop
and offer ``wait_until(predicate)``: both are this, one object each.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

__all__ = ["Changes"]


class Changes:
    """Whoever owns some state calls :meth:`notify` after each change; a waiter's
    :meth:`wait_until` re-checks its predicate on every notification. Use it from the
    event loop that changes the state (it is not thread-safe)."""

    def __init__(self) -> None:
        self._changed = anyio.Event()

    def notify(self) -> None:
        """Wake every waiter, each to re-check its predicate."""
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> None:
        """Return once ``predicate()`` holds (at once if it already does);
        ``TimeoutError`` if it does not within ``timeout`` seconds."""
        with anyio.fail_after(timeout):
            while not predicate():
                await self._changed.wait()
