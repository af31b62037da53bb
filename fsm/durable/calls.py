"""The write-ahead hand-off for the one-call deciders: an MRTR call and a task.

:class:`DurableCall` wraps a :class:`~fsm.mrtr.call.MrtrCall` or a
:class:`~fsm.tasks.task.TaskCall` (the decider itself is unchanged) and puts one
:class:`~fsm.actions.Persist` first among the actions of every ``feed`` that changed what
must survive a crash. Its delta is the call's whole :class:`CallRecord` (a call's record is
bounded by the decider's own bounds), so a store keeps one row per call and writing a
delta replaces it. Since ``Persist`` comes first, a question is recorded (with its text)
before its ``Present``, an answer before the ``Retry``/``Update`` that carries it, and the
call's end before its ``Complete``/``Fail``.

What writes: a question shown, an answer, a round's new ``requestState``, an update sent or
settled, a key withdrawn, the task created, the call's end. What never writes: a task poll
that changed nothing but the poll counters and pacing, an MRTR call that never asked a
question (nothing to protect: a crash before its first question leaves the call to the
application to issue again).

:meth:`DurableCall.restart` starts a fresh decider from a stored record and returns, in
order: a ``Persist`` if the restart changed anything; a :class:`~fsm.actions.Reshown` for
each question shown and unanswered at the crash and never re-shown before (at most once
per key, ever); then what the request in flight at the crash becomes: it died with the
process, so it is fed to the decider as a request that got no response (counted as a
failed attempt: the MRTR ``Retry`` is re-sent with the stored answers and state; a task's
``tasks/update`` is re-sent with the stored answers while its key is listed, its
``tasks/get`` is polled again, each that was in flight). An ended call restarts to
nothing.

Clocks: an MRTR question's age is measured on the decider's clock; a durable MRTR call
takes a clock that means the same across processes (``time.time``), as a task's does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from fsm.actions import Persist, Present, Reshown
from fsm.errors import RequestKey
from fsm.mrtr.call import CallSnapshot, MrtrCall, RoundFailed
from fsm.outcomes import SubmissionResult
from fsm.questions import canonical_json
from fsm.sse.guard import Question
from fsm.tasks.task import PollFailed, TaskCall, TaskSnapshot, UpdateFailed

__all__ = ["RESTARTED", "CallRecord", "DurableCall"]

RESTARTED = SubmissionResult(None, error="ProcessRestarted")
"""What a request in flight at the crash is fed back as: no response arrived."""


class CallRecord(NamedTuple):
    """What a store keeps of one MRTR call or task (the payload of its ``Persist``):
    the decider's snapshot, the questions shown and not answered yet (with their text,
    to show again after a restart), and the keys already re-shown."""

    call: str
    snapshot: CallSnapshot | TaskSnapshot
    questions: tuple[Question, ...]
    reshown: tuple[RequestKey, ...]

    @property
    def era(self) -> str:
        """``"mrtr"`` or ``"tasks"``."""
        return "mrtr" if isinstance(self.snapshot, CallSnapshot) else "tasks"

    @property
    def ended(self) -> bool:
        """Whether the call's outcome was recorded."""
        return bool(self.snapshot.ended)


Decider = MrtrCall | TaskCall


class DurableCall:
    """A decider of one call whose decisions survive a crash (see the module docstring).
    Feed it what the decider takes; take its actions in order, writing each ``Persist``'s
    delta to a :class:`~fsm.durable.store.Store` and waiting for it before the next one."""

    def __init__(self, decider: Decider) -> None:
        self.decider = decider
        self._call = decider.call_id
        self._questions: dict[RequestKey, Question] = {}
        self._reshown: set[RequestKey] = set()
        self._last = self._view()

    @classmethod
    def restart(cls, decider: Decider, record: CallRecord) -> tuple[DurableCall, tuple[Any, ...]]:
        """Start ``decider`` (fresh, same call id and config as the one that wrote
        ``record``) from the store; return it and the actions to take, in order.
        ``ValueError`` for a record of another call or era."""
        if record.call != decider.call_id:
            raise ValueError(f"record of {record.call!r} given to another call")
        if isinstance(decider, MrtrCall) != isinstance(record.snapshot, CallSnapshot):
            raise ValueError(f"record of era {record.era} given to another era's decider")
        self = cls.resume(decider, record)
        if record.ended:
            return self, ()
        inflight = self._resend()
        shown: list[Reshown] = []
        for q in record.questions:
            if q.key not in self._reshown and decider.state_of(q.key) == "presented":
                self._reshown.add(q.key)
                params = None if q.params is None else json.loads(q.params)
                shown.append(Reshown(q.key, q.method, params))
        self._prune()
        return self, self._persisted((*shown, *inflight))

    @classmethod
    def resume(cls, decider: Decider, record: CallRecord) -> DurableCall:
        """The durable call in the state ``record`` holds, as if it had never stopped (no
        restart: nothing is re-shown or re-sent): what a model checker steps from. The
        record must be of ``decider``'s era."""
        decider.restore(record.snapshot)  # type: ignore[arg-type]  # the era is the caller's
        self = cls(decider)
        self._questions = {q.key: q for q in record.questions}
        self._reshown = set(record.reshown)
        self._last = self._view()
        return self

    def feed(self, event: Any) -> tuple[Any, ...]:
        """Feed ``event`` to the decider; its actions, a ``Persist`` first when the call's
        record changed."""
        actions = self.decider.feed(event)
        for a in actions:
            if isinstance(a, Present):
                params = None if a.params is None else canonical_json(a.params)
                self._questions[a.key] = Question(a.key, a.method, params)
        self._prune()
        return self._persisted(actions)

    def record(self) -> CallRecord:
        """The call's current record."""
        return CallRecord(
            self._call,
            self.decider.snapshot(),
            tuple(self._questions.values()),
            tuple(k for k in self._questions if k in self._reshown),
        )

    def _resend(self) -> Sequence[Any]:
        d = self.decider
        if isinstance(d, MrtrCall):
            return d.feed(RoundFailed(RESTARTED)) if d.state == "sent" else ()
        snap, out = d.snapshot(), list[Any]()
        if snap.update is not None:  # both may be in flight: each died with the process
            out += d.feed(UpdateFailed(RESTARTED))
        if snap.get_pending:
            out += d.feed(PollFailed(RESTARTED))
        return out

    def _prune(self) -> None:
        """Keep the text of questions still on screen only (bounded as the decider is)."""
        for key in [k for k in self._questions if self.decider.state_of(k) != "presented"]:
            del self._questions[key]
            self._reshown.discard(key)

    def _view(self) -> tuple[Any, ...]:
        snap: CallSnapshot | TaskSnapshot = self.decider.snapshot()
        if isinstance(snap, TaskSnapshot):  # pacing and poll counts: no write per poll
            snap = replace(snap, status="", polls=0, poll_errors=0, interval_s=0.0)
        elif not snap.questions:
            return ()
        return (snap, tuple(self._questions), tuple(sorted(map(repr, self._reshown))))

    def _persisted(self, actions: Sequence[Any]) -> tuple[Any, ...]:
        view = self._view()
        if view == self._last:
            return tuple(actions)
        self._last = view
        return (Persist(self.record()), *actions)
