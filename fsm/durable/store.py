"""The store protocol and the in-memory store (no durability: tests and benchmarks)."""

from __future__ import annotations

from typing import Protocol

from fsm.durable.calls import CallRecord
from fsm.sse.guard import GuardSnapshot, SseDelta, SseStored

EMPTY = SseStored(GuardSnapshot("", (), (), False))
"""What an empty store holds."""

Delta = SseDelta | CallRecord
"""What one ``Persist`` carries: the SSE guard's delta, or an MRTR call's or a task's
whole record (which replaces the one stored under its call id)."""

MAX_ENDED_CALLS = 256
"""Ended calls' records a store keeps (their tombstones: an ended call is not run again);
the oldest beyond this many leave, so the store stays bounded."""


class Store(Protocol):
    """Where a durable guard's deltas go, one client profile per store.

    ``write`` returns once the delta is durable (the embedder takes the actions after a
    ``Persist`` only then); ``load`` returns every delta written, applied in order
    (:meth:`fsm.sse.guard.SseStored.apply`); ``writes`` counts the writes made through
    this object; ``calls`` returns the stored MRTR calls' and tasks' records. Neither is
    called for a progress event: the guard asks for no write. One store serves every era.
    """

    @property
    def writes(self) -> int:
        """The deltas written through this object."""
        ...

    def write(self, delta: Delta) -> None:
        """Make ``delta`` durable (one atomic write)."""
        ...

    def load(self) -> SseStored:
        """What is stored: start a guard from it with ``Guard.restart``."""
        ...

    def calls(self) -> dict[str, CallRecord]:
        """The MRTR calls' and tasks' records by call id: restart each with
        :meth:`fsm.durable.calls.DurableCall.restart`."""
        ...

    def call(self, call_id: str) -> CallRecord | None:
        """The record of call ``call_id`` alone, or ``None``: reads that one record, so
        a record of another call that does not read back cannot fail this call's start."""
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
        self._calls: dict[str, CallRecord] = {}
        self._writes = 0

    @property
    def writes(self) -> int:
        """The deltas written."""
        return self._writes

    def write(self, delta: Delta) -> None:
        """Apply ``delta``."""
        if isinstance(delta, CallRecord):
            self._calls.pop(delta.call, None)  # the newest write last, as SQLite orders them
            self._calls[delta.call] = delta
            ended = [c for c, r in self._calls.items() if r.ended]
            for call in ended[: max(0, len(ended) - MAX_ENDED_CALLS)]:
                del self._calls[call]
        else:
            self.stored = self.stored.apply(delta)
        self._writes += 1

    def load(self) -> SseStored:
        """The current content."""
        return self.stored

    def calls(self) -> dict[str, CallRecord]:
        """The calls' current records."""
        return dict(self._calls)

    def call(self, call_id: str) -> CallRecord | None:
        """The current record of ``call_id``, or ``None``."""
        return self._calls.get(call_id)

    def close(self) -> None:
        """Nothing to release."""
