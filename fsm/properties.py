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
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, NoReturn, TypeVar

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
class SessionBegan:
    """The client began session ``session_id`` (its first, or a new one after the last was
    gone). Requests of earlier sessions stay dead and their streams unresumable; the new
    session's requests are alive."""

    session_id: str


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
    """An interaction ended: ``outcome`` is ``"completed"`` (its origin's response
    arrived), ``"failed"`` (``reason``: its typed error's) or ``"closed"`` (the client
    closed the session while it was open: a normal end). Every check reads the three
    alike: an interaction ends once, and an ended stream is not resumed."""

    interaction: str
    outcome: str
    reason: str = ""


Observation = (
    Delivered
    | Cancelled
    | Rejected
    | SessionGone
    | SessionBegan
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


K = TypeVar("K")
V = TypeVar("V")


class FrozenMap(dict[K, V], Generic[K, V]):
    """An immutable, hashable mapping: the monitor's per-key and per-stream facts.

    A ``dict`` underneath, so a lookup is a dictionary lookup and :meth:`set` (the only
    update: it returns a new map) is one copy in C. Equal maps are equal and hash alike
    whatever their insertion order (the hash, of the set of items, is computed on first
    use and kept). Every mutating ``dict`` method raises ``TypeError``.
    """

    __slots__ = ("_hash",)
    _hash: int

    def set(self, key: K, value: V) -> FrozenMap[K, V]:
        """A copy of this map with ``key`` bound to ``value``."""
        new = FrozenMap(self)
        dict.__setitem__(new, key, value)
        return new

    def without(self, keys: Collection[K]) -> FrozenMap[K, V]:
        """A copy of this map without ``keys`` (itself when it holds none of them)."""
        if not any(k in self for k in keys):
            return self
        return FrozenMap({k: v for k, v in self.items() if k not in keys})

    def __hash__(self) -> int:  # type: ignore[override]
        try:
            return self._hash
        except AttributeError:
            self._hash = hash(frozenset(self.items()))
            return self._hash

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenMap({dict.__repr__(self)})"

    def _immutable(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("FrozenMap is immutable: use .set()")

    __setitem__ = __delitem__ = __ior__ = _immutable
    clear = pop = popitem = setdefault = update = _immutable


_NO_FACTS: FrozenMap[Any, Any] = FrozenMap()


class MonitorState(NamedTuple):
    """What the monitor remembers. Immutable and hashable (models embed it and hash it
    on every step: a tuple hashes and copies in C, a frozen dataclass in Python); the
    maps are :class:`FrozenMap` (a step costs a copy, not a re-sort)."""

    dead: frozenset[RequestKey] = frozenset()
    presented: frozenset[RequestKey] = frozenset()
    idempotent: frozenset[RequestKey] = frozenset()
    deadlines: FrozenMap[RequestKey, float] = _NO_FACTS
    stale_delivery: frozenset[RequestKey] = frozenset()
    stream_of: FrozenMap[RequestKey, str] = _NO_FACTS
    no_resume: frozenset[str] = frozenset()
    session_gone: bool = False
    answers: FrozenMap[RequestKey, str] = _NO_FACTS
    submissions: FrozenMap[RequestKey, int] = _NO_FACTS
    newest: FrozenMap[str, str] = _NO_FACTS
    seen: frozenset[tuple[str, str]] = frozenset()
    stalls: FrozenMap[str, int] = _NO_FACTS
    begun: frozenset[str] = frozenset()
    ended: frozenset[str] = frozenset()
    violated: frozenset[str] = frozenset()


def step(
    state: MonitorState, obs: Observation, budgets: Budgets = Budgets()
) -> tuple[MonitorState, tuple[Violation, ...]]:
    """Apply one observation; return the new state and the violations it caused."""
    bad: list[Violation] = []
    s = state
    if isinstance(obs, Delivered):
        if s.stream_of.get(obs.key) is None:
            s = s._replace(stream_of=s.stream_of.set(obs.key, obs.stream))
        if not obs.interactive and obs.key not in s.idempotent:
            s = s._replace(idempotent=s.idempotent | {obs.key})
        deadline = s.deadlines.get(obs.key)
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
        isinstance(obs, Cancelled) and s.stream_of.get(obs.key) is not None
    ):
        # A cancellation for a request never delivered references nothing the client
        # knows (the specification lets receivers ignore it), so it kills nothing.
        s = s._replace(dead=s.dead | {obs.key})
    elif isinstance(obs, Rejected):
        if obs.session:
            s = _session_gone(s)
        elif obs.key not in s.dead and s.answers.get(obs.key) is not None:
            # Only the rejection of an answer the user gave counts (a stray outcome for a
            # key never answered proves nothing); rejecting an answer to a request already
            # known cancelled is expected.
            # Only an interaction's stream (one that began: it has an origin) must not be
            # resumed; the GET stream carries other requests and stays resumable.
            stream = s.stream_of.get(obs.key)
            ends = {stream} if stream is not None and stream in s.begun else set()
            s = s._replace(dead=s.dead | {obs.key}, no_resume=s.no_resume | ends)
    elif isinstance(obs, SessionGone):
        s = _session_gone(s)
    elif isinstance(obs, SessionBegan):
        if s.session_gone:  # what the client knew of the gone session stays dead
            s = s._replace(session_gone=False, dead=s.dead | set(s.stream_of))
    elif isinstance(obs, EventSeen):
        if (obs.stream, obs.event_id) not in s.seen:
            s = s._replace(
                seen=s.seen | {(obs.stream, obs.event_id)},
                newest=s.newest.set(obs.stream, obs.event_id),
                stalls=s.stalls.set(obs.stream, 0),
            )
    elif isinstance(obs, Answered):
        s = s._replace(answers=s.answers.set(obs.key, _answer_id(obs.answer)))
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
                deadlines=s.deadlines.set(obs.key, obs.t + budgets.ttl),
            )
    elif isinstance(obs, Submitted):
        given = s.answers.get(obs.key)
        if given is None or given != _answer_id(obs.answer):
            bad.append(
                Violation(
                    "P4", f"answer for {obs.key!r} submitted that the user did not give for it"
                )
            )
        if budgets.counters:
            count = s.submissions.get(obs.key, 0) + 1
            if count > budgets.max_submissions:
                bad.append(Violation("L1", f"{obs.key!r} submitted {count} times"))
            # Counters saturate one past the budget: a looping client's states stay finite.
            count = min(count, budgets.max_submissions + 1)
            s = s._replace(submissions=s.submissions.set(obs.key, count))
    elif isinstance(obs, Resumed):
        if obs.stream in s.no_resume or s.session_gone:
            bad.append(Violation("P3", f"{obs.stream} resumed after a terminal rejection"))
        newest = s.newest.get(obs.stream)
        if newest is not None and obs.cursor != newest:
            bad.append(
                Violation(
                    "P7", f"{obs.stream} resumed from {obs.cursor!r}, newest seen is {newest!r}"
                )
            )
        if budgets.counters:
            stalls = s.stalls.get(obs.stream, 0) + 1
            if stalls > budgets.max_resumes_without_progress:
                bad.append(Violation("L1", f"{obs.stream} resumed {stalls} times without progress"))
            stalls = min(stalls, budgets.max_resumes_without_progress + 1)
            s = s._replace(stalls=s.stalls.set(obs.stream, stalls))
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
    newest: str | None = state.newest.get(stream)
    return newest


