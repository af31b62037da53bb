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
          delivered with ``interactive=False``, may be presented again), or a
          question the user answered is presented again under another key of its
          origin call (a re-ask under a new id: ``Delivered.question``,
          :mod:`fsm.questions`); across a restart, a key shown but not answered
          may be shown once more (``Reshown``), never an answered one, never twice
P3        an interaction's stream is resumed after a terminal rejection of the
          answer to a request on it not already known cancelled (or after the
          session was gone); the origin-less GET stream stays resumable
P4        a submission carries an answer the user did not give for that key
P5        an interaction ends twice, or (at quiescence) never ends
P6        a presentation follows a replayed delivery without liveness
          assertion past the key's recorded deadline
P7        a resume uses a cursor other than the newest event id seen on it (by the
          current process: a ``Restarted`` client resumes from what it stored)
L1        (bounded form) more resumes without progress than the budget, or
          more submissions of one key than the budget
========  ==================================================================

One implementation, three ways to run it
----------------------------------------
The rules are written once, in :class:`Facts`: the monitor's state in mutable sets and
dicts, updated in place, O(1) amortised per observation. Everything else runs them:

* :class:`Monitor` (the online monitor of every guarded session, the SSE conformance kit)
  and :class:`fsm.audit.AuditMonitor` (the log audit) hold one :class:`Facts` and apply
  each observation to it in place, whatever the length of the session or the log;
* :func:`step`, the pure function the model checker steps its states with, thaws an
  immutable, hashable :class:`MonitorState` into :class:`Facts`, applies the observation
  in place and freezes the result (sharing the fields it left alone). That costs
  O(facts) per step, which the checker can afford: its states hold a handful of facts
  and its worlds memoise every step (a few thousand calls check every shipped model).

The reverse (the rules written over the immutable state, the audit and the online
monitor stepping it) copies a whole set or map per observation: quadratic over a long
session or log, which is why the in-place form is the one the rules are written in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, NoReturn, TypeVar

from fsm.errors import RequestKey
from fsm.fields import check_fields

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


def property_names(names: Iterable[str] | None) -> tuple[str, ...]:
    """The property names ``names`` chosen, in their order (``None``: every one of
    :data:`PROPERTIES`). ``ValueError`` names each one that is not a property, and refuses
    a bare string (``"P1"`` is not read as the names ``"P"`` and ``"1"``): a choice that
    silently checked nothing would pass every run."""
    if names is None:
        return tuple(PROPERTIES)
    if isinstance(names, str):
        raise ValueError(f"property names are a collection of names, not the string {names!r}")
    chosen = tuple(names)
    unknown = [repr(n) for n in chosen if n not in PROPERTIES]
    if unknown:
        raise ValueError(
            f"not a property: {', '.join(unknown)}; the properties are {', '.join(PROPERTIES)}"
        )
    return chosen


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
    question: RequestKey | None = None
    """The key of the request of the same origin call that asked this question first
    (method and canonical params: :func:`fsm.questions.question_id`) when this one asks
    it again under a new key; ``None``: a question of its own. Once the user answered
    that first request, this one is a re-ask: P2 counts the question's presentations,
    P4 takes its answer for this key's."""


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
class Reshown:
    """After a restart, the client showed ``key`` again at time ``t``: it was shown
    before the process ended and not answered. P1 and P6 judge it as a presentation; P2
    allows it once per key, and never for a key the user answered."""

    key: RequestKey
    t: float


@dataclass(frozen=True, slots=True)
class Restarted:
    """The client's process ended and a new one started from its durable store. The
    new process has seen no event id yet: P7 compares its resumes with what it sees from
    now on (its first resume uses the cursor it stored, see docs/durability.md), and its
    resumes without progress count afresh (the environment bounds the crashes)."""


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
    """The client resumed ``stream`` with ``Last-Event-ID: cursor``. ``held``: the resume
    follows a refusal from a server that still held the stream's old connection (a
    patient refusal: :attr:`fsm.outcomes.Classification.patient`), which a guard waits
    out within its patience, spending none of its budget of resumes without progress:
    the bounded L1 does not count it either."""

    stream: str
    cursor: str
    held: bool = False


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
    | Reshown
    | Restarted
    | DeclaredDead
    | Submitted
    | Resumed
    | Began
    | Ended
)


