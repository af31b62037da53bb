"""Which event ids a stream has carried: exact for the recent ones, fingerprints for the rest.

A resumed SSE connection may replay events the client already has, from wherever the
server chooses: after the ``Last-Event-ID`` (the specification), from it, from the start of
its buffer. Event ids are opaque strings with no order the client may rely on, so the only
way to tell a replayed old event from a new one is to remember every id the stream carried.
:class:`EventHistory` does that in bounded memory:

* the ``window`` most recent ids exactly (a set for lookups, a deque for their order: the
  fast path, and no false match for anything recent);
* every id evicted from the window as a 58-bit fingerprint (10 bits pick one of 1,024
  buckets, 48 more are stored: 6 bytes per id), up to ``cap`` ids;
* once ``cap`` fingerprints are stored the history is :attr:`~EventHistory.full`: ids
  evicted from the window after that are forgotten, and the owner must no longer trust
  a replay (the guard then refuses to resume that stream: see ``GuardConfig``).

Memory per stream: the window's ids plus at most ``6 * cap`` bytes of fingerprints and a
bucket header (about 60 bytes) per bucket in use, at most 1,024 of them. The default
``cap`` of 131,072 ids is 768 KiB of fingerprints.

Cost: an id in the window is one dictionary lookup; any other id, one ``bytes.find`` in
its bucket (``6 * count / 1024`` bytes: 768 bytes at the default cap), done in C.
Storing a fingerprint is an append.

A fingerprint match for an id never seen is possible: for a stream that has stored ``n``
fingerprints, the chance that a given new id matches one is at most ``n / 2**58`` (below
``5e-13`` at the default cap, assuming the hash behaves as a random function). Such a
false match makes one new event count as already seen: it is not taken as progress and the
cursor does not move to it (a later resume then replays it, harmlessly). The fingerprint
is the string's built-in ``hash``, salted per process by CPython (``PYTHONHASHSEED``): a
server cannot choose ids that collide, and the same history must not be compared across
processes with different seeds (snapshots restore in the process that made them).
"""

from __future__ import annotations

import struct
import sys
from collections import deque
from typing import Any

_BUCKET_MASK = (1 << 10) - 1  # the hash's low 10 bits pick the bucket
_RECORD = 6  # bytes stored per fingerprint: the hash's top 48 bits
_HASH_BYTES = struct.Struct("<q").pack

FINGERPRINT_BITS = 10 + 8 * _RECORD
"""Bits of an id's hash that :class:`EventHistory` compares for ids left the window."""


class EventHistory:
    """The event ids one stream has carried (see the module docstring for the bounds).

    ``event_id in history`` asks whether the stream carried it; :meth:`record` asks and
    records a new one in one call.
    """

    __slots__ = ("_buckets", "_seen", "cap", "count", "full", "recent", "window")

    def __init__(self, window: int, cap: int) -> None:
        """``window``: ids kept exactly (at least 1); ``cap``: fingerprints kept beyond
        them (0 keeps none: the history is full as soon as an id leaves the window)."""
        self.window, self.cap = max(1, window), max(0, cap)
        self.recent: deque[str] = deque()
        """The newest ids, oldest first (their order; :attr:`_seen` answers lookups)."""
        self._seen: set[str] = set()
        self._buckets: dict[int, bytearray] = {}
        self.count = 0
        """How many fingerprints are stored."""
        self.full = False
        """Whether an id has left the window since :attr:`cap` fingerprints were stored
        (forgotten: a replay of it would look new)."""

    def __contains__(self, event_id: object) -> bool:
        if event_id in self._seen:
            return True
        return bool(self.count) and isinstance(event_id, str) and self._fingerprinted(event_id)

    def record(self, event_id: str) -> bool:
        """Whether ``event_id`` is new to the stream; a new one is recorded as the newest
        id (the oldest of the window then leaves it for the fingerprints)."""
        seen = self._seen
        if event_id in seen:
            return False
        buckets = self._buckets
        if buckets and self._fingerprinted(event_id):
            return False
        seen.add(event_id)
        recent = self.recent
        recent.append(event_id)
        if len(recent) > self.window:
            oldest = recent.popleft()
            seen.discard(oldest)
            if self.count >= self.cap:
                self.full = True
            else:
                h = hash(oldest)
                bucket = buckets.get(h & _BUCKET_MASK)
                if bucket is None:
                    bucket = buckets[h & _BUCKET_MASK] = bytearray()
                bucket += _HASH_BYTES(h)[2:]
                self.count += 1
        return True

    def _fingerprinted(self, event_id: str) -> bool:
        """Whether ``event_id``'s fingerprint is stored (it left the window, or matches)."""
        h = hash(event_id)
        bucket = self._buckets.get(h & _BUCKET_MASK)
        if bucket is None:
            return False
        needle = _HASH_BYTES(h)[2:]
        at = bucket.find(needle)
        while at >= 0:
            if at % _RECORD == 0:
                return True
            at = bucket.find(needle, at + 1)
        return False

    def __len__(self) -> int:
        """How many ids the history can answer for (window plus fingerprints)."""
        return len(self.recent) + self.count

    def nbytes(self) -> int:
        """Memory held, in bytes: the containers, the window's id strings, the buckets."""
        total = sys.getsizeof(self.recent) + sys.getsizeof(self._seen)
        total += sum(sys.getsizeof(i) for i in self.recent)
        total += sys.getsizeof(self._buckets)
        return total + sum(sys.getsizeof(b) for b in self._buckets.values())

    def freeze(self) -> tuple[Any, ...]:
        """A hashable value of the history (for snapshots; valid in this process)."""
        buckets = (
            tuple(sorted((k, bytes(b)) for k, b in self._buckets.items())) if self.count else ()
        )
        return (tuple(self.recent), buckets, self.count, self.full)

    @classmethod
    def thaw(cls, window: int, cap: int, frozen: tuple[Any, ...]) -> EventHistory:
        """The history a :meth:`freeze` describes, with these bounds."""
        recent, buckets, count, full = frozen
        history = cls(window, cap)
        history.recent = deque(recent)
        history._seen = set(recent)
        history._buckets = {k: bytearray(b) for k, b in buckets}
        history.count, history.full = count, full
        return history
