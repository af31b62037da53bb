"""Server-sent events on the wire: the product's one parser, and the events the transport
writes itself.

:class:`SseParser` is incremental and linear: every byte is scanned for line ends and
stored once, when it arrives, and kept as the bytes it came in. A large event is handed
on as the pieces its reads brought (:attr:`SseFrame.parts`), so passing it on copies
nothing, and decoding its message costs one join of its data: no step of its handling
holds the event loop that serves other sessions for much longer than a read does.

The parser follows the WHATWG event-stream rules that matter to JSON-RPC over SSE: lines
end with CRLF, LF or CR (a CR at the end of a read waits for the next read to tell a CRLF
from a CR, or for the end of the stream, :meth:`SseParser.finish`, which makes it a line
end); one byte order mark (:data:`BOM`) at the very start of the stream is dropped (one
anywhere else is data); a blank line ends an event; ``data:`` lines are joined with line
feeds; ``id:`` with a NUL is ignored; ``retry:`` counts when it is all digits; comments and
unknown fields make no event on their own. Documented choices: an event that has no
field at all (only comments) is dropped; a byte that is not UTF-8 is kept (passed on
as it came; in :attr:`SseFrame.data` decoded with ``surrogateescape``) and marks its
event not UTF-8 instead of being replaced; an ``id:`` that is not a usable cursor
(:func:`usable_event_id`: one that could not be sent back as ``Last-Event-ID``) is
ignored as one with a NUL is (the event is read as having no id: it never becomes the
cursor, and the event is still passed on as it came); a ``retry:`` of more than
:data:`RETRY_DIGITS` digits is read as the largest number of that many (no unbounded
conversion of a server's digits).
"""

from __future__ import annotations

import codecs
import re

from fsm.messages import CANCELLED

__all__ = [
    "BOM",
    "LARGE_EVENT",
    "MAX_EVENT_ID",
    "PIECE_COST",
    "RETRY_DIGITS",
    "EventTooLarge",
    "SseFrame",
    "SseParser",
    "encode_event",
    "hot_event",
    "plain_notification",
    "usable_event_id",
]


class SseFrame:
    """One parsed SSE event.

    ``parts`` are the event's bytes as received, line ends normalised to LF, ending with
    the blank line that ended it, in the pieces the reads brought them in: a large event
    is never joined into one copy to be passed on (:attr:`raw` joins them on demand).
    ``data_bytes`` is the ``data`` field (its lines joined with LF); :attr:`data` is it
    decoded. ``utf8``: the event was valid UTF-8 (one that is not is malformed JSON: RFC
    8259; its :attr:`data` keeps each such byte as a lone surrogate)."""

    __slots__ = (
        "_data",
        "data_bytes",
        "event",
        "event_id",
        "has_data",
        "parts",
        "retry",
        "size",
        "utf8",
    )

    def __init__(
        self,
        parts: tuple[bytes, ...],
        event_id: str | None,
        data_bytes: bytes,
        retry: int | None,
        has_data: bool,
        utf8: bool = True,
        event: str | None = None,
        size: int | None = None,
    ) -> None:
        self.parts = parts
        self.event_id = event_id
        self.data_bytes = data_bytes
        self.retry = retry
        self.has_data = has_data
        self.utf8 = utf8
        self.event = event
        """The ``event:`` field (the event type), if any."""
        self.size = sum(map(len, parts)) if size is None else size
        """Bytes of the event as passed on (:attr:`parts`)."""
        self._data: str | None = None

    @property
    def raw(self) -> bytes:
        """The event's bytes (line ends as LF) and the blank line, in one piece."""
        return self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)

    @property
    def data(self) -> str:
        """The ``data`` field as text (decoded once, when first read)."""
        if self._data is None:
            self._data = self.data_bytes.decode("utf-8", "surrogateescape")
        return self._data

    def __repr__(self) -> str:
        return (
            f"SseFrame(event_id={self.event_id!r}, size={self.size}, event={self.event!r}, "
            f"retry={self.retry!r}, has_data={self.has_data}, utf8={self.utf8})"
        )


class EventTooLarge(Exception):
    """An SSE event longer than the parser's ``max_event`` bytes."""


LARGE_EVENT = 256 * 1024
"""Bytes of an SSE event from which its message is read by its envelope
(:func:`fsm.adapters._transport.envelope.decode`) and its handling hands the event loop
back before and after that decoding (``GuardedBody._pass_on``)."""

