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
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import MISSING, dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

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
    "t": (int, float),
}


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
    :func:`loads` reports). Raises :class:`TraceFormatError` (line 0) for a schema-3
    header naming an unknown era."""
    if '"header"' not in line:
        return None
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, Mapping) or record.get("kind") != "header":
        return None
    if record.get("schema") != ERA_SCHEMA:
        return None
    era = record.get("era")
    if not isinstance(era, str) or era not in ERAS:
        raise TraceFormatError(0, f"unknown era {era!r}")
    return era


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


def loads(text: str) -> Iterator[tuple[int, P.Observation, float]]:
    """``(line number, observation, t)`` for each record; blank lines are skipped."""
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:
            raise TraceFormatError(number, f"not JSON: {exc}") from None
        except RecursionError:
            raise TraceFormatError(number, "nested too deeply to be a record") from None
        obs = from_record(record, number)
        if obs is not None:
            t = record.get("t", 0.0)
            if type(t) not in (int, float):
                raise TraceFormatError(number, f"t must be a number, got {t!r}")
            yield number, obs, float(t)
