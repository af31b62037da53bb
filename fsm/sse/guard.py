"""The sans-IO guard: feed it events, do what its actions say.

>>> from fsm import Guard, events as ev
>>> guard = Guard(clock=lambda: 0.0)
>>> guard.feed(ev.SessionStarted("s1"))
()
>>> guard.feed(ev.StreamOpened("post:2", origin=2))
()
>>> guard.feed(ev.SseEvent("post:2", {"jsonrpc": "2.0", "id": 1,
...     "method": "elicitation/create", "params": {"message": "Delete 3 files?"}}, "e1"))
(Present(key=('s1', 1), method='elicitation/create', params={'message': 'Delete 3 files?'}),)

Contract
--------
* :meth:`Guard.feed` never raises for anything a server or network can do: malformed
  messages, unknown ids, events after a terminal state, floods. Those get an ``Ignore``
  or ``Refuse`` action with a stable ``reason``. It raises :class:`~fsm.errors.GuardUsageError`
  only when the *embedding application* feeds an impossible event (an answer for a key
  it was never asked to present, an unknown stream for a lifecycle event); the guard's
  state is then unchanged.
* Every interaction (each stream, and each request without an origin) ends with exactly
  one ``Complete`` or ``Fail`` action, never two.
* Rules: the first delivery of an interactive request is presented once and
  its client-side deadline recorded; a repeated delivery is never presented again (with a
  liveness assertion for an already-submitted request, the stored answer is resubmitted);
  a replayed request without liveness assertion past its deadline is dead; answer outcomes
  are classified by :class:`~fsm.outcomes.Classifier`; a terminal rejection never leads to
  a resume; retries are bounded and never re-prompt.
* The guard decides; it changes no machine's state itself. Every state change is a
  declared transition (:mod:`fsm.machines.resumption`, by default through the ``transitions``
  runtime) fired by :class:`fsm.machines.product.ProductRun`, and every cross-machine effect is a
  row of :data:`fsm.machines.resumption.PRODUCT` that the same runtime applies. What the rows mean
  to the guard (which requests a stream's origin covers, a withdrawn prompt, the one
  outcome of an interaction) are its ``_members`` and ``_on_terminal``.
* Memory is bounded: at most ``max_live_requests`` live requests (more are refused), at
  most ``max_tombstones`` finished ones kept for de-duplication (oldest evicted first: a
  key redelivered after its tombstone was evicted looks new), ``max_streams`` streams and
  ``max_seen_event_ids`` event ids per stream kept exactly and ``max_event_history``
  more as fingerprints (:mod:`fsm.sse.history`).
* Resumption terminates and never goes backwards, whatever the server replays: progress
  (which resets the budget of ``max_resumes_without_progress``) is an event id the stream
  never carried before, judged against its whole history, so replaying old events is no
  progress and never moves the cursor; a stream is resumed at most
  ``max_resumes_per_stream`` times in all (a server that restamps old events with new ids
  cannot keep it alive); once its history is full, a stream's next loss is terminal.
  A resumed connection is checked against the whole history until its first new event;
  after that, and on a connection that is not a resumption (a live stretch), against the
  window only, and the cursor is looked up in the rest at the loss: only a broken server
  repeats an id on a live connection, and its repeat is passed on but never resumed from.
* One question, one prompt: within one origin call (the POST stream of a tool call and
  the requests on it), a request with a new id whose method and canonical params equal
  those of one the user answered (a server-side shim that lost the answer asks again
  under a new id) is never presented: the stored answer is resubmitted under the new
  id, at most ``max_reasks`` times per question, then the call fails once with
  :class:`~fsm.errors.QuestionReaskedError` (with ``on_reask="fail"``, at the first
  re-ask); ``questions=False`` keys requests by id alone. The rule is
  :mod:`fsm.questions`, the one the MRTR era applies.
* Patience with a server that still holds the old connection: a resume it refuses for
  that reason (a *patient* row of the resume table: 409, "session already exists", 429
  or 503 with ``Retry-After``) spends no budget of resumes without progress; it is
  retried with backoff and jitter (never sooner than ``Retry-After``) until
  ``resume_patience_s`` have passed since the first such refusal, by the clock or by the
  waits the guard asked for, whichever says more. A resume that opens a stream ends the
  patience, and spends the budget as before when it brings nothing new; every resume
  counts towards ``max_resumes_per_stream``. So the patience ends too (L1).
* Not thread-safe; drive one guard from one task at a time (asyncio tasks interleave only
  at ``await`` points, and ``feed`` never awaits).
"""

from __future__ import annotations

import json
import math
import random
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar, cast

from fsm import events as ev
from fsm.actions import (
    Action,
    Complete,
    Fail,
    Ignore,
    Persist,
    Present,
    Refuse,
    Reshown,
    Resume,
    Submit,
    Wait,
    Withdraw,
)
from fsm.errors import (
    CapacityError,
    EventTooLargeError,
    GuardUsageError,
    InteractionFailed,
    QuestionReaskedError,
    RequestCancelledError,
    RequestId,
    RequestKey,
    ResumeBudgetSpentError,
    SessionExpiredError,
    StaleRequestError,
    StreamAbandonedError,
    SubmissionFailedError,
    UnknownPendingRequestError,
)
from fsm.fields import check_fields
from fsm.machines.product import Cause, ProductRun
from fsm.machines.resumption import LIVENESS, PRODUCT, TRANSPORT
from fsm.machines.spec import Scope
from fsm.machines.tables import EngineName
from fsm.messages import (
    Malformed,
    Notification,
    Response,
    ServerRequest,
    is_plain_notification,
    params_digest,
    parse,
)
from fsm.outcomes import Classifier, OutcomeClass, SubmissionResult, backoff_delay, server_wait
from fsm.questions import OnReask, canonical_json, question_id, reask_refusal
from fsm.sse.history import EventHistory

LIVE_MARKER = "dead-or-resumable/live"
"""A server may put ``{"_meta": {LIVE_MARKER: true}}`` in a request's params to assert
that a replayed copy is still live (rule 5). Any oracle can replace this one."""

_LONGEST_RETRY_MS: int = 10**15
"""A ``retry:`` beyond this (milliseconds: 31,700 years) is read as this before it is
turned into seconds: no float conversion of an unbounded integer."""

LivenessOracle = Callable[[ServerRequest, bool], bool]
"""``oracle(request, replayed) -> asserted live?`` Called for repeated deliveries."""


def default_oracle(request: ServerRequest, replayed: bool) -> bool:
    """A fresh (non-replayed) delivery, or the :data:`LIVE_MARKER` in ``_meta``, asserts it."""
    if not replayed:
        return True
    meta = request.params.get("_meta") if request.params is not None else None
    return isinstance(meta, Mapping) and meta.get(LIVE_MARKER) is True


