"""The final responses of finished streams, kept so that a resume which lost one gets it.

The gateway cannot know whether the last bytes it wrote to a client arrived before the
connection broke, so it keeps the last piece passed on of each finished stream (its last
event is the stream's result) and answers a resume of that stream from it. What it keeps
is bounded twice: the newest ``per_session`` streams of each session, and ``max_bytes``
over all sessions together, the least recently kept going first. A session's memory for
results then stops growing with its calls, and the replica's with its sessions: one
client cannot fill a replica with the results it read whole.

A resume of a stream whose result was let go is told so (``result-not-kept``) by the
gateway; nothing else changes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

__all__ = ["KeptResults"]


class KeptResults:
    """The kept final pieces, by owner (a session, compared by identity) and stream.

    ``per_session``: pieces kept per owner, the newest; ``max_bytes``: bytes kept over
    every owner, the oldest going first (a piece larger than ``max_bytes`` is not kept).
    An owner's pieces go with :meth:`forget` when the owner goes."""

    def __init__(self, per_session: int, max_bytes: int) -> None:
        self.per_session = per_session
        self.max_bytes = max_bytes
        self._pieces: OrderedDict[tuple[Hashable, str], bytes] = OrderedDict()
        self._streams: dict[Hashable, OrderedDict[str, None]] = {}
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
        then let the oldest go past either bound."""
        self._drop(owner, stream)
        if len(piece) > self.max_bytes:
            return
        self._pieces[owner, stream] = piece
        self._streams.setdefault(owner, OrderedDict())[stream] = None
        self._bytes += len(piece)
        mine = self._streams[owner]
        while len(mine) > self.per_session:
            self._drop(owner, next(iter(mine)))
        while self._bytes > self.max_bytes:
            oldest_owner, oldest_stream = next(iter(self._pieces))
            self._drop(oldest_owner, oldest_stream)

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
        if not mine:
            del self._streams[owner]
