"""The event ids a gateway hands its clients, and how it reads them back.

Every SSE event id the gateway passes on is rewritten to
``<tag>.<position>.<mac>.<upstream id>``: ``tag`` names the stream (the URL-safe base64
of the guard's stream name, ``post:<origin id>`` or ``get``, ``get/2``, ...; a name
longer than 256 bytes, a call whose request id is that long, is named by ``~`` and 24
characters of a SHA-256 digest of it, so an id does not grow with a request id),
``position`` counts the stream's events with a usable id as the gateway passed them on
(1, 2, ...),
``mac`` authenticates the id (below), ``upstream id`` is the server's own id (it may hold
dots: it is everything after the third). A client echoes the id back as
``Last-Event-ID`` when it resumes, so whichever replica the resume lands on knows, from
the header alone, which stream it continues, how far the client got, and which id to
send upstream. Nothing is stored per event. A digest tag is the exception: it reads back
only in the process whose rewriter of that stream issued it, while that rewriter lives
(the session's id table keeps it as long as the stream can be resumed here); on another
replica, or after a restart, the id is refused as not issued.

**Authenticated.** ``mac`` is the first 16 bytes of HMAC-SHA256 under the gateway's key
(:class:`EventIdKeys`), URL-safe base64 without padding (22 characters), over the
length-prefixed MCP session id, stream name, position and upstream id. An id is read
back (:func:`parse_event_id`) only in the session it was issued in and only if its MAC
verifies under the current key or a previous one still accepted (a rotation): a forged
or altered id, or one issued for another session, is not the gateway's. Replicas behind
one balancer must share the keys. Rewriting a typical progress event (a 153-byte piece,
one ``id:`` line) costs 3.9 µs with its signature, 1.9 µs without (``timeit``, best of
21, one core of an AMD EPYC, CPython 3.11; the ``hmac`` state keyed with the session and
stream is made once per stream and copied per event): the signature's 2 µs are 2-3 % of
the 63-108 µs of CPU a replica spends per progress event.

Limits: ids are rewritten on ``id:`` lines that start after a line feed (``\\n`` or
``\\r\\n`` line endings, what every MCP server sends). An event that
:class:`~fsm.adapters._transport.body.GuardedBody` passes on as its parser read it (line
ends made ``\\n``) has its ids rewritten whatever its line ends were: so does every event
of a stream whose lines all end with a bare ``\\r`` (each of its reads ends inside an
event, or on a ``\\r`` held for the next read or the stream's end). In a read passed on as
it came, an ``id:`` after a bare ``\\r`` (a stream that mixes line ends) passes with the
server's id, and a resume from it is refused as not issued by the gateway. An empty
``id:`` (which resets the client's id) passes unchanged.

**A leading byte order mark.** WHATWG readers drop one U+FEFF at the very start of an
event stream, and so does the gateway's parser (``SseParser.begin``). The rewriter never
sees one: the stream it rewrites is what ``GuardedBody`` passes on, which drops the mark
that leads each upstream connection, so the stream's first line is a line start as any
other and its id is rewritten. Dropped, not kept: a resume's connection is spliced into
the middle of the client's stream, where a client keeps a mark and reads the line after
it as a field named ``\\ufeffid`` (or ``\\ufeffdata``); the mcp SDK's reader (httpx2)
keeps one even at the start; a WHATWG client reads the stream alike without it. A mark
anywhere else is data, for the guard's parser as for a WHATWG client, so an ``id:`` right
after it is not rewritten: the client ignores that line, as the guard did.

**Only usable ids.** An upstream id that is not a usable cursor
(:func:`~fsm.adapters._transport.sse.usable_event_id`: longer than
:data:`~fsm.adapters._transport.sse.MAX_EVENT_ID`, not visible ASCII, a space at either
end; the guard reads its event as having no id and never resumes from it) is never
embedded in an id the gateway issues: no ``Last-Event-ID`` header could bring such an id
back as it was sent. Its ``id:`` line is rewritten to the id of the stream's last event
with a usable id, issued again (same position, same MAC: the client's last event id stays
what the guard can resume from), or, before there is one, to an empty comment line ``:``
(the event then has no id field, which leaves the client's last event id as it was; an
empty ``id:`` would reset it; the line's end is kept, so no event is cut short). Such an
event is not counted, and never becomes the stream's ``last`` (what the store keeps as
its cursor): ``position`` and ``last`` always name an id the gateway issued, and a
stream's cursor does not grow with what a server puts in its ids. A MAC proves the
gateway issued the id in that session, nothing more: a client of the session may replay
any id it was given.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from weakref import WeakValueDictionary

from fsm.adapters._transport.http import MAX_TRACKED_ID
from fsm.adapters._transport.sse import usable_event_id

__all__ = [
    "ENV_KEY",
    "ENV_PREVIOUS_KEY",
    "MIN_KEY_BYTES",
    "EventIdKeys",
    "GatewayEventId",
    "IdRewriter",
    "parse_event_id",
    "store_name",
]

ENV_KEY = "FSM_GATEWAY_ID_KEY"
"""The environment variable holding the key that signs event ids."""
ENV_PREVIOUS_KEY = "FSM_GATEWAY_ID_KEY_PREVIOUS"
"""The environment variable holding a previous key still accepted (during a rotation)."""
MIN_KEY_BYTES = 32
"""The shortest key accepted (bytes of its UTF-8)."""

WHOLE_NAME_MAX = MAX_TRACKED_ID
"""The longest stream name (UTF-8 bytes) an id carries whole; a longer one is named by a
digest. The bound of a tracked call's request id too
(:func:`~fsm.adapters._transport.http.tracked_id`): a call's stream name, ``post:`` and
its id's JSON text, is at most 5 bytes longer."""
DIGEST_MARK = "~"
"""How a tag that is a digest of its stream's name begins (no base64 tag does)."""