@dataclass(frozen=True, slots=True)
class GuardConfig:
    """Policy knobs. Defaults follow the specification and the measured SDKs.

    Methods in neither ``interactive_methods`` nor ``idempotent_methods`` are treated as
    interactive (presented at most once): the conservative choice.

    Resumption: ``max_resumes_without_progress`` resumes in a row that bring no event id
    the stream never carried end it; ``max_resumes_per_stream`` bounds its resumes in
    all (``None``: no such cap, and no count kept). Each stream remembers its
    ``max_seen_event_ids`` newest event ids exactly (and up to a quarter more: they leave
    in batches) and up to ``max_event_history`` older ones as fingerprints (7 bytes each:
    896 KiB at the default); a stream that carried
    more than both can no longer tell a replay from new events, and its next loss is
    terminal (``ResumeBudgetSpentError``, reason ``history-full``). How a failed resume
    GET is judged is ``resume_classifier``.
    Streams: at most ``max_streams`` live at once; ended ones are remembered (a resume of
    one is told it ended) until room is needed, or, with ``max_ended_streams``, only the
    newest that many (``None``: as many as ``max_streams`` leaves room for). A forgotten
    stream's requests stay remembered as ``max_tombstones`` allows.
    ``event_history`` is the class that keeps a stream's history: replace it only to
    study other retention policies (the models of a window-only client and of an
    unverified cursor do), since the default is what P7 and L1 rest on. The guard calls
    its ``record`` (replay stretches), ``record_live`` (live stretches), ``newest`` (at
    each loss), ``full``, ``count``, ``recent``, ``freeze`` and ``thaw``.
    Patience: a resume the server refuses because it still holds the old connection (a
    ``patient`` row of ``resume_classifier``) is retried until ``resume_patience_s``
    (default 150 s: Render's hosted server refuses for about 120 s, IBM ContextForge's
    listener claim lasts 30 s) have passed since the first such refusal, after
    :meth:`patient_delay`; ``resume_jitter`` returns numbers in [0, 1] that spread those
    waits (inject a constant for deterministic tests and models).
    Server waits: a server's ``retry:`` and ``Retry-After`` are honoured up to
    ``max_server_wait_s`` (default 60 s, the default ``request_ttl_s``, as the tasks era's
    ``max_poll_interval_s``); a longer one (10**30 ms, an infinite or not-a-number
    ``Retry-After``) waits that long, so no server can make a stream or an answer wait
    without end (:meth:`server_wait`).
    Questions: with ``questions`` (the default), an interactive request on an origin's
    stream that asks what a request answered before on it asked (method and canonical
    params, :mod:`fsm.questions`) gets the stored answer, at most ``max_reasks`` times
    per question, then fails the call (``on_reask="fail"``: at once); never a prompt.
    Durability: with ``durable``, every feed that changes what must survive a crash
    starts its actions with one :class:`~fsm.actions.Persist` (see :class:`SseDelta`
    and docs/durability.md); progress events never do.
    """

    interactive_methods: frozenset[str] = frozenset(
        {"elicitation/create", "sampling/createMessage"}
    )
    idempotent_methods: frozenset[str] = frozenset({"ping", "roots/list"})
    request_ttl_s: float = 60.0
    ttl_by_method: Mapping[str, float] = field(default_factory=dict)
    max_resumes_without_progress: int = 3
    max_submit_attempts: int = 3
    backoff_initial_s: float = 1.0
    backoff_factor: float = 2.0
    backoff_max_s: float = 30.0
    max_live_requests: int = 256
    max_tombstones: int = 4096
    max_streams: int = 64
    max_ended_streams: int | None = None
    max_seen_event_ids: int = 1024
    max_event_history: int = 131_072
    max_resumes_per_stream: int | None = 100
    resume_patience_s: float = 150.0
    max_server_wait_s: float = 60.0
    resume_jitter: Callable[[], float] = random.random
    event_history: type[EventHistory] = EventHistory
    classifier: Classifier = field(default_factory=Classifier)
    resume_classifier: Classifier = field(default_factory=Classifier.for_resumes)
    oracle: LivenessOracle = default_oracle
    questions: bool = True
    max_reasks: int = 1
    on_reask: OnReask = "resubmit"
    durable: bool = False

    def __post_init__(self) -> None:
        check_fields(self, ValueError, floats="number")

    def ttl(self, method: str) -> float:
        """The client-side deadline recorded for a request of ``method``."""
        return self.ttl_by_method.get(method, self.request_ttl_s)

    def server_wait(self, seconds: float) -> float:
        """A wait a server asked for (its ``Retry-After``), at most ``max_server_wait_s``
        (which is also what a NaN asks for)."""
        return server_wait(seconds, self.max_server_wait_s)

    def retry_wait(self, retry_ms: int) -> float:
        """A server's ``retry:`` (milliseconds, an integer of any size) in seconds, at
        most ``max_server_wait_s``: never a float conversion of an unbounded integer."""
        return self.server_wait(min(retry_ms, _LONGEST_RETRY_MS) / 1000.0)

    def backoff(self, stalls: int, retry_ms: int | None) -> float:
        """Delay before resume number ``stalls + 1``: the server's ``retry:`` if it sent one
        (at most ``max_server_wait_s``)."""
        if retry_ms is not None:
            return self.retry_wait(retry_ms)
        return backoff_delay(
            stalls, self.backoff_initial_s, self.backoff_factor, self.backoff_max_s
        )

    def resubmit_delay(self, attempts: int, retry_after: float | None) -> float:
        """Delay before an answer's submission number ``attempts + 1``, after a retryable
        failure: the server's ``Retry-After`` if it sent one (at most
        ``max_server_wait_s``), else the backoff after ``attempts`` submissions; never
        below 0."""
        if retry_after is None:
            return max(0.0, self.backoff(attempts - 1, None))
        return max(0.0, self.server_wait(retry_after))

    def patient_delay(
        self, refusals: int, retry_ms: int | None, retry_after: float | None
    ) -> float:
        """Delay after patient refusal number ``refusals + 1``: a backoff step from the
        server's ``retry:`` (when above 0, else ``backoff_initial_s``), times
        ``backoff_factor`` per refusal, at most ``backoff_max_s`` (or the ``retry:``, if
        longer), with equal jitter: half the step, plus the other half times a draw of
        ``resume_jitter``; never less than the server's ``Retry-After``. The server's
        ``retry:`` and ``Retry-After`` count up to ``max_server_wait_s`` each. (The guard
        also cuts it to what is left of ``resume_patience_s``.)"""
        start = self.retry_wait(retry_ms) if retry_ms else self.backoff_initial_s
        step = backoff_delay(refusals, start, self.backoff_factor, max(self.backoff_max_s, start))
        draw = float(self.resume_jitter())
        if not 0.0 <= draw <= 1.0:  # NaN included: no spread rather than a wrong one
            draw = 1.0
        delay = step * (0.5 + 0.5 * draw)
        return delay if retry_after is None else max(self.server_wait(retry_after), delay)


class StreamRecord(NamedTuple):
    """One stream of a :meth:`Guard.snapshot` (a tuple, and its repr a tuple's)."""

    id: str
    origin: RequestId | None
    state: str
    cursor: str | None
    history: tuple[Any, ...]
    stalls: int
    resumes: int
    retry_ms: int | None
    resumed: bool
    ended: bool
    cause: Cause | None
    requests: tuple[RequestKey, ...]
    held: tuple[float, float, int] | None = None
    """Patience with a server holding the old connection: ``(since, waited, refusals)``
    (the clock at the first patient refusal, the seconds of waits asked since, their
    number), or ``None``."""

    def __repr__(self) -> str:
        return tuple.__repr__(self)

    def rename(self, plan: KeyRenaming) -> StreamRecord:
        """This record with the request keys it names renamed by ``plan``."""
        return self._replace(
            cause=plan.cause(self.cause), requests=tuple(map(plan.key, self.requests))
        )


class RequestRecord(NamedTuple):
    """One request of a :meth:`Guard.snapshot` (a tuple, and its repr a tuple's).
    ``answer`` is the stored answer as canonical JSON."""

    key: RequestKey
    stream: str
    method: str
    digest: int
    deadline: float
    state: str
    answer: str | None
    attempts: int
    presented_at: float | None
    asserted: bool
    ended: bool
    cause: Cause | None
    reasks: int = 0
    """Times the stored answer was resubmitted under a new id for a re-ask."""

    def __repr__(self) -> str:
        return tuple.__repr__(self)

    def rename(self, plan: KeyRenaming) -> RequestRecord:
        """This record with its key, and the key its cause names, renamed by ``plan``."""
        return self._replace(key=plan.key(self.key), cause=plan.cause(self.cause))