PIECE_COST = 64
"""Bytes each line and each read held of a pending event count at least towards
:attr:`SseParser.max_event`: about what holding a ``bytes`` costs beyond its content
(its header and its place in a list). An event sent a byte per read, or as a million
one-character lines, is bounded by the memory it takes, not only by its length; one
read in large pieces counts its length (an event just under the bound passes however
its reads cut it), and takes at most about twice what it counts."""


MAX_EVENT_ID = 1024
"""The longest event id (characters) taken as a stream's cursor. An id is a usable cursor
only if a resume can send it back as the ``Last-Event-ID`` header, as it came: at most
this long, visible ASCII (0x20-0x7E), no space at either end (an HTTP header's value
loses those). Real servers' ids are far shorter (a UUID, ``<stream>_<n>``); a longer one
would be kept per stream and per ended stream, and a gateway's id that embeds it could
not come back within a request head anyway."""

_ID_VALUE = rb"(?:[!-~](?:[ -~]{0,%d}[!-~])?)?" % (MAX_EVENT_ID - 2)
"""A usable cursor's bytes (see :data:`MAX_EVENT_ID`), as a pattern."""
_USABLE_ID = re.compile(_ID_VALUE).fullmatch

RETRY_DIGITS = 10
"""Digits of a ``retry:`` value read as a number (leading zeros aside); a longer value is
read as ``10**RETRY_DIGITS - 1`` ms (about 116 days), and the guard caps the wait it asks
for anyway (:attr:`fsm.sse.guard.GuardConfig.max_server_wait_s`)."""

_LONGEST_RETRY: int = 10**RETRY_DIGITS - 1

BOM = b"\xef\xbb\xbf"
"""A UTF-8 byte order mark (U+FEFF). WHATWG's event-stream decoding drops one at the very
start of a stream (eventsource-parser, the TypeScript SDK's reader, does); anywhere else
it is data: a line that begins with it names another field (``\\ufeffid``)."""


def usable_event_id(value: bytes) -> bool:
    """Whether the ``id:`` value ``value`` is a usable cursor (see :data:`MAX_EVENT_ID`):
    empty (the id reset), or at most :data:`MAX_EVENT_ID` visible ASCII characters with
    no space at either end. An id that is not is read as no id: the guard never resumes
    from it (a stream resumes from its last usable id, or ends ``no-cursor``)."""
    return _USABLE_ID(value) is not None


def _retry(value: bytes) -> int:
    """The milliseconds of a ``retry:`` value of ASCII digits, at most
    ``10**RETRY_DIGITS - 1``: never an unbounded conversion."""
    if len(value) > RETRY_DIGITS:
        value = value.lstrip(b"0") or b"0"
        if len(value) > RETRY_DIGITS:
            return _LONGEST_RETRY
    return int(value)


class _Long:
    """A line that came in more than one read: its pieces, never joined to be passed on;
    checked for UTF-8 piece by piece as they arrive."""

    __slots__ = ("pieces", "utf8", "weight")

    def __init__(self, pieces: list[bytes], utf8: bool, weight: int) -> None:
        self.pieces, self.utf8 = pieces, utf8
        self.weight = weight
        """What holding it counts: each piece at least :data:`PIECE_COST`."""