# ----------------------------------------------------------------- the monitor


@dataclass(frozen=True, slots=True)
class Budgets:
    """What the monitor needs to know of the client's configuration. ``ValueError`` for
    a count below 0 or a TTL that is not a number >= 0 (:mod:`fsm.fields`)."""

    ttl: float = 60.0
    max_resumes_without_progress: int = 3
    max_submissions: int = 6
    counters: bool = True
    """Track the bounded-L1 counters. Model checkers set it off: their L1 is cycle
    detection, and counters would only unroll every loop up to the budget."""

    def __post_init__(self) -> None:
        check_fields(self, ValueError, floats="number")


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
    """What the monitor remembers, frozen. Immutable and hashable (models embed it and
    hash it on every step: a tuple hashes and copies in C, a frozen dataclass in Python);
    the maps are :class:`FrozenMap`. :meth:`Facts.freeze` makes one, :meth:`Facts.thaw`
    reads one back."""

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
    asks: FrozenMap[RequestKey, RequestKey] = _NO_FACTS
    """A re-ask's key -> the key that first asked its question (``Delivered.question``)."""
    reshown: frozenset[RequestKey] = frozenset()
    """The keys shown again after a restart (:class:`Reshown`)."""


_EMPTY = MonitorState()


class Facts:
    """What the monitor knows, in mutable sets and dicts, and the rules that judge an
    observation against it: the only implementation of P1-P7 and the bounded L1.

    :meth:`check` returns what an observation violates and changes nothing; :meth:`apply`
    records it (with the violations ``check`` found); :meth:`observe` does both. Each
    costs O(1) amortised, whatever came before: a set or dict update per fact, and a lost
    or revived session touches only the streams and requests learnt since the previous
    one (everything learnt earlier is already unresumable, or already dead). Forgetting
    an interaction (:meth:`forget`) costs what is known of it. :meth:`freeze` and
    :meth:`thaw` convert to and from :class:`MonitorState`, each O(facts).

    The fields mirror :class:`MonitorState`'s (``seen`` as event ids per stream), plus
    indexes: the keys delivered on each stream (what forgetting a stream drops) and the
    keys and streams learnt since the session was last revived or lost.
    """

    __slots__ = (
        "_asked",
        "_fresh_keys",
        "_fresh_streams",
        "_keys_on",
        "_seen_count",
        "answers",
        "asks",
        "begun",
        "budgets",
        "dead",
        "deadlines",
        "ended",
        "idempotent",
        "newest",
        "no_resume",
        "presented",
        "reshown",
        "seen",
        "session_gone",
        "stale_delivery",
        "stalls",
        "stream_of",
        "submissions",
        "violated",
    )

    def __init__(self, budgets: Budgets = Budgets()) -> None:
        self.budgets = budgets
        self.dead: set[RequestKey] = set()
        self.presented: set[RequestKey] = set()
        self.idempotent: set[RequestKey] = set()
        self.deadlines: dict[RequestKey, float] = {}
        self.stale_delivery: set[RequestKey] = set()
        self.stream_of: dict[RequestKey, str] = {}
        self.no_resume: set[str] = set()
        self.session_gone = False
        self.answers: dict[RequestKey, str] = {}
        self.submissions: dict[RequestKey, int] = {}
        self.newest: dict[str, str] = {}
        self.seen: dict[str, set[str]] = {}
        self.stalls: dict[str, int] = {}
        self.begun: set[str] = set()
        self.ended: set[str] = set()
        self.violated: set[str] = set()
        self.asks: dict[RequestKey, RequestKey] = {}
        self.reshown: set[RequestKey] = set()
        self._asked: set[RequestKey] = set()  # questions presented, by their first key
        self._keys_on: dict[str, set[RequestKey]] = {}
        self._fresh_keys: set[RequestKey] = set()
        self._fresh_streams: set[str] = set()
        self._seen_count = 0

    # -- judging

    def check(self, obs: Observation) -> tuple[Violation, ...]:
        """The violations ``obs`` causes in the current state, in a fixed order (P1, P2,
        P6 for a presentation; P4, L1 for a submission; P3, P7, L1 for a resume)."""
        bad: list[Violation] = []
        if isinstance(obs, Presented):
            key = obs.key
            if key in self.dead or self.session_gone:
                bad.append(Violation("P1", f"{key!r} presented after the client knew it dead"))
            if key in self.presented and key not in self.idempotent:
                bad.append(Violation("P2", f"{key!r} presented a second time"))
            elif key not in self.idempotent and self.asks.get(key, key) in self._asked:
                first = self.asks.get(key, key)
                bad.append(
                    Violation("P2", f"{key!r} presented: it asks again what {first!r} asked")
                )
            if key in self.stale_delivery:
                bad.append(
                    Violation(
                        "P6",
                        f"{key!r} presented from a replay past its deadline "
                        "without liveness assertion",
                    )
                )
        elif isinstance(obs, Reshown):
            key = obs.key
            if key in self.dead or self.session_gone:
                bad.append(Violation("P1", f"{key!r} shown again after the client knew it dead"))
            if key in self.reshown or key not in self.presented:
                bad.append(Violation("P2", f"{key!r} shown again after a restart twice"))
            elif key in self.answers or self.asks.get(key, key) in self.answers:
                bad.append(Violation("P2", f"{key!r} shown again after it was answered"))
            if key in self.stale_delivery:
                bad.append(Violation("P6", f"{key!r} shown again past its deadline"))
        elif isinstance(obs, Submitted):
            given = self.answers.get(obs.key)
            if given is None and obs.key in self.asks:  # a re-ask: its question's answer
                given = self.answers.get(self.asks[obs.key])
            if given is None or given != _answer_id(obs.answer):
                bad.append(
                    Violation(
                        "P4", f"answer for {obs.key!r} submitted that the user did not give for it"
                    )
                )
            if self.budgets.counters:
                count = self.submissions.get(obs.key, 0) + 1
                if count > self.budgets.max_submissions:
                    bad.append(Violation("L1", f"{obs.key!r} submitted {count} times"))
        elif isinstance(obs, Resumed):
            stream = obs.stream
            if stream in self.no_resume or self.session_gone:
                bad.append(Violation("P3", f"{stream} resumed after a terminal rejection"))
            newest = self.newest.get(stream)
            if newest is not None and obs.cursor != newest:
                bad.append(
                    Violation(
                        "P7", f"{stream} resumed from {obs.cursor!r}, newest seen is {newest!r}"
                    )
                )
            if self.budgets.counters and not obs.held:
                stalls = self.stalls.get(stream, 0) + 1
                if stalls > self.budgets.max_resumes_without_progress:
                    bad.append(Violation("L1", f"{stream} resumed {stalls} times without progress"))
        elif isinstance(obs, Ended) and obs.interaction in self.ended:
            bad.append(Violation("P5", f"{obs.interaction} ended twice"))
        return tuple(bad)

    def apply(self, obs: Observation, bad: Iterable[Violation] = ()) -> None:
        """Record ``obs``, whose violations (from :meth:`check`, in this same state) are
        ``bad``: their names join ``violated``."""
        if isinstance(obs, Delivered):
            key = obs.key
            if key not in self.stream_of:  # the first delivery names the key's stream
                self.stream_of[key] = obs.stream
                self._keys_on.setdefault(obs.stream, set()).add(key)
                self._fresh_keys.add(key)
                self._fresh_streams.add(obs.stream)
            if not obs.interactive:
                self.idempotent.add(key)
            first = obs.question
            if first is not None and first != key and key not in self.asks:
                first = self.asks.get(first, first)
                if first in self.answers:  # a question the user answered, asked again
                    self.asks[key] = first
            deadline = self.deadlines.get(key)
            if (
                obs.interactive
                and obs.replayed
                and not obs.asserted
                and deadline is not None
                and obs.t > deadline
            ):
                self.stale_delivery.add(key)
            else:
                self.stale_delivery.discard(key)
        elif isinstance(obs, DeclaredDead) or (
            isinstance(obs, Cancelled) and obs.key in self.stream_of
        ):
            # A cancellation for a request never delivered references nothing the client
            # knows (the specification lets receivers ignore it), so it kills nothing.
            self.dead.add(obs.key)
        elif isinstance(obs, Rejected):
            if obs.session:
                self._lose_session()
            elif obs.key not in self.dead and obs.key in self.answers:
                # Only the rejection of an answer the user gave counts (a stray outcome for
                # a key never answered proves nothing); rejecting an answer to a request
                # already known cancelled is expected. Only an interaction's stream (one
                # that began: it has an origin) must not be resumed; the GET stream
                # carries other requests and stays resumable.
                self.dead.add(obs.key)
                stream = self.stream_of.get(obs.key)
                if stream is not None and stream in self.begun:
                    self.no_resume.add(stream)
        elif isinstance(obs, SessionGone):
            self._lose_session()
        elif isinstance(obs, SessionBegan):
            if self.session_gone:  # what the client knew of the gone session stays dead
                self.session_gone = False
                self.dead |= self._fresh_keys  # every key delivered earlier already is
                self._fresh_keys.clear()
        elif isinstance(obs, EventSeen):
            ids = self.seen.get(obs.stream)
            if ids is None:
                ids = self.seen[obs.stream] = set()
            if obs.event_id not in ids:
                ids.add(obs.event_id)
                self._seen_count += 1
                self.newest[obs.stream] = obs.event_id
                self.stalls[obs.stream] = 0
                self._fresh_streams.add(obs.stream)
        elif isinstance(obs, Answered):
            self.answers[obs.key] = _answer_id(obs.answer)
        elif isinstance(obs, Presented):
            if obs.key not in self.presented:
                if obs.key not in self.idempotent:
                    self._asked.add(self.asks.get(obs.key, obs.key))
                self.presented.add(obs.key)
                self.deadlines[obs.key] = obs.t + self.budgets.ttl
        elif isinstance(obs, Reshown):
            self.reshown.add(obs.key)
        elif isinstance(obs, Restarted):  # the new process has seen no event id
            self.newest.clear()
            self.seen.clear()
            self._seen_count = 0
            self.stalls.clear()
        elif isinstance(obs, Submitted):
            if self.budgets.counters:
                # Counters saturate one past the budget: a looping client's states stay
                # finite.
                count = self.submissions.get(obs.key, 0) + 1
                self.submissions[obs.key] = min(count, self.budgets.max_submissions + 1)
        elif isinstance(obs, Resumed):
            if self.budgets.counters and not obs.held:
                stalls = self.stalls.get(obs.stream, 0) + 1
                limit = self.budgets.max_resumes_without_progress + 1
                self.stalls[obs.stream] = min(stalls, limit)
        elif isinstance(obs, Began):
            self.begun.add(obs.interaction)
        elif isinstance(obs, Ended):
            self.ended.add(obs.interaction)
            self.begun.add(obs.interaction)
        if bad:
            self.violated.update(v.name for v in bad)

    def observe(self, obs: Observation) -> tuple[Violation, ...]:
        """:meth:`check` then :meth:`apply` ``obs``; return its violations."""
        bad = self.check(obs)
        self.apply(obs, bad)
        return bad

    def _lose_session(self) -> None:
        # Every stream known before the previous loss is unresumable already.
        self.session_gone = True
        self.no_resume |= self._fresh_streams
        self._fresh_streams.clear()

    # -- forgetting

    def forget(self, interaction: str) -> set[RequestKey]:
        """Drop what is known of ``interaction`` and of the requests delivered on its
        stream; return those requests' keys. Costs what is dropped.

        Forgetting loses checks, never creates one, with one exception: a submission for
        a forgotten request is judged as one for a request never answered (P4). What was
        violated stays in ``violated``."""
        keys = self._keys_on.pop(interaction, set())
        for key in keys:
            self.dead.discard(key)
            self.presented.discard(key)
            self.idempotent.discard(key)
            self.deadlines.pop(key, None)
            self.stale_delivery.discard(key)
            del self.stream_of[key]
            self.answers.pop(key, None)
            self.submissions.pop(key, None)
            self.asks.pop(key, None)
            self.reshown.discard(key)
            self._asked.discard(key)
            self._fresh_keys.discard(key)
        self.no_resume.discard(interaction)
        self.newest.pop(interaction, None)
        self._seen_count -= len(self.seen.pop(interaction, ()))
        self.stalls.pop(interaction, None)
        self.begun.discard(interaction)
        self.ended.discard(interaction)
        self._fresh_streams.discard(interaction)
        return keys

    # -- reading the state

    def unfinished(self) -> tuple[Violation, ...]:
        """P5 at quiescence: interactions that began and never ended, by name."""
        return _unfinished(self.begun, self.ended)

    def retained(self) -> int:
        """How many entries the state holds (keys, streams, event ids, index entries):
        what bounds its memory. O(1)."""
        return (
            len(self.dead)
            + len(self.presented)
            + len(self.idempotent)
            + len(self.deadlines)
            + len(self.stale_delivery)
            + 2 * len(self.stream_of)  # with the per-stream index
            + len(self.no_resume)
            + len(self.answers)
            + len(self.submissions)
            + len(self.asks)
            + len(self.reshown)
            + len(self._asked)
            + len(self.newest)
            + len(self.seen)
            + self._seen_count
            + len(self.stalls)
            + len(self.begun)
            + len(self.ended)
            + len(self._keys_on)
            + len(self._fresh_keys)
            + len(self._fresh_streams)
        )

    def freeze(self, like: MonitorState = _EMPTY) -> MonitorState:
        """The state as a :class:`MonitorState`. Each field equal to ``like``'s is
        ``like``'s own object (already hashed, shared between states); the others are
        copies. O(facts)."""
        seen = frozenset((s, e) for s, ids in self.seen.items() for e in ids)
        return MonitorState(
            _set(like.dead, self.dead),
            _set(like.presented, self.presented),
            _set(like.idempotent, self.idempotent),
            _map(like.deadlines, self.deadlines),
            _set(like.stale_delivery, self.stale_delivery),
            _map(like.stream_of, self.stream_of),
            _set(like.no_resume, self.no_resume),
            self.session_gone,
            _map(like.answers, self.answers),
            _map(like.submissions, self.submissions),
            _map(like.newest, self.newest),
            like.seen if seen == like.seen else seen,
            _map(like.stalls, self.stalls),
            _set(like.begun, self.begun),
            _set(like.ended, self.ended),
            _set(like.violated, self.violated),
            _map(like.asks, self.asks),
            _set(like.reshown, self.reshown),
        )

    @classmethod
    def thaw(cls, state: MonitorState, budgets: Budgets = Budgets()) -> Facts:
        """``state`` as facts judged with ``budgets``, sharing nothing with it. O(facts).

        The indexes are rebuilt from the fields: every delivered key not dead counts as
        learnt since the last revival, every known stream not unresumable as learnt since
        the last loss (the rest already are what a revival or a loss would make them)."""
        facts = cls.__new__(cls)  # every field is set below: no empty ones to replace
        facts.budgets = budgets
        facts.dead = set(state.dead)
        facts.presented = set(state.presented)
        facts.idempotent = set(state.idempotent)
        facts.deadlines = dict(state.deadlines)
        facts.stale_delivery = set(state.stale_delivery)
        facts.stream_of = dict(state.stream_of)
        facts.no_resume = set(state.no_resume)
        facts.session_gone = state.session_gone
        facts.answers = dict(state.answers)
        facts.submissions = dict(state.submissions)
        facts.newest = dict(state.newest)
        seen: dict[str, set[str]] = {}
        for stream, event_id in state.seen:
            seen.setdefault(stream, set()).add(event_id)
        facts.seen = seen
        facts._seen_count = len(state.seen)
        facts.stalls = dict(state.stalls)
        facts.begun = set(state.begun)
        facts.ended = set(state.ended)
        facts.violated = set(state.violated)
        facts.asks = dict(state.asks)
        facts.reshown = set(state.reshown)
        facts._asked = {state.asks.get(k, k) for k in state.presented if k not in state.idempotent}
        keys_on: dict[str, set[RequestKey]] = {}
        for key, stream in state.stream_of.items():
            keys_on.setdefault(stream, set()).add(key)
        facts._keys_on = keys_on
        facts._fresh_keys = facts.stream_of.keys() - facts.dead
        facts._fresh_streams = {*facts.stream_of.values(), *facts.newest} - facts.no_resume
        return facts