class GuardSnapshot(NamedTuple):
    """The whole decision state of a :class:`Guard` (see :meth:`Guard.snapshot`).

    Records are tuples, hashed and compared as tuples, and their repr is a tuple's: a
    snapshot without a failure's cause in it reads back from its repr with
    ``ast.literal_eval``, and :meth:`Guard.restore` takes the plain tuples."""

    session: str
    streams: tuple[StreamRecord, ...]
    requests: tuple[RequestRecord, ...]
    expired: bool

    def __repr__(self) -> str:
        return tuple.__repr__(self)

    def rename(self, plan: KeyRenaming) -> GuardSnapshot:
        """Every record renamed by ``plan``, the requests in the guard's order of their
        new keys (see :func:`rename_snapshot`)."""
        requests = sorted((r.rename(plan) for r in self.requests), key=_record_order)
        return self._replace(
            streams=tuple(s.rename(plan) for s in self.streams), requests=tuple(requests)
        )


class Question(NamedTuple):
    """A question as the store keeps it while it may have to be shown again: its
    ``params`` as canonical JSON (``None``: the request had none)."""

    key: RequestKey
    method: str
    params: str | None


class SseDelta(NamedTuple):
    """What one :meth:`Guard.feed` changed that must survive a crash (the payload of a
    :class:`~fsm.actions.Persist`): the session, the changed request records (state,
    stored answer, attempts, cause), the questions first shown in it, the keys re-shown
    after a restart, the changed streams (a request of theirs changed, or they ended;
    ``history`` is ``()``: a store keeps the cursor, not the event ids) and the request
    keys and the streams the guard forgot (beyond ``max_tombstones``, ``max_streams``
    or ``max_ended_streams``), so a store stays as bounded as the guard."""

    session: str
    expired: bool
    streams: tuple[StreamRecord, ...]
    requests: tuple[RequestRecord, ...]
    questions: tuple[Question, ...] = ()
    reshown: tuple[RequestKey, ...] = ()
    forgotten: tuple[RequestKey, ...] = ()
    dropped: tuple[str, ...] = ()


class SseStored(NamedTuple):
    """What a store gives back after a crash (every :class:`SseDelta` applied in order):
    the guard's durable state as a snapshot (streams without history), the questions
    still open, and the keys already re-shown after a restart. :meth:`Guard.restart`
    takes it."""

    snapshot: GuardSnapshot
    questions: tuple[Question, ...] = ()
    reshown: frozenset[RequestKey] = frozenset()

    def apply(self, delta: SseDelta) -> SseStored:
        """What is stored once ``delta`` is written: forgotten keys and dropped streams
        go first, then a record replaces the one of its key or stream; a question is kept
        until its request ends. Every store's reading of a delta (the SQLite one is
        tested against it)."""
        snap = self.snapshot
        streams = {s.id: s for s in snap.streams}
        for name in delta.dropped:  # forgotten before this feed's records (a reused name)
            streams.pop(name, None)
        streams.update((s.id, s) for s in delta.streams)
        requests = {r.key: r for r in snap.requests}
        for key in delta.forgotten:
            requests.pop(key, None)
        requests.update((r.key, r) for r in delta.requests)
        questions = {q.key: q for q in (*self.questions, *delta.questions)}
        open_ = {k for k, r in requests.items() if r.state not in LIVENESS.terminal}
        return SseStored(
            GuardSnapshot(
                delta.session,
                tuple(streams[n] for n in sorted(streams)),
                tuple(sorted(requests.values(), key=_record_order)),
                delta.expired,
            ),
            tuple(q for k, q in sorted(questions.items(), key=_key_order) if k in open_),
            frozenset(k for k in (*self.reshown, *delta.reshown) if k in requests),
        )


class KeyRenaming:
    """A one-to-one renaming of request keys (keys not in ``keys`` are kept), applied
    field by field by each record's ``rename``: keys, and in causes of failures their
    key and the key's ``repr`` in their message and evidence. Event ids are not keys."""

    __slots__ = ("_pattern", "_reprs", "keys")

    def __init__(self, keys: Mapping[RequestKey, RequestKey]) -> None:
        self.keys = keys
        self._reprs = {repr(old): repr(new) for old, new in keys.items()}
        self._pattern = re.compile(
            "|".join(re.escape(r) for r in sorted(self._reprs, key=len, reverse=True))
        )

    def key(self, key: RequestKey) -> RequestKey:
        """The new name of ``key``."""
        return self.keys.get(key, key)

    def text(self, value: str) -> str:
        """``value`` with the ``repr`` of every renamed key replaced by its new one."""
        if not self._reprs:
            return value
        return self._pattern.sub(lambda m: self._reprs[m.group()], value)

    def cause(self, cause: Cause | None) -> Cause | None:
        """``cause`` naming the renamed keys (``None`` stays ``None``)."""
        if cause is None:
            return None
        return cause._replace(
            key=None if cause.key is None else self.key(cause.key),
            message=self.text(cause.message),
            evidence=tuple(map(self.text, cause.evidence)),
        )


class _Stream:
    """One transport instance (an SSE stream)."""

    __slots__ = (
        "cause",
        "cursor",
        "ended",
        "held",
        "history",
        "id",
        "origin",
        "requests",
        "resumed",
        "resumes",
        "retry_ms",
        "stalls",
        "state",
    )
    machine = TRANSPORT.name

    def __init__(self, sid: str, origin: RequestId | None, history: EventHistory) -> None:
        self.id, self.origin = sid, origin
        self.state = TRANSPORT.initial
        self.cursor: str | None = None
        self.history = history
        self.stalls = 0
        self.resumes = 0
        self.retry_ms: int | None = None
        self.resumed = False
        self.ended = False
        self.cause: Cause | None = None
        self.requests: list[RequestKey] = []
        self.held: tuple[float, float, int] | None = None

    def freeze(self, history: bool = True) -> StreamRecord:
        """This stream as a record; without ``history``, its history is ``()`` (what a
        store keeps: the cursor alone, see :class:`SseDelta`)."""
        frozen = self.history.freeze() if history else ()
        return StreamRecord(
            self.id,
            self.origin,
            self.state,
            self.cursor,
            frozen,
            self.stalls,
            self.resumes,
            self.retry_ms,
            self.resumed,
            self.ended,
            self.cause,
            tuple(self.requests),
            self.held,
        )

    @classmethod
    def thaw(cls, rec: StreamRecord, config: GuardConfig) -> _Stream:
        s = cls(rec.id, rec.origin, _history(config, rec.history))
        s.state, s.cursor, s.stalls, s.resumes = rec.state, rec.cursor, rec.stalls, rec.resumes
        s.retry_ms, s.resumed, s.ended = rec.retry_ms, rec.resumed, rec.ended
        s.cause, s.requests, s.held = rec.cause, list(rec.requests), rec.held
        return s