class SseParser:
    """Incremental SSE parser: bytes in, complete events out.

    ``max_event`` bounds one event, buffered or complete, in bytes (its lines and the
    line feeds between them), each line and each read held counting at least
    :data:`PIECE_COST` (what holding it as a piece costs): past it :meth:`feed`
    raises :class:`EventTooLarge` and the parser must not be fed again (``None``: no
    bound). Memory is the pending event and its partial line, in the pieces the reads
    brought: at most about ``max_event`` bytes however the event is cut, even one byte
    per read.

    Each byte is scanned for line ends once, when it arrives; a line that spans reads is
    kept as its pieces (checked for UTF-8 as they come, through an incremental decoder)
    and handed on as them: an event of many reads costs at its end one join of its data
    (to decode the message), not a copy of everything it holds.
    """

    __slots__ = (
        "_cr",
        "_head",
        "_line",
        "_line_size",
        "_line_utf8",
        "_line_weight",
        "_lines",
        "_size",
        "_validator",
        "idle",
        "max_event",
    )

    def __init__(self, max_event: int | None = None, *, mid_stream: bool = False) -> None:
        """``mid_stream``: the bytes fed start inside a stream (kept events passed on
        again), so none of them is the stream's leading :data:`BOM`: one is data."""
        self.max_event = max_event
        self._lines: list[bytes | _Long] = []
        """The pending event's complete lines (not blank)."""
        self._line: list[bytes] = []
        """The pending line, in the pieces it came in."""
        self._line_size = 0
        """Weight of the pending line: its bytes and its pieces (in :attr:`_size` too)."""
        self._line_weight = 0
        """Weight of the line :meth:`_close_line` ended last."""
        self._line_utf8 = True
        """The pending line's pieces so far are UTF-8 (checked by :attr:`_validator`)."""
        self._validator = codecs.getincrementaldecoder("utf-8")("strict")
        self._size = 0
        """Weight of the pending event: its bytes, line feeds and pieces."""
        self._cr = False
        """The last read ended with a carriage return: the first half of a CRLF or a line
        end of its own, decided with the next read (or by :meth:`finish`)."""
        self._head: bytes | None = None if mid_stream else b""
        """The stream's first bytes, held while they may be the start of a :data:`BOM`
        (``b""``: none yet); ``None`` once the start is decided (:meth:`begin`)."""
        self.idle = mid_stream
        """Nothing buffered: no part of an event, so the next read starts a new event
        (and :func:`hot_event` may read it directly). Not before the stream's start is
        decided (:meth:`begin`): its first bytes may be a :data:`BOM`."""

    @property
    def pending(self) -> bool:
        """Whether part of an event (or of the stream's leading :data:`BOM`) is buffered:
        a later read completes it."""
        return bool(self._size) or self._cr or bool(self._head)

    @property
    def starting(self) -> bool:
        """Whether the stream's start is not decided yet (:meth:`begin`)."""
        return self._head is not None

    def begin(self, chunk: bytes) -> bytes:
        """The stream's bytes in ``chunk`` (a read at its start) without a leading
        :data:`BOM`: ``b""`` while they may still be the start of one (fewer than three
        bytes so far, all a BOM's; held here, given back with the next read if they are
        not one). Once the start is decided (:attr:`starting` is false) ``chunk`` as it
        is. :meth:`feed` calls it itself; a caller that passes a stream's bytes on calls
        it first, to pass them on as the parser reads them (without the mark)."""
        head = self._head
        if head is None:
            return chunk
        if head:
            chunk = head + chunk
        if len(chunk) < 3 and BOM.startswith(chunk):  # b"" too: nothing decided yet
            self._head = chunk
            return b""
        self._head = None
        self.idle = True  # nothing else is buffered at the start
        return chunk[3:] if chunk.startswith(BOM) else chunk

    def finish(self) -> list[SseFrame]:
        """The events the end of the stream completes (call it once, at a clean end;
        the parser is not fed again). A carriage return that ended the last read is a
        line end of its own (no LF can follow it), so the event it ends is complete, as
        every WHATWG reader takes it (httpx2's ``_SSELineDecoder.flush``); whatever else
        is pending (an event or a line not ended) is dropped, as WHATWG says. Raises
        :class:`EventTooLarge` as :meth:`feed` does."""
        if not self._cr:
            return []
        self._cr = False
        return self.feed(b"\n")

    def _hold(self, piece: bytes) -> None:
        """Keep ``piece`` as part of the pending line, checking its UTF-8 on the way."""
        if self._line_utf8 and not piece.isascii():
            try:
                self._validator.decode(piece)
            except UnicodeDecodeError:
                self._line_utf8 = False
        self._line.append(piece)
        weight = max(len(piece), PIECE_COST)
        self._line_size += weight
        self._size += weight

    def feed(self, chunk: bytes) -> list[SseFrame]:
        """The events ``chunk`` completes, in order. Raises :class:`EventTooLarge`."""
        if self._head is not None:  # the stream's first read(s): a leading BOM?
            chunk = self.begin(chunk)
        if self._cr:
            chunk, self._cr = b"\r" + chunk, False
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):
                chunk, self._cr = chunk[:-1], True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        limit = self.max_event
        if b"\n" not in chunk:  # the middle of a line (say, of a large event's data)
            if chunk:
                self._hold(chunk)
                self.idle = False
                if limit is not None and self._size > limit:
                    raise EventTooLarge(f"an SSE event over {limit} bytes")
            return []
        lines = chunk.split(b"\n")
        tail = lines.pop()
        pending, size = self._lines, self._size
        if self._line:  # the pending line ends in this read
            if lines[0]:
                self._hold(lines[0])
            closed = self._close_line()
            pending.append(closed)
            size = self._size + (closed.weight if type(closed) is _Long else self._line_weight) + 1
            lines = lines[1:]
        out: list[SseFrame] = []
        for line in lines:
            if line:
                pending.append(line)
                size += (len(line) if len(line) > PIECE_COST else PIECE_COST) + 1
            elif pending:  # a blank line ends the event
                if limit is not None and size - 1 > limit:
                    raise EventTooLarge(f"an SSE event over {limit} bytes")
                frame = _frame(pending)
                if frame is not None:
                    out.append(frame)
                pending, size = [], 0
        self._lines, self._size = pending, size
        if tail:
            self._hold(tail)
        if limit is not None and self._size > limit:
            raise EventTooLarge(f"an SSE event over {limit} bytes")
        self.idle = not self._size and not self._cr
        return out

    def _close_line(self) -> bytes | _Long:
        """The pending line, ended (its weight leaves :attr:`_size`): one piece as it is
        (checked when its event is framed), more as a :class:`_Long`."""
        line, self._line = self._line, []
        self._size -= self._line_size
        weight, self._line_size = self._line_size, 0
        utf8, self._line_utf8 = self._line_utf8, True
        if utf8 and len(line) > 1:
            try:
                self._validator.decode(b"", final=True)  # no sequence cut off at its end
            except UnicodeDecodeError:
                utf8 = False
        self._validator.reset()
        self._line_weight = weight
        if len(line) == 1:
            return line[0]
        return _Long(line, utf8, weight)


