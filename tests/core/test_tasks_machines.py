"""The tasks era's machines: both engines agree on every (state, trigger) pair of the task
and input-key machines, their shapes are pinned, and the product's rows are the ones the
decider relies on (a coupling that ends a key, a broadcast that completes them)."""

from __future__ import annotations

import pytest

from fsm.machines.runtime import TransitionsMachine
from fsm.machines.spec import MachineSpec
from fsm.machines.tables import CompiledMachine, InvalidTransition
from fsm.machines.tasks import TASK, TASK_INPUT, TASK_INPUT_LIVE, TASK_LIVE, TASKS_PRODUCT

# (states, triggers, declared transitions), pinned: a change to a machine must be deliberate.
SHAPES = {"task": (6, 8, 16), "task-input": (8, 12, 20)}


def _outcome(engine: TransitionsMachine | CompiledMachine, state: str, trigger: str) -> str:
    try:
        return engine.fire(state, trigger)
    except InvalidTransition:
        return "<invalid>"


@pytest.mark.parametrize("spec", [TASK, TASK_INPUT], ids=lambda s: s.name)
def test_runtime_and_table_agree_on_every_pair(spec: MachineSpec) -> None:
    assert (len(spec.states), len(spec.triggers), len(spec.transitions)) == SHAPES[spec.name]
    runtime, table = TransitionsMachine(spec), CompiledMachine.compile(spec)
    declared = {(t.source, t.trigger): t.dest for t in spec.transitions}
    for state in spec.states:
        for trigger in spec.triggers:
            got = _outcome(runtime, state, trigger)
            assert got == _outcome(table, state, trigger) == declared.get((state, trigger), got)
            assert (got != "<invalid>") == ((state, trigger) in declared)


def test_the_product_rows() -> None:
    assert TASKS_PRODUCT.machines == (TASK, TASK_INPUT)
    assert TASKS_PRODUCT.broadcast("task_completed").fires == (
        ("task", "complete"),
        ("task-input", "complete"),
    )
    rows = {c.name: c for c in TASKS_PRODUCT.couplings}
    assert rows["rejected_answer_fails_task"].then_states == TASK_LIVE
    assert rows["ended_task_orphans_keys"].then_states == TASK_INPUT_LIVE
    # An answer that was sent is consumed when the task completes; one that was not is dead.
    assert TASK_INPUT.terminal == {"consumed", "withdrawn", "dead"}
    dests = {(t.source, t.trigger): t.dest for t in TASK_INPUT.transitions}
    assert dests[("submitted", "complete")] == "consumed"
    assert dests[("presented", "complete")] == "dead"
    # A superseded key is withdrawn, not dead: it does not fail the task.
    assert dests[("presented", "supersede")] == "withdrawn"