class _Request:
    """One liveness instance (a server-to-client request)."""

    __slots__ = (
        "answer",
        "answer_text",
        "asserted",
        "attempts",
        "cause",
        "deadline",
        "digest",
        "ended",
        "key",
        "method",
        "presented_at",
        "reasks",
        "state",
        "stream",
    )
    machine = LIVENESS.name

    def __init__(
        self, key: RequestKey, stream: str, method: str, digest: int, deadline: float
    ) -> None:
        self.key, self.stream, self.method, self.digest = key, stream, method, digest
        self.deadline = deadline
        self.state = LIVENESS.initial
        self.answer: Mapping[str, Any] | None = None
        self.answer_text: str | None = None  # the answer as canonical JSON, made on demand
        self.attempts = 0
        self.presented_at: float | None = None
        self.asserted = False
        self.ended = False
        self.cause: Cause | None = None
        self.reasks = 0

    def freeze(self) -> RequestRecord:
        return RequestRecord(
            self.key,
            self.stream,
            self.method,
            self.digest,
            self.deadline,
            self.state,
            self.frozen_answer(),
            self.attempts,
            self.presented_at,
            self.asserted,
            self.ended,
            self.cause,
            self.reasks,
        )

    @classmethod
    def thaw(cls, rec: RequestRecord) -> _Request:
        r = cls(rec.key, rec.stream, rec.method, rec.digest, rec.deadline)
        r.state, r.attempts, r.presented_at = rec.state, rec.attempts, rec.presented_at
        r.asserted, r.ended, r.cause, r.reasks = rec.asserted, rec.ended, rec.cause, rec.reasks
        r.answer_text = rec.answer  # decoded only if submitted again
        return r

    def frozen_answer(self) -> str | None:
        """The answer as canonical JSON (computed once: snapshots reuse it)."""
        if self.answer_text is None and self.answer is not None:
            self.answer_text = canonical_json(self.answer)
        return self.answer_text

    def stored_answer(self) -> Mapping[str, Any]:
        """The answer to submit (decoded once from a restored snapshot's JSON)."""
        if self.answer is None:
            assert self.answer_text is not None, "submitting a request with no answer"
            self.answer = json.loads(self.answer_text)
        return self.answer


_NOTHING: tuple[Action, ...] = ()