def _is_utf8(line: bytes) -> bool:
    if line.isascii():
        return True
    try:
        line.decode()
    except UnicodeDecodeError:
        return False
    return True


def _frame(lines: list[bytes | _Long]) -> SseFrame | None:
    """The event of ``lines`` (complete, none blank; the list is the caller's to give
    up); ``None`` when none is a field."""
    event_id: str | None = None
    data: list[bytes] = []
    retry: int | None = None
    kind: str | None = None
    meaningful = False
    longs = False
    for line in lines:
        if not isinstance(line, bytes):  # a line that came in pieces (rare): its own reading
            longs = True
            continue
        if line.startswith(b"data:"):
            data.append(line[6:] if line.startswith(b" ", 5) else line[5:])
            meaningful = True
        elif line.startswith(b"id:"):
            value = line[4:] if line.startswith(b" ", 3) else line[3:]
            if _USABLE_ID(value) is not None:  # else ignored, as one with a NUL
                event_id = value.decode("ascii")
            meaningful = True
        elif line.startswith(b":"):
            continue
        else:
            name, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            if name == b"retry" and value.isdigit():
                retry = _retry(value)
            elif name == b"event":
                kind = value.decode("utf-8", "surrogateescape")
            elif name == b"data":  # the bare field name: an empty value
                data.append(b"")
            elif name == b"id":
                event_id = ""
            meaningful = True
    if longs:
        return _long_frame(lines)
    if not meaningful:
        return None
    lines += (b"", b"")  # whole lines only (the common case): one join, one check
    raw = b"\n".join(lines)  # type: ignore[arg-type]  # only bytes here
    utf8 = raw.isascii() or _is_utf8(raw)
    value = data[0] if len(data) == 1 else b"\n".join(data)
    return SseFrame((raw,), event_id, value, retry, bool(data), utf8, kind, len(raw))


def _long_frame(lines: list[bytes | _Long]) -> SseFrame | None:
    """:func:`_frame` of an event with a line that came in pieces: a ``data`` line is
    kept in its pieces (its value joined once, the event passed on in them), a long line
    of another field is joined (an ``id`` line is passed on in one piece)."""
    for i, line in enumerate(lines):
        if isinstance(line, _Long) and not line.pieces[0].startswith(b"data:"):
            lines[i] = b"".join(line.pieces)
    short: list[bytes | _Long] = [line for line in lines if isinstance(line, bytes)]
    frame = _frame(short) if short else None
    data: list[bytes | _Long] = []
    for line in lines:
        if isinstance(line, _Long):
            data.append(line)
        elif line == b"data" or line.startswith(b"data:"):
            data.append(line[6:] if line.startswith(b" ", 5) else line[5:])
    if frame is None and not data:
        return None
    utf8 = True
    parts: list[bytes] = []
    pending: list[bytes] = []
    for line in lines:
        if isinstance(line, _Long):
            utf8 = utf8 and line.utf8
            if pending:
                pending.append(b"")
                parts.append(b"\n".join(pending))
                pending = []
            parts += line.pieces
            pending.append(b"")  # the line feed after it, joined to what follows
        else:
            utf8 = utf8 and _is_utf8(line)
            pending.append(line)
    pending += (b"", b"")
    parts.append(b"\n".join(pending))
    if frame is None:
        return SseFrame(tuple(parts), None, _data(data), None, True, utf8)
    return SseFrame(
        tuple(parts), frame.event_id, _data(data), frame.retry, bool(data), utf8, frame.event
    )


