"""The explicit-state engine's exact outputs (``fsm/checker/explore.py``), pinned where
``make mutate`` found them unpinned: the memory warning's text; lassos over system
states that loop back to the first one, or start beside a state that is not expanded,
and their words; a monitor that stops counting laps; the error of a system state that
is no projection; the states the ``system_state`` hook is given while a loop is rebuilt
concretely; what the ``why`` and ``describe_step`` hooks are given, and the error of a
step that disappears while its note is written."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import count

import pytest
from checker_models import GraphModel, Ring, chain
from test_checker_system_lasso import Steering

from fsm.checker import BaseModel, Lasso, ModelError, Property, check
from fsm.checker import explore as explore_module
from fsm.checker.explore import MemoryUseWarning

_TAIL = (
    ": it may run out of memory before it ends."
    " Lower the model's bounds or the state bound (max_states)."
)


@pytest.mark.parametrize(
    ("held", "physical", "said"),
    [
        (1_050_000_000, 4_000_000_000, "1.1 GB of memory, over 26% of this machine's 4.0 GB"),
        # the share is rounded down
        (2_999_600_000, 4_000_000_000, "3.0 GB of memory, over 74% of this machine's 4.0 GB"),
        # a platform that says it has no memory gets a share, not a ZeroDivisionError
        (10_000_000, 0, "0.0 GB of memory, over 1000000000% of this machine's 0.0 GB"),
    ],
)
def test_the_memory_warning_says_how_much_is_held_of_how_much(
    monkeypatch: pytest.MonkeyPatch, held: int, physical: int, said: str
) -> None:
    monkeypatch.setattr(explore_module, "_physical_memory", lambda: physical)
    monkeypatch.setattr(explore_module, "_peak_memory", lambda: held)
    with pytest.warns(MemoryUseWarning) as caught:
        report = check(GraphModel(chain(1100), label="line"), memory_warning=0.25)
    # looked at once 1,024 states are expanded (the last at depth 1,023): 1,025 discovered
    where = ", at 1,025 states (depth 1023)"
    assert report.complete and [str(w.message) for w in caught] == [
        f"line: the search holds {said}{where}{_TAIL}"
    ]


@dataclass
class Monitored(GraphModel):
    """An explicit graph whose states' tens record a monitor: the system state is the
    last digit."""

    def system_state(self, state: int) -> Hashable:
        return state % 10


def test_a_loop_back_to_the_first_system_state_starts_at_the_first_step() -> None:
    # positions 0 -> 1 -> 0 -> 1 ...; the monitor counts laps up to two (then stays),
    # so the whole states 20 and 21 close the cycle two laps after the system state did
    edges = {0: [("a", 1)], 1: [("b", 10)], 10: [("c", 11)], 11: [("d", 20)]}
    edges |= {20: [("e", 21)], 21: [("f", 20)]}
    lasso = check(Monitored(edges, [Property.terminates()])).assert_violated("L1")
    assert isinstance(lasso, Lasso)
    assert (lasso.names, lasso.states, lasso.loop_start) == (["a", "b"], (0, 1, 10), 0)
    assert check(Monitored(edges, [Property.terminates()])).result("L1").why == (
        "steps 1-2 lead back to the system state after step 0: they can repeat for ever"
    )


def test_a_lasso_starts_from_an_expanded_state_of_its_system_state() -> None:
    # the first initial state (10) has the system state of the loop 0 <-> 1 but lies
    # outside the boundary: it is not expanded, so the loop is walked from state 0
    edges = {0: [("a", 1)], 1: [("b", 0)], 10: [("c", 1)]}
    model = Monitored(edges, [Property.terminates()], inits=(10, 0), boundary=lambda s: s < 10)
    lasso = check(model).assert_violated("L1")
    assert (lasso.init_index, lasso.names, lasso.states, lasso.loop_start) == (
        1,
        ["a", "b"],
        (0, 1, 0),
        0,
    )


def test_a_system_state_that_is_no_projection_is_named_with_the_path_to_it() -> None:
    with pytest.raises(ModelError) as caught:
        check(Steering())
    assert str(caught.value) == (
        "model.system_state is not a projection: two states of one system state"
        " have different successors"
    )
    path = caught.value.path
    assert path is not None and path.names == ["to 1", "to 2", "to 3", "stay"]
    assert caught.value.action is None


class RecordingRing(Ring):
    """:class:`~checker_models.Ring` of 4 places whose ``system_state`` keeps every state
    it is given."""

    def __init__(self) -> None:
        super().__init__(4)
        self.given: list[object] = []

    def system_state(self, state: int) -> Hashable:
        self.given.append(state)
        return state


def test_a_loop_rebuilt_in_laps_gives_system_state_only_states_of_the_model() -> None:
    model = RecordingRing()
    lasso = check(model).assert_violated("L1")
    assert (lasso.names, lasso.loop_start) == ([f"pass {i}" for i in range(4)], 0)
    assert model.given and set(model.given) <= set(range(4))


@dataclass
class Explained(GraphModel):
    """A graph model whose ``why`` hook says where a loop starts."""

    def why(self, name: str, states: Sequence[int], loop_start: int | None) -> str | None:
        return f"{name} loops from step {loop_start}"


def test_the_why_hook_is_told_where_the_loop_starts() -> None:
    edges = {**chain(3), 3: [("back", 1)]}
    result = check(Explained(edges, [Property.terminates()])).result("L1")
    assert (result.why, result.at) == ("L1 loops from step 1", 1)


@dataclass(frozen=True)
class Door:
    """An action that prints as "go" whichever state it leads to."""

    to: int

    def __str__(self) -> str:
        return "go"


@dataclass
class Doors(BaseModel[int, Door]):
    """From 0 two actions that print alike lead to 1 and to 2; 2 is bad. Each step's
    note names the door taken. With ``drifts`` the doors are there only the first time 0
    is asked for its actions (the model is not a function of the state)."""

    drifts: bool = False
    calls: count[int] = field(default_factory=count)

    def init_states(self) -> Sequence[int]:
        return [0]

    def actions(self, state: int) -> Iterable[Door]:
        if state != 0 or (self.drifts and next(self.calls) > 0):
            return []
        return [Door(1), Door(2)]

    def next_state(self, state: int, action: Door) -> int | None:
        return action.to

    def properties(self) -> Sequence[Property[int]]:
        return [Property.always("not 2", lambda s: s != 2)]

    def describe_step(self, state: int, action: Door, next_state: int) -> str:
        return f"door to {action.to}"


def test_a_steps_note_is_about_the_action_taken_among_those_that_print_alike() -> None:
    path = check(Doors()).assert_violated("not 2")
    assert (path.names, [s.note for s in path.steps]) == (["go"], ["door to 2"])


def test_a_step_that_disappears_while_its_note_is_written_is_a_model_error() -> None:
    with pytest.raises(ModelError) as caught:
        check(Doors(drifts=True))
    assert str(caught.value) == "model is not deterministic: step 'go' of a path disappeared"
    assert (caught.value.path, caught.value.action) == (None, "go")