class Guard:
    """Decides, event by event, what an MCP client must do. See the module docstring."""

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        config: GuardConfig | None = None,
        engine: EngineName = "transitions",
        on_fire: Callable[[str, str, str, str], None] | None = None,
    ) -> None:
        """``clock`` returns seconds (monotonic); ``engine`` picks the ``transitions``
        runtime or the compiled tables; ``on_fire(machine, source, trigger, dest)`` is
        called for every declared transition taken (coverage, tracing)."""
        self.config = config or GuardConfig()
        self._clock = clock
        self._run = ProductRun(PRODUCT, engine, self._members, self._on_terminal, on_fire)
        self.session = ""
        self.expired = False
        """Whether the current session is known gone: nothing of it is presented again."""
        self._streams: dict[str, _Stream] = {}
        self._requests: dict[RequestKey, _Request] = {}
        self._tombstones: OrderedDict[RequestKey, None] = OrderedDict()
        self._live_requests = 0
        self._out: list[Action] = []
        self._durable = self.config.durable
        self._dirty_streams: set[str] = set()
        self._dirty_requests: set[RequestKey] = set()
        self._questions: list[Question] = []
        self._reshown: list[RequestKey] = []
        self._forgotten: list[RequestKey] = []
        self._dropped: list[str] = []
        self._session_dirty = False
        self._handlers: dict[type, Callable[[Any], None]] = {
            ev.SessionStarted: self._on_session_started,
            ev.StreamOpened: self._on_stream_opened,
            ev.SseEvent: self._on_sse,
            ev.ReplayBatch: self._on_batch,
            ev.StreamLost: self._on_lost,
            ev.TimerFired: self._on_timer,
            ev.StreamResumed: self._on_resumed,
            ev.ResumeRefused: self._on_resume_refused,
            ev.UserAnswered: self._on_answer,
            ev.SubmissionOutcome: self._on_outcome,
            ev.OriginResponse: self._on_origin_response,
            ev.SessionExpired: self._on_session_expired,
            ev.LivenessAsserted: self._on_asserted,
            ev.StreamAbandoned: self._on_abandoned,
        }

    # ------------------------------------------------------------------ public API

    def feed(self, event: ev.Event) -> tuple[Action, ...]:
        """Apply one event; return the actions the client must take, in order."""
        kind = type(event)
        if kind is ev.SseEvent:  # the hot path of a progress notification (on_event's)
            sse = cast(ev.SseEvent, event)
            data = sse.data
            if (
                sse.retry_ms is None
                and sse.replayed is None
                and type(data) is dict
                and is_plain_notification(data)
            ):
                fast = self.on_plain_notification(sse.stream, sse.event_id)
                if fast is not None:
                    return fast
        handler = self._handlers.get(kind)
        if handler is None:
            raise GuardUsageError(f"not a guard event: {event!r}")
        out: list[Action] = []
        self._out = out
        handler(event)
        if self._durable and (self._dirty_requests or self._dirty_streams or self._session_dirty):
            out.insert(0, Persist(self._take_delta()))
        return tuple(out) if out else _NOTHING

    def restart(self, stored: SseStored) -> tuple[Action, ...]:
        """Start this (fresh) guard from what a store kept when the client's process
        ended, and return what to do now, in order: a :class:`~fsm.actions.Persist`
        (when anything changed), a ``Wait`` for every stream that was live (its
        connection died with the process: it is resumed from its stored cursor, or ends
        once if it has none), a :class:`~fsm.actions.Reshown` for every question shown
        but unanswered at the crash that was never re-shown (never a second time), and a
        ``Submit`` of the stored answer for every answer whose POST was in flight
        (counted as a failed attempt: ``max_submit_attempts`` still bounds it). An
        answered question is never shown again; an interaction that ended is not ended
        again. See docs/durability.md."""
        snap = stored.snapshot
        self.restore(snap)
        out: list[Action] = []
        self._out = out
        for st in self._streams.values():
            if st.cursor is not None:
                st.history.record(st.cursor)
            if st.state in ("open", "resuming"):
                self._run.fire(st, "lose")
                st.resumed = False
            if st.state == "broken":
                self._schedule_or_give_up(st, "client restart")
            elif st.state == "waiting":
                self._emit(Wait(st.id, self.config.backoff(st.stalls, st.retry_ms)))
        questions = {q.key: q for q in stored.questions}
        for rec in list(self._requests.values()):
            q = questions.get(rec.key)
            if rec.state == "presented" and q is not None and rec.key not in stored.reshown:
                params = None if q.params is None else json.loads(q.params)
                self._reshown.append(rec.key)
                self._emit(Reshown(rec.key, q.method, params))
            elif rec.state == "submitting":
                lost = SubmissionResult(None, None, "client-restart")
                self._on_outcome(ev.SubmissionOutcome(rec.key, lost))
        if self._durable and (self._dirty_requests or self._dirty_streams or self._reshown):
            out.insert(0, Persist(self._take_delta()))
        return tuple(out)

    def _take_delta(self) -> SseDelta:
        """The :class:`SseDelta` of what changed since the last one (and forget it)."""
        requests = [self._requests.get(k) for k in self._dirty_requests]
        recs = sorted((r.freeze() for r in requests if r is not None), key=_record_order)
        names = self._dirty_streams.union(r.stream for r in recs)
        streams = tuple(self._streams[n].freeze(False) for n in sorted(names) if n in self._streams)
        delta = SseDelta(
            self.session,
            self.expired,
            streams,
            tuple(recs),
            tuple(self._questions),
            tuple(self._reshown),
            tuple(self._forgotten),
            tuple(self._dropped),
        )
        self._dirty_streams, self._dirty_requests = set(), set()
        self._questions, self._reshown, self._forgotten, self._dropped = [], [], [], []
        self._session_dirty = False
        return delta

    def on_event(
        self, stream: str, event_id: str | None, data: Mapping[str, Any]
    ) -> tuple[Action, ...]:
        """Hot path for one decoded SSE event; same result as ``feed(SseEvent(...))``."""
        if is_plain_notification(data):
            actions = self.on_plain_notification(stream, event_id)
            if actions is not None:
                return actions
        return self.feed(ev.SseEvent(stream, data, event_id))

    def on_plain_notification(self, stream: str, event_id: str | None) -> tuple[Action, ...] | None:
        """Hot path for an SSE event whose message the caller knows to be a notification
        that needs no decision: ``jsonrpc`` "2.0", a non-empty method other than a
        cancellation, no ``id``, params an object or absent (a progress or logging
        notification). Only its event id matters: when ``stream`` is open, the same
        state change and actions as ``feed(SseEvent(stream, message, event_id))`` (an
        ``Ignore("duplicate-event")`` for an id already seen, else none); ``None`` and
        no change when ``stream`` is unknown or not open (the caller then feeds the
        event itself)."""
        st = self._streams.get(stream)
        if st is None or st.state != "open":
            return None
        if event_id is not None and not self._advance(st, event_id):
            return (Ignore("duplicate-event", event_id, stream=stream),)
        return _NOTHING

    def state_of(self, key: RequestKey) -> str | None:
        """The liveness state of ``key`` (``None`` if unknown or evicted)."""
        rec = self._requests.get(key)
        return rec.state if rec is not None else None

    def now(self) -> float:
        """The injected clock's current reading."""
        return self._clock()

    def connection_resumed(self, stream: str) -> bool:
        """Whether ``stream``'s current connection is a resumed one (its events count as
        replays unless an event says otherwise)."""
        st = self._streams.get(stream)
        return st is not None and st.resumed

    def stream_state(self, stream: str) -> str | None:
        """The transport state of ``stream`` (``None`` if unknown)."""
        st = self._streams.get(stream)
        return st.state if st is not None else None

    def cursor(self, stream: str) -> str | None:
        """The newest event id seen on any connection of ``stream`` that was new to it:
        what a resume names (``None`` if unknown, or if no such id is known any more:
        see :meth:`fsm.sse.history.EventHistory.newest`)."""
        st = self._streams.get(stream)
        return st.history.newest() if st is not None else None

    def stream_of(self, key: RequestKey) -> str | None:
        """The stream that delivered ``key`` (``None`` if unknown or evicted)."""
        rec = self._requests.get(key)
        return rec.stream if rec is not None else None

    def live_streams(self) -> list[str]:
        """The streams not yet ended (``done`` or ``dead``), oldest first."""
        return [s.id for s in self._streams.values() if s.state not in TRANSPORT.terminal]

    def tracked(self) -> tuple[int, int, int]:
        """``(live requests, tombstones, streams)`` currently held."""
        return self._live_requests, len(self._tombstones), len(self._streams)

    def snapshot(self) -> GuardSnapshot:
        """A hashable value of the whole decision state (for model checking and tests).

        Two guards with equal snapshots decide identically (tombstone eviction order
        excepted, which only matters once ``max_tombstones`` is reached).
        """
        streams = tuple(s.freeze() for _, s in sorted(self._streams.items()))
        requests = tuple(r.freeze() for _, r in sorted(self._requests.items(), key=_key_order))
        return GuardSnapshot(self.session, streams, requests, self.expired)

    def restore(self, snap: GuardSnapshot) -> None:
        """Load a :meth:`snapshot` (made by a guard with the same config), or the same
        value as plain tuples (read back from its repr)."""
        self.session, streams, requests, self.expired = snap
        self._streams = {}
        for stream in streams:
            rec = _record(StreamRecord, stream)
            self._streams[rec.id] = _Stream.thaw(rec, self.config)
        self._requests = {}
        self._tombstones = OrderedDict()
        self._live_requests = 0
        for request in requests:
            r = _Request.thaw(_record(RequestRecord, request))
            self._requests[r.key] = r
            if r.state in LIVENESS.terminal:
                self._tombstones[r.key] = None
            else:
                self._live_requests += 1

    # --------------------------------------------------------------- event handlers

    def _on_session_started(self, e: ev.SessionStarted) -> None:
        self.session = e.session
        self.expired = False
        self._session_dirty = self._durable

    def _on_stream_opened(self, e: ev.StreamOpened) -> None:
        old = self._streams.get(e.stream)
        if old is not None and old.state not in TRANSPORT.terminal:
            raise GuardUsageError(f"stream {e.stream!r} is already open ({old.state})")
        live = sum(1 for s in self._streams.values() if s.state not in TRANSPORT.terminal)
        if live >= self.config.max_streams:
            raise GuardUsageError(f"more than max_streams={self.config.max_streams} live streams")
        if old is not None:
            del self._streams[e.stream]
            if self._durable:
                self._dropped.append(e.stream)
        self._evict_streams()
        self._streams[e.stream] = _Stream(e.stream, e.origin, _history(self.config, None))
        if self._durable:  # known after a crash, to be resumed or ended once
            self._dirty_streams.add(e.stream)

    def _on_sse(self, e: ev.SseEvent, batch_cancels: frozenset[RequestId] = frozenset()) -> None:
        st = self._streams.get(e.stream)
        if st is None:
            self._emit(
                Ignore("unknown-stream", f"event on unknown stream {e.stream!r}", stream=e.stream)
            )
            return
        if st.state in TRANSPORT.terminal:
            self._emit(Ignore("stream-terminal", f"{e.stream} is {st.state}", stream=e.stream))
            return
        duplicate = e.event_id is not None and not self._advance(st, e.event_id, e.replayed)
        if e.retry_ms is not None:
            if isinstance(e.retry_ms, int) and not isinstance(e.retry_ms, bool) and e.retry_ms >= 0:
                st.retry_ms = e.retry_ms
            else:
                self._emit(Ignore("bad-retry", f"retry: {e.retry_ms!r}", stream=e.stream))
        data = e.data
        if is_plain_notification(data):  # progress, logging: its event id was all it said
            if duplicate:
                self._emit(Ignore("duplicate-event", e.event_id or "", stream=st.id))
            return
        if data is None or data == "" or data == b"":
            return  # priming event or comment: only the cursor moves
        msg = parse(data)
        replayed = st.resumed if e.replayed is None else e.replayed
        if isinstance(msg, ServerRequest):
            self._on_request(st, msg, replayed, batch_cancels)
        elif isinstance(msg, Notification):
            if msg.cancelled_id is not None:
                self._on_cancel(st, msg.cancelled_id, msg)
            elif duplicate:
                self._emit(Ignore("duplicate-event", e.event_id or "", stream=st.id))
        elif isinstance(msg, Response):
            if st.origin is None or msg.id != st.origin or type(msg.id) is not type(st.origin):
                self._emit(
                    Ignore(
                        "foreign-response",
                        f"response id {msg.id!r} was never sent on {st.id}",
                        stream=st.id,
                    )
                )
            elif duplicate:
                self._emit(Ignore("duplicate-event", e.event_id or "", stream=st.id))
            else:
                self._run.broadcast("origin_response", st)
        else:
            assert isinstance(msg, Malformed)
            self._emit(Ignore("malformed", msg.reason, stream=st.id))

    def _on_batch(self, e: ev.ReplayBatch) -> None:
        cancels: dict[RequestId, int] = {}
        for i, item in enumerate(e.events):
            msg = parse(item.data) if item.data not in (None, "", b"") else None
            if isinstance(msg, Notification) and msg.cancelled_id is not None:
                cancels[msg.cancelled_id] = i
        for i, item in enumerate(e.events):
            later = frozenset(rid for rid, j in cancels.items() if j > i)
            self._on_sse(_as_replay(item), later)

    def _on_request(
        self, st: _Stream, msg: ServerRequest, replayed: bool, batch_cancels: frozenset[RequestId]
    ) -> None:
        cfg = self.config
        key: RequestKey = (self.session, msg.id)
        if self.expired:
            self._emit(
                Ignore("session-expired", f"{key!r} arrived after the session expired", key=key)
            )
            return
        rec = self._requests.get(key)
        if msg.method in cfg.idempotent_methods:
            if rec is not None:
                # An id names one request per session: a ping reusing the id of a tracked
                # interactive request is not that request, and answering it would post a
                # result under the interactive request's id.
                self._emit(Ignore("id-reused", f"{key!r} redelivered with other method", key=key))
                return
            self._emit(Present(key, msg.method, msg.params))
            return
        now = self._clock()
        if rec is None:
            if self._live_requests >= cfg.max_live_requests:
                err = CapacityError(
                    f"{self._live_requests} live requests (max_live_requests="
                    f"{cfg.max_live_requests}); refusing {key!r}"
                )
                self._emit(Refuse(key, err))
                return
            rec = self._track(key, st, msg, now)
            if msg.id in batch_cancels:
                self._run.kill(rec, "cancel", None)
                self._emit(
                    Ignore(
                        "cancelled-later-in-batch", "cancelled later in the same replay", key=key
                    )
                )
                return
            first = self._asked_before(st, rec) if cfg.questions else None
            if first is not None:
                self._on_reask(st, rec, first, question_id(msg.method, msg.params))
                return
            rec.presented_at = now
            self._run.fire(rec, "present")
            self._emit(Present(key, msg.method, msg.params))
            return
        if rec.digest != params_digest(msg.params) or rec.method != msg.method:
            self._emit(
                Ignore("id-reused", f"{key!r} redelivered with other method or params", key=key)
            )
            return
        if rec.state in LIVENESS.terminal:
            self._emit(Ignore("request-terminal", f"{key!r} is {rec.state}", key=key))
            return
        live = rec.asserted or cfg.oracle(msg, replayed)
        if rec.state == "submitted" and live and rec.attempts < cfg.max_submit_attempts:
            self._submit(rec, 0.0, "resubmit")
        elif rec.state in ("new", "presented", "answered") and not live and now > rec.deadline:
            evidence = (
                f"presented at t={rec.presented_at}",
                f"deadline t={rec.deadline}",
                f"replayed at t={now} on {st.id} without liveness assertion",
            )
            self._run.kill(
                rec,
                "stale",
                Cause(
                    StaleRequestError,
                    f"request {key!r} replayed past its deadline "
                    "without liveness assertion: dead, not presented again",
                    key,
                    evidence,
                ),
            )
        else:
            self._emit(Ignore("duplicate-delivery", f"{key!r} already {rec.state}", key=key))

    def _asked_before(self, st: _Stream, rec: _Request) -> _Request | None:
        """The request of ``st``'s origin call that first asked ``rec``'s question
        (method and canonical params), if it is not ``rec`` and the user's answer to it
        is stored; else ``None`` (always on a stream without an origin: it is no one
        call). The first asker is what :class:`fsm.questions.QuestionBook` names too."""
        if st.origin is None:
            return None
        for k in st.requests:
            other = self._requests.get(k)
            if other is rec:
                return None
            if other is not None and other.digest == rec.digest and other.method == rec.method:
                answered = other.answer is not None or other.answer_text is not None
                return other if answered else None
        return None

    def _on_reask(self, st: _Stream, rec: _Request, first: _Request, qid: str) -> None:
        """``rec`` asks again what ``first`` asked and the user answered: resubmit the
        stored answer under ``rec``'s id (bounded per question), or fail the call once."""
        cfg = self.config
        spent = reask_refusal(first.reasks, cfg.max_reasks, cfg.on_reask)
        if spent is not None:
            self._run.kill(
                rec,
                "reask",
                Cause(
                    QuestionReaskedError,
                    f"the server asked {qid} again under {rec.key!r} after {first.key!r} "
                    "was answered; the user is not asked twice",
                    rec.key,
                    (f"{rec.key!r} on {st.id} re-asks {qid}, first asked as {first.key!r}", spent),
                ),
            )
            return
        first.reasks += 1
        rec.answer, rec.answer_text = first.answer, first.answer_text
        self._run.fire(rec, "reuse")
        self._submit(rec, 0.0)

    def _on_cancel(self, st: _Stream, rid: RequestId, msg: Notification) -> None:
        key: RequestKey = (self.session, rid)
        rec = self._requests.get(key)
        if rec is None:
            self._emit(Ignore("cancel-unknown-request", f"no request {key!r}", key=key))
        elif rec.state in LIVENESS.terminal:
            self._emit(Ignore("cancel-terminal-request", f"{key!r} is {rec.state}", key=key))
        else:
            reason = msg.params.get("reason") if msg.params is not None else None
            self._run.kill(
                rec,
                "cancel",
                Cause(
                    RequestCancelledError,
                    f"server cancelled {key!r}: {reason}",
                    key,
                    (f"notifications/cancelled on {st.id}: {reason!r}",),
                ),
            )

    def _on_lost(self, e: ev.StreamLost) -> None:
        st = self._stream(e.stream)
        if st.state not in ("open", "resuming"):
            self._emit(Ignore("not-connected", f"{st.id} is {st.state}", stream=st.id))
            return
        self._run.fire(st, "lose")
        st.resumed = False
        st.cursor = st.history.newest()  # a live stretch may have taken a repeat for new
        self._schedule_or_give_up(st, "clean close" if e.clean else "abrupt cut")

    def _on_timer(self, e: ev.TimerFired) -> None:
        st = self._stream(e.stream)
        if st.state != "waiting" or st.cursor is None:
            self._emit(Ignore("no-wait-pending", f"{st.id} is {st.state}", stream=st.id))
            return
        self._run.fire(st, "resume")
        st.stalls += 1
        if self.config.max_resumes_per_stream is not None:
            st.resumes += 1
        self._emit(Resume(st.id, st.cursor))

    def _on_resumed(self, e: ev.StreamResumed) -> None:
        st = self._stream(e.stream)
        if st.state != "resuming":
            self._emit(Ignore("no-resume-pending", f"{st.id} is {st.state}", stream=st.id))
            return
        self._run.fire(st, "reopen")
        st.resumed = True
        st.held = None  # the server let go: a later refusal is a new hold

    def _on_resume_refused(self, e: ev.ResumeRefused) -> None:
        st = self._stream(e.stream)
        verdict = self.config.resume_classifier.classify(e.result())
        what = f"resume GET -> {e.result().describe()} ({verdict.rule}: {verdict.outcome.value})"
        if verdict.outcome is OutcomeClass.TERMINAL and verdict.scope == "session":
            # a request carrying the session id says the session is gone, whether or not
            # a resume was pending on this stream ("404 on any request")
            self._expire_session(what)
            return
        if st.state != "resuming":
            self._emit(Ignore("no-resume-pending", f"{st.id} is {st.state}", stream=st.id))
            return
        self._run.fire(st, "lose")
        if verdict.outcome is OutcomeClass.TERMINAL:
            self._run.kill(
                st,
                "give_up",
                Cause(
                    ResumeBudgetSpentError,
                    f"{st.id} cannot be resumed ({what})",
                    None,
                    (what,),
                    "not-resumable",
                ),
            )
        else:
            self._schedule_or_give_up(st, what, verdict.retry_after, verdict.patient)

    def _on_answer(self, e: ev.UserAnswered) -> None:
        rec = self._requests.get(e.key)
        if rec is None:
            raise GuardUsageError(f"answer for {e.key!r}, which was never presented")
        if rec.state in LIVENESS.terminal:
            self._emit(
                Ignore("answer-after-death", f"{e.key!r} is {rec.state}; answer dropped", key=e.key)
            )
            return
        if rec.state != "presented":
            self._emit(Ignore("already-answered", f"{e.key!r} is {rec.state}", key=e.key))
            return
        if not isinstance(e.answer, Mapping):
            raise GuardUsageError(f"answer for {e.key!r} is not a JSON object")
        rec.answer, rec.answer_text = e.answer, None
        self._run.fire(rec, "answer")
        self._submit(rec, 0.0)

    def _on_outcome(self, e: ev.SubmissionOutcome) -> None:
        rec = self._requests.get(e.key)
        verdict = self.config.classifier.classify(e.result)
        seen = f"{e.result.describe()} -> {verdict.rule} ({verdict.outcome.value})"
        if verdict.outcome is OutcomeClass.TERMINAL and verdict.scope == "session":
            self._expire_session(seen)  # whatever the request's state: the session is gone
            return
        if rec is None or rec.state != "submitting":
            self._emit(
                Ignore(
                    "no-submission-pending",
                    f"{e.key!r} is {rec.state if rec else 'unknown'}",
                    key=e.key,
                )
            )
            return
        evidence = (f"answer submitted, attempt {rec.attempts}", seen)
        if verdict.outcome is OutcomeClass.ACCEPTED:
            self._run.fire(rec, "accept")
            if self._durable:
                self._dirty_requests.add(rec.key)
            if self._origin_of(rec) is None:
                self._end(rec, None)
        elif verdict.outcome is OutcomeClass.TERMINAL:
            self._run.kill(
                rec,
                "reject",
                Cause(
                    UnknownPendingRequestError,
                    f"answer for {e.key!r} rejected as terminal: {seen}",
                    e.key,
                    evidence,
                ),
            )
        elif rec.attempts < self.config.max_submit_attempts:
            self._run.fire(rec, "retry")
            self._submit(rec, self.config.resubmit_delay(rec.attempts, verdict.retry_after))
        else:
            self._run.kill(
                rec,
                "reject",
                Cause(
                    SubmissionFailedError,
                    f"answer for {e.key!r} failed {rec.attempts} times (last: {seen})",
                    e.key,
                    evidence,
                ),
            )

    def _on_origin_response(self, e: ev.OriginResponse) -> None:
        st = self._stream(e.stream)
        if st.origin is None or st.state in TRANSPORT.terminal:
            self._emit(Ignore("no-origin-pending", f"{st.id} is {st.state}", stream=st.id))
            return
        self._run.broadcast("origin_response", st)

    def _on_session_expired(self, e: ev.SessionExpired) -> None:
        self._expire_session("HTTP 404 on the session")

    def _on_abandoned(self, e: ev.StreamAbandoned) -> None:
        st = self._stream(e.stream)
        if st.state in TRANSPORT.terminal:
            self._emit(Ignore("stream-terminal", f"{st.id} is {st.state}", stream=st.id))
            return
        too_large = e.reason == EventTooLargeError.reason
        error = EventTooLargeError if too_large else StreamAbandonedError
        what = e.detail or "the application stopped following it"
        self._run.kill(
            st, "abandon", Cause(error, f"{st.id} abandoned ({what})", None, (what,), e.reason)
        )

    def _on_asserted(self, e: ev.LivenessAsserted) -> None:
        rec = self._requests.get(e.key)
        if rec is None or rec.state in LIVENESS.terminal:
            self._emit(Ignore("assertion-unknown-request", f"{e.key!r}", key=e.key))
            return
        rec.asserted = True

    # ---------------------------------------------------------------- machinery

    def _emit(self, action: Action) -> None:
        self._out.append(action)
        if self._durable and isinstance(action, (Present, Submit)):
            key = action.key
            if key in self._requests:  # an interactive request (idempotent ones are not kept)
                self._dirty_requests.add(key)
                if type(action) is Present:
                    params = None if action.params is None else canonical_json(action.params)
                    self._questions.append(Question(key, action.method, params))

    def _stream(self, sid: str) -> _Stream:
        st = self._streams.get(sid)
        if st is None:
            raise GuardUsageError(f"unknown stream {sid!r}")
        return st

    def _advance(self, st: _Stream, event_id: str, replayed: bool | None = None) -> bool:
        """Whether ``event_id`` is one the stream never carried; such an id is the cursor
        now, and it is progress (the budget of resumes without progress resets).

        A resumed connection is a replay stretch until its first new id (``stalls`` counts
        the resumes since the last one): its ids are checked against the whole history.
        After that, and on a connection that is not a resumption, the stretch is live: ids
        are checked against the window only (see :mod:`fsm.sse.history`), and a loss checks the
        cursor against the rest (:meth:`_on_lost`). An event marked ``replayed`` is always
        checked against everything."""
        history = st.history
        if st.stalls or replayed:
            if not history.record(event_id):
                return False
            st.stalls = 0
        elif not history.record_live(event_id):
            return False
        st.cursor = event_id
        return True

    def _track(self, key: RequestKey, st: _Stream, msg: ServerRequest, now: float) -> _Request:
        rec = _Request(
            key, st.id, msg.method, params_digest(msg.params), now + self.config.ttl(msg.method)
        )
        self._requests[key] = rec
        self._live_requests += 1
        st.requests.append(key)
        return rec

    def _submit(self, rec: _Request, delay: float, trigger: str = "submit") -> None:
        """Fire ``trigger`` (``submit``, or ``resubmit`` of an already-submitted answer)
        and POST the stored answer: the user is never asked again."""
        answer = rec.stored_answer()
        self._run.fire(rec, trigger)
        rec.attempts += 1
        self._emit(Submit(rec.key, answer, rec.attempts, delay))

    def _schedule_or_give_up(
        self, st: _Stream, what: str, retry_after: float | None = None, patient: bool = False
    ) -> None:
        """After a loss (or a transient resume failure): wait and resume, or end the
        stream when resuming is unsafe or its budgets are spent. ``retry_after``: the
        server's ``Retry-After`` in seconds, which overrides the backoff. ``patient``: the
        server refused the resume because it still holds the old connection (see
        :meth:`_patience`)."""
        cfg = self.config
        delay: float | None = None
        if patient:
            st.stalls = max(0, st.stalls - 1)  # refused, not resumed: no verdict on progress
        refusal = _resume_refusal(st, cfg)
        if refusal is None and patient:
            delay, refusal = self._patience(st, retry_after)
        if refusal is None:
            self._run.fire(st, "schedule")
            if delay is None:
                if retry_after is None:
                    delay = cfg.backoff(st.stalls, st.retry_ms)
                else:
                    delay = cfg.server_wait(retry_after)
            self._emit(Wait(st.id, max(0.0, delay)))
            return
        message, evidence, reason = refusal
        self._run.kill(
            st,
            "give_up",
            Cause(
                ResumeBudgetSpentError,
                f"{st.id} lost ({what}) {message}",
                None,
                (what, *evidence),
                reason,
            ),
        )

    def _patience(
        self, st: _Stream, retry_after: float | None
    ) -> tuple[float | None, tuple[str, tuple[str, ...], str] | None]:
        """The wait after a patient refusal, or why the patience is spent. What it spent
        is the larger of the clock since the first such refusal and the waits it asked
        for since: the clock alone would let a model (or a stopped clock) wait forever,
        the waits alone would not count the time the refused requests took."""
        cfg = self.config
        now = self._clock()
        since, waited, refusals = st.held if st.held is not None else (now, 0.0, 0)
        spent = max(now - since, waited)
        left = cfg.resume_patience_s - spent
        if left > 0 and not math.isnan(left):
            delay = min(cfg.patient_delay(refusals, st.retry_ms, retry_after), left)
            st.held = (since, waited + delay, refusals + 1)
            return delay, None
        return None, (
            f"after {refusals + 1} refusals in {spent:g} s while the server still held the "
            f"old connection (resume_patience_s={cfg.resume_patience_s:g})",
            (
                f"{refusals + 1} refusals of a server holding the old connection",
                f"cursor {st.cursor}",
            ),
            "resume-patience-spent",
        )

    def _expire_session(self, what: str) -> None:
        self.expired = True
        self._session_dirty = self._durable
        message = f"session {self.session!r} expired ({what})"

        def cause(inst: _Stream | _Request) -> Cause:
            key = inst.key if isinstance(inst, _Request) else None
            return Cause(SessionExpiredError, message, key, (what,))

        self._run.broadcast("session_expired", None, cause)

    def _origin_of(self, rec: _Request) -> RequestId | None:
        st = self._streams.get(rec.stream)
        return st.origin if st is not None else None

    def _interaction(self, inst: _Stream | _Request) -> str:
        if isinstance(inst, _Stream):
            return inst.id
        return f"{inst.stream}#{inst.key[1]!r}"

    # -- what the product's rows mean here (fsm.machines.product applies them)

    def _members(
        self, machine: str, scope: Scope, anchor: _Stream | _Request | None
    ) -> list[_Stream | _Request]:
        """The instances of ``machine`` a row reaches: in the session, or of the origin
        of ``anchor``'s stream (none for the standalone stream, which has no origin)."""
        if scope == "session":
            if machine == TRANSPORT.name:
                return list(self._streams.values())
            return list(self._requests.values())
        st = (
            anchor
            if isinstance(anchor, _Stream) or anchor is None
            else self._streams.get(anchor.stream)
        )
        if st is None or st.origin is None:
            return []
        if machine == TRANSPORT.name:
            return [st]
        reqs = (self._requests.get(k) for k in st.requests)
        return [r for r in reqs if r is not None]

    def _on_terminal(self, inst: _Stream | _Request, old: str, trigger: str) -> None:
        """An instance ended: tombstone a request (and withdraw its prompt), and end the
        interaction it is the last word on."""
        new = inst.state
        if self._durable:
            if isinstance(inst, _Request):
                self._dirty_requests.add(inst.key)
            else:
                self._dirty_streams.add(inst.id)
        if isinstance(inst, _Request):
            self._live_requests -= 1
            self._tombstones[inst.key] = None
            self._evict_tombstones()
            if old == "presented":
                reason = inst.cause.reason or inst.cause.error.reason if inst.cause else trigger
                self._emit(Withdraw(inst.key, reason))
            if self._origin_of(inst) is None and new != "resolved":
                error = RequestCancelledError if new == "cancelled" else InteractionFailed
                self._end(
                    inst,
                    inst.cause or Cause(error, f"{inst.key!r} {new} ({trigger})", inst.key, ()),
                )
        else:
            self._end(
                inst,
                None
                if new == "done"
                else inst.cause or Cause(ResumeBudgetSpentError, f"{inst.id} dead", None, ()),
            )

    def _end(self, inst: _Stream | _Request, cause: Cause | None) -> None:
        """Emit the one outcome of an interaction (a no-op if it already ended)."""
        if inst.ended:
            return
        inst.ended = True
        interaction = self._interaction(inst)
        stream = inst.id if isinstance(inst, _Stream) else inst.stream
        if cause is None:
            self._emit(Complete(interaction))
        else:
            self._emit(Fail(interaction, cause.build(stream)))

    def _evict_tombstones(self) -> None:
        while len(self._tombstones) > self.config.max_tombstones:
            key, _ = self._tombstones.popitem(last=False)
            if self._durable:
                self._forgotten.append(key)
            rec = self._requests.pop(key, None)
            if rec is not None:
                st = self._streams.get(rec.stream)
                if st is not None and key in st.requests:
                    st.requests.remove(key)

    def _evict_streams(self) -> None:
        """Forget terminal streams (oldest first) to make room for a new one within
        ``max_streams``, and beyond ``max_ended_streams``."""
        ended = [s.id for s in self._streams.values() if s.state in TRANSPORT.terminal]
        keep = self.config.max_ended_streams
        excess = max(
            len(self._streams) + 1 - self.config.max_streams,
            0 if keep is None else len(ended) - keep,
        )
        for victim in ended[: max(excess, 0)]:
            del self._streams[victim]
            if self._durable:
                self._dropped.append(victim)


