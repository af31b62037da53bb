"""The conformance kit for clients of the tasks extension (``io.modelcontextprotocol/tasks``,
protocol 2026-07-28): hypothesis plays a tasks server, the network, the user and the clock
against one task of any client that speaks the tasks vocabulary (:mod:`fsm.tasks.task`:
``feed(TaskEvent) -> Sequence[TaskAction]``).

Contract
--------
* The client under test is built by ``client_factory(clock)`` once per example and
  drives one task (id :data:`TASK_ID`). ``clock`` reads wall-clock seconds (the task's
  ``createdAt`` is an absolute time). The example starts by feeding
  :class:`~fsm.tasks.task.TaskCreated` (status ``working``); the client must answer with a
  :class:`~fsm.tasks.task.Poll`.
* A prompt is a :class:`~fsm.actions.Present` whose key is ``(task id, inputRequests
  key)``; a :class:`~fsm.tasks.task.Update` carries answers keyed by ``inputRequests``
  key. The kit's questions (``questions``, default 2) are ``elicitation/create`` with
  distinct messages.
* The kit's server lists every question under a key of its own and, within what
  hypothesis draws, acknowledges an update (the answers are taken later: the key leaves
  the listing), acknowledges one and drops it, loses one in transit, supersedes a key
  (the question moves to a new key), re-asks a taken question under a new key, fails or
  cancels the task, purges it (-32602 on both requests), and lets the task's ``createdAt
  + ttlMs`` (``ttl_s``) pass (the kit then feeds :class:`~fsm.tasks.task.Tick`). The
  server completes the task once every question was taken. A client restart is not
  played (the checker's tasks world explores it: ``docs/tasks.md``).
* The kit respects the client: it answers only a request the client sent (a ``Poll``, an
  ``Update``), moves the clock by a poll's ``delay_s`` when it answers it, the user
  answers only prompts showing, and nothing is fed after the client ended the task except
  the user's race.
* Observations go to the one shared monitor (:mod:`fsm.properties`) through the one
  reading of a task run (:mod:`fsm.tasks.observe`, the checker's tasks world's): P1-P7
  and L1 as ``docs/tasks.md`` restates them. Restated P6 also fails an update sent once
  the task's TTL passed. Every observation and its time is kept in :attr:`log` (an event
  log for :mod:`fsm.trace`). Teardown drains: the server stops misbehaving, the user
  answers everything, the clock passes the TTL if it must, and the task must end exactly
  once within ``drain_rounds`` steps (P5).

Limits: one task per example; keys are strings, questions are told apart by message.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Literal, Protocol

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from fsm import actions as act
from fsm import events as ev
from fsm import properties as P
from fsm.errors import RequestKey
from fsm.outcomes import SubmissionResult
from fsm.tasks import observe
from fsm.tasks.outcomes import TASK_EXPIRED
from fsm.tasks.task import (
    Poll,
    Polled,
    PollFailed,
    TaskAction,
    TaskCreated,
    TaskEvent,
    Tick,
    Update,
    UpdateAcked,
    UpdateFailed,
)
from fsm.testing.call_kit import OneCallMachine, bind, question

TASK_ID = "task"
"""The id of the kit's task (a request key is ``(TASK_ID, inputRequests key)``)."""
CREATED = 1_700_000_000.0
"""The task's ``createdAt``, in seconds since the epoch: the kit's clock starts there."""
LOST = SubmissionResult(None, error="ReadTimeout")


class TasksClientUnderTest(Protocol):
    """What the kit drives: one task's ``feed`` in the tasks vocabulary."""

    def feed(self, event: TaskEvent) -> Sequence[TaskAction]:
        """Apply one event; return the actions the client takes, in order."""
        ...


TasksClientFactory = Callable[[Callable[[], float]], TasksClientUnderTest]
"""``factory(clock) -> client``: a fresh tasks client that reads wall-clock seconds from
``clock``."""


