"""Event logs: observations (:mod:`fsm.properties`) as JSON Lines.

One JSON object per line. Every record has ``"kind"`` (the observation's name in snake
case) and ``"t"`` (seconds on the client's clock, a number); the other fields are the
observation's, with request keys as ``[session, id]`` arrays:

==============  ===========================================================
kind            fields
==============  ===========================================================
``delivered``   ``key``, ``stream``, ``replayed`` (bool), ``asserted`` (bool),
                ``interactive`` (bool)
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
``ended``       ``interaction``, ``outcome`` (``completed`` | ``failed``), ``reason``
==============  ===========================================================

Streams and interactions carry the client's names: ``post:<id>`` for the response
stream of request ``<id>`` (its interaction ``began`` and ends once), ``<stream>#<id>``
for a server request without an origin (it ends once, with no ``began``), and ``get``,
``get/2``, ``get/3``, ... for the connection generations of the standalone GET stream
(:func:`fsm.events.standalone_stream`): a fresh GET after one ended is the next
generation, so no name ends twice. A generation has no ``began`` (it need not end: it
lives as long as the session) and at most one ``ended`` (when the client gave up on it,
e.g. cut before any event id: reason ``no-cursor``); its ``resumed`` records follow only
its own ``event_seen`` ids. ``python -m fsm audit`` reads those names as they are: an
``ended`` repeated for one name is P5, a ``resumed`` after its stream's ``ended`` is
``M``, and ``--complete`` asks only the interactions that ``began`` to have ended.

Unknown extra fields are ignored (forward compatible); a missing or mistyped field is a
:class:`TraceFormatError` naming the line. The first line may be a header
``{"kind": "header", "schema": "dead-or-resumable/trace/1", ...}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import MISSING, fields
from typing import Any

from fsm import properties as P

SCHEMA = "dead-or-resumable/trace/1"

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


def to_record(obs: P.Observation, t: float = 0.0) -> dict[str, Any]:
    """The JSON-ready record of ``obs`` observed at ``t``."""
    record: dict[str, Any] = {"kind": _NAMES[type(obs)]}
    for f in fields(obs):
        value = getattr(obs, f.name)
        record[f.name] = list(value) if f.name == "key" else value
    record.setdefault("t", t)
    return record


def from_record(record: object, line: int = 0) -> P.Observation | None:
    """The observation in ``record`` (``None`` for a header). Raises TraceFormatError."""
    if not isinstance(record, Mapping):
        raise TraceFormatError(line, "not a JSON object")
    kind = record.get("kind")
    if kind == "header":
        if record.get("schema") != SCHEMA:
            raise TraceFormatError(line, f"unknown schema {record.get('schema')!r}")
        return None
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise TraceFormatError(line, f"unknown kind {kind!r}")
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


def _field(kind: str, name: str, value: object, line: int) -> Any:
    if name == "key":
        if (
            isinstance(value, list)
            and len(value) == 2
            and isinstance(value[0], str)
            and type(value[1]) in (int, str)
        ):
            return (value[0], value[1])
        raise TraceFormatError(line, f"{kind}: key must be [session, id], got {value!r}")
    wanted = _TYPES.get(name)
    if wanted is not None and (type(value) not in wanted):
        raise TraceFormatError(line, f"{kind}: {name} must be {wanted[0].__name__}, got {value!r}")
    return value


def dumps(observations: Iterable[tuple[P.Observation, float]]) -> str:
    """JSON Lines text (with a header) for ``(observation, t)`` pairs."""
    lines = [json.dumps({"kind": "header", "schema": SCHEMA})]
    lines += [json.dumps(to_record(o, t), sort_keys=True) for o, t in observations]
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