def rename_snapshot(snap: GuardSnapshot, keys: Mapping[RequestKey, RequestKey]) -> GuardSnapshot:
    """The :meth:`Guard.snapshot` a guard would have taken had every request key ``k`` of
    ``keys`` been ``keys[k]`` all along (keys not in ``keys`` are kept): each record
    renamed by a :class:`KeyRenaming` (event ids are not renamed), the requests in the
    guard's order of their new keys (:meth:`GuardSnapshot.rename`). ``keys`` must be
    one-to-one.

    The guard decides the same, up to the renaming, in the renamed state: no decision
    depends on a key's value (a model checker's symmetry reduction rests on that, and
    checks it on the full space of its models)."""
    return snap.rename(KeyRenaming(keys)) if keys else snap


def _resume_refusal(st: _Stream, cfg: GuardConfig) -> tuple[str, tuple[str, ...], str] | None:
    """Why ``st`` must not be resumed now, as ``(message, evidence, reason)``, or ``None``."""
    if st.cursor is None and st.history.recent:
        window = len(st.history.recent)
        return (
            f"after {len(st.history)} event ids: the last {window} all repeated older ones, "
            "so the newest new one is not known",
            (f"{window} event ids repeated on a live connection", "event ids must be unique"),
            "cursor-unknown",
        )
    if st.cursor is None:
        return ("before any event id: nothing to resume from", ("no event id seen",), "no-cursor")
    if st.history.full:
        return (
            f"after {len(st.history)} event ids: its history is full, so a replay could not "
            "be told from new events",
            (
                f"max_seen_event_ids={cfg.max_seen_event_ids}",
                f"max_event_history={cfg.max_event_history}",
            ),
            "history-full",
        )
    if st.stalls >= cfg.max_resumes_without_progress:
        return (
            f"after {st.stalls} resumes without progress",
            (f"{st.stalls} resumes without an event id it never carried", f"cursor {st.cursor}"),
            "resume-budget-spent",
        )
    if cfg.max_resumes_per_stream is not None and st.resumes >= cfg.max_resumes_per_stream:
        return (
            f"after {st.resumes} resumes in all (max_resumes_per_stream)",
            (f"{st.resumes} resumes", f"cursor {st.cursor}"),
            "resume-cap",
        )
    return None


