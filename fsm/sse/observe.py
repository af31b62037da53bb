"""Turn a guard's inputs and decisions into :mod:`fsm.properties` observations, and write
them as an event log (:mod:`fsm.trace`).

:class:`ObservedGuard` wraps a :class:`~fsm.sse.guard.Guard`: ``feed`` returns the same
actions, and also records what the client was told and what it did, as observations
checked online by a :class:`~fsm.properties.Monitor` and kept (bounded) for an event log.
It is how a client that embeds a bare ``Guard`` logs it (``docs/adapter.md``, "Event
log"); the SDK adapters, the gateway, the hypothesis stateful tests and the conformance
kit's reference client all come through here, so they speak one vocabulary.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Collection
from typing import IO

from fsm import actions as act
from fsm import events as ev
from fsm import properties as P
from fsm import trace
from fsm.messages import Notification, ServerRequest, parse
from fsm.outcomes import Classifier, OutcomeClass
from fsm.questions import QuestionBook
from fsm.sse.guard import Guard, GuardConfig, LivenessOracle, default_oracle


class ObservedGuard:
    """A guard whose every decision is observed, checked against P1-P7 and logged.

    Feed it instead of the guard: ``feed(event)`` returns what ``guard.feed(event)``
    returns. To log a bare guard to ``sink``, a text file open for writing::

        observed = ObservedGuard(Guard(clock=time.monotonic), sink=sink)
        actions = observed.feed(event)  # for every event, as guard.feed
        text = observed.event_log()  # the kept observations, the same JSON Lines

    The log is :mod:`fsm.trace` JSON Lines (``python -m fsm audit`` reads it): ``sink``
    receives the header at construction and each record as it is observed (nothing is
    flushed or closed here); :meth:`event_log` renders the kept observations. Every record
    carries ``t`` (the guard's clock) and ``wall`` (UTC, derived from ``t`` and one
    reading of ``wall_clock`` at construction: :attr:`timebase`). Records come in the
    order observed, and the observations of one ``feed`` share one clock reading for what
    the client was told and one for what it did, so ``t`` and ``wall`` never decrease
    along a log when the guard's clock is monotonic.

    ``log_limit`` bounds the kept observations (oldest dropped first); the monitor and
    ``sink`` still see every one. ``on_observation(observation, t)`` is called for each.
    ``retain`` bounds the monitor's memory to that many ended interactions (see
    :class:`~fsm.properties.Monitor`; ``None``: remember everything): a long-lived
    session's steps then cost the same after a thousand tool calls as after one.
    ``budgets`` default to the guard's configuration.
    """

    def __init__(
        self,
        guard: Guard,
        *,
        budgets: P.Budgets | None = None,
        log_limit: int = 100_000,
        retain: int | None = 256,
        on_observation: Callable[[P.Observation, float], None] | None = None,
        sink: IO[str] | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.guard = guard
        cfg = guard.config
        self.monitor = P.Monitor(
            budgets
            or P.Budgets(
                ttl=cfg.request_ttl_s,
                max_resumes_without_progress=cfg.max_resumes_without_progress,
                max_submissions=2 * cfg.max_submit_attempts,
            ),
            retain=retain,
        )
        self.log: deque[tuple[P.Observation, float]] = deque(maxlen=log_limit)
        """The kept ``(observation, t)`` pairs, oldest first (at most ``log_limit``)."""
        self.timebase = trace.Timebase.start(guard.now(), wall_clock)
        """When the log began, on the guard's clock and on the wall clock."""
        self._held: set[str] = set()
        """Streams whose last resume was refused by a server still holding their old
        connection (a patient refusal): their next resume is observed ``held``."""
        self.questions = QuestionBook()
        """Which key first asked each question of each tool call (re-asks, P2 and P4)."""
        self._on_observation = on_observation
        self._sink = sink
        if sink is not None:
            sink.write(trace.header_line(self.timebase) + "\n")

    @property
    def violations(self) -> list[tuple[int, P.Observation, P.Violation]]:
        """Every violation seen so far: (observation number, observation, violation)."""
        return self.monitor.violations

    def observe(self, obs: P.Observation, t: float | None = None) -> None:
        """Record one observation (also usable for facts the guard never sees) at ``t``
        (default: the guard's clock now). An observation with a time of its own
        (``Delivered``, ``Presented``) should carry the same ``t``."""
        if t is None:
            t = self.guard.now()
        self.log.append((obs, t))
        self.monitor.observe(obs)
        if self._sink is not None:
            self._sink.write(trace.record_line(obs, t, self.timebase) + "\n")
        if self._on_observation is not None:
            self._on_observation(obs, t)

    def feed(self, event: ev.Event) -> tuple[act.Action, ...]:
        """``guard.feed(event)``, observed."""
        now = self.guard.now()
        told = self._told(event, now)
        self._note_hold(event)
        actions = self.guard.feed(event)
        if isinstance(event, ev.UserAnswered) and any(
            isinstance(a, act.Ignore) and a.reason == "already-answered" for a in actions
        ):
            # the guard acts on the first answer to a request and ignores later ones: a
            # later one is not the answer the client submits (P4 judges that one)
            told = [obs for obs in told if not isinstance(obs, P.Answered)]
        for obs in told:
            self.observe(obs, now)
        if actions:
            now = self.guard.now()
            for action in actions:
                for obs in did(action, now=now):
                    if isinstance(obs, P.Resumed) and obs.stream in self._held:
                        obs = P.Resumed(obs.stream, obs.cursor, held=True)
                    self.observe(obs, now)
        return actions

    def _note_hold(self, event: ev.Event) -> None:
        """Whether ``event`` leaves its stream held: a resume refused as the guard's
        resume classifier says a server still holding the old connection refuses it."""
        if isinstance(event, ev.ResumeRefused):
            verdict = self.guard.config.resume_classifier.classify(event.result())
            if verdict.patient:
                self._held.add(event.stream)
            else:
                self._held.discard(event.stream)
        elif isinstance(event, ev.StreamResumed | ev.StreamLost):
            self._held.discard(event.stream)

    def event_log(self) -> str:
        """The kept observations as :mod:`fsm.trace` JSON Lines: the header, then one
        record per observation with ``t`` and ``wall``. Past ``log_limit`` observations
        the oldest are missing (``sink`` has them all)."""
        return trace.dumps(self.log, self.timebase)

    def _told(self, event: ev.Event, now: float) -> list[P.Observation]:
        g = self.guard
        return told(
            event,
            session=g.session,
            now=now,
            replayed=g.connection_resumed,
            oracle=g.config.oracle,
            idempotent=g.config.idempotent_methods,
            classifier=g.config.classifier,
            resume_classifier=g.config.resume_classifier,
            questions=self.questions,
        )