class TasksConformanceMachine(OneCallMachine):
    """See the module docstring; build one with :func:`tasks_conformance_machine`."""

    subject = "task"
    client_factory: ClassVar[TasksClientFactory]
    questions: ClassVar[int] = 2
    ttl_s: ClassVar[float] = 600.0
    poll_interval_ms: ClassVar[int] = 1000
    drain_rounds: ClassVar[int] = 40

    def __init__(self) -> None:
        super().__init__()
        cls = type(self)
        self.now = CREATED
        self.budgets = P.Budgets(ttl=cls.ttl_s, counters=False)
        self.client = cls.client_factory(lambda: self.now)
        # the server's task
        self.status = "input_required"
        self.listed: dict[str, int] = {f"k{q}": q for q in range(cls.questions)}
        self.asked: list[tuple[str, int]] = list(self.listed.items())
        self.pending: set[str] = set()
        self.taken: set[int] = set()
        # the requests in flight and what the client was last told
        self.get = False
        self.update: list[str] | None = None
        self.seen: list[str] = []
        self.delay = 0.0
        # the client side
        self.showing: set[str] = set()
        self.log: list[tuple[P.Observation, float]] = []
        """Every observation the kit judged and when: an event log (:func:`fsm.trace.dumps`)."""
        self._observe(P.Began(TASK_ID))
        self.feed(TaskCreated(self._task("working")))

    # ------------------------------------------------------------ plumbing

    def _observe(self, obs: P.Observation) -> None:
        self.log.append((obs, self.now))
        self._judge(obs, self.budgets)

    def _observe_all(self, observations: Iterable[P.Observation]) -> None:
        for obs in observations:
            self._observe(obs)

    @staticmethod
    def _key(server_key: str) -> RequestKey:
        return (TASK_ID, server_key)

    def _deadline(self) -> float:
        return CREATED + type(self).ttl_s

    def _task(self, status: str) -> dict[str, Any]:
        return {
            "taskId": TASK_ID,
            "status": status,
            "ttlMs": int(type(self).ttl_s * 1000),
            "pollIntervalMs": type(self).poll_interval_ms,
            "createdAt": datetime.datetime.fromtimestamp(CREATED, datetime.UTC).isoformat(),
        }

    def feed(self, event: TaskEvent) -> None:
        """Feed ``event`` and observe what the client did."""
        for a in self.client.feed(event):
            self._did(a)

    def _did(self, a: TaskAction) -> None:
        if isinstance(a, act.Present):
            server_key = str(a.key[1])
            self.showing.add(server_key)
            self._observe(P.Presented(self._key(server_key), self.now))
        elif isinstance(a, act.Withdraw):
            self.showing.discard(str(a.key[1]))
            self._observe(P.DeclaredDead(a.key))
        elif isinstance(a, Poll):
            if self.get:
                self._violation("P5", "a second tasks/get while one is in flight")
            self.get, self.delay = True, max(0.0, float(a.delay_s))
        elif isinstance(a, Update):
            if self.update is not None:
                self._violation("P5", "a second tasks/update while one is in flight")
            if self.now >= self._deadline():
                late = self.now - self._deadline()
                self._violation("P6", f"an update sent {late:.0f}s after the task's TTL passed")
            answers = [(self._key(k), v) for k, v in a.input_responses.items()]
            self._observe_all(observe.updated(TASK_ID, answers))
            self.update = list(a.input_responses)
        elif isinstance(a, act.Complete | act.Fail):
            self.ended += 1
            outcome = "completed" if isinstance(a, act.Complete) else "failed"
            self._observe(P.Ended(TASK_ID, outcome))
            self.showing.clear()
            self.get, self.update = False, None

    def _live(self) -> bool:
        return self.status in observe.LIVE and not self.ended

    def _asked(self) -> list[tuple[RequestKey, int]]:
        return [(self._key(k), q) for k, q in self.asked]

    def _new_key(self, q: int) -> str:
        k = f"k{len(self.asked)}"
        self.asked.append((k, q))
        return k

    # ------------------------------------------------------------ the server's answers

    def _answer_poll(self) -> None:
        self.get = False
        self.now += min(self.delay, 3600.0)
        seen = [self._key(k) for k in self.seen]
        if self.status == "purged":
            self._observe_all(observe.gone("get", (), seen))
            self.seen = []
            return self.feed(PollFailed(TASK_EXPIRED))
        listed = list(self.listed.items()) if self.status == "input_required" else []
        told = observe.polled(
            self.monitor,
            TASK_ID,
            self.now,
            self.status,
            [(self._key(k), q) for k, q in listed],
            self._asked(),
            seen,
            self.taken,
        )
        self._observe_all(told)
        self.seen = [k for k, _ in listed]
        result = self._task(self.status)
        if self.status == "input_required":
            result["inputRequests"] = {k: question(q) for k, q in listed}
        elif self.status == "failed":
            result["error"] = {"code": -32603, "message": "the tool failed"}
        self.feed(Polled(result))

    def _answer_update(self, how: Literal["ack", "drop", "lose"]) -> None:
        carried, self.update = self.update or [], None
        if self.status == "purged":
            self._observe_all(observe.gone("update", [self._key(k) for k in carried], ()))
            return self.feed(UpdateFailed(TASK_EXPIRED))
        if how == "lose":
            return self.feed(UpdateFailed(LOST))
        if how == "ack":
            self.pending |= {k for k in carried if k in self.listed}
        self.feed(UpdateAcked())

    def _take(self, reask: bool) -> None:
        took = [k for k in self.listed if k in self.pending]
        self.pending.clear()
        for k in took:
            self.taken.add(self.listed.pop(k))
        if reask and took:
            q = min(q for k, q in self.asked if k in took)
            self.listed[self._new_key(q)] = q
        self.status = "input_required" if self.listed else "working"

    # ------------------------------------------------------------ rules

    @rule()
    @precondition(lambda self: self.get)
    def server_answers_poll(self) -> None:
        self._answer_poll()

    @rule(how=st.sampled_from(("ack", "ack", "drop", "lose")))
    @precondition(lambda self: self.update is not None)
    def server_answers_update(self, how: Literal["ack", "drop", "lose"]) -> None:
        self._answer_update(how)

    @rule(reask=st.booleans())
    @precondition(lambda self: bool(self.pending) and self.status in observe.LIVE)
    def server_takes_answers(self, reask: bool) -> None:
        self._take(reask)

    @rule()
    @precondition(lambda self: self.status == "working" and len(self.taken) == type(self).questions)
    def server_completes(self) -> None:
        self.status = "completed"

    @rule(pick=st.integers(0, 7))
    @precondition(
        lambda self: self.status in observe.LIVE and any(k not in self.pending for k in self.listed)
    )
    def server_supersedes(self, pick: int) -> None:
        keys = [k for k in self.listed if k not in self.pending]
        old = keys[pick % len(keys)]
        q = self.listed.pop(old)
        self.listed[self._new_key(q)] = q

    @rule(status=st.sampled_from(("failed", "cancelled")))
    @precondition(lambda self: self.status in observe.LIVE)
    def server_ends_task(self, status: str) -> None:
        self.status, self.listed = status, {}
        self.pending.clear()

    @rule()
    @precondition(lambda self: self.status != "purged")
    def server_purges(self) -> None:
        self.status, self.listed = "purged", {}
        self.pending.clear()

    @rule(pick=st.integers(0, 7))
    @precondition(lambda self: bool(self.showing))
    def user_answers(self, pick: int) -> None:
        server_key = sorted(self.showing)[pick % len(self.showing)]
        self.showing.discard(server_key)
        q = dict(self.asked)[server_key]
        answer = {"action": "accept", "content": {"q": q}}
        self._observe(P.Answered(self._key(server_key), answer))
        self.feed(ev.UserAnswered(self._key(server_key), answer))

    @rule(big=st.booleans())
    def clock_passes(self, big: bool) -> None:
        self.now += type(self).ttl_s + 1.0 if big else 1.0
        if not self.ended:
            self.feed(Tick())

    def _drain(self, n: int) -> None:
        if self.showing:
            self.user_answers(0)
        elif self.update is not None:
            self._answer_update("ack")
        elif self.pending and self.status in observe.LIVE:
            self._take(False)
        elif self.status == "working" and len(self.taken) == type(self).questions:
            self.status = "completed"
        elif self.get and n < type(self).drain_rounds // 2:
            self._answer_poll()
        else:  # a task still not done: its TTL is the backstop
            if self.now < self._deadline():
                self.now = self._deadline()
            self.clock_passes(False)
            if self.get:
                self._answer_poll()


def tasks_conformance_machine(
    client_factory: TasksClientFactory,
    *,
    questions: int = 2,
    ttl_s: float = 600.0,
    check: Iterable[str] | None = None,
) -> type[TasksConformanceMachine]:
    """A :class:`TasksConformanceMachine` bound to ``client_factory``; run it with
    ``run_state_machine_as_test(M, settings=kit_settings())``. ``questions``: how many
    the task asks (>= 1); ``ttl_s``: the task's ``ttlMs`` in seconds (> 0). ``check``: the
    property names that fail a run (default all; narrowing silences, never changes, a
    verdict). Raises ``ValueError`` for bounds out of range or a ``check`` naming no
    property."""
    return bind(
        TasksConformanceMachine,
        "TasksConformance",
        client_factory,
        check,
        questions=questions,
        ttl_s=ttl_s,
    )
