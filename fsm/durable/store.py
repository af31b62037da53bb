"""The store protocol and the in-memory store (no durability: tests and benchmarks)."""

from __future__ import annotations

from typing import Protocol

from fsm.sse.guard import GuardSnapshot, SseDelta, SseStored

EMPTY = SseStored(GuardSnapshot("", (), (), False))
"""What an empty store holds."""


class Store(Protocol):
    """Where a durable guard's deltas go, one client profile per store.

    ``write`` returns once the delta is durable (the embedder takes the actions after a
    ``Persist`` only then); ``load`` returns every delta written, applied in order
    (:meth:`fsm.sse.guard.SseStored.apply`); ``writes`` counts the writes made through
    this object. Neither is called for a progress event: the guard asks for no write."""

    @property
    def writes(self) -> int:
        """The deltas written through this object."""
        ...

    def write(self, delta: SseDelta) -> None:
        """Make ``delta`` durable (one atomic write)."""
        ...

    def load(self) -> SseStored:
        """What is stored: start a guard from it with ``Guard.restart``."""
        ...

    def close(self) -> None:
        """Release the store (and its file, for a file store). Idempotent."""
        ...


class MemoryStore:
    """A :class:`Store` in this process's memory: survives nothing, costs no disk write.
    ``stored`` is the current content. A write rebuilds it (O(records stored), bounded
    as the guard's tombstones are): for tests, models and benchmarks."""

    def __init__(self, stored: SseStored = EMPTY) -> None:
        self.stored = stored
        self._writes = 0

    @property
    def writes(self) -> int:
        """The deltas written."""
        return self._writes

    def write(self, delta: SseDelta) -> None:
        """Apply ``delta``."""
        self.stored = self.stored.apply(delta)
        self._writes += 1

    def load(self) -> SseStored:
        """The current content."""
        return self.stored

    def close(self) -> None:
        """Nothing to release."""
