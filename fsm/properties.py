"""The properties P1-P7 (and bounded L1), defined once as a monitor over observations.

Every consumer checks the same definitions: the model checker (models keep a
:class:`MonitorState` in their state and assert ``always(no violation of Pn)``), the
hypothesis stateful tests, the conformance kit, and the trace audit (which reads the
same observations from a JSONL log). An observation is either something the client was
told (a delivery, a cancellation, a submission outcome, an event id) or something it did
(present, submit, resume, end an interaction).

========  ==================================================================
property  violated when
========  ==================================================================
P1        a request the client knows is dead (cancel delivered after it, answer rejected
          as terminal, session gone, or itself declared dead) is presented
P2        an interactive request key is presented a second time (idempotent ones,
          delivered with ``interactive=False``, may be presented again)
P3        an interaction's stream is resumed after a terminal rejection of the
          answer to a request on it not already known cancelled (or after the
          session was gone); the origin-less GET stream stays resumable
P4        a submission carries an answer the user did not give for that key
P5        an interaction ends twice, or (at quiescence) never ends
P6        a presentation follows a replayed delivery without liveness
          assertion past the key's recorded deadline
P7        a resume uses a cursor other than the newest event id seen on it
L1        (bounded form) more resumes without progress than the budget, or
          more submissions of one key than the budget
========  ==================================================================

:class:`MonitorState` is immutable and hashable; :func:`step` is a pure function.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from fsm.errors import RequestKey

PROPERTIES: dict[str, str] = {
    "P1": "a dead request is never presented",
    "P2": "each interactive request key is presented at most once",
    "P3": "a terminal rejection never leads to a resume of that stream",
    "P4": "an answer is only ever submitted for the request the user answered",
    "P5": "every interaction ends with exactly one outcome",
    "P6": "a replayed request without liveness assertion past its deadline is never presented",
    "P7": "a resume never uses a cursor older than the newest event id seen on that stream",
    "L1": "bounded: resumes without progress and submissions per key stay within budget",
}


# ----------------------------------------------------------------- observations


@dataclass(frozen=True, slots=True)
class Delivered:
    """A server request reached the client on ``stream`` at time ``t``."""

    key: RequestKey
    stream: str
    t: float
    replayed: bool = False
    asserted: bool = False
    interactive: bool = True


@dataclass(frozen=True, slots=True)
class Cancelled:
    """A ``notifications/cancelled`` for ``key`` reached the client."""

    key: RequestKey


@dataclass(frozen=True, slots=True)
class Rejected:
    """An answer submission for ``key`` came back terminal (``session``: session gone)."""

    key: RequestKey
    session: bool = False


@dataclass(frozen=True, slots=True)
class SessionGone:
    """The client saw HTTP 404 for its session."""


@dataclass(frozen=True, slots=True)
class EventSeen:
    """An SSE event with ``event_id`` arrived on ``stream``."""

    stream: str
    event_id: str


@dataclass(frozen=True, slots=True)
class Answered:
    """The user answered ``key`` with ``answer``."""

    key: RequestKey
    answer: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Presented:
    """The client presented ``key`` at time ``t``."""

    key: RequestKey
    t: float


@dataclass(frozen=True, slots=True)
class DeclaredDead:
    """The client itself judged ``key`` dead (stale rule, or its origin failed)."""

    key: RequestKey


@dataclass(frozen=True, slots=True)
class Submitted:
    """The client POSTed ``answer`` for ``key``."""

    key: RequestKey
    answer: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Resumed:
    """The client resumed ``stream`` with ``Last-Event-ID: cursor``."""

    stream: str
    cursor: str


@dataclass(frozen=True, slots=True)
class Began:
    """An interaction began (a tool call's stream opened, or an origin-less request)."""

    interaction: str


@dataclass(frozen=True, slots=True)
class Ended:
    """An interaction ended: ``outcome`` is ``"completed"`` or ``"failed"``."""

    interaction: str
    outcome: str
    reason: str = ""


Observation = (
    Delivered
    | Cancelled
    | Rejected
    | SessionGone
    | EventSeen
    | Answered
    | Presented
    | DeclaredDead
    | Submitted
    | Resumed
    | Began
    | Ended
)


# ----------------------------------------------------------------- the monitor


@dataclass(frozen=True, slots=True)
class Budgets:
    """What the monitor needs to know of the client's configuration."""

    ttl: float = 60.0
    max_resumes_without_progress: int = 3
    max_submissions: int = 6
    counters: bool = True
    """Track the bounded-L1 counters. Model checkers set it off: their L1 is cycle
    detection, and counters would only unroll every loop up to the budget."""


@dataclass(frozen=True, slots=True)
class Violation:
    """Property ``name`` broken by an observation; ``why`` explains it."""

    name: str
    why: str


def _answer_id(answer: Mapping[str, Any]) -> str:
    return json.dumps(answer, sort_keys=True, default=repr)


class MonitorState(NamedTuple):
    """What the monitor remembers. Immutable and hashable (models embed it and hash it
    on every step: a tuple hashes and copies in C, a frozen dataclass in Python)."""

    dead: frozenset[RequestKey] = frozenset()
    presented: frozenset[RequestKey] = frozenset()
    idempotent: frozenset[RequestKey] = frozenset()
    deadlines: tuple[tuple[RequestKey, float], ...] = ()
    stale_delivery: frozenset[RequestKey] = frozenset()
    stream_of: tuple[tuple[RequestKey, str], ...] = ()
    no_resume: frozenset[str] = frozenset()
    session_gone: bool = False
    answers: tuple[tuple[RequestKey, str], ...] = ()
    submissions: tuple[tuple[RequestKey, int], ...] = ()
    newest: tuple[tuple[str, str], ...] = ()
    seen: frozenset[tuple[str, str]] = frozenset()
    stalls: tuple[tuple[str, int], ...] = ()
    begun: frozenset[str] = frozenset()
    ended: frozenset[str] = frozenset()
    violated: frozenset[str] = frozenset()


def _get(pairs: tuple[tuple[Any, Any], ...], key: Any, default: Any = None) -> Any:
    for k, v in pairs:
        if k == key:
            return v
    return default


def _put(pairs: tuple[tuple[Any, Any], ...], key: Any, value: Any) -> tuple[tuple[Any, Any], ...]:
    kept = [(k, v) for k, v in pairs if k != key]
    kept.append((key, value))
    return tuple(sorted(kept, key=lambda kv: repr(kv[0])))


def step(
    state: MonitorState, obs: Observation, budgets: Budgets = Budgets()
) -> tuple[MonitorState, tuple[Violation, ...]]:
    """Apply one observation; return the new state and the violations it caused."""
    bad: list[Violation] = []
    s = state
    if isinstance(obs, Delivered):
        if _get(s.stream_of, obs.key) is None:
            s = s._replace(stream_of=_put(s.stream_of, obs.key, obs.stream))
        if not obs.interactive and obs.key not in s.idempotent:
            s = s._replace(idempotent=s.idempotent | {obs.key})
        deadline = _get(s.deadlines, obs.key)
        stale = (
            obs.interactive
            and obs.replayed
            and not obs.asserted
            and deadline is not None
            and obs.t > deadline
        )
        if stale:
            s = s._replace(stale_delivery=s.stale_delivery | {obs.key})
        elif obs.key in s.stale_delivery:
            s = s._replace(stale_delivery=s.stale_delivery - {obs.key})
    elif isinstance(obs, DeclaredDead) or (
        isinstance(obs, Cancelled) and _get(s.stream_of, obs.key) is not None
    ):
        # A cancellation for a request never delivered references nothing the client
        # knows (the specification lets receivers ignore it), so it kills nothing.
        s = s._replace(dead=s.dead | {obs.key})
    elif isinstance(obs, Rejected):
        if obs.session:
            s = _session_gone(s)
        elif obs.key not in s.dead and _get(s.answers, obs.key) is not None:
            # Only the rejection of an answer the user gave counts (a stray outcome for a
            # key never answered proves nothing); rejecting an answer to a request already
            # known cancelled is expected.
            # Only an interaction's stream (one that began: it has an origin) must not be
            # resumed; the GET stream carries other requests and stays resumable.
            stream = _get(s.stream_of, obs.key)
            ends = {stream} if stream is not None and stream in s.begun else set()
            s = s._replace(dead=s.dead | {obs.key}, no_resume=s.no_resume | ends)
    elif isinstance(obs, SessionGone):
        s = _session_gone(s)
    elif isinstance(obs, EventSeen):
        if (obs.stream, obs.event_id) not in s.seen:
            s = s._replace(
                seen=s.seen | {(obs.stream, obs.event_id)},
                newest=_put(s.newest, obs.stream, obs.event_id),
                stalls=_put(s.stalls, obs.stream, 0),
            )
    elif isinstance(obs, Answered):
        s = s._replace(answers=_put(s.answers, obs.key, _answer_id(obs.answer)))
    elif isinstance(obs, Presented):
        if obs.key in s.dead or s.session_gone:
            bad.append(Violation("P1", f"{obs.key!r} presented after the client knew it dead"))
        if obs.key in s.presented and obs.key not in s.idempotent:
            bad.append(Violation("P2", f"{obs.key!r} presented a second time"))
        if obs.key in s.stale_delivery:
            bad.append(
                Violation(
                    "P6",
                    f"{obs.key!r} presented from a replay past its deadline "
                    "without liveness assertion",
                )
            )
        if obs.key not in s.presented:
            s = s._replace(
                presented=s.presented | {obs.key},
                deadlines=_put(s.deadlines, obs.key, obs.t + budgets.ttl),
            )
    elif isinstance(obs, Submitted):
        given = _get(s.answers, obs.key)
        if given is None or given != _answer_id(obs.answer):
            bad.append(
                Violation(
                    "P4", f"answer for {obs.key!r} submitted that the user did not give for it"
                )
            )
        if budgets.counters:
            count = _get(s.submissions, obs.key, 0) + 1
            if count > budgets.max_submissions:
                bad.append(Violation("L1", f"{obs.key!r} submitted {count} times"))
            # Counters saturate one past the budget: a looping client's states stay finite.
            count = min(count, budgets.max_submissions + 1)
            s = s._replace(submissions=_put(s.submissions, obs.key, count))
    elif isinstance(obs, Resumed):
        if obs.stream in s.no_resume or s.session_gone:
            bad.append(Violation("P3", f"{obs.stream} resumed after a terminal rejection"))
        newest = _get(s.newest, obs.stream)
        if newest is not None and obs.cursor != newest:
            bad.append(
                Violation(
                    "P7", f"{obs.stream} resumed from {obs.cursor!r}, newest seen is {newest!r}"
                )
            )
        if budgets.counters:
            stalls = _get(s.stalls, obs.stream, 0) + 1
            if stalls > budgets.max_resumes_without_progress:
                bad.append(Violation("L1", f"{obs.stream} resumed {stalls} times without progress"))
            stalls = min(stalls, budgets.max_resumes_without_progress + 1)
            s = s._replace(stalls=_put(s.stalls, obs.stream, stalls))
    elif isinstance(obs, Began):
        s = s._replace(begun=s.begun | {obs.interaction})
    elif isinstance(obs, Ended):
        if obs.interaction in s.ended:
            bad.append(Violation("P5", f"{obs.interaction} ended twice"))
        s = s._replace(ended=s.ended | {obs.interaction}, begun=s.begun | {obs.interaction})
    if bad:
        s = s._replace(violated=s.violated | {v.name for v in bad})
    return s, tuple(bad)


def newest_event(state: MonitorState, stream: str) -> str | None:
    """The newest event id the monitor saw on ``stream`` (what P7 compares against)."""
    newest: str | None = _get(state.newest, stream)
    return newest


def _session_gone(s: MonitorState) -> MonitorState:
    streams = {stream for _, stream in s.stream_of} | {stream for stream, _ in s.newest}
    return s._replace(session_gone=True, no_resume=s.no_resume | streams)


def unfinished(state: MonitorState) -> tuple[Violation, ...]:
    """P5 at quiescence: interactions that began and never ended."""
    return tuple(Violation("P5", f"{i} never ended") for i in sorted(state.begun - state.ended))


class Monitor:
    """A mutable convenience wrapper around :func:`step` that records violations."""

    def __init__(self, budgets: Budgets = Budgets()) -> None:
        self.budgets = budgets
        self.state = MonitorState()
        self.violations: list[tuple[int, Observation, Violation]] = []
        self.count = 0

    def observe(self, obs: Observation) -> tuple[Violation, ...]:
        """Apply ``obs``; return (and remember) the violations it caused."""
        self.state, bad = step(self.state, obs, self.budgets)
        self.count += 1
        self.violations += [(self.count, obs, v) for v in bad]
        return bad

    def finish(self) -> tuple[Violation, ...]:
        """Check P5 at quiescence; return (and remember) what never ended."""
        bad = unfinished(self.state)
        self.violations += [(self.count, Began(v.why), v) for v in bad]
        return bad
