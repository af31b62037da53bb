"""Server-sent events on the wire: the product's one parser, and the events the transport
writes itself.

:class:`SseParser` is incremental and linear: every byte is decoded, scanned for line
ends and stored once, when it arrives, so an event spread over many reads costs at its
end only the joins that make its text (no rescan of what came before). That keeps a
large event from stopping the event loop that serves other sessions for longer than a
copy of it takes.

The parser follows the WHATWG event-stream rules that matter to JSON-RPC over SSE: lines
end with CRLF, LF or CR (a CR at the end of a read waits for the next read to tell a CRLF
from a CR); a blank line ends an event; ``data:`` lines are joined with line feeds;
``id:`` with a NUL is ignored; ``retry:`` counts when it is all digits; comments and
unknown fields make no event on their own. Two documented choices: an event that has no
field at all (only comments) is dropped, and a byte that is not UTF-8 is kept (decoded
with ``surrogateescape``) and marks its event not UTF-8 instead of being replaced.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from fsm.messages import CANCELLED

__all__ = [
    "PIECE_COST",
    "EventTooLarge",
    "SseFrame",
    "SseParser",
    "encode_event",
    "hot_event",
    "plain_notification",
    "raw_bytes",
]


@dataclass(slots=True)
class SseFrame:
    """One parsed SSE event.

    ``raw`` is the event's lines as received, line ends normalised to LF, and the blank
    line that ended it (a byte that is not UTF-8 kept as a lone surrogate:
    :func:`raw_bytes` gives the bytes back). ``utf8``: the event was valid UTF-8 (one
    that is not is malformed JSON: RFC 8259)."""

    raw: str
    event_id: str | None
    data: str
    retry: int | None
    has_data: bool
    utf8: bool = True
    event: str | None = None
    """The ``event:`` field (the event type), if any."""


_SURROGATES = re.compile("[\udc80-\udcff]")
"""How ``surrogateescape`` decoding marks a byte that is not UTF-8."""


def raw_bytes(frame: SseFrame) -> bytes:
    """The bytes of a parsed event as received (line ends as LF) and the blank line."""
    return frame.raw.encode("utf-8", "surrogateescape")


class EventTooLarge(Exception):
    """An SSE event longer than the parser's ``max_event`` characters."""


PIECE_COST = 64
"""Characters each line and each read held of a pending event count towards
:attr:`SseParser.max_event`: about what a held ``str`` costs beyond its text, so an
event sent a byte per read, or as a million one-character lines, is bounded by the
memory it takes, not only by its length."""


class SseParser:
    """Incremental SSE parser: bytes in, complete events out.

    ``max_event`` bounds one event, buffered or complete, in characters of its decoded
    text (its lines and the line feeds between them), each line and each read held
    counting :data:`PIECE_COST` more (what holding it as a piece costs): past it
    :meth:`feed` raises :class:`EventTooLarge` and the parser must not be fed again
    (``None``: no bound). Memory is the pending event and its partial line, in pieces:
    at most about ``max_event`` bytes however the event is cut, even one byte per read.
    """

    __slots__ = ("_cr", "_decoder", "_line", "_line_size", "_lines", "_size", "idle", "max_event")

    def __init__(self, max_event: int | None = None) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self.max_event = max_event
        self._lines: list[str] = []
        """The pending event's complete lines (not blank)."""
        self._line: list[str] = []
        """The pending line, in the pieces it came in: joined once, when it ends."""
        self._line_size = 0
        """Weight of the pending line: its characters and its pieces (in :attr:`_size` too)."""
        self._size = 0
        """Weight of the pending event: its characters, line feeds and pieces."""
        self._cr = False
        """The last read ended with a carriage return: the first half of a CRLF or a line
        end of its own, decided with the next read."""
        self.idle = True
        """Nothing buffered: neither part of an event nor part of a UTF-8 sequence, so the
        next read starts a new event (and :func:`hot_event` may read it directly)."""

    @property
    def pending(self) -> bool:
        """Whether part of an event is buffered (a later read completes it)."""
        return bool(self._size) or self._cr

    def feed(self, chunk: bytes) -> list[SseFrame]:
        """The events ``chunk`` completes, in order. Raises :class:`EventTooLarge`."""
        text = self._decoder.decode(chunk)
        if self._cr:
            text, self._cr = "\r" + text, False
        if "\r" in text:
            if text.endswith("\r"):
                text, self._cr = text[:-1], True
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        limit = self.max_event
        if "\n" not in text:  # the middle of a line (say, of a large event's data)
            if text:
                self._line.append(text)
                weight = len(text) + PIECE_COST
                self._line_size += weight
                self._size += weight
                self.idle = False
                if limit is not None and self._size > limit:
                    raise EventTooLarge(f"an SSE event over {limit} bytes")
            return []
        lines = text.split("\n")
        tail = lines.pop()
        pending, size = self._lines, self._size
        if self._line:  # the pending line ends in this read
            self._line.append(lines[0])
            lines[0] = "".join(self._line)
            size -= self._line_size
            self._line, self._line_size = [], 0
        out: list[SseFrame] = []
        for line in lines:
            if line:
                pending.append(line)
                size += len(line) + 1 + PIECE_COST
            elif pending:  # a blank line ends the event
                if limit is not None and size - 1 > limit:
                    raise EventTooLarge(f"an SSE event over {limit} bytes")
                frame = _frame(pending)
                if frame is not None:
                    out.append(frame)
                pending, size = [], 0
        if tail:
            self._line.append(tail)
            self._line_size = len(tail) + PIECE_COST
            size += self._line_size
        self._lines, self._size = pending, size
        if limit is not None and size > limit:
            raise EventTooLarge(f"an SSE event over {limit} bytes")
        self.idle = not size and not self._cr and not self._decoder.getstate()[0]
        return out


def _frame(lines: list[str]) -> SseFrame | None:
    """The event of ``lines`` (complete, none blank); ``None`` when none is a field."""
    event_id: str | None = None
    data: list[str] = []
    retry: int | None = None
    kind: str | None = None
    meaningful = False
    for line in lines:
        if line.startswith("data:"):  # one slice: a large event's data is copied once
            data.append(line[6:] if line.startswith("data: ") else line[5:])
            meaningful = True
        elif line.startswith("id:"):
            value = line[3:]
            value = value[1:] if value.startswith(" ") else value
            if "\0" not in value:
                event_id = value
            meaningful = True
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "retry" and value.isdigit():
                retry = int(value)
            elif name == "event":
                kind = value
            meaningful = True
    if not meaningful:
        return None
    lines.append("\n")  # the blank line, in the one copy that joins the lines
    raw = "\n".join(lines)
    utf8 = raw.isascii() or _SURROGATES.search(raw) is None  # isascii: O(1) on a str
    return SseFrame(raw, event_id, "\n".join(data), retry, bool(data), utf8, kind)


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
_HOT_EVENT = re.compile(
    rb"(?:id: ?([^\r\n\0]*)\r?\n)?"
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

    Taken only for an event of the lines ``id:`` (optional), ``event: message``
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