_DIGEST_BYTES = 18  # 24 characters of base64, no padding
_ID_LINE = re.compile(rb"^id:[ ]?([^\r\n]+)", re.M)
_MAX_POSITION = 2**62
_MAC_BYTES = 16
_MAC_CHARS = 22  # base64 of 16 bytes, unpadded
_URLSAFE = bytes.maketrans(b"+/", b"-_")


def _tag(stream: str) -> str:
    """The tag naming ``stream`` in its ids: its name's URL-safe base64 up to
    :data:`WHOLE_NAME_MAX` characters, else :data:`DIGEST_MARK` and a digest of it."""
    raw = stream.encode()
    if len(raw) <= WHOLE_NAME_MAX:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return _digest_name(raw)


def _digest_name(raw: bytes) -> str:
    digest = hashlib.sha256(raw).digest()[:_DIGEST_BYTES]
    return DIGEST_MARK + base64.urlsafe_b64encode(digest).decode()


def store_name(stream: str) -> str:
    """How ``stream`` is named in the state store (its cursor, its open claims): its
    name up to :data:`WHOLE_NAME_MAX` bytes, else :data:`DIGEST_MARK` and a digest of it,
    as its event ids name it. A store key then does not grow with a request id; no stream
    name begins with the mark, so a digest names no other stream."""
    raw = stream.encode()
    return stream if len(raw) <= WHOLE_NAME_MAX else _digest_name(raw)


def _field(value: bytes) -> bytes:
    return b"%d:%s" % (len(value), value)


def _key(text: str, where: str) -> bytes:
    key = text.strip().encode()
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"{where}: an event-id key must be at least {MIN_KEY_BYTES} bytes")
    return key


