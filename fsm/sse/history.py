"""Which event ids a stream has carried: exact for the recent ones, fingerprints for the rest.

A resumed SSE connection may replay events the client already has, from wherever the
server chooses: after the ``Last-Event-ID`` (the specification), from it, from the start of
its buffer. Event ids are opaque strings with no order the client may rely on, so the only
way to tell a replayed old event from a new one is to remember every id the stream carried.
:class:`EventHistory` does that in bounded memory:

* at least the ``window`` most recent ids exactly (a set for lookups, a list for their
  order: no false match for anything recent). Ids leave the window in batches of
  :attr:`~EventHistory.batch` (a quarter of the window), so it holds up to
  ``window + batch - 1`` of them;
* every id that left the window as a 56-bit fingerprint (bits 8-63 of its string hash), up
  to ``cap`` ids. Fingerprints are made a batch at a time (hashed and packed in C, 7 bytes
  each) and left *pending*; the first lookup that needs them files them into 1,024 buckets
  by the hash's top 10 bits, where 6 bytes each remain (bits 8-55: the bucket stands for
  the rest);
* once ``cap`` fingerprints are stored the history is :attr:`~EventHistory.full`: ids
  leaving the window after that are forgotten, and the owner must no longer trust a
  replay (the guard then refuses to resume that stream: see ``GuardConfig``).

Two ways to record an id, for the two stretches of a connection:

* :meth:`~EventHistory.record` checks the id against everything: the window, then the
  fingerprints. For a replay stretch: a resumed connection until its first new event.
* :meth:`~EventHistory.record_live` checks the window only. For a live stretch: a
  connection that is not a resumption, or a resumed one once it sent a new event. Ids are
  unique within a session (the specification), so on a live stretch only a broken server
  repeats one, and a repeat from within the window is still caught; one from further back
  is recorded as new. :meth:`~EventHistory.newest` then finds it out (a fingerprint
  matches it), so whoever resumes from :meth:`~EventHistory.newest` never names an id
  behind the newest new one.

Memory per stream: the window's ids plus at most ``7 * cap`` bytes of fingerprints (``6 *
cap`` once filed, and at most 1,024 buckets in a dictionary: about 120 KB of headers). The
default ``cap`` of 131,072 ids is at most 896 KiB of fingerprints.

Cost: recording on a live stretch is a set lookup and an append, and a share of its batch
(a few C calls per batch, none per id). A fingerprint lookup (:meth:`~EventHistory.record`,
``in``, :meth:`~EventHistory.newest`) is one ``bytes.find`` in its bucket: ``6 * count /
1024`` bytes, 768 bytes at the default cap; the first one after new fingerprints were made
also files them (sorted in C, one append per bucket).

A fingerprint match for an id never seen is possible: for a stream that has stored ``n``
fingerprints, the chance that a given new id matches one of them is at most
``n / 2**56`` (below ``2e-12`` at the default cap, assuming the hash behaves as a random
function). Such a false match makes one new event count as already seen: it is not taken as
progress and the cursor does not move to it (a later resume then replays it, harmlessly).
The fingerprint is the string's built-in ``hash``, salted per process by CPython
(``PYTHONHASHSEED``): a server cannot choose ids that collide, and the same history must not
be compared across processes with different seeds (snapshots restore in the process that
made them).
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_left
from typing import Any

_BUCKET_SHIFT = 54  # the hash's top 10 bits pick the bucket
_PENDING = 7  # bytes per pending fingerprint: bytes 1-7 of the little-endian hash
_RECORD = 6  # bytes per filed one: bytes 1-6 (the bucket stands for bits 54-63)
_LITTLE_ENDIAN_HASH = struct.Struct("<q").pack
_INDEX_CHUNK = 16_384  # hashes sorted at once while filing (bounds the transient list)

FINGERPRINT_BITS = 8 * _PENDING
"""Bits of an id's hash that :class:`EventHistory` compares for ids left the window."""


def _rows(hashes: array[int], width: int) -> bytearray:
    """Bytes 1 to ``width`` of each of ``hashes`` (little-endian), in their order."""
    if sys.byteorder == "big":
        hashes.byteswap()
    packed = memoryview(hashes).cast("B")
    rows = bytearray(width * len(hashes))
    for k in range(width):
        rows[k::width] = packed[k + 1 :: 8]
    return rows