def _session_gone(s: MonitorState) -> MonitorState:
    streams = {*s.stream_of.values(), *s.newest}
    return s._replace(session_gone=True, no_resume=s.no_resume | streams)


def forget(state: MonitorState, interaction: str) -> MonitorState:
    """``state`` without what it knows of ``interaction`` and of the requests delivered on
    its stream (what a bounded :class:`Monitor` drops once the interaction has ended).

    Forgetting loses checks, never creates one, with one exception: a submission for a
    forgotten request is judged as one for a request never answered (P4)."""
    keys = {k for k, stream in state.stream_of.items() if stream == interaction}
    gone = {interaction}
    return state._replace(
        dead=state.dead - keys,
        presented=state.presented - keys,
        idempotent=state.idempotent - keys,
        deadlines=state.deadlines.without(keys),
        stale_delivery=state.stale_delivery - keys,
        stream_of=state.stream_of.without(keys),
        no_resume=state.no_resume - gone,
        answers=state.answers.without(keys),
        submissions=state.submissions.without(keys),
        newest=state.newest.without(gone),
        seen=frozenset(seen for seen in state.seen if seen[0] != interaction),
        stalls=state.stalls.without(gone),
        begun=state.begun - gone,
        ended=state.ended - gone,
    )


def rename_keys(state: MonitorState, keys: Mapping[RequestKey, RequestKey]) -> MonitorState:
    """``state`` as the monitor would hold it had every request key ``k`` of ``keys`` been
    ``keys[k]`` all along (keys not in ``keys`` are kept; ``keys`` must be one-to-one).
    No verdict depends on a key's value, so the renamed state judges alike."""
    if not keys:
        return state

    def ks(items: frozenset[RequestKey]) -> frozenset[RequestKey]:
        return frozenset(keys.get(k, k) for k in items)

    def km(facts: FrozenMap[RequestKey, V]) -> FrozenMap[RequestKey, V]:
        return FrozenMap({keys.get(k, k): v for k, v in facts.items()})

    return state._replace(
        dead=ks(state.dead),
        presented=ks(state.presented),
        idempotent=ks(state.idempotent),
        deadlines=km(state.deadlines),
        stale_delivery=ks(state.stale_delivery),
        stream_of=km(state.stream_of),
        answers=km(state.answers),
        submissions=km(state.submissions),
    )


