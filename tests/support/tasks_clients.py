"""Tasks clients for the tasks conformance kit, in its vocabulary
(``factory(clock) -> client`` with ``feed(TaskEvent) -> actions``):

* :func:`guarded_task`: the library's :class:`~fsm.tasks.task.TaskCall`, unchanged.
* :class:`ExtTasks022Client`: the requester of ``@modelcontextprotocol/ext-tasks`` 0.2.2 as
  measured (``models/ext_tasks_0_2_2.py`` has the sources): a ledger of the keys it
  handled (by key: a question asked again under a new key is presented again, P2),
  reserved while their handlers run and committed once ``tasks/update`` succeeded; a
  failed update releases its keys and rethrows, ending the execution. No clock, no
  withdrawal; a terminal status or an error ends the execution.
* :class:`RepollingRequester`: the same ledger in a hand-written loop that goes on
  polling after a failed update (as :mod:`fsm.wire.tasks_plain` does): the released key,
  still listed, is presented again (P2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fsm import actions as act
from fsm import events as ev
from fsm.errors import CallRejectedError, RequestKey, TaskFailedError
from fsm.tasks.task import (
    Poll,
    Polled,
    PollFailed,
    TaskAction,
    TaskCall,
    TaskConfig,
    TaskCreated,
    TaskEvent,
    Update,
    UpdateAcked,
    UpdateFailed,
)
from fsm.testing.tasks_kit import TASK_ID, TasksClientUnderTest


def guarded_task(clock: Callable[[], float]) -> TasksClientUnderTest:
    """The library's task rules for the kit's task."""
    return TaskCall(TASK_ID, clock=clock, config=TaskConfig(max_polls=200))


class ExtTasks022Client:
    """The ext-tasks 0.2.2 requester (module docstring)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.reserved: set[str] = set()
        self.committed: set[str] = set()
        self.waiting: set[str] = set()
        self.answers: dict[str, Mapping[str, Any]] = {}
        self.inflight: tuple[str, ...] = ()
        self.ended = False

    def _end(self, outcome: TaskAction) -> tuple[TaskAction, ...]:
        self.ended = True
        return (outcome,)

    def _key(self, server_key: str) -> RequestKey:
        return (TASK_ID, server_key)

    def feed(self, event: TaskEvent) -> Sequence[TaskAction]:
        if self.ended:
            return ()
        if isinstance(event, TaskCreated):
            return (Poll(TASK_ID, 1.0),)
        if isinstance(event, Polled):
            result = event.result
            status = result.get("status") if isinstance(result, dict) else None
            if status == "completed":
                return self._end(act.Complete(TASK_ID))
            if status in ("failed", "cancelled"):
                return self._end(act.Fail(TASK_ID, TaskFailedError(f"task {status}")))
            asks = result.get("inputRequests") or {} if isinstance(result, dict) else {}
            new = [k for k in asks if k not in self.reserved | self.committed]
            if not new:
                return (Poll(TASK_ID, 1.0),)
            self.reserved |= set(new)
            self.waiting |= set(new)
            return tuple(
                act.Present(self._key(k), asks[k]["method"], asks[k].get("params")) for k in new
            )
        if isinstance(event, ev.UserAnswered):
            server_key = str(event.key[1])
            if server_key not in self.waiting:
                return ()
            self.waiting.discard(server_key)
            self.answers[server_key] = event.answer
            if self.waiting:
                return ()
            self.inflight, answers = tuple(sorted(self.answers)), dict(self.answers)
            self.answers = {}
            return (Update(TASK_ID, answers),)
        if isinstance(event, UpdateAcked):
            self.reserved -= set(self.inflight)
            self.committed |= set(self.inflight)
            self.inflight = ()
            return (Poll(TASK_ID, 1.0),)
        if isinstance(event, UpdateFailed):
            self.reserved -= set(self.inflight)  # released, then the error is rethrown
            self.inflight = ()
            return self._after_failed_update()
        if isinstance(event, PollFailed):
            return self._end(act.Fail(TASK_ID, CallRejectedError("tasks/get failed")))
        return ()

    def _after_failed_update(self) -> tuple[TaskAction, ...]:
        return self._end(act.Fail(TASK_ID, CallRejectedError("tasks/update failed")))


class RepollingRequester(ExtTasks022Client):
    """The ledger in a loop that polls on after a failed update (module docstring)."""

    def _after_failed_update(self) -> tuple[TaskAction, ...]:
        return (Poll(TASK_ID, 1.0),)
