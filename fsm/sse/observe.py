"""Turn a guard's inputs and decisions into :mod:`fsm.properties` observations.

:class:`ObservedGuard` wraps a :class:`~fsm.sse.guard.Guard`: ``feed`` returns the same
actions, and also records what the client was told and what it did, as observations
checked online by a :class:`~fsm.properties.Monitor` and kept (bounded) for an event log
(:mod:`fsm.trace`). The hypothesis stateful tests, the conformance kit's reference
client and the SDK adapter's logs all come through here, so they speak one vocabulary.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection

from fsm import actions as act
from fsm import events as ev
from fsm import properties as P
from fsm.messages import Notification, ServerRequest, parse
from fsm.outcomes import Classifier, OutcomeClass
from fsm.sse.guard import Guard, GuardConfig, LivenessOracle, default_oracle


class ObservedGuard:
    """A guard whose every decision is observed and checked against P1-P7.

    ``log_limit`` bounds the kept observations (oldest dropped first); the monitor still
    sees every one. ``on_observation`` is called for each, e.g. to write JSON Lines.
    ``retain`` bounds the monitor's memory to that many ended interactions (see
    :class:`~fsm.properties.Monitor`; ``None``: remember everything): a long-lived
    session's steps then cost the same after a thousand tool calls as after one.
    """

    def __init__(
        self,
        guard: Guard,
        *,
        budgets: P.Budgets | None = None,
        log_limit: int = 100_000,
        retain: int | None = 256,
        on_observation: Callable[[P.Observation, float], None] | None = None,
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
        self._on_observation = on_observation

    @property
    def violations(self) -> list[tuple[int, P.Observation, P.Violation]]:
        """Every violation seen so far: (observation number, observation, violation)."""
        return self.monitor.violations

    def observe(self, obs: P.Observation) -> None:
        """Record one observation (also usable for facts the guard never sees)."""
        t = self.guard.now()
        self.log.append((obs, t))
        self.monitor.observe(obs)
        if self._on_observation is not None:
            self._on_observation(obs, t)

    def feed(self, event: ev.Event) -> tuple[act.Action, ...]:
        """``guard.feed(event)``, observed."""
        for obs in self._told(event):
            self.observe(obs)
        actions = self.guard.feed(event)
        for action in actions:
            for obs in self._did(action):
                self.observe(obs)
        return actions

    def _told(self, event: ev.Event) -> list[P.Observation]:
        g = self.guard
        return told(
            event,
            session=g.session,
            now=g.now(),
            replayed=g.connection_resumed,
            oracle=g.config.oracle,
            idempotent=g.config.idempotent_methods,
            classifier=g.config.classifier,
            resume_classifier=g.config.resume_classifier,
        )

    def _did(self, action: act.Action) -> list[P.Observation]:
        return did(action, now=self.guard.now())


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
) -> list[P.Observation]:
    """What ``event`` tells a client, as observations. ``replayed(stream)`` says whether
    the stream's current connection is a resumed one (for events that do not say);
    ``classifier`` and ``resume_classifier`` judge answer POST and resume GET results as
    the guard does (a session-scoped terminal verdict is the session gone)."""
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
            )
        ]
    if isinstance(event, ev.StreamOpened):
        return [P.Began(event.stream)] if event.origin is not None else []
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
            out.append(
                P.Delivered(
                    (session, msg.id),
                    event.stream,
                    now,
                    replayed=again,
                    asserted=oracle(msg, again),
                    interactive=msg.method not in idempotent,
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
    """What a client's ``action`` shows it doing, as observations."""
    if isinstance(action, act.Present):
        return [P.Presented(action.key, now)]
    if isinstance(action, act.Withdraw):
        return [P.DeclaredDead(action.key)]
    if isinstance(action, act.Submit):
        return [P.Submitted(action.key, action.answer)]
    if isinstance(action, act.Resume):
        return [P.Resumed(action.stream, action.cursor)]
    if isinstance(action, act.Fail):
        dead = [P.DeclaredDead(action.error.key)] if action.error.key is not None else []
        return [*dead, P.Ended(action.interaction, "failed", action.error.reason)]
    if isinstance(action, act.Complete):
        return [P.Ended(action.interaction, "completed")]
    return []
