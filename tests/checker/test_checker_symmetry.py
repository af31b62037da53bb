"""Symmetry reduction: models that must fail and must pass under it, counterexamples rebuilt in
concrete ids that replay on the unreduced model, and a declared symmetry that is not one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import factorial

import pytest
from checker_models import GraphModel, Ring, chain

from fsm.checker import (
    BaseModel,
    Checker,
    Lasso,
    ModelError,
    Property,
    Symmetry,
    check,
    replay,
    verify_symmetry,
    violated_at,
)

Counters = tuple[int, ...]


class Workers(BaseModel[Counters, str]):
    """``n`` interchangeable workers, each counting 0..``top``; any may step. With ``reset``
    a worker at the top may go back to 0 (a cycle). Symmetry: any permutation of workers
    (the representative sorts the counters)."""

    def __init__(self, n: int, top: int, *, reset: bool = False, bad: int | None = None) -> None:
        self.n, self.top, self.reset, self.bad = n, top, reset, bad

    @property
    def name(self) -> str:
        return f"workers{self.n}"

    def init_states(self) -> Sequence[Counters]:
        return [(0,) * self.n]

    def actions(self, state: Counters) -> Iterable[str]:
        return [f"step {i}" for i in range(self.n)] + (
            [f"reset {i}" for i in range(self.n)] if self.reset else []
        )

    def next_state(self, state: Counters, action: str) -> Counters | None:
        verb, arg = action.split()
        i = int(arg)
        if verb == "step" and state[i] < self.top:
            return (*state[:i], state[i] + 1, *state[i + 1 :])
        if verb == "reset" and state[i] == self.top:
            return (*state[:i], 0, *state[i + 1 :])
        return None

    def properties(self) -> Sequence[Property[Counters]]:
        props: list[Property[Counters]] = [
            Property.sometimes("all done", lambda s: all(c == self.top for c in s)),
            Property.terminates(),
        ]
        if self.bad is not None:
            bad = self.bad  # two workers on the value ``bad`` at once is the bug
            props.append(Property.always("apart", lambda s: s.count(bad) < 2))
        return props

    def is_terminal(self, state: Counters) -> bool:
        return True

    def symmetry(self) -> Symmetry[Counters]:
        def orbit(state: Counters) -> int:
            size = factorial(len(state))
            for value in set(state):
                size //= factorial(state.count(value))
            return size

        return Symmetry(lambda s: tuple(sorted(s)), orbit)


def test_a_model_that_must_pass_passes_with_fewer_states() -> None:
    model = Workers(4, 2)
    full, reduced = check(model, symmetry=False), check(model)
    assert full.ok and reduced.ok
    assert (full.states, reduced.states) == (81, 15)  # 3^4, and multisets of 4 from 3
    assert reduced.symmetry and reduced.represented == full.states
    assert not full.symmetry and full.represented == full.states
    assert "(representatives of 81 under symmetry)" in reduced.summary()


def test_a_model_that_must_fail_fails_with_a_concrete_replayable_counterexample() -> None:
    model = Workers(3, 3, bad=2)
    full, reduced = check(model, symmetry=False), check(model)
    path = reduced.assert_violated("apart")
    assert len(path) == len(full.assert_violated("apart")) == 4  # still shortest
    states = replay(model, path.names, init=path.init_index)  # on the unreduced model
    assert states == list(path.states)
    assert violated_at(model, "apart", states)
    assert sorted(path.states[-1]) == [0, 2, 2]  # concrete: which two workers, not a multiset


def test_a_lasso_found_among_representatives_is_a_concrete_lasso() -> None:
    model = Workers(3, 1, reset=True)
    reduced = check(model)
    lasso = reduced.assert_violated("L1")
    assert isinstance(lasso, Lasso)
    states = replay(model, lasso.names, init=lasso.init_index)
    assert violated_at(model, "L1", states, loop_start=lasso.loop_start)
    assert check(model, symmetry=False).result("L1").verdict is reduced.result("L1").verdict


def test_a_loop_round_an_orbit_is_rebuilt_by_going_round_again() -> None:
    reduced = check(Ring(5))
    assert reduced.states == 1 and reduced.represented == 5
    lasso = reduced.assert_violated("L1")
    assert lasso.names == [f"pass {i}" for i in range(5)] and lasso.loop_start == 0
    assert violated_at(Ring(5), "L1", replay(Ring(5), lasso.names), loop_start=0)


def test_the_audit_accepts_a_true_symmetry() -> None:
    audit = verify_symmetry(Workers(3, 2, bad=1))
    assert audit.ok, audit.problems
    assert (audit.full.states, audit.reduced.states, audit.representatives) == (27, 10, 10)


class Merged(Workers):
    """Declares that the first worker's counter does not matter: not a symmetry."""

    def symmetry(self) -> Symmetry[Counters]:
        return Symmetry(lambda s: (0, *s[1:]))


def test_a_declared_symmetry_that_is_not_one_is_caught() -> None:
    model = Merged(2, 2, bad=2)
    audit = verify_symmetry(model)
    assert not audit.ok
    assert any("apart differs" in p for p in audit.problems)
    assert any("successors differ" in p for p in audit.problems)