@dataclass(frozen=True)
class EventIdKeys:
    """The keys that sign and verify event ids: ``current`` signs, ``current`` and each of
    ``previous`` verify (a rotation: give the new key as current and the old one as
    previous on every replica, then drop the old one). ``repr`` shows no key."""

    current: bytes = field(repr=False)
    previous: tuple[bytes, ...] = field(default=(), repr=False)
    _digested: WeakValueDictionary[tuple[str, str], IdRewriter] = field(
        default_factory=WeakValueDictionary, init=False, repr=False, compare=False
    )
    """The rewriters alive in this process whose stream a digest names, by session and
    tag: what reads a digest tag back (an entry goes with its rewriter)."""

    def __post_init__(self) -> None:
        for key in (self.current, *self.previous):
            if len(key) < MIN_KEY_BYTES:
                raise ValueError(f"an event-id key must be at least {MIN_KEY_BYTES} bytes")

    @classmethod
    def generate(cls) -> EventIdKeys:
        """A random key: for one replica (replicas that share a store must share keys)."""
        return cls(secrets.token_bytes(32))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> EventIdKeys | None:
        """The keys in :data:`ENV_KEY` (and :data:`ENV_PREVIOUS_KEY`), as UTF-8 text;
        ``None`` when neither is set. ``ValueError`` for a short key, or a previous key
        without a current one (a rotation half done)."""
        env = os.environ if environ is None else environ
        current = env.get(ENV_KEY, "").strip()
        previous = env.get(ENV_PREVIOUS_KEY, "").strip()
        if not current:
            if previous:
                raise ValueError(f"{ENV_PREVIOUS_KEY} is set but {ENV_KEY} is not")
            return None
        return cls(_key(current, ENV_KEY), (_key(previous, ENV_PREVIOUS_KEY),) if previous else ())

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> EventIdKeys:
        """The keys in a file: its first non-empty line is the current key, a second one
        (optional) the previous key. ``ValueError`` naming the file (never a key) for a
        file that cannot be read, holds no key, more than two, or a short one."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"event-id key file {os.fspath(path)!r}: cannot read it") from exc
        lines = [line for line in text.splitlines() if line.strip()]
        where = f"event-id key file {os.fspath(path)!r}"
        if not lines or len(lines) > 2:
            raise ValueError(f"{where}: expected one or two keys, one per line")
        return cls(_key(lines[0], where), tuple(_key(line, where) for line in lines[1:]))

    def _macs(self, session: str, stream: str) -> list[hmac.HMAC]:
        prefix = _field(session.encode()) + _field(stream.encode())
        return [hmac.new(k, prefix, hashlib.sha256) for k in (self.current, *self.previous)]


def _mac(state: hmac.HMAC, position: bytes, upstream: bytes) -> bytes:
    """The MAC field of an id: ``state`` (keyed, the session and stream already in it)
    completed with ``_field(position) + _field(upstream)``."""
    h = state.copy()
    h.update(b"%d:%s%d:%s" % (len(position), position, len(upstream), upstream))
    mac = binascii.b2a_base64(h.digest()[:_MAC_BYTES], newline=False)
    return mac.translate(_URLSAFE)[:_MAC_CHARS]


@dataclass(frozen=True)
class GatewayEventId:
    """A ``Last-Event-ID`` the gateway issued, read back: the stream it belongs to, its
    position in the stream, the upstream server's id of that event."""

    stream: str
    position: int
    upstream_id: str


def parse_event_id(value: str, session: str, keys: EventIdKeys) -> GatewayEventId | None:
    """Read an event id the gateway issued in ``session``; ``None`` for anything else
    (another format, a stream name of no kind the guard uses, a position out of range, a
    MAC that verifies under none of ``keys``, an id issued in another session)."""
    tag, dot, rest = value.partition(".")
    position, dot2, rest = rest.partition(".")
    mac, dot3, upstream = rest.partition(".")
    if not (dot and dot2 and dot3 and upstream) or len(mac) != _MAC_CHARS:
        return None
    if not position.isascii() or not position.isdigit() or len(position) > 18:
        return None
    stream = _stream_of(tag, session, keys)
    if stream is None or _tag(stream) != tag:
        return None
    if not (stream.startswith("post:") or stream.startswith("get")):
        return None
    pos = int(position)
    if not 0 < pos < _MAX_POSITION or position != str(pos):
        return None
    try:  # a lone surrogate is in no id the gateway issued
        raw, given, states = upstream.encode(), mac.encode(), keys._macs(session, stream)
    except UnicodeEncodeError:
        return None
    if not any(hmac.compare_digest(_mac(s, position.encode(), raw), given) for s in states):
        return None
    return GatewayEventId(stream, pos, upstream)


