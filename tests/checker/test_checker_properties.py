"""Each checker feature, proved on a tiny model that must fail and one that must pass."""

from __future__ import annotations

import pytest
from checker_models import Counter, GraphModel, chain, lasso_graph

from fsm.checker import Checker, Lasso, ModelError, Property, Verdict, check


def test_cycle_behind_a_long_path_is_reported_as_shortest_lasso() -> None:
    report = check(lasso_graph(with_back_edges=True))
    assert (report.states, report.transitions, report.depth) == (39, 41, 20)
    assert report.result("L1").verdict is Verdict.VIOLATED
    lasso = report.assert_violated("L1")
    assert isinstance(lasso, Lasso)
    assert lasso.loop_start == 10
    assert len(lasso.prefix) == 10 and len(lasso.loop) == 4
    assert lasso.names[10:] == ["a1", "a2", "a3", "a4 back"]
    assert lasso.states[lasso.loop_start] == lasso.states[-1] == 10


def test_no_cycle_terminates() -> None:
    report = check(lasso_graph(with_back_edges=False))
    assert (report.states, report.transitions, report.depth) == (41, 40, 20)
    assert report.result("L1").verdict is Verdict.HOLDS
    assert report.counterexample("L1") is None
    report.assert_properties()


def test_self_loop_is_a_cycle() -> None:
    model = GraphModel({0: [("go", 1)], 1: [("stay", 1), ("end", 2)]}, [Property.terminates()])
    lasso = check(model).assert_violated("L1")
    assert lasso.names == ["go", "stay"]
    assert lasso.loop_start == 1


def test_deadlock_found_with_shortest_path() -> None:
    model = GraphModel({**chain(3), 0: [("step 0", 1), ("jump", 2)]}, [Property.deadlock()])
    report = check(model)
    assert (report.states, report.transitions) == (4, 4)
    path = report.assert_violated("deadlock")
    assert path.names == ["jump", "step 2"]
    assert path.states[-1] == 3


def test_terminal_stuck_state_is_not_a_deadlock() -> None:
    model = GraphModel(chain(3), [Property.deadlock()], terminal=frozenset({3}))
    report = check(model)
    assert report.result("deadlock").verdict is Verdict.HOLDS
    report.assert_properties()


def test_action_returning_none_is_not_a_successor() -> None:
    model = Counter(top=0, props_=(Property.deadlock(),))
    assert check(model).result("deadlock").verdict is Verdict.HOLDS  # Counter: all terminal
    stuck = GraphModel({0: [("nowhere", 1)]}, [Property.deadlock()], inits=(5,))
    report = check(stuck)
    assert report.assert_violated("deadlock").names == []


def test_sometimes_never_reached_is_vacuous() -> None:
    never: Property[int] = Property.sometimes("reach 99", lambda s: s == 99, "can reach 99")
    report = check(Counter(props_=(never,)))
    assert report.result("reach 99").verdict is Verdict.VACUOUS
    assert not report.ok
    with pytest.raises(AssertionError, match="reach 99 vacuous"):
        report.assert_properties()


def test_sometimes_reached_holds_with_its_example() -> None:
    reach: Property[int] = Property.sometimes("reach 4", lambda s: s == 4)
    report = check(Counter(props_=(reach,)))
    result = report.result("reach 4")
    assert result.verdict is Verdict.HOLDS
    assert result.path is not None and result.path.names == ["inc"] * 4
    assert report.counterexample("reach 4") is None


def test_invariant_broken_at_depth_7_has_a_7_step_trace() -> None:
    # Counter: inc/dec in 0..10; many longer paths reach 7 (inc, dec, inc, ...), BFS finds 7.
    report = check(Counter())
    assert (report.states, report.transitions, report.depth) == (11, 20, 10)
    path = report.assert_violated("not bad")
    assert len(path) == 7
    assert path.names == ["inc"] * 7
    assert path.states[-1] == 7


def test_invariant_that_holds() -> None:
    report = check(Counter(bad=11))
    assert report.result("not bad").verdict is Verdict.HOLDS
    report.assert_properties()
    with pytest.raises(AssertionError, match=r"not bad was not violated \(verdict: holds\)"):
        report.assert_violated("not bad")


def test_invariant_violated_in_an_initial_state() -> None:
    path = check(Counter(bad=0)).assert_violated("not bad")
    assert path.names == [] and path.states == (0,)


def test_runs_are_deterministic() -> None:
    def run() -> dict[str, object]:
        data = check(lasso_graph(with_back_edges=True)).to_json()
        data.pop("seconds")
        return data

    first = run()
    assert all(run() == first for _ in range(3))
    counter_paths = {tuple(check(Counter()).assert_violated("not bad").names) for _ in range(3)}
    assert len(counter_paths) == 1


def test_max_states_bound_makes_the_run_incomplete() -> None:
    props: tuple[Property[int], ...] = (
        Property.always("not 7", lambda s: s != 7),
        Property.always("not 3", lambda s: s != 3),
        Property.sometimes("reach 9", lambda s: s == 9),
        Property.sometimes("reach 2", lambda s: s == 2),
        Property.deadlock(),
    )
    report = check(Counter(props_=props), max_states=5)
    assert not report.complete and report.states == 5
    verdicts = {r.name: r.verdict for r in report.results}
    assert verdicts == {
        "not 7": Verdict.UNKNOWN,
        "not 3": Verdict.VIOLATED,
        "reach 9": Verdict.UNKNOWN,
        "reach 2": Verdict.HOLDS,  # the example found is a real path
        "deadlock": Verdict.UNKNOWN,
    }
    assert "INCOMPLETE" in report.format_text()
    with pytest.raises(AssertionError, match="not 7 unknown"):
        report.assert_properties()