T = TypeVar("T")


def _set(like: frozenset[T], now: set[T]) -> frozenset[T]:
    return like if now == like else frozenset(now)


def _map(like: FrozenMap[K, V], now: dict[K, V]) -> FrozenMap[K, V]:
    return like if now == like else FrozenMap(now)


def _unfinished(begun: AbstractSet[str], ended: AbstractSet[str]) -> tuple[Violation, ...]:
    return tuple(Violation("P5", f"{i} never ended") for i in sorted(begun - ended))


def step(
    state: MonitorState, obs: Observation, budgets: Budgets = Budgets()
) -> tuple[MonitorState, tuple[Violation, ...]]:
    """Apply one observation; return the new state and the violations it caused.

    Pure: ``state`` is thawed into :class:`Facts`, judged and updated there, and frozen
    again (the fields ``obs`` left alone are ``state``'s own). O(facts) per call: made for
    the model checker, whose states hold a handful of facts and whose worlds memoise each
    step. A long stream of observations belongs to :class:`Monitor`, O(1) each."""
    facts = Facts.thaw(state, budgets)
    bad = facts.observe(obs)
    return facts.freeze(state), bad


def newest_event(state: MonitorState, stream: str) -> str | None:
    """The newest event id the monitor saw on ``stream`` (what P7 compares against)."""
    newest: str | None = state.newest.get(stream)
    return newest