def _data(lines: list[bytes | _Long]) -> bytes:
    """The ``data`` field: the values of the event's ``data`` lines (a long line still
    with its field name, which is cut here), joined with LF; a long line costs one join."""
    values: list[bytes] = []
    for line in lines:
        if type(line) is _Long:
            head, *rest = line.pieces
            while len(head) <= 6 and rest:  # "data:" and its space cut across reads
                head += rest.pop(0)
            skip = 6 if head.startswith(b"data: ") else 5
            values.append(b"".join([head[skip:], *rest]))
        else:
            assert type(line) is bytes
            values.append(line)
    return values[0] if len(values) == 1 else b"\n".join(values)


def encode_event(event_id: str | None, data: str) -> bytes:
    """An SSE ``message`` event of one ``data`` line (and ``id`` when given)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: message\ndata: {data}\n\n".encode()


_NOTIFICATION_PREFIX = '{"jsonrpc":"2.0","method":"'


def plain_notification(data: str) -> str | None:
    """The method of a compactly serialised notification that needs no decision, read
    without a JSON parse; ``None`` whenever in doubt (the caller then parses).

    Taken only for ``{"jsonrpc":"2.0","method":"<m>","params":{...}}`` (or without
    params) with one ``"method"``, one ``"jsonrpc"`` and at most one ``"params"`` key, no
    ``"id"`` anywhere, no backslash anywhere (an escaped key such as ``"\\u0069d"`` would
    hide from the checks) and ``<m>`` not a cancellation: only messages that, parsed, pass
    :func:`fsm.messages.is_plain_notification`.
    Anything malformed is forwarded to the SDK either way.
    """
    if not data.startswith(_NOTIFICATION_PREFIX) or not data.endswith("}"):
        return None
    start = len(_NOTIFICATION_PREFIX)
    end = data.find('"', start)
    if end <= start:
        return None
    method = data[start:end]
    rest = data[end + 1 :]
    if (
        "\\" in data
        or method == CANCELLED
        or not (rest == "}" or rest.startswith(',"params":{'))
        or '"id"' in data
        or data.count('"method"') != 1
        or data.count('"jsonrpc"') != 1
        or data.count('"params"') > 1
    ):
        return None
    return method


_FLAT_PARAMS = rb'(?:,"params":\{[^{}\[\]\\\r\n]*\})?'
_HOT_EVENT = re.compile(  # an id that is not a usable cursor: no match, the parser reads it
    rb"(?:id: ?(" + _ID_VALUE + rb")\r?\n)?"
    rb"(?:event: ?message\r?\n)?"
    rb'data: ?\{(?:"jsonrpc":"2\.0","method":"([^"\\\r\n]+)"'
    + _FLAT_PARAMS
    + rb'|"method":"([^"\\\r\n]+)"'
    + _FLAT_PARAMS
    + rb',"jsonrpc":"2\.0")\}'
    rb"\r?\n\r?\n"
)
_CANCELLED_BYTES = CANCELLED.encode()


def hot_event(chunk: bytes, pos: int) -> tuple[int, str | None] | None:
    """A whole plain notification event at ``chunk[pos:]``, read without a parse:
    ``(end, event id)``, or ``None`` whenever in doubt (the caller then parses).

    Taken only for an event of the lines ``id:`` (optional; its value a usable cursor,
    :func:`usable_event_id`, else the parser reads the event), ``event: message``
    (optional) and one ``data:`` line holding exactly
    ``{"jsonrpc":"2.0","method":"<m>","params":{...}}`` (or without params; or with
    ``"jsonrpc":"2.0"`` last, as the mcp 1.x server writes it), compact, the params flat
    (no brace or bracket inside, so they end at the first ``}`` and no other top-level
    key can follow), no backslash anywhere (no escaped key or method), ``<m>`` not a
    cancellation, each line ended by CRLF or LF and the event by an empty line. Those
    are notifications that need no decision (no top-level ``id``, one ``method``,
    ``jsonrpc`` 2.0, params an object: what
    :meth:`fsm.sse.guard.Guard.on_plain_notification` is for), with the id and data
    :class:`SseParser` would give. ``chunk`` must be ASCII (the caller checks it once per
    chunk) and ``pos`` the start of an event. Anything malformed (say, an unterminated
    string inside the params) is forwarded either way.
    """
    m = _HOT_EVENT.match(chunk, pos)
    if m is None:
        return None
    event_id, method, method_last = m.groups()
    if (method or method_last) == _CANCELLED_BYTES:
        return None
    return m.end(), None if event_id is None else event_id.decode()
