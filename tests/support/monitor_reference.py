"""The P1-P7 rules as they were written over the immutable state, frozen here as the
reference the shared in-place implementation (:class:`fsm.properties.Facts`) is compared
with: :func:`step`, :func:`forget` and the online :class:`Monitor` exactly as
:mod:`fsm.properties` had them, each observation copying what it changed; and the
hypothesis strategies of the random observations and budgets both are run on. Tests only.
It changes only with a deliberate change of the rules, in the same commit: a refactoring
of :mod:`fsm.properties` that needs it changed has changed a verdict.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from hypothesis import strategies as st

from fsm import properties as P
from fsm.errors import RequestKey
from fsm.properties import (
    Answered,
    Began,
    Budgets,
    Cancelled,
    DeclaredDead,
    Delivered,
    Ended,
    EventSeen,
    FrozenMap,
    MonitorState,
    Observation,
    Presented,
    Rejected,
    Resumed,
    SessionBegan,
    SessionGone,
    Submitted,
    Violation,
)

DEFAULT = Budgets()
_K = TypeVar("_K")


def _answer_id(answer: Mapping[str, Any]) -> str:
    return json.dumps(answer, sort_keys=True, default=repr)


def _counted(counts: FrozenMap[_K, int], key: _K, limit: int) -> tuple[int, FrozenMap[_K, int]]:
    """``key`` counted once more: the new count, and ``counts`` holding it capped at one
    past ``limit`` (all a verdict needs, so a counter stays bounded)."""
    count = counts.get(key, 0) + 1
    return count, counts.set(key, min(count, limit + 1))


def step(
    state: MonitorState, obs: Observation, budgets: Budgets = DEFAULT
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
        s = s._replace(dead=s.dead | {obs.key})
    elif isinstance(obs, Rejected):
        if obs.session:
            s = _session_gone(s)
        elif obs.key not in s.dead and s.answers.get(obs.key) is not None:
            stream = s.stream_of.get(obs.key)
            ends = {stream} if stream is not None and stream in s.begun else set()
            s = s._replace(dead=s.dead | {obs.key}, no_resume=s.no_resume | ends)
    elif isinstance(obs, SessionGone):
        s = _session_gone(s)
    elif isinstance(obs, SessionBegan):
        if s.session_gone:
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
            count, submissions = _counted(s.submissions, obs.key, budgets.max_submissions)
            if count > budgets.max_submissions:
                bad.append(Violation("L1", f"{obs.key!r} submitted {count} times"))
            s = s._replace(submissions=submissions)
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
        if budgets.counters and not obs.held:  # a resume a held server refused is no stall
            limit = budgets.max_resumes_without_progress
            count, stalls = _counted(s.stalls, obs.stream, limit)
            if count > limit:
                bad.append(Violation("L1", f"{obs.stream} resumed {count} times without progress"))
            s = s._replace(stalls=stalls)
    elif isinstance(obs, Began):
        s = s._replace(begun=s.begun | {obs.interaction})
    elif isinstance(obs, Ended):
        if obs.interaction in s.ended:
            bad.append(Violation("P5", f"{obs.interaction} ended twice"))
        s = s._replace(ended=s.ended | {obs.interaction}, begun=s.begun | {obs.interaction})
    if bad:
        s = s._replace(violated=s.violated | {v.name for v in bad})
    return s, tuple(bad)


def _session_gone(s: MonitorState) -> MonitorState:
    streams = {*s.stream_of.values(), *s.newest}
    return s._replace(session_gone=True, no_resume=s.no_resume | streams)


def forget(state: MonitorState, interaction: str) -> MonitorState:
    """``state`` without what it knows of ``interaction`` and of the requests delivered on
    its stream."""
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


def unfinished(state: MonitorState) -> tuple[Violation, ...]:
    """P5 at quiescence: interactions that began and never ended."""
    return tuple(Violation("P5", f"{i} never ended") for i in sorted(state.begun - state.ended))


class Monitor:
    """The online monitor as it was: :func:`step` per observation, forgetting the oldest
    ended interaction past ``retain`` (and telling ``on_forget`` which interaction and
    which request keys delivered on its stream, before they are forgotten)."""

    def __init__(
        self,
        budgets: Budgets = DEFAULT,
        *,
        retain: int | None = None,
        on_forget: Callable[[str, set[RequestKey]], None] | None = None,
    ) -> None:
        self.budgets = budgets
        self.retain = retain
        self.on_forget = on_forget
        self.state = MonitorState()
        self.violations: list[tuple[int, Observation, Violation]] = []
        self.count = 0
        self._ended: list[str] = []
        """Ended interactions still remembered, oldest first."""

    def observe(self, obs: Observation) -> tuple[Violation, ...]:
        self.state, bad = step(self.state, obs, self.budgets)
        self.count += 1
        self.violations += [(self.count, obs, v) for v in bad]
        if self.retain is not None and isinstance(obs, Ended):
            if obs.interaction not in self._ended:
                self._ended.append(obs.interaction)
            past = max(len(self._ended) - self.retain, 0)
            forgotten, self._ended = self._ended[:past], self._ended[past:]
            for interaction in forgotten:
                if self.on_forget is not None:
                    keys = {k for k, on in self.state.stream_of.items() if on == interaction}
                    self.on_forget(interaction, keys)
                self.state = forget(self.state, interaction)
        return bad

    def finish(self) -> tuple[Violation, ...]:
        bad = unfinished(self.state)
        self.violations += [(self.count, Began(v.why), v) for v in bad]
        return bad


# ----------------------------------------------------------------- random observations

SESSIONS = ("s1", "s2")
KEYS = st.tuples(st.sampled_from(SESSIONS), st.sampled_from([1, 2, 3, "x"]))
STREAMS = st.sampled_from(["post:1", "post:2", "post:3", "get", "get/2"])
INTERACTIONS = st.sampled_from(["post:1", "post:2", "post:3", "get", "get/2", "get#1"])
EVENT_IDS = st.sampled_from(["e1", "e2", "e3"])
TIMES = st.sampled_from([0.0, 1.0, 30.0, 61.0, 130.0])
ANSWERS = st.sampled_from([{"action": "accept"}, {"action": "decline"}])

OBSERVATIONS: st.SearchStrategy[P.Observation] = st.one_of(
    st.builds(P.Delivered, KEYS, STREAMS, TIMES, st.booleans(), st.booleans(), st.booleans()),
    st.builds(P.Cancelled, KEYS),
    st.builds(P.Rejected, KEYS, st.booleans()),
    st.just(P.SessionGone()),
    st.builds(P.SessionBegan, st.sampled_from(SESSIONS)),
    st.builds(P.EventSeen, STREAMS, EVENT_IDS),
    st.builds(P.Answered, KEYS, ANSWERS),
    st.builds(P.Presented, KEYS, TIMES),
    st.builds(P.DeclaredDead, KEYS),
    st.builds(P.Submitted, KEYS, ANSWERS),
    st.builds(P.Resumed, STREAMS, EVENT_IDS, st.booleans()),
    st.builds(P.Began, INTERACTIONS),
    st.builds(P.Ended, INTERACTIONS, st.sampled_from(["completed", "failed"])),
)
BUDGETS = st.builds(
    P.Budgets,
    ttl=st.sampled_from([10.0, 60.0]),
    max_resumes_without_progress=st.integers(0, 3),
    max_submissions=st.integers(0, 3),
    counters=st.booleans(),
)