_DEFAULTS = GuardConfig()


def told(
    event: ev.Event,
    *,
    session: str,
    now: float,
    replayed: Callable[[str], bool],
    oracle: LivenessOracle = default_oracle,
    idempotent: Collection[str] = _DEFAULTS.idempotent_methods,
    classifier: Classifier = _DEFAULTS.classifier,
    resume_classifier: Classifier = _DEFAULTS.resume_classifier,
    questions: QuestionBook | None = None,
) -> list[P.Observation]:
    """What ``event`` tells a client, as observations. ``replayed(stream)`` says whether
    the stream's current connection is a resumed one (for events that do not say);
    ``classifier`` and ``resume_classifier`` judge answer POST and resume GET results as
    the guard does (a session-scoped terminal verdict is the session gone).
    ``questions``: the book of each tool call's questions, which names the first asker of
    a delivery's question (``Delivered.question``); without it none is named."""
    if isinstance(event, ev.ReplayBatch):
        return [
            obs
            for item in event.events
            for obs in told(
                ev.SseEvent(
                    item.stream,
                    item.data,
                    item.event_id,
                    item.retry_ms,
                    True if item.replayed is None else item.replayed,
                ),
                session=session,
                now=now,
                replayed=replayed,
                oracle=oracle,
                idempotent=idempotent,
                classifier=classifier,
                resume_classifier=resume_classifier,
                questions=questions,
            )
        ]
    if isinstance(event, ev.StreamOpened):
        if event.origin is None:
            return []
        if questions is not None:
            questions.open(event.stream)
        return [P.Began(event.stream)]
    if isinstance(event, ev.SessionStarted):
        return [P.SessionBegan(event.session)]
    if isinstance(event, ev.SseEvent):
        out: list[P.Observation] = []
        if event.event_id is not None:
            out.append(P.EventSeen(event.stream, event.event_id))
        if event.data in (None, "", b""):
            return out
        msg = parse(event.data)
        again = replayed(event.stream) if event.replayed is None else event.replayed
        if isinstance(msg, ServerRequest):
            key = (session, msg.id)
            interactive = msg.method not in idempotent
            first = None
            if questions is not None and interactive:
                first = questions.first(event.stream, msg.method, msg.params, key)
            out.append(
                P.Delivered(
                    key,
                    event.stream,
                    now,
                    replayed=again,
                    asserted=oracle(msg, again),
                    interactive=interactive,
                    question=first,
                )
            )
        elif isinstance(msg, Notification) and msg.cancelled_id is not None:
            out.append(P.Cancelled((session, msg.cancelled_id)))
        return out
    if isinstance(event, ev.UserAnswered):
        return [P.Answered(event.key, event.answer)]
    if isinstance(event, ev.SubmissionOutcome):
        verdict = classifier.classify(event.result)
        if verdict.outcome is OutcomeClass.TERMINAL:
            return [P.Rejected(event.key, session=verdict.scope == "session")]
        return []
    if isinstance(event, ev.ResumeRefused):
        verdict = resume_classifier.classify(event.result())
        gone = verdict.outcome is OutcomeClass.TERMINAL and verdict.scope == "session"
        return [P.SessionGone()] if gone else []
    if isinstance(event, ev.SessionExpired):
        return [P.SessionGone()]
    return []


def did(action: act.Action, *, now: float) -> list[P.Observation]:
    """What a client's ``action`` shows it doing, as observations. A ``Fail`` is an
    ``Ended`` with outcome ``failed``, or ``closed`` when its reason is
    :data:`fsm.events.SESSION_CLOSED` (the client closed the session: no failure)."""
    if isinstance(action, act.Present):
        return [P.Presented(action.key, now)]
    if isinstance(action, act.Withdraw):
        return [P.DeclaredDead(action.key)]
    if isinstance(action, act.Submit):
        return [P.Submitted(action.key, action.answer)]
    if isinstance(action, act.Resume):
        return [P.Resumed(action.stream, action.cursor)]
    if isinstance(action, act.Fail):
        reason = action.error.reason
        dead = [P.DeclaredDead(action.error.key)] if action.error.key is not None else []
        outcome = "closed" if reason == ev.SESSION_CLOSED else "failed"
        return [*dead, P.Ended(action.interaction, outcome, reason)]
    if isinstance(action, act.Complete):
        return [P.Ended(action.interaction, "completed")]
    return []
