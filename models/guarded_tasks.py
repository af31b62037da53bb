"""The library's task rules (:class:`fsm.tasks.task.TaskCall`) against the tasks environments.

The client here *is* ``TaskCall`` (on the compiled tables of the declared task and
input-key machines): the checker verifies the shipped decision code. Variants without a
crash (all must pass P1-P7 and L1): servers that supersede a key, re-ask an answered
question under a new key, fail or purge the task, acknowledge an update and drop it, lose
an update; a user who answers (early or late) or never; the task's TTL passing.

With a crash (``crashes=1``) the rules violate P2, and must: ``TaskCall`` keeps nothing
durable, so after a restart with the persisted task id a key answered before the crash,
and still listed because the acknowledgement is eventually consistent, is presented again.
A durable store of the snapshot (:class:`fsm.tasks.task.TaskSnapshot`) is what closes it.
"""

from __future__ import annotations

import itertools
from typing import Any

from fsm import actions as act
from fsm import events as ev
from fsm.machines.tasks import TASKS_PRODUCT
from fsm.outcomes import SubmissionResult
from fsm.tasks import task as tasks
from fsm.tasks.outcomes import TASK_EXPIRED
from fsm.tasks.task import TaskAction, TaskCall, TaskConfig, TaskEvent
from fsm.worlds.common import QUESTIONS
from fsm.worlds.tasks import (
    TASK,
    USER_ANSWER,
    Acked,
    Answer,
    End,
    Error,
    Input,
    Output,
    Poll,
    Present,
    Restart,
    Status,
    TasksBounds,
    TasksSnapshotPolicy,
    TasksWorld,
    Update,
    Withdraw,
)

LEGEND = (
    "guarded-tasks[user(,supersede,reask,fail,purge,drop,lost,ttl,crash)]: the user answers"
    " or never; the server supersedes a key, re-asks an answered question under a new key,"
    " fails or purges the task, acknowledges an update and drops it; an update is lost; the"
    " task's TTL passes; the client crashes and restarts with its task id; xN: N questions"
)
"""What the fields of this file's model names mean (``fsm check --overview`` prints it)."""

_TASK = {"taskId": TASK, "ttlMs": 1000, "createdAt": "1970-01-01T00:00:00Z", "pollIntervalMs": 100}
_LOST = SubmissionResult(None, error="ReadTimeout")


def _event(inp: Input, call: TaskCall) -> tuple[TaskEvent, ...]:
    if isinstance(inp, Status):
        body: dict[str, Any] = {**_TASK, "status": inp.status}
        if inp.status == "input_required":
            body["inputRequests"] = {f"k{k}": QUESTIONS[q] for k, q in inp.listed}
        return (tasks.Polled(body),)
    if isinstance(inp, Error):
        outcome = TASK_EXPIRED if inp.reason == "expired" else _LOST
        failed = tasks.PollFailed if inp.request == "get" else tasks.UpdateFailed
        return (failed(outcome),)
    if isinstance(inp, Acked):
        return (tasks.UpdateAcked(),)
    if isinstance(inp, Answer):
        return (ev.UserAnswered((TASK, f"k{inp.request}"), dict(USER_ANSWER)),)
    if isinstance(inp, Restart):
        return (tasks.TaskResumed(),)
    return (tasks.Tick(),)


def _k(name: str | int) -> int:
    return int(str(name)[1:])


def _outputs(a: TaskAction) -> tuple[Output, ...]:
    if isinstance(a, act.Present):
        return (Present(_k(a.key[1])),)
    if isinstance(a, act.Withdraw):
        return (Withdraw(_k(a.key[1])),)
    if isinstance(a, tasks.Poll):
        return (Poll(),)
    if isinstance(a, tasks.Update):
        answers = tuple(
            sorted((_k(k), tuple(sorted(v.items()))) for k, v in a.input_responses.items())
        )
        return (Update(answers),)
    if isinstance(a, act.Fail):
        return (End("failed"),)
    if isinstance(a, act.Complete):
        return (End("completed"),)
    return ()


class TasksGuardPolicy(TasksSnapshotPolicy[TaskCall]):
    """:class:`fsm.tasks.task.TaskCall` as the tasks world's client. State: a task
    snapshot; a restart starts from a fresh ``TaskCall`` (nothing durable)."""

    def __init__(self, config: TaskConfig) -> None:
        super().__init__(
            "guarded-tasks",
            lambda clock, on_fire: TaskCall(
                TASK, clock=clock, config=config, engine="tables", on_fire=on_fire
            ),
            product=TASKS_PRODUCT,
            to_events=_event,
            to_outputs=_outputs,
            opening=(tasks.TaskCreated({**_TASK, "status": "working"}),),
        )


CONFIG = TaskConfig(max_polls=64, max_resends=1, max_resubmits=1, max_reasks=1)
POLICY = TasksGuardPolicy(CONFIG)

_FAULTS = ("supersede", "reask", "fail", "purge", "drop", "lost")


def _world(
    user: str, faults: tuple[str, ...], *, ttl: bool, crashes: int = 0, questions: int = 1
) -> TasksWorld:
    counts = {f: int(f in faults) for f in _FAULTS}
    bounds = TasksBounds(
        questions=questions,
        supersedes=counts["supersede"],
        reasks=counts["reask"],
        fails=counts["fail"],
        purges=counts["purge"],
        drops=counts["drop"],
        lost=counts["lost"],
        expiries=int(ttl),
        crashes=crashes,
        user="answers" if user == "answers" else "never",
    )
    flags = [user, *faults, *(["ttl"] if ttl else []), *(["crash"] if crashes else [])]
    expect = ("P2",) if crashes else ()
    suffix = f" x{questions}" if questions > 1 else ""
    name = f"guarded-tasks[{','.join(flags)}]{suffix}"
    return TasksWorld(POLICY, bounds, name=name, expect=expect)


def variants() -> list[TasksWorld]:
    """The variants that must pass: each fault alone and in pairs, with and without the
    TTL passing; a user who never answers (the TTL then ends the call); two questions
    listed at once (answered in one update or two), alone, superseded, re-asked, with an
    update dropped or lost."""
    worlds = [_world("never", faults, ttl=True) for faults in ((), ("supersede",), ("fail",))]
    for n in (0, 1, 2):
        for faults in itertools.combinations(_FAULTS, n):
            for ttl in (False, True):
                worlds.append(_world("answers", faults, ttl=ttl))
    for faults in ((), ("supersede",), ("reask",), ("drop",), ("lost",)):
        worlds.append(_world("answers", faults, ttl=False, questions=2))
    worlds.append(_world("answers", ("lost",), ttl=True, questions=2))
    return worlds


MODELS = [*variants(), _world("answers", (), ttl=False, crashes=1)]