def forget(state: MonitorState, interaction: str) -> MonitorState:
    """``state`` without what it knows of ``interaction`` and of the requests delivered on
    its stream (what a bounded :class:`Monitor` drops once the interaction has ended):
    :meth:`Facts.forget` on the thawed state. O(facts).

    Forgetting loses checks, never creates one, with one exception: a submission for a
    forgotten request is judged as one for a request never answered (P4)."""
    facts = Facts.thaw(state)
    facts.forget(interaction)
    return facts.freeze(state)


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
        reshown=ks(state.reshown),
        asks=FrozenMap({keys.get(k, k): keys.get(v, v) for k, v in state.asks.items()}),
    )


def unfinished(state: MonitorState) -> tuple[Violation, ...]:
    """P5 at quiescence: interactions that began and never ended."""
    return _unfinished(state.begun, state.ended)


class Monitor:
    """The online monitor: :class:`Facts` judged in place, the violations recorded.

    Each observation costs O(1) amortised (nothing is copied), so a monitor may watch a
    session of any length. ``retain`` bounds what it remembers: once more than ``retain``
    interactions have ended, the oldest ended one is forgotten with the requests
    delivered on its stream (:meth:`Facts.forget`; ``on_forget(interaction, keys)`` is
    then called with those requests' keys), so memory stays bounded however many tool
    calls a session makes. Requests on a stream that has not ended (the open generation
    of the standalone GET stream) are not forgotten; those of a GET generation that ended
    go like any other's. ``None`` (the default) remembers everything, as the model
    checker does.

    :attr:`state` reads (and replaces) the facts as a :class:`MonitorState`: O(facts), for
    reports and tests, never per observation.
    """

    def __init__(
        self,
        budgets: Budgets = Budgets(),
        *,
        retain: int | None = None,
        on_forget: Callable[[str, set[RequestKey]], None] | None = None,
    ) -> None:
        if retain is not None and retain < 0:
            raise ValueError("retain must be >= 0 or None")
        self.facts = Facts(budgets)
        self.retain = retain
        self.violations: list[tuple[int, Observation, Violation]] = []
        """``(observation number, observation, violation)``, in order."""
        self.count = 0
        """Observations applied so far."""
        self._on_forget = on_forget
        self._ended: dict[str, None] = {}  # ended interactions still remembered, oldest first

    @property
    def budgets(self) -> Budgets:
        """The budgets the monitor judges with."""
        return self.facts.budgets

    @budgets.setter
    def budgets(self, budgets: Budgets) -> None:
        self.facts.budgets = budgets

    @property
    def state(self) -> MonitorState:
        """The facts as a :class:`MonitorState` (a copy, O(facts)); assigning one makes
        the monitor judge from it on (which interactions ended, for ``retain``, and the
        recorded violations are kept)."""
        return self.facts.freeze()

    @state.setter
    def state(self, state: MonitorState) -> None:
        self.facts = Facts.thaw(state, self.facts.budgets)

    def check(self, obs: Observation) -> tuple[Violation, ...]:
        """The violations ``obs`` would cause now; nothing changes (:meth:`Facts.check`)."""
        return self.facts.check(obs)

    def apply(self, obs: Observation, bad: Sequence[Violation] = ()) -> None:
        """Record ``obs`` and ``bad``, its violations from :meth:`check`; then forget
        past ``retain``."""
        self.facts.apply(obs, bad)
        self.count += 1
        if bad:
            self.violations += [(self.count, obs, v) for v in bad]
        if self.retain is not None and isinstance(obs, Ended):
            ended = self._ended
            ended[obs.interaction] = None
            while len(ended) > self.retain:
                oldest = next(iter(ended))
                del ended[oldest]
                self.forget(oldest)

    def observe(self, obs: Observation) -> tuple[Violation, ...]:
        """Apply ``obs``; return (and remember) the violations it caused."""
        bad = self.facts.check(obs)
        self.apply(obs, bad)
        return bad

    def forget(self, interaction: str) -> set[RequestKey]:
        """Forget ``interaction`` and the requests delivered on its stream
        (:meth:`Facts.forget`); return their keys."""
        keys = self.facts.forget(interaction)
        if self._on_forget is not None:
            self._on_forget(interaction, keys)
        return keys

    def unfinished(self) -> tuple[Violation, ...]:
        """P5 at quiescence, without recording it (see :meth:`finish`)."""
        return self.facts.unfinished()

    def finish(self) -> tuple[Violation, ...]:
        """Check P5 at quiescence; return (and remember) what never ended."""
        bad = self.facts.unfinished()
        self.violations += [(self.count, Began(v.why), v) for v in bad]
        return bad

    def retained(self) -> int:
        """How many entries the monitor holds (its facts and the window of ended
        interactions): what bounds its memory. O(1)."""
        return self.facts.retained() + len(self._ended)