def _stream_of(tag: str, session: str, keys: EventIdKeys) -> str | None:
    """The stream ``tag`` names: decoded, or for a digest the stream of the rewriter of
    ``session`` alive under ``keys`` that issued it (``None``: none, or not base64)."""
    if tag.startswith(DIGEST_MARK):
        ids = keys._digested.get((session, tag))
        return None if ids is None else ids.stream
    try:
        return base64.urlsafe_b64decode(tag + "=" * (-len(tag) % 4)).decode()
    except (binascii.Error, ValueError):
        return None


class IdRewriter:
    """Rewrites the ids of one stream's events as they are passed on, signed for
    ``session`` (see the module docstring). ``position`` (the events passed on with a
    usable id) and ``last`` (the upstream id of the newest of them: usable, see
    :func:`~fsm.adapters._transport.sse.usable_event_id`) carry over from one client
    connection of the stream to the next."""

    __slots__ = ("__weakref__", "_prefix", "_state", "last", "position", "stream")

    def __init__(
        self,
        stream: str,
        session: str,
        keys: EventIdKeys,
        position: int = 0,
        last: str | None = None,
    ) -> None:
        tag = _tag(stream)
        if tag.startswith(DIGEST_MARK):  # read back while this rewriter lives
            keys._digested[session, tag] = self
        self.stream = stream
        self._prefix = (tag + ".").encode()
        self._state = keys._macs(session, stream)[0]
        self.position = position
        self.last = last

    def advance_to(self, position: int, last: str) -> None:
        """Continue after ``position`` (another replica's, or the client's) if it is ahead."""
        if position > self.position:
            self.position, self.last = position, last

    def rewrite(self, piece: bytes, line_start: bool = True) -> bytes:
        """``piece`` with every event id rewritten: each ``id:`` line that starts the
        piece (when ``line_start``: the piece before it ended a line) or follows a line
        feed (what :data:`_ID_LINE` matches, found with ``bytes.find``: a regular
        expression would try every position of a large event's data). A piece may be part
        of an event (a large one is passed on in the pieces it was read in), but an
        ``id:`` line is never cut across two pieces. A byte order mark is no line start:
        none leads what it rewrites (``GuardedBody`` drops an upstream connection's
        leading one; see the module docstring), one anywhere else is data."""
        at = piece.find(b"id:")
        if at < 0:
            return piece
        view = memoryview(piece)  # slices of it are not copies: the join is the one copy
        out: list[bytes | memoryview] = []
        done = 0
        while at >= 0:
            if (at == 0 and line_start) or (at > 0 and piece[at - 1] == 0x0A):
                m = _ID_LINE.match(piece, at)
                if m is not None:
                    out += (view[done:at], self._one(m))
                    done = m.end()
            at = piece.find(b"id:", at + 3)
        if not out:
            return piece
        out.append(view[done:])
        return b"".join(out)

    def _one(self, m: re.Match[bytes]) -> bytes:
        line = m.group(0)
        upstream = line[4:] if line.startswith(b" ", 3) else line[3:]  # as the parser reads it
        if not upstream:  # ``id: ``: the reset passes as ``id:`` does
            return line
        if usable_event_id(upstream):
            self.position += 1
            self.last = upstream.decode("ascii")
            return self._id(upstream)
        return self._again()

    def _again(self) -> bytes:
        """What stands for an unusable upstream id: the id of the last usable event
        issued again (the client's last event id stays one the guard resumes from), or
        ``:`` (a comment: the event has no id field) when there is none."""
        try:
            last = b"" if self.last is None or self.position < 1 else self.last.encode()
        except UnicodeEncodeError:  # a store's cursor no gateway would issue an id for
            last = b""
        return self._id(last) if last and usable_event_id(last) else b":"

    def _id(self, upstream: bytes) -> bytes:
        position = b"%d" % self.position
        mac = _mac(self._state, position, upstream)
        return b"id: %s%s.%s.%s" % (self._prefix, position, mac, upstream)
