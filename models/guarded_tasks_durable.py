"""A task whose client crashes: the task rules with their durable store.

The tasks world's ``crashes``: the client's process ends while no prompt is on screen (its
``tasks/get`` and ``tasks/update`` in flight are lost) and a new one starts with the task
id. The client is :class:`fsm.tasks.task.TaskCall` made durable by
:class:`fsm.durable.calls.DurableCall`: every ``Persist`` it returns is applied to the
store (the call's :class:`~fsm.durable.calls.CallRecord`), which is part of the client's
state and survives the crash; the new process is ``DurableCall.restart`` of the stored
record.

* ``guarded-tasks-durable[answers,crash]`` (and with a dropped or a lost update): P1-P7
  and L1 hold. The same client without its store is ``guarded-tasks[answers,crash]``
  (models/guarded_tasks.py), which violates P2: a key answered before the crash and still
  listed is presented again.
"""

from __future__ import annotations

from fsm import actions as act
from fsm.durable.calls import CallRecord, DurableCall
from fsm.tasks import task as tasks
from fsm.tasks.task import TaskCall
from fsm.worlds.tasks import TASK, Input, Output, Restart, TasksBounds, TasksWorld

from .guarded_tasks import _TASK, CONFIG, TasksGuardPolicy, _event, _outputs

LEGEND = (
    "guarded-tasks-durable[user,faults,crash]: the task rules with their durable store; "
    "the client crashes once and restarts from the store with its task id; the server "
    "drops an acknowledged update or loses one"
)
"""What the fields of this file's model names mean (``fsm check --overview`` prints it)."""

State = tuple[CallRecord, CallRecord]
"""The live call's record (its memory) and the stored one (what survives a crash)."""


class DurableTasksPolicy(TasksGuardPolicy):
    """The durable task rules as the tasks world's client. State: ``(live, stored)``;
    :class:`~fsm.worlds.common.Restart` drops ``live`` and restarts from ``stored``."""

    def __init__(self) -> None:
        super().__init__(CONFIG)
        self.name = "guarded-tasks-durable"
        call = DurableCall(TaskCall(TASK, clock=lambda: 0.0, config=CONFIG))
        stored: CallRecord | None = None
        for a in call.feed(tasks.TaskCreated({**_TASK, "status": "working"})):
            if isinstance(a, act.Persist):
                assert isinstance(a.delta, CallRecord)
                stored = a.delta
        assert stored is not None, "a task's creation is written"
        self._start: State = (call.record(), stored)

    def init(self) -> State:
        return self._start

    def step(self, state: State, t: float, inp: Input) -> tuple[State, tuple[Output, ...]]:
        return self.decide_by(("durable", state, t, inp), t, lambda: self._decide(state, inp))

    def _decide(self, state: State, inp: Input) -> tuple[State, tuple[Output, ...]]:
        live, stored = state
        decider = self.decider
        if isinstance(inp, Restart):
            decider.restore(self.fresh)
            call, actions = DurableCall.restart(decider, stored)
        else:
            call = DurableCall.resume(decider, live)
            actions = tuple(a for e in _event(inp, decider) for a in call.feed(e))
        for a in actions:
            if isinstance(a, act.Persist):
                assert isinstance(a.delta, CallRecord)
                stored = a.delta
        outputs = tuple(o for a in actions for o in _outputs(a))
        return (call.record(), stored), outputs


def _world(faults: tuple[str, ...] = ()) -> TasksWorld:
    bounds = TasksBounds(
        questions=1,
        supersedes=int("supersede" in faults),
        reasks=int("reask" in faults),
        fails=int("fail" in faults),
        purges=int("purge" in faults),
        drops=int("drop" in faults),
        lost=int("lost" in faults),
        expiries=int("ttl" in faults),
        crashes=1,
        user="answers",
    )
    name = f"guarded-tasks-durable[{','.join(('answers', *faults, 'crash'))}]"
    return TasksWorld(POLICY, bounds, name=name)


POLICY = DurableTasksPolicy()

FAULTS = ("supersede", "reask", "fail", "purge", "drop", "lost", "ttl")

MODELS = [_world(), *(_world((f,)) for f in FAULTS)]
