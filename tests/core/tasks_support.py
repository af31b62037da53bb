"""Shared helpers for the task rule tests: questions, an answer, poll results, a task on a
clock the test moves by hand."""

from __future__ import annotations

from typing import Any

from core_support import FakeClock

from fsm import actions as act
from fsm import events as ev
from fsm.errors import InteractionFailed
from fsm.outcomes import SubmissionResult
from fsm.tasks.task import Poll, Polled, TaskAction, TaskCall, TaskConfig, TaskCreated

ASK = {"method": "elicitation/create", "params": {"message": "Delete 3 files?"}}
OTHER = {"method": "elicitation/create", "params": {"message": "Really?"}}
YES = {"action": "accept", "content": {"ok": True}}
LOST = SubmissionResult(None, error="ConnectError")
T0 = 1_700_000_000.0
CREATED = "2023-11-14T22:13:20Z"  # T0


def status(
    kind: str = "working", asks: dict[str, Any] | None = None, **more: Any
) -> dict[str, Any]:
    """A tasks/get result of task ``t`` (TTL 60 s from T0, polled every 0.5 s)."""
    body: dict[str, Any] = {"taskId": "t", "status": kind, "ttlMs": 60_000, "createdAt": CREATED}
    body["pollIntervalMs"] = 500
    if asks is not None:
        body["inputRequests"] = asks
    body.update(more)
    return body


def started(**config: Any) -> tuple[TaskCall, FakeClock]:
    """Task ``t`` created at T0 with these ``TaskConfig`` knobs; its first poll is due."""
    clock = FakeClock(T0)
    task = TaskCall("t", clock=clock, config=TaskConfig(**config))
    assert task.feed(TaskCreated(status())) == (Poll("t", 0.5),)
    return task, clock


def kinds(actions: tuple[TaskAction, ...]) -> list[str]:
    """The kinds of ``actions``, in order."""
    return [type(a).__name__ for a in actions]


def fail_of(actions: tuple[TaskAction, ...]) -> InteractionFailed:
    """The error of the one outcome of ``actions``, a ``Fail`` and the last action."""
    fail = actions[-1]
    assert isinstance(fail, act.Fail) and fail.interaction == "t", actions
    assert sum(isinstance(a, act.Fail | act.Complete) for a in actions) == 1
    return fail.error


def asked(task: TaskCall, asks: dict[str, Any]) -> tuple[TaskAction, ...]:
    """Feed a poll listing ``asks``."""
    return task.feed(Polled(status("input_required", asks)))


def answer(task: TaskCall, key: str) -> tuple[TaskAction, ...]:
    """The user answers key ``key`` with ``YES``."""
    return task.feed(ev.UserAnswered(("t", key), YES))
