"""Event logs: observations (:mod:`fsm.properties`) as JSON Lines, schema
``dead-or-resumable/trace/2`` (:data:`SCHEMA`; documented for readers in
``docs/adapter.md``, "Event log").

One JSON object per line. The first line is a header, ``{"kind": "header", "schema":
"dead-or-resumable/trace/2", "t": ..., "wall": ...}`` (``t`` and ``wall``: when the log
began). Every other record has ``"kind"`` (the observation's name in snake case), ``"t"``
(seconds on the client's monotonic clock, a number) and ``"wall"`` (the same instant in
UTC, an ISO 8601 string with microseconds, e.g. ``"2025-06-01T12:00:00.250000Z"``); the
other fields are the observation's, with request keys as ``[session, id]`` arrays:

==============  ===========================================================
kind            fields
==============  ===========================================================
``delivered``   ``key``, ``stream``, ``replayed`` (bool), ``asserted`` (bool),
                ``interactive`` (bool), and for a re-ask under a new id only
                ``question`` (the key that first asked the same question)
``cancelled``   ``key``
``rejected``    ``key``, ``session`` (bool: the whole session is gone)
``session_gone``
``session_began`` ``session_id``
``event_seen``  ``stream``, ``event_id``
``answered``    ``key``, ``answer`` (object)
``presented``   ``key``
``declared_dead`` ``key``
``submitted``   ``key``, ``answer`` (object)
``resumed``     ``stream``, ``cursor``
``began``       ``interaction``
``ended``       ``interaction``, ``outcome`` (``completed`` | ``failed`` | ``closed``),
                ``reason``
==============  ===========================================================

Time: a writer reads the wall clock once, when the log begins (:class:`Timebase`), and
derives every record's ``wall`` from its ``t``: records come in the order they were
observed, ``t`` and ``wall`` never decrease along a log (given a monotonic clock), and a
step of the system clock during the session does not reorder them. ``wall`` is as exact
as the system clock was at the start, plus the monotonic clock's drift since (which NTP
slews alike on Linux): close enough to line a record up with a server's log.

Outcomes: ``completed`` (the origin's response arrived), ``failed`` (the interaction ended
without completing: ``reason`` is its typed error's), ``closed`` (the client closed the
session while the stream was still open, reason ``session-closed``: a normal end, not a
failure).

Streams and interactions carry the client's names: ``post:<id>`` for the response
stream of request ``<id>`` (its interaction ``began`` and ends once), ``<stream>#<id>``
for a server request without an origin (it ends once, with no ``began``), and ``get``,
``get/2``, ``get/3``, ... for the connection generations of the standalone GET stream
(:func:`fsm.events.standalone_stream`): a fresh GET after one ended is the next
generation, so no name ends twice. A generation has no ``began`` (it need not end: it
lives as long as the session) and at most one ``ended``: ``failed`` when the client gave
up on it (e.g. cut before any event id: reason ``no-cursor``), ``closed`` when the
session closed around it. Its ``resumed`` records follow only its own ``event_seen`` ids.
``python -m fsm audit`` reads those names as they are: an ``ended`` repeated for one name
is P5, a ``resumed`` after its stream's ``ended`` (whatever the outcome) is ``M``, and
``--complete`` asks only the interactions that ``began`` to have ended.

Eras: a log of a task of the tasks extension (``io.modelcontextprotocol/tasks``) names its
era in the header, ``{"kind": "header", "schema": "dead-or-resumable/trace/3", "era":
"tasks", ...}`` (:data:`ERA_SCHEMA`, :data:`ERAS`): its keys are ``[task id,
inputRequests key]``, its interaction the task id, and it is read as ``docs/tasks.md``
says (:mod:`fsm.tasks.observe`): a key's lifecycle is :data:`fsm.machines.tasks.TASK_INPUT`,
not the SSE liveness machine. Schema 3 is schema 2 plus that header field; a log that
names no era (SSE and MRTR logs) is written as schema 2, so readers of schema 2 read it
unchanged, while one that knows only schema 2 refuses a task log instead of judging it
by the wrong machine.

Versions: a reader accepts the schemas in :data:`SCHEMAS`. Schema 1 (``trace/1``) had no
``wall``, no ``t`` in the header and no ``closed`` outcome; its logs read as before. The
header may be missing (a hand-written log); a header naming another schema is a
:class:`TraceFormatError`. Unknown extra fields are ignored (forward compatible); a missing
or mistyped field is a :class:`TraceFormatError` naming the line. ``wall`` is optional for
a reader (logs of schema 1, logs written without a :class:`Timebase`).

Reading: a log is JSON Lines (:func:`split_lines`): records are separated by line feeds
only (a ``\\r`` before one is dropped), so a U+2028, U+0085 or any other character that
``str.splitlines`` would break at stays inside its record, as JSON allows in a string.
Each line is strict JSON (:func:`read_line`): ``NaN``, ``Infinity`` and a number too large
for a float (``1e999``) are not JSON values a record may hold, anywhere in it. A numeric
field (``t``, the header's ``t``) must be a finite number (an ``int`` or a ``float``, not
a ``bool``; an integer a float cannot hold, e.g. 400 digits, is refused too): it is read
as a ``float``.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import MISSING, dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

from fsm import properties as P

SCHEMA = "dead-or-resumable/trace/2"
"""The schema this module writes (the header's ``schema``)."""

ERA_SCHEMA = "dead-or-resumable/trace/3"
"""The schema of a log whose header names its era (``era``, one of :data:`ERAS`)."""

ERAS = frozenset({"sse", "tasks"})
"""The eras a header may name; a header naming none is an ``sse`` log (MRTR logs too)."""

SCHEMAS = frozenset({"dead-or-resumable/trace/1", SCHEMA, ERA_SCHEMA})
"""The schemas :func:`loads` reads: these and every earlier one."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EARLIEST = datetime.min.replace(tzinfo=UTC)
_LATEST = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Timebase:
    """Where a log's monotonic clock stands against the wall clock: at monotonic reading
    ``t0`` the wall clock read ``wall0`` (seconds since the Unix epoch). Every record's
    ``wall`` is derived from its ``t`` (``wall0 + t - t0``), so ``wall`` keeps the order
    of ``t`` whatever the system clock does after the log began."""

    t0: float
    wall0: float

    @classmethod
    def start(cls, t0: float, wall_clock: Callable[[], float] = time.time) -> Timebase:
        """The timebase of a log beginning now: ``t0`` is the client's clock reading now,
        ``wall_clock`` (``time.time`` by default) is read once."""
        return cls(t0, wall_clock())

    def wall(self, t: float) -> str:
        """Monotonic reading ``t`` as UTC, ISO 8601 with microseconds and a ``Z``, e.g.
        ``"2025-06-01T12:00:00.250000Z"``. A reading outside what a date can hold (a
        test clock jumped by centuries, or not a number) gives the first or last
        representable instant rather than raising."""
        seconds = self.wall0 + (t - self.t0)
        try:
            moment = _EPOCH + timedelta(seconds=seconds)
        except (OverflowError, ValueError):
            moment = _LATEST if not math.isnan(seconds) and seconds > 0 else _EARLIEST
        return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


_KINDS: dict[str, type[Any]] = {
    re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower(): cls
    for cls in (
        P.Delivered,
        P.Cancelled,
        P.Rejected,
        P.SessionGone,
        P.SessionBegan,
        P.EventSeen,
        P.Answered,
        P.Presented,
        P.DeclaredDead,
        P.Submitted,
        P.Resumed,
        P.Began,
        P.Ended,
    )
}
_NAMES = {cls: name for name, cls in _KINDS.items()}
_TYPES: dict[str, tuple[type, ...]] = {
    "stream": (str,),
    "event_id": (str,),
    "cursor": (str,),
    "interaction": (str,),
    "outcome": (str,),
    "reason": (str,),
    "replayed": (bool,),
    "asserted": (bool,),
    "interactive": (bool,),
    "held": (bool,),
    "session": (bool,),
    "session_id": (str,),
    "answer": (dict,),
}
_NUMBERS = frozenset({"t"})
"""The numeric fields of a record: each read by :func:`_number` (a finite float)."""


class TraceFormatError(ValueError):
    """A log line is not a valid record; ``line`` is 1-based."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"line {line}: {why}")
        self.line, self.why = line, why


def header(timebase: Timebase | None = None, era: str | None = None) -> dict[str, Any]:
    """The header record: the schema and, with ``timebase``, when the log began; with
    ``era`` (one of :data:`ERAS`, else ``ValueError``), schema 3 naming it."""
    if era is not None and era not in ERAS:
        raise ValueError(f"unknown era {era!r}: choose from {', '.join(sorted(ERAS))}")
    record: dict[str, Any] = {"kind": "header", "schema": SCHEMA if era is None else ERA_SCHEMA}
    if era is not None:
        record["era"] = era
    if timebase is not None:
        record["t"] = timebase.t0
        record["wall"] = timebase.wall(timebase.t0)
    return record


def header_line(timebase: Timebase | None = None, era: str | None = None) -> str:
    """The header as a log's first line (no line break), keys sorted."""
    return json.dumps(header(timebase, era), sort_keys=True)


def era_of(line: str) -> str | None:
    """The era the log line ``line`` names if it is a schema-3 header (``None`` for any
    other line: a record, a header of an earlier schema, a line that is not JSON, which
    :func:`loads` reports). The line is parsed, so a header spelled with JSON escapes is
    one. Raises :class:`TraceFormatError` (line 0) for a schema-3 header naming an unknown
    era."""
    try:
        record = _parse(line, 0)
    except TraceFormatError:
        return None
    if not isinstance(record, Mapping) or record.get("kind") != "header":
        return None
    if record.get("schema") != ERA_SCHEMA:
        return None
    era = record.get("era")
    if not isinstance(era, str) or era not in ERAS:
        raise TraceFormatError(0, f"unknown era {era!r}")
    return era


def header_era(record: Mapping[str, Any]) -> str | None:
    """The era the header ``record`` names (one of :data:`ERAS`), ``None`` for a header
    naming none (an ``sse`` log) or a record that is not a header. Read from the parsed
    record, as :func:`from_record` checked it (it refuses a schema-3 header without a
    known era)."""
    if record.get("kind") != "header" or record.get("schema") != ERA_SCHEMA:
        return None
    era = record.get("era")
    return era if isinstance(era, str) and era in ERAS else None


def to_record(
    obs: P.Observation, t: float = 0.0, timebase: Timebase | None = None
) -> dict[str, Any]:
    """The JSON-ready record of ``obs`` observed at ``t`` (with ``wall`` when a
    ``timebase`` is given). An observation with a time of its own (``delivered``,
    ``presented``) keeps it as the record's ``t``: an observer gives both the same."""
    record: dict[str, Any] = {"kind": _NAMES[type(obs)]}
    for f in fields(obs):
        value = getattr(obs, f.name)
        if value is None and f.default is None:
            continue  # an optional field left out (a delivery's question)
        record[f.name] = list(value) if f.name in _KEYS else value
    record.setdefault("t", t)
    if timebase is not None:
        record["wall"] = timebase.wall(record["t"])
    return record


def record_line(obs: P.Observation, t: float, timebase: Timebase | None = None) -> str:
    """One line of a log (no line break): the record of ``obs`` at ``t``, keys sorted."""
    return json.dumps(to_record(obs, t, timebase), sort_keys=True)


def from_record(record: object, line: int = 0) -> P.Observation | None:
    """The observation in ``record`` (``None`` for a header). Raises TraceFormatError."""
    if not isinstance(record, Mapping):
        raise TraceFormatError(line, "not a JSON object")
    kind = record.get("kind")
    if kind == "header":
        schema = record.get("schema")
        if not isinstance(schema, str) or schema not in SCHEMAS:
            raise TraceFormatError(line, f"unknown schema {schema!r}")
        era = record.get("era")
        if schema == ERA_SCHEMA and (not isinstance(era, str) or era not in ERAS):
            raise TraceFormatError(line, f"unknown era {era!r}")
        if "t" in record:
            _number("header", "t", record["t"], line)
        return None
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise TraceFormatError(line, f"unknown kind {kind!r}")
    wall = record.get("wall")
    if wall is not None and type(wall) is not str:
        raise TraceFormatError(line, f"{kind}: wall must be a string, got {wall!r}")
    args: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in record:
            if f.default is not MISSING or f.default_factory is not MISSING:
                continue
            raise TraceFormatError(line, f"{kind}: missing field {f.name!r}")
        args[f.name] = _field(str(kind), f.name, record[f.name], line)
    try:
        return cls(**args)  # type: ignore[no-any-return]
    except TypeError as exc:
        raise TraceFormatError(line, f"{kind}: {exc}") from None


_KEYS = frozenset({"key", "question"})
"""The fields that hold request keys (``[session, id]`` arrays in a record)."""


def _field(kind: str, name: str, value: object, line: int) -> Any:
    if name in _KEYS:
        if (
            isinstance(value, list)
            and len(value) == 2
            and isinstance(value[0], str)
            and type(value[1]) in (int, str)
        ):
            return (value[0], value[1])
        raise TraceFormatError(line, f"{kind}: {name} must be [session, id], got {value!r}")
    if name in _NUMBERS:
        return _number(kind, name, value, line)
    wanted = _TYPES.get(name)
    if wanted is not None and (type(value) not in wanted):
        raise TraceFormatError(line, f"{kind}: {name} must be {wanted[0].__name__}, got {value!r}")
    return value


def dumps(
    observations: Iterable[tuple[P.Observation, float]],
    timebase: Timebase | None = None,
    era: str | None = None,
) -> str:
    """JSON Lines text (a header first, naming ``era`` if given) for ``(observation, t)``
    pairs, in the order given; every record carries ``wall`` when a ``timebase`` is given."""
    lines = [header_line(timebase, era)]
    lines += [record_line(o, t, timebase) for o, t in observations]
    return "\n".join(lines) + "\n"


def _number(kind: str, name: str, value: object, line: int) -> float:
    """The numeric field ``name`` of a ``kind`` record on line ``line``: ``value`` as a
    finite ``float``. :class:`TraceFormatError` for anything else: not an ``int`` or a
    ``float`` (a ``bool`` is neither), NaN, an infinity, or an integer too large for a
    float (it would raise OverflowError wherever it is used as a time). Every numeric
    field read from a log is read here."""
    if isinstance(value, int | float) and type(value) in (int, float):
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if math.isfinite(number):
            return number
    raise TraceFormatError(line, f"{kind}: {name} must be a finite number, got {_shown(value)}")


def _shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: a refused value may be huge (an
    integer of thousands of digits is not even turned into text)."""
    if type(value) is int and value.bit_length() > 4 * limit:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _json_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON value")


def _json_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        shown = text if len(text) <= 40 else f"{text[:37]}..."
        raise ValueError(f"the number {shown} is too large for a float")
    return value


_DECODER = json.JSONDecoder(parse_constant=_json_constant, parse_float=_json_float)
"""Strict JSON (:func:`read_line`), built once: ``json.loads`` given hooks builds a decoder
per call."""


def _parse(raw: str, line: int) -> Any:
    """The JSON value on the log line ``raw``, strict (:func:`read_line`)."""
    try:
        return _DECODER.decode(raw)
    except ValueError as exc:
        raise TraceFormatError(line, f"not JSON: {exc}") from None
    except RecursionError:
        raise TraceFormatError(line, "nested too deeply to be a record") from None


def split_lines(chunks: Iterable[str]) -> Iterator[str]:
    """The lines of the text that ``chunks`` yields in pieces (cut anywhere), as JSON
    Lines separates records: at each line feed (``\\n``) only, without it and without one
    ``\\r`` before it (``\\r\\n`` endings); the text after the last line feed is a last line
    unless empty. No other character ends a line: U+2028, U+2029, U+0085, ``\\r`` alone,
    ``\\v``, ``\\f`` and ``\\x1c``-``\\x1e`` (which ``str.splitlines`` breaks at) stay in their
    line, as they may inside a JSON string (a raw control character there is not JSON:
    the line is then reported malformed, not cut in two).

    Linear time: each chunk is scanned once and a line's pieces are joined once, however
    many chunks the line spans; memory: the current chunk and the current line. The one
    splitter of :func:`loads` and :func:`fsm.audit.read_lines`."""
    tail: list[str] = []  # the unterminated line so far, in pieces
    for chunk in chunks:
        pieces = chunk.split("\n")
        if len(pieces) == 1:
            if chunk:
                tail.append(chunk)
            continue
        if tail:
            tail.append(pieces[0])
            pieces[0] = "".join(tail)
            tail.clear()
        last = pieces.pop()
        if last:
            tail.append(last)
        for piece in pieces:
            yield piece[:-1] if piece.endswith("\r") else piece
    if tail:
        piece = "".join(tail)
        yield piece[:-1] if piece.endswith("\r") else piece


def read_line(
    raw: str, number: int = 0
) -> tuple[Mapping[str, Any], P.Observation | None, float] | None:
    """What the log line ``raw`` (without its line feed; ``number`` is its 1-based line,
    for errors) holds: ``None`` for a blank line, else ``(record, observation, t)``: the
    parsed JSON object, its observation (``None`` for a header: :func:`header_era` reads
    it) and its ``t`` as a finite float (``0.0`` if absent).

    The line is strict JSON: ``NaN``, ``Infinity`` and a number a float cannot hold are
    refused wherever they are (a report echoing the record must stay JSON), and every
    numeric field is a finite number. Raises :class:`TraceFormatError` naming the line."""
    if not raw.strip():
        return None
    record = _parse(raw, number)
    obs = from_record(record, number)
    if obs is None:
        return record, None, _number("header", "t", record.get("t", 0.0), number)
    return record, obs, _number(_NAMES[type(obs)], "t", record.get("t", 0.0), number)


def loads(text: str) -> Iterator[tuple[int, P.Observation, float]]:
    """``(line number, observation, t)`` for each record of the JSON Lines ``text``
    (:func:`split_lines`, :func:`read_line`); blank lines and headers are skipped."""
    for number, raw in enumerate(split_lines((text,)), 1):
        got = read_line(raw, number)
        if got is not None and got[1] is not None:
            yield number, got[1], got[2]