def test_bounded_run_never_reports_a_false_deadlock() -> None:
    # State 0's only successor is cut off by the bound: it must not be judged stuck.
    report = check(GraphModel(chain(3), [Property.deadlock()]), max_states=1)
    assert report.result("deadlock").verdict is Verdict.UNKNOWN


def test_max_depth_bound() -> None:
    report = check(Counter(), max_depth=3)
    assert (report.states, report.depth, report.complete) == (4, 3, False)
    assert report.result("not bad").verdict is Verdict.UNKNOWN
    assert check(Counter(), max_depth=10).complete is False
    assert check(Counter(), max_depth=11).complete is True


def test_cycle_found_within_a_bound_is_still_a_violation() -> None:
    model = GraphModel(
        {0: [("a", 1)], 1: [("b", 0), ("c", 2)], **chain(50, start=2)}, [Property.terminates()]
    )
    report = check(model, max_states=4)
    assert not report.complete
    assert report.assert_violated("L1").names == ["a", "b"]


def test_states_outside_the_boundary_are_checked_but_not_expanded() -> None:
    props = [
        Property.always("below 4", lambda s: s < 4),
        Property.deadlock(),
        Property.terminates(),
    ]
    edges = {**chain(5), 5: [("loop", 5)]}
    report = check(GraphModel(edges, props, boundary=lambda s: s < 3))
    assert (report.states, report.transitions) == (4, 3)
    assert report.result("below 4").verdict is Verdict.HOLDS
    assert report.result("deadlock").verdict is Verdict.HOLDS
    assert report.result("L1").verdict is Verdict.HOLDS
    bad = check(GraphModel(edges, props, boundary=lambda s: s < 4))
    assert bad.assert_violated("below 4").names == ["step 0", "step 1", "step 2", "step 3"]


def test_duplicate_initial_states_are_ignored_and_init_index_recorded() -> None:
    model = GraphModel(
        {1: [("x", 2)]}, [Property.always("not 2", lambda s: s != 2)], inits=(0, 1, 0)
    )
    report = check(model)
    assert report.states == 3
    path = report.assert_violated("not 2")
    assert (path.init_index, path.names) == (1, ["x"])


def test_coverage_reports_declarations_that_never_fired() -> None:
    report = check(Counter())
    assert report.coverage.fired == ("inc", "dec")
    assert report.coverage.never_fired == ("reset",)
    assert "never fired (dead declarations): reset" in report.format_text()
    full = check(GraphModel(chain(2), declared=("step 0", "step 1")))
    assert full.coverage.never_fired == ()
    assert full.coverage.fired == ("step 0", "step 1")


def test_duplicate_property_names_are_rejected() -> None:
    props = (Property.deadlock("x"), Property.terminates("x"))
    with pytest.raises(ValueError, match="duplicate property names: x"):
        Checker(Counter(props_=props))


def test_model_raising_is_reported_with_the_path_to_the_state() -> None:
    class Exploding(Counter):
        def next_state(self, state: int, action: str) -> int | None:
            if state == 3 and action == "inc":
                raise RuntimeError("boom")
            return super().next_state(state, action)

    with pytest.raises(ModelError, match="RuntimeError: boom") as info:
        check(Exploding())
    assert info.value.path is not None and info.value.path.names == ["inc", "inc", "inc"]
    assert info.value.action == "inc"
    assert "applying 'inc'" in info.value.format_text()


def test_long_chain_with_back_edge_needs_no_recursion() -> None:
    n = 50_000
    edges = {**chain(n), n: [("back", n // 2)]}
    lasso = check(GraphModel(edges, [Property.terminates()])).assert_violated("L1")
    assert isinstance(lasso, Lasso) and lasso.loop_start == n // 2
    assert len(lasso.loop) == n // 2 + 1


def test_progress_callback_is_called_on_long_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    import fsm.checker.explore as explore

    clock = iter(range(0, 10**6, 1))  # every look at the clock advances one second
    monkeypatch.setattr(explore, "perf_counter", lambda: float(next(clock)))
    monkeypatch.setattr(explore, "_PROGRESS_EVERY", 1)
    seen: list[str] = []
    check(Counter(), progress=lambda p: seen.append(p.format()))
    assert seen and seen[0].startswith(f"progress {Counter().name}: states=")  # names the model
    assert "states/s=" in seen[0] and "queue=" in seen[0]


def test_text_output_marks_verdicts_and_loops() -> None:
    text = check(lasso_graph(with_back_edges=True)).format_text()
    assert text.startswith("graph: states=39 transitions=41 depth=20 seconds=")
    assert "✗ L1 violated" in text
    assert "-- loop starts here --" in text and "back to step 10" in text
    assert "✓" in check(Counter(bad=11)).format_text()


def test_model_raising_outside_the_search_is_a_model_error() -> None:
    class NoProps(Counter):
        def properties(self) -> list[Property[int]]:
            raise LookupError("no table")

    with pytest.raises(ModelError, match=r"LookupError: no table \(reading its hooks") as info:
        Checker(NoProps())
    assert info.value.path is None and "no table" in info.value.format_text()

    class BadInit(Counter):
        def init_states(self) -> list[int]:
            raise OSError("disk")

    with pytest.raises(ModelError, match="OSError: disk"):
        check(BadInit())
    with pytest.raises(TypeError, match="missing init_states, actions, next_state, properties"):
        Checker(object())  # type: ignore[arg-type]
