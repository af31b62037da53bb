"""Tiny models with known answers, used to test the checker itself."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from fsm.checker import BaseModel, Property, Symmetry

Edges = Mapping[int, Sequence[tuple[str, int]]]


@dataclass
class GraphModel(BaseModel[int, str]):
    """A model given as an explicit labelled graph over integer states."""

    edges: Edges
    props: Sequence[Property[int]] = ()
    inits: Sequence[int] = (0,)
    terminal: frozenset[int] = frozenset()
    boundary: Callable[[int], bool] | None = None
    declared: Sequence[str] = ()
    label: str = "graph"

    @property
    def name(self) -> str:
        return self.label

    def init_states(self) -> Sequence[int]:
        return list(self.inits)

    def actions(self, state: int) -> Iterable[str]:
        return [name for name, _ in self.edges.get(state, ())]

    def next_state(self, state: int, action: str) -> int | None:
        return dict(self.edges.get(state, ())).get(action)

    def properties(self) -> Sequence[Property[int]]:
        return list(self.props)

    def within_boundary(self, state: int) -> bool:
        return self.boundary is None or self.boundary(state)

    def is_terminal(self, state: int) -> bool:
        return state in self.terminal

    def declared_transitions(self) -> Iterable[str]:
        return self.declared

    def fired_transitions(self, state: int, action: str, next_state: int) -> Iterable[str]:
        return [action]

    def format_state(self, state: int) -> str:
        return f"s{state}"


def chain(n: int, start: int = 0) -> dict[int, list[tuple[str, int]]]:
    """start -> start+1 -> ... -> start+n, actions named "step i"."""
    return {i: [(f"step {i}", i + 1)] for i in range(start, start + n)}


def lasso_graph(with_back_edges: bool) -> GraphModel:
    """A 10-step chain 0..10; from 10 two cycles back to 10 (4 and 6 long) if ``with_back_edges``;
    a decoy longer path 0 -> 100..119 leads to a deeper self-loop at 119."""
    edges = chain(10)
    edges[0] = [*edges[0], ("detour", 100)]
    edges.update(chain(19, start=100))
    edges[10] = [("a1", 11), ("b1", 21)]
    edges[11], edges[12], edges[13] = [("a2", 12)], [("a3", 13)], [("a4", 14)]
    edges[21], edges[22], edges[23] = [("b2", 22)], [("b3", 23)], [("b4", 24)]
    edges[24], edges[25] = [("b5", 25)], [("b6", 26)]
    if with_back_edges:
        edges[13] = [("a4 back", 10)]
        edges[25] = [("b6 back", 10)]
        edges[119] = [("spin", 119)]
    return GraphModel(edges, [Property.terminates()], terminal=frozenset({14, 26, 119}))


@dataclass(frozen=True)
class Counter(BaseModel[int, str]):
    """A counter in 0..top with "inc" and "dec": 11 states, 20 transitions for top=10."""

    top: int = 10
    bad: int = 7
    props_: tuple[Property[int], ...] = field(default=())

    def init_states(self) -> Sequence[int]:
        return [0]

    def actions(self, state: int) -> Iterable[str]:
        return ["inc", "dec"]

    def next_state(self, state: int, action: str) -> int | None:
        nxt = state + 1 if action == "inc" else state - 1
        return nxt if 0 <= nxt <= self.top else None

    def properties(self) -> Sequence[Property[int]]:
        bad = self.bad
        return self.props_ or [Property.always("not bad", lambda s: s != bad, "never reach bad")]

    def is_terminal(self, state: int) -> bool:
        return True

    def declared_transitions(self) -> Iterable[str]:
        return ["inc", "dec", "reset"]

    def fired_transitions(self, state: int, action: str, next_state: int) -> Iterable[str]:
        return [action]


@dataclass(frozen=True)
class Grid(BaseModel[tuple[int, int], str]):
    """Walk on an n x n torus: 4 actions everywhere, n*n states, 4*n*n transitions."""

    n: int = 300

    def init_states(self) -> Sequence[tuple[int, int]]:
        return [(0, 0)]

    def actions(self, state: tuple[int, int]) -> Iterable[str]:
        return ("E", "W", "N", "S")

    def next_state(self, state: tuple[int, int], action: str) -> tuple[int, int] | None:
        x, y = state
        n = self.n
        if action == "E":
            return ((x + 1) % n, y)
        if action == "W":
            return ((x - 1) % n, y)
        if action == "N":
            return (x, (y + 1) % n)
        return (x, (y - 1) % n)

    def properties(self) -> Sequence[Property[tuple[int, int]]]:
        return [Property.always("in range", lambda s: s[0] < self.n and s[1] < self.n)]


class Ring(BaseModel[int, str]):
    """A token on a ring of ``n`` places, passed on forever; symmetry: rotations. The one
    representative has a self-loop, each concrete state does not: the concrete lasso
    needs ``n`` laps of the representative's loop."""

    def __init__(self, n: int) -> None:
        self.n = n

    def init_states(self) -> Sequence[int]:
        return [0]

    def actions(self, state: int) -> Iterable[str]:
        return [f"pass {state}"]

    def next_state(self, state: int, action: str) -> int | None:
        return (state + 1) % self.n

    def properties(self) -> Sequence[Property[int]]:
        return [Property.terminates()]

    def symmetry(self) -> Symmetry[int]:
        return Symmetry(lambda s: 0, lambda s: self.n)
