"""Lassos shortest over a model's system states: a monitor that records the first lap must
not make the reported loop start a lap late, and the loop must still be a real cycle."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import pytest

from fsm.checker import BaseModel, Lasso, ModelError, Property, Verdict, check, replay, violated_at

State = tuple[int, frozenset[int]]


@dataclass(frozen=True)
class Recorded(BaseModel[State, str]):
    """A walk 0 -> 1 -> 2 -> 3 (-> 1 again when ``loops``) beside a monitor that records the
    positions visited. The monitor never steers, so the system state is the position."""

    loops: bool = True
    projected: bool = True

    def init_states(self) -> Sequence[State]:
        return [(0, frozenset({0}))]

    def actions(self, state: State) -> Iterable[str]:
        pos = state[0]
        if pos < 3:
            return [f"to {pos + 1}"]
        return ["back to 1"] if self.loops else []

    def next_state(self, state: State, action: str) -> State | None:
        pos, seen = state
        nxt = 1 if pos == 3 else pos + 1
        return (nxt, seen | {nxt})

    def properties(self) -> Sequence[Property[State]]:
        return [Property.terminates()]

    def is_terminal(self, state: State) -> bool:
        return state[0] == 3

    def system_state(self, state: State) -> Hashable:
        return state[0] if self.projected else state


def test_the_loop_starts_where_the_system_first_repeats() -> None:
    lasso = check(Recorded()).assert_violated("L1")
    assert isinstance(lasso, Lasso)
    # 0 -> 1, then 1 -> 2 -> 3 -> 1: the system repeats at position 1 after one step
    assert (lasso.names, lasso.loop_start) == (["to 1", "to 2", "to 3", "back to 1"], 1)
    assert [s[0] for s in lasso.states] == [0, 1, 2, 3, 1]
    # the monitor's record differs where the loop closes: a cycle of system states
    assert lasso.states[1] != lasso.states[-1]
    states = replay(Recorded(), lasso.names)
    assert violated_at(Recorded(), "L1", states, loop_start=lasso.loop_start)


def test_over_whole_states_the_same_loop_starts_a_lap_late() -> None:
    lasso = check(Recorded(projected=False)).assert_violated("L1")
    # the whole state first repeats once the monitor has seen every position
    assert (len(lasso), lasso.loop_start) == (6, 3)
    assert lasso.states[lasso.loop_start] == lasso.states[-1]


def test_a_system_without_a_cycle_terminates_whatever_the_monitor_records() -> None:
    report = check(Recorded(loops=False))
    assert report.result("L1").verdict is Verdict.HOLDS


def test_a_prefix_that_is_no_cycle_of_system_states_is_not_judged_a_lasso() -> None:
    states = replay(Recorded(), ["to 1", "to 2", "to 3"])
    assert not violated_at(Recorded(), "L1", states, loop_start=1)


@dataclass(frozen=True)
class Steering(Recorded):
    """A "monitor" that steers: at position 3 the walk goes back only before the first
    lap is recorded (it may stay there for ever), so the projection to the position is
    no projection."""

    def actions(self, state: State) -> Iterable[str]:
        pos, seen = state
        if pos == 3:
            return ["back to 1", "stay"] if 4 not in seen else ["stay"]
        return [f"to {pos + 1}"]

    def next_state(self, state: State, action: str) -> State | None:
        pos, seen = state
        if action == "stay":
            return (3, seen | {4})
        return (1, seen | {4}) if pos == 3 else (pos + 1, seen | {pos + 1})

    def is_terminal(self, state: State) -> bool:
        return 4 in state[1]


def test_a_system_state_that_steers_is_reported_not_a_projection() -> None:
    with pytest.raises(ModelError, match=r"^model.system_state is not a projection"):
        check(Steering())
    lasso = check(Steering(projected=False)).assert_violated("L1")
    assert lasso.names[-1] == "stay"  # over whole states: the real cycle


def test_without_a_cycle_of_states_the_system_states_are_not_searched() -> None:
    # the same steering model without its self-loop: no cycle at all, so no lasso (the
    # loop of positions 1-2-3 never closes a cycle of states)
    @dataclass(frozen=True)
    class Settling(Steering):
        def next_state(self, state: State, action: str) -> State | None:
            if action == "stay" and 4 in state[1]:
                return None
            return super().next_state(state, action)

    assert check(Settling()).result("L1").verdict is Verdict.HOLDS