def unfinished(state: MonitorState) -> tuple[Violation, ...]:
    """P5 at quiescence: interactions that began and never ended."""
    return tuple(Violation("P5", f"{i} never ended") for i in sorted(state.begun - state.ended))


class Monitor:
    """A mutable convenience wrapper around :func:`step` that records violations.

    ``retain`` bounds what an online monitor remembers over a long session: once more
    than ``retain`` interactions have ended, the oldest ended one is forgotten with the
    requests delivered on its stream (:func:`forget`), so memory and the cost of a step
    stay bounded however many tool calls a session makes. Requests on a stream that has
    not ended (the open generation of the standalone GET stream) are not forgotten; those
    of a GET generation that ended go like any other's. ``None`` (the default)
    remembers everything, as the model checker and the audit do.
    """

    def __init__(self, budgets: Budgets = Budgets(), *, retain: int | None = None) -> None:
        if retain is not None and retain < 0:
            raise ValueError("retain must be >= 0 or None")
        self.budgets = budgets
        self.retain = retain
        self.state = MonitorState()
        self.violations: list[tuple[int, Observation, Violation]] = []
        self.count = 0
        self._ended: dict[str, None] = {}  # ended interactions still remembered, oldest first

    def observe(self, obs: Observation) -> tuple[Violation, ...]:
        """Apply ``obs``; return (and remember) the violations it caused."""
        self.state, bad = step(self.state, obs, self.budgets)
        self.count += 1
        self.violations += [(self.count, obs, v) for v in bad]
        if self.retain is not None and isinstance(obs, Ended):
            ended = self._ended
            ended[obs.interaction] = None
            while len(ended) > self.retain:
                oldest = next(iter(ended))
                del ended[oldest]
                self.state = forget(self.state, oldest)
        return bad

    def finish(self) -> tuple[Violation, ...]:
        """Check P5 at quiescence; return (and remember) what never ended."""
        bad = unfinished(self.state)
        self.violations += [(self.count, Began(v.why), v) for v in bad]
        return bad
