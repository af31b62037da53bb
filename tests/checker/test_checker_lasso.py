"""The termination counterexample (a lasso) in full: the states it carries, where it
starts, the shortest cycle it goes round, and a model whose edges change under the
checker's feet."""

from __future__ import annotations

import random
from collections.abc import Iterable
from itertools import pairwise

import pytest
from checker_models import GraphModel

from fsm.checker import Lasso, ModelError, Property, check
from fsm.checker.explore import cyclic_components, shortest_cycle


def _lasso(model: GraphModel) -> Lasso:
    lasso = check(model).assert_violated("L1")
    assert isinstance(lasso, Lasso)
    return lasso


def test_a_lasso_carries_each_state_it_passes_and_where_it_starts() -> None:
    # 5 -> 6 -> 7 -> 8 -> 6: init 5 is the second initial state
    edges = {5: [("go", 6)], 6: [("a", 7)], 7: [("b", 8)], 8: [("back", 6)]}
    model = GraphModel(edges, [Property.terminates()], inits=(0, 5), terminal=frozenset({0}))
    lasso = _lasso(model)
    assert (lasso.init, lasso.init_index, lasso.loop_start) == ("s5", 1, 1)
    assert lasso.names == ["go", "a", "b", "back"]
    assert [s.state for s in lasso.steps] == ["s6", "s7", "s8", "s6"]
    assert lasso.states == (5, 6, 7, 8, 6)


def _csr(edges: dict[int, list[int]], n: int) -> tuple[list[int], list[int]]:
    offsets, flat = [0], []
    for v in range(n):
        flat += edges.get(v, [])
        offsets.append(len(flat))
    return offsets, flat


def test_the_cycle_through_a_state_is_a_shortest_one() -> None:
    # 0 -> 1 -> 2 -> 0 and 0 -> 2 -> 0: the shortest cycle through 0 is 0 2 0
    offsets, edges = _csr({0: [1, 2], 1: [2], 2: [0], 3: [0]}, 4)
    comp, cyclic = cyclic_components(4, offsets, edges)
    assert comp[0] == comp[1] == comp[2] != comp[3] and cyclic == {comp[0]}
    assert shortest_cycle(0, comp, offsets, edges) == [0, 2, 0]
    with pytest.raises(ValueError, match=r"^state 3 is on no cycle$"):
        shortest_cycle(3, comp, offsets, edges)


class Drifting(GraphModel):
    """A model whose transitions vanish after the search (its three states expanded): not
    a function of the state."""

    calls: int = 0

    def actions(self, state: int) -> Iterable[str]:
        self.calls += 1
        return super().actions(state) if self.calls <= 3 else []


def test_a_model_whose_edges_change_is_reported_not_deterministic() -> None:
    edges = {0: [("a", 1)], 1: [("b", 2)], 2: [("c", 1)]}
    with pytest.raises(ModelError) as info:
        check(Drifting(edges, [Property.terminates()]))
    assert str(info.value) == "model is not deterministic: an explored edge disappeared"
    assert info.value.path is not None and info.value.path.names == ["a", "b"]
    assert info.value.action is None


def _reach(edges: dict[int, list[int]], n: int) -> list[set[int]]:
    """reach[u]: the nodes reachable from u by one edge or more."""
    reach = []
    for u in range(n):
        seen: set[int] = set()
        todo = list(edges.get(u, []))
        while todo:
            w = todo.pop()
            if w not in seen:
                seen.add(w)
                todo += edges.get(w, [])
        reach.append(seen)
    return reach


def _cycle_length(edges: dict[int, list[int]], v: int) -> int:
    """Length of a shortest cycle through v, by BFS over the whole graph."""
    depth, frontier = 1, set(edges.get(v, []))
    seen = set(frontier)
    while v not in frontier:
        frontier = {w for u in frontier for w in edges.get(u, []) if w not in seen}
        seen |= frontier
        depth += 1
    return depth


def test_components_and_shortest_cycles_match_a_brute_force_on_random_graphs() -> None:
    for seed in range(300):
        rng = random.Random(seed)
        n = rng.randint(1, 8)
        edges = {u: rng.sample(range(n), rng.randint(0, min(n, 3))) for u in range(n)}
        offsets, flat = _csr(edges, n)
        comp, cyclic = cyclic_components(n, offsets, flat)
        reach = _reach(edges, n)
        for u in range(n):
            for v in range(n):
                same = u == v or (v in reach[u] and u in reach[v])
                assert (comp[u] == comp[v]) is same, (seed, edges, u, v)
            on_cycle = u in reach[u]
            assert (comp[u] in cyclic) is on_cycle, (seed, edges, u)
            if on_cycle:
                loop = shortest_cycle(u, comp, offsets, flat)
                assert loop[0] == loop[-1] == u
                assert all(w in edges[x] for x, w in pairwise(loop))
                assert len(loop) - 1 == _cycle_length(edges, u), (seed, edges, u)


def test_a_loop_closed_by_an_edge_outside_the_search_tree_names_that_edge() -> None:
    """The closing edge is not a BFS tree edge, so its name is looked up again: the action
    that leads back, not the state's first action (which leaves the loop)."""
    model = GraphModel(
        {0: [("a", 1)], 1: [("out", 2), ("back", 0)]},
        props=[Property.terminates()],
        terminal=frozenset({2}),
    )
    lasso = check(model).assert_violated("L1")
    assert isinstance(lasso, Lasso)
    assert (lasso.names, lasso.loop_start) == (["a", "back"], 0)