def _history(config: GuardConfig, frozen: tuple[Any, ...] | None) -> EventHistory:
    window, cap, cls = config.max_seen_event_ids, config.max_event_history, config.event_history
    return cls(window, cap) if not frozen else cls.thaw(window, cap, frozen)


def _as_replay(item: ev.SseEvent) -> ev.SseEvent:
    """Events of a :class:`~fsm.events.ReplayBatch` are replays unless marked otherwise."""
    if item.replayed is not None:
        return item
    return ev.SseEvent(item.stream, item.data, item.event_id, item.retry_ms, True)


def _key_order(item: tuple[RequestKey, object]) -> tuple[str, str, str]:
    session, rid = item[0]
    return (session, type(rid).__name__, str(rid).rjust(20))


def _record_order(rec: RequestRecord) -> tuple[str, str, str]:
    return _key_order((rec.key, None))


_R = TypeVar("_R", StreamRecord, RequestRecord)


def _record(cls: type[_R], value: tuple[Any, ...]) -> _R:
    """``value`` as a ``cls`` record (already one, or the plain tuple of its fields; a
    tuple without the trailing fields that have defaults, as older snapshots were, gets
    those defaults)."""
    if type(value) is cls:
        return value
    return cls._make(value) if len(value) == len(cls._fields) else cls(*value)
