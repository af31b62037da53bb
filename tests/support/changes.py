"""Waiting on a test double's state: :class:`Changes` wakes its waiters at each change
the double notes (:meth:`Changes.note`), and each checks its condition again. No polling
and no sleeping: a test waits exactly until what it waits for happened."""

from __future__ import annotations

from collections.abc import Callable

import anyio


class Changes:
    """The changes of one test double's state, for tasks waiting on them. Built outside
    an event loop as well (no event exists until a task waits)."""

    def __init__(self) -> None:
        self._waiting: list[anyio.Event] = []

    def note(self) -> None:
        """The state changed: wake every task waiting now."""
        waiting, self._waiting = self._waiting, []
        for changed in waiting:
            changed.set()

    async def next(self) -> None:
        """Return at the next :meth:`note`."""
        changed = anyio.Event()
        self._waiting.append(changed)
        await changed.wait()

    async def until(self, ok: Callable[[], bool]) -> None:
        """Return once ``ok()`` holds, checked now and after each :meth:`note` (never, if
        no change makes it hold: guard it with a timeout)."""
        while not ok():
            await self.next()
