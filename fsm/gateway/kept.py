"""The final responses of finished streams, kept so that a resume which lost one gets it.

The gateway cannot know whether the last bytes it wrote to a client arrived before the
connection broke, so it keeps the last piece passed on of each finished stream (its last
event is the stream's result) and answers a resume of that stream from it. What it keeps
is bounded twice: the newest ``per_session`` streams of each session, and ``max_bytes``
over all sessions together. Past ``max_bytes`` the oldest piece of the session holding
the most bytes goes first (a fair share, as a max-min scheduler gives): a session's
memory for results stops growing with its calls, the replica's with its sessions, and
a session that reads many large results pushes out its own before another session's
smaller share: a session holding no more than an equal share of ``max_bytes`` among the
sessions holding results loses none (the share is per session: a client holding many
sessions holds many shares).

A resume of a stream whose result was let go is told so (``result-not-kept``) by the
gateway; nothing else changes.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Hashable
from itertools import count

__all__ = ["KeptResults"]


class KeptResults:
    """The kept final pieces, by owner (a session, compared by identity) and stream.

    ``per_session``: pieces kept per owner, the newest; ``max_bytes``: bytes kept over
    every owner, taken back from the owner holding the most (its oldest piece; of owners
    holding alike, the one whose holding changed longest ago). A piece larger than
    ``max_bytes`` is not kept. An owner's pieces go with :meth:`forget` when the owner
    goes. Each call costs O(log owners), amortised."""

    def __init__(self, per_session: int, max_bytes: int) -> None:
        self.per_session = per_session
        self.max_bytes = max_bytes
        self._pieces: dict[tuple[Hashable, str], bytes] = {}
        self._streams: dict[Hashable, OrderedDict[str, None]] = {}
        self._held: dict[Hashable, tuple[int, int]] = {}  # owner: (bytes, age of change)
        # (-bytes, age) per change of an owner's bytes; an entry that is no longer
        # the owner's newest is stale and skipped (the heap is rebuilt when mostly stale)
        self._largest: list[tuple[int, int]] = []
        self._at: dict[int, Hashable] = {}  # age of each owner's newest entry: the owner
        self._age = count()
        self._bytes = 0

    @property
    def size(self) -> int:
        """Bytes kept, over every owner."""
        return self._bytes

    def count(self, owner: Hashable) -> int:
        """How many pieces ``owner`` has kept."""
        return len(self._streams.get(owner, ()))

    def of(self, owner: Hashable) -> dict[str, bytes]:
        """``owner``'s kept pieces by stream, oldest first."""
        return {stream: self._pieces[owner, stream] for stream in self._streams.get(owner, ())}

    def __contains__(self, key: tuple[Hashable, str]) -> bool:
        return key in self._pieces

    def get(self, owner: Hashable, stream: str) -> bytes | None:
        """The piece kept of ``owner``'s ``stream``, or ``None``."""
        return self._pieces.get((owner, stream))

    def keep(self, owner: Hashable, stream: str, piece: bytes) -> None:
        """Keep ``piece`` as ``owner``'s ``stream``'s final piece (replacing one kept),
        then let pieces go past either bound: ``owner``'s oldest past ``per_session``, the
        oldest of the owner holding the most bytes past ``max_bytes``."""
        self._drop(owner, stream)
        if len(piece) > self.max_bytes:
            return
        self._pieces[owner, stream] = piece
        mine = self._streams.setdefault(owner, OrderedDict())
        mine[stream] = None
        self._bytes += len(piece)
        self._hold(owner, self._held.get(owner, (0, 0))[0] + len(piece))
        while len(mine) > self.per_session:
            self._drop(owner, next(iter(mine)))
        while self._bytes > self.max_bytes:
            largest = self._owner_holding_most()
            self._drop(largest, next(iter(self._streams[largest])))

    def forget(self, owner: Hashable) -> None:
        """Let every piece of ``owner`` go (the session is no longer held)."""
        for stream in list(self._streams.get(owner, ())):
            self._drop(owner, stream)

    def _drop(self, owner: Hashable, stream: str) -> None:
        piece = self._pieces.pop((owner, stream), None)
        if piece is None:
            return
        self._bytes -= len(piece)
        mine = self._streams[owner]
        del mine[stream]
        if mine:
            self._hold(owner, self._held[owner][0] - len(piece))
        else:
            del self._streams[owner], self._at[self._held.pop(owner)[1]]

    def _hold(self, owner: Hashable, held: int) -> None:
        old = self._held.get(owner)
        if old is not None:
            del self._at[old[1]]
        age = next(self._age)
        self._held[owner], self._at[age] = (held, age), owner
        heapq.heappush(self._largest, (-held, age))
        if len(self._largest) > 2 * len(self._held) + 64:
            self._largest = [entry for entry in self._largest if self._current(entry)]
            heapq.heapify(self._largest)

    def _current(self, entry: tuple[int, int]) -> bool:
        return entry[1] in self._at

    def _owner_holding_most(self) -> Hashable:
        while not self._current(self._largest[0]):
            heapq.heappop(self._largest)
        return self._at[self._largest[0][1]]