def _hashes(rows: bytes | bytearray) -> array[int]:
    """The hashes pending ``rows`` were made from, their low 8 bits zero."""
    packed = bytearray(8 * (len(rows) // _PENDING))
    for k in range(_PENDING):
        packed[k + 1 :: 8] = rows[k::_PENDING]
    hashes = array("q", bytes(packed))
    if sys.byteorder == "big":
        hashes.byteswap()
    return hashes


def _sorted_records(bucket: bytearray) -> bytes:
    """``bucket``'s records in byte order (the order they were filed in is not state)."""
    records = sorted(bucket[at : at + _RECORD] for at in range(0, len(bucket), _RECORD))
    return b"".join(records)


class EventHistory:
    """The event ids one stream has carried (see the module docstring for the bounds).

    ``event_id in history`` asks whether the stream carried it; :meth:`record` and
    :meth:`record_live` ask and record a new one in one call.
    """

    __slots__ = (
        "_buckets",
        "_evict_at",
        "_pending",
        "_seen",
        "batch",
        "cap",
        "count",
        "full",
        "recent",
        "window",
    )

    def __init__(self, window: int, cap: int) -> None:
        """``window``: ids kept exactly (at least 1); ``cap``: fingerprints kept beyond
        them (0 keeps none: the history is full as soon as an id leaves the window)."""
        self.window, self.cap = max(1, window), max(0, cap)
        self.batch = max(1, self.window // 4)
        """How many ids leave the window at once (when it holds ``window + batch``)."""
        self._evict_at = self.window + self.batch
        self.recent: list[str] = []
        """The newest ids, oldest first (their order; :attr:`_seen` answers lookups)."""
        self._seen: set[str] = set()
        self._buckets: dict[int, bytearray] = {}
        """The filed fingerprints by bucket (the hash's top 10 bits); only buckets in use."""
        self._pending = bytearray()
        """Fingerprints of ids that left the window, in that order, not yet filed into
        :attr:`_buckets` (filed by the first lookup that needs them)."""
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
        """Whether ``event_id`` is new to the stream, checked against the whole history;
        a new one is recorded as the newest id."""
        if self.count and event_id not in self._seen and self._fingerprinted(event_id):
            return False
        return self.record_live(event_id)

    def record_live(self, event_id: str) -> bool:
        """Whether ``event_id`` is new to the window; a new one is recorded as the newest
        id. For a live stretch (module docstring): an id older than the window is taken as
        new here, and :meth:`newest` tells."""
        seen = self._seen
        if event_id in seen:
            return False
        seen.add(event_id)
        recent = self.recent
        recent.append(event_id)
        if len(recent) >= self._evict_at:
            self._evict()
        return True

    def newest(self) -> str | None:
        """The newest id that was new to the stream when recorded: the last id of the
        window that no fingerprint matches. ``None`` when none was recorded, or when every
        id in the window repeats one that left it earlier (recorded on a live stretch of a
        broken server: the newest new id is no longer known)."""
        recent = self.recent
        if not self.count:
            return recent[-1] if recent else None
        for event_id in reversed(recent):
            if not self._fingerprinted(event_id):
                return event_id
        return None

    def _evict(self) -> None:
        """Move the oldest ids out of the window, down to ``window`` of them, into
        fingerprints (pending: filed into buckets by the next lookup) while there is room."""
        recent = self.recent
        leaving = recent[: len(recent) - self.window]
        del recent[: len(leaving)]
        self._seen.difference_update(leaving)
        room = self.cap - self.count
        if len(leaving) > room:
            self.full = True
            leaving = leaving[: max(0, room)]
        self._pending += _rows(array("q", list(map(hash, leaving))), _PENDING)
        self.count += len(leaving)

    def _file_pending(self) -> None:
        """File the pending fingerprints into their buckets: a chunk at a time, sorted, so
        each bucket's share of a chunk is one run of it."""
        pending, self._pending = self._pending, bytearray()
        buckets = self._buckets
        step = _PENDING * _INDEX_CHUNK
        for at in range(0, len(pending), step):
            hashes = sorted(_hashes(pending[at : at + step]))
            rows = _rows(array("q", hashes), _RECORD)
            start, n = 0, len(hashes)
            while start < n:
                bucket = hashes[start] >> _BUCKET_SHIFT
                end = bisect_left(hashes, (bucket + 1) << _BUCKET_SHIFT, start)
                run = rows[_RECORD * start : _RECORD * end]
                filed = buckets.get(bucket)
                if filed is None:
                    buckets[bucket] = run
                else:
                    filed += run
                start = end

    def _fingerprinted(self, event_id: str) -> bool:
        """Whether ``event_id``'s fingerprint is stored (it left the window, or matches)."""
        if self._pending:
            self._file_pending()
        h = hash(event_id)
        bucket = self._buckets.get(h >> _BUCKET_SHIFT)
        if bucket is None:
            return False
        needle = _LITTLE_ENDIAN_HASH(h)[1 : 1 + _RECORD]
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
        """Memory held, in bytes: the containers, the window's id strings, the pending
        fingerprints, the buckets and their numbers."""
        total = sys.getsizeof(self.recent) + sys.getsizeof(self._seen)
        total += sum(sys.getsizeof(i) for i in self.recent)
        total += sys.getsizeof(self._buckets) + sys.getsizeof(self._pending)
        total += sum(sys.getsizeof(b) for b in self._buckets.values())
        return total + sum(sys.getsizeof(k) for k in self._buckets)  # small ones are shared

    def freeze(self) -> tuple[Any, ...]:
        """A hashable value of the history (for snapshots; valid in this process): equal
        for equal histories, whenever their fingerprints were filed."""
        if self._pending:
            self._file_pending()
        buckets = tuple((k, _sorted_records(b)) for k, b in sorted(self._buckets.items()))
        return (tuple(self.recent), buckets, self.count, self.full)

    @classmethod
    def thaw(cls, window: int, cap: int, frozen: tuple[Any, ...]) -> EventHistory:
        """The history a :meth:`freeze` describes, with these bounds."""
        recent, buckets, count, full = frozen
        history = cls(window, cap)
        history.recent = list(recent)
        history._seen = set(recent)
        history._buckets = {k: bytearray(b) for k, b in buckets}
        history.count, history.full = count, full
        return history
