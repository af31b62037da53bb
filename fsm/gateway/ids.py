"""The event ids a gateway hands its clients, and how it reads them back.

Every SSE event id the gateway passes on is rewritten to ``<tag>.<position>.<upstream id>``:
``tag`` names the stream (the URL-safe base64 of the guard's stream name, ``post:<origin
id>`` or ``get``, ``get/2``, ...), ``position`` counts the stream's events as the gateway
passed them on (1, 2, ...), ``upstream id`` is the server's own id. A client echoes the id
back as ``Last-Event-ID`` when it resumes, so whichever replica the resume lands on knows,
from the header alone, which stream it continues, how far the client got, and which id to
send upstream. Nothing is stored per event.

Limits: ids are rewritten on ``id:`` lines that start after a line feed (``\\n`` or
``\\r\\n`` line endings, what every MCP server sends); an event stream with bare ``\\r``
line endings passes with the server's ids, and a resume from one is refused as not
issued by the gateway. An empty ``id:`` (which resets the client's id) passes unchanged.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

__all__ = ["GatewayEventId", "IdRewriter", "parse_event_id"]

_ID_LINE = re.compile(rb"^id:[ ]?([^\r\n]+)", re.M)
_MAX_POSITION = 2**62


def _tag(stream: str) -> str:
    return base64.urlsafe_b64encode(stream.encode()).decode().rstrip("=")


@dataclass(frozen=True)
class GatewayEventId:
    """A ``Last-Event-ID`` the gateway issued, read back: the stream it belongs to, its
    position in the stream, the upstream server's id of that event."""

    stream: str
    position: int
    upstream_id: str


def parse_event_id(value: str) -> GatewayEventId | None:
    """Read a gateway-issued event id; ``None`` for anything the gateway did not issue
    (another format, a forged tag, a stream name of no kind the guard uses)."""
    tag, dot, rest = value.partition(".")
    position, dot2, upstream = rest.partition(".")
    if not dot or not dot2 or not upstream or not position.isdigit() or len(position) > 18:
        return None
    try:
        stream = base64.urlsafe_b64decode(tag + "=" * (-len(tag) % 4)).decode()
    except (binascii.Error, ValueError):
        return None
    if _tag(stream) != tag or not (stream.startswith("post:") or stream.startswith("get")):
        return None
    pos = int(position)
    if not 0 < pos < _MAX_POSITION:
        return None
    return GatewayEventId(stream, pos, upstream)


class IdRewriter:
    """Rewrites the ids of one stream's events as they are passed on (see the module
    docstring). ``position`` and ``last`` (the upstream id of the newest event passed on)
    carry over from one client connection of the stream to the next."""

    __slots__ = ("_prefix", "last", "position")

    def __init__(self, stream: str, position: int = 0, last: str | None = None) -> None:
        self._prefix = (_tag(stream) + ".").encode()
        self.position = position
        self.last = last

    def advance_to(self, position: int, last: str) -> None:
        """Continue after ``position`` (another replica's, or the client's) if it is ahead."""
        if position > self.position:
            self.position, self.last = position, last

    def rewrite(self, piece: bytes) -> bytes:
        """``piece`` (whole events) with every event id rewritten."""
        if b"id:" not in piece:
            return piece
        return _ID_LINE.sub(self._one, piece)

    def _one(self, m: re.Match[bytes]) -> bytes:
        self.position += 1
        upstream = m.group(1)
        self.last = upstream.decode("utf-8", "replace")
        return b"id: %s%d.%s" % (self._prefix, self.position, upstream)