def test_a_counterexample_with_no_concrete_counterpart_is_a_model_error() -> None:
    class Lying(Workers):
        def symmetry(self) -> Symmetry[Counters]:  # maps to states one step ahead
            return Symmetry(lambda s: tuple(min(c + 1, self.top) for c in s))

    with pytest.raises(ModelError, match="declared symmetry is not one") as caught:
        Checker(Lying(2, 3, bad=3)).run()
    # the error names the step with no concrete counterpart and the path to where it fails
    assert caught.value.action == "step 0"
    assert str(caught.value).endswith("no concrete step stands for 'step 0'")
    path = caught.value.path
    assert path is not None and (path.init_index, path.states, path.names) == (0, ((0, 0),), [])


def test_a_symmetry_hook_must_return_a_symmetry() -> None:
    class Wrong(Workers):
        def symmetry(self) -> Symmetry[Counters]:
            return "sorted"  # type: ignore[return-value]

    with pytest.raises(ModelError, match="must return a Symmetry"):
        Checker(Wrong(2, 1))


def test_the_audit_needs_a_declared_symmetry() -> None:
    with pytest.raises(ValueError, match="declares no symmetry"):
        verify_symmetry(GraphModel(chain(2)))


def test_the_progress_line_names_the_model_and_the_states_represented() -> None:
    from fsm.checker import Progress

    line = Progress(15, 40, 3, 2, 2.0, "workers4", 81).format()
    assert line.startswith("progress workers4: states=15 (standing for 81: 40/s)")
    assert "(standing for" not in Progress(15, 40, 3, 2, 2.0, "workers4").format()


@dataclass
class Orbits(GraphModel):
    """An explicit graph whose declared symmetry maps state ``s`` to ``reps.get(s, s)``."""

    reps: Mapping[int, int] = field(default_factory=dict)

    def symmetry(self) -> Symmetry[int]:
        return Symmetry(lambda s: self.reps.get(s, s))


def test_the_concrete_path_takes_the_actions_the_representative_path_names() -> None:
    """From a concrete state two actions lead into the next orbit: the one the path among
    representatives took is preferred, so both paths read alike; the representative's
    first action leads elsewhere and is not taken."""
    edges = {
        0: [("x", 2), ("y", 1)],
        1: [("z", 0), ("p", 3)],
        2: [("q", 4), ("p", 3), ("z", 0)],
    }
    never_c: Property[int] = Property.always("never C", lambda s: s not in (3, 4))
    model = Orbits(edges, props=[never_c], terminal=frozenset({3, 4}), reps={2: 1, 4: 3})
    path = check(model).assert_violated("never C")
    assert (path.names, path.states) == (["x", "p"], (0, 2, 3))
    assert replay(model, path.names) == list(path.states)


LOOPS = [
    # the concrete walk settles into a cycle that misses the loop's first state
    (
        {5: [("enter", 0)], 0: [("go", 1)], 1: [("go", 2)], 2: [("go", 1)]},
        {1: 0, 2: 0},
        5,
        ["enter", "go", "go", "go"],
        2,
    ),
    # a loop that closes in one lap after a prefix is not gone round again
    ({5: [("enter", 0)], 0: [("pass", 0)]}, {}, 5, ["enter", "pass"], 1),
    # a loop through two orbits after a prefix: its laps repeat the loop, not the prefix
    (
        {5: [("enter", 0)], 0: [("go", 1)], 1: [("go", 2)], 2: [("go", 3)], 3: [("go", 0)]},
        {2: 0, 3: 1},
        5,
        ["enter", "go", "go", "go", "go"],
        1,
    ),
    # the walk reaches a concrete self-loop at the end of the first lap
    ({0: [("go", 1)], 1: [("go", 1)]}, {1: 0}, 0, ["go", "go"], 1),
]


@pytest.mark.parametrize(("edges", "reps", "init", "names", "loop_start"), LOOPS)
def test_a_lasso_rebuilt_in_laps_is_the_shortest_concrete_one(
    edges: dict[int, list[tuple[str, int]]],
    reps: dict[int, int],
    init: int,
    names: list[str],
    loop_start: int,
) -> None:
    model = Orbits(edges, props=[Property.terminates()], inits=(init,), reps=reps)
    lasso = check(model).assert_violated("L1")
    assert isinstance(lasso, Lasso)
    assert (lasso.names, lasso.loop_start) == (names, loop_start)
    states = replay(model, lasso.names)
    assert violated_at(model, "L1", states, loop_start=loop_start)


def test_an_initial_state_with_no_counterpart_is_a_model_error() -> None:
    """A model whose initial states change between calls (it is not pure): no initial
    state has the representative the counterexample starts from."""

    @dataclass
    class Shifting(Orbits):
        calls: int = 0

        def init_states(self) -> Sequence[int]:
            self.calls += 1
            return [0] if self.calls == 1 else [9]

    model = Shifting({0: [("go", 1)], 1: [("go", 1)]}, props=[Property.terminates()])
    with pytest.raises(ModelError) as caught:
        check(model)
    assert str(caught.value) == "the declared symmetry is not one: no initial state fits"
    assert (caught.value.path, caught.value.action) == (None, None)
