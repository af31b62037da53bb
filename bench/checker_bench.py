"""Model-checker figures: throughput on the guarded model, growth, all models, and the
time to the seed client's bug, exhaustive checker versus hypothesis, side by side.

Figures recorded: ``checker_states_per_s`` (distinct states per second on the largest
shipped guarded variant, from a cold start: a fresh guard policy, nothing memoised),
``checker_states_per_s_ceiling`` (the same model's states divided by the time of the
bare graph search over its explored graph plus the shipped guard's own decisions: what a
checker whose every other part cost nothing would reach here), ``check_all_models_s``
(``python -m fsm check`` on every shipped model, a fresh process, wall time including
start-up) and ``check_all_models_states`` (the states its ``--brief`` lines report, summed),
``hypothesis_over_checker_time_to_bug`` (median time until a hypothesis stateful test
over the same seed-incident model first fails, divided by the checker's time to its
shortest counterexample).
"""

from __future__ import annotations

import gc
import re
import statistics
import subprocess
import sys
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from bench.results import record, table

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fsm import Guard  # noqa: E402
from fsm.checker import Checker, Report, check, load_models  # noqa: E402
from fsm.checker.explore import cyclic_components  # noqa: E402
from fsm.worlds.sse import Bounds, World, WorldState  # noqa: E402
from models.guarded import CONFIG, GuardPolicy, variants  # noqa: E402

T = TypeVar("T")


def _timed(run: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``run()`` after a full collection: garbage left by an earlier measurement (the
    largest model's graphs hold millions of objects) must not be collected inside a
    later one's timing."""
    gc.collect()
    return run(*args, **kwargs)


MODEL_FILES = tuple(sorted(path.name for path in (ROOT / "models").glob("*.py")))
"""Every shipped model file: what ``python -m fsm check models/*.py`` checks."""


def _growth() -> None:
    rows: list[tuple[Any, ...]] = []
    for requests in (1, 2, 3):  # representatives under symmetry; 4 and the full spaces:
        # python -m bench symmetry
        world = variants(requests, {"after,silent,rpc,answers"}, GuardPolicy(CONFIG))[0]
        report = _timed(check, world)
        states = f"{report.states:,}"
        rows.append(
            (
                f"requests={requests}",
                states,
                report.transitions,
                report.depth,
                report.seconds,
                report.states / report.seconds,
            )
        )
    for cuts in (1, 2, 3):
        world = World(
            GuardPolicy(CONFIG),
            Bounds(requests=2, cuts=cuts, unknown_answer="rpc"),
            name=f"cuts={cuts}",
        )
        report = _timed(check, world)
        rows.append(
            (
                f"requests=2 cuts={cuts}",
                f"{report.states:,}",
                report.transitions,
                report.depth,
                report.seconds,
                report.states / report.seconds,
            )
        )
    table(
        rows,
        header=(
            "guarded[after,silent,rpc,answers]",
            "states",
            "transitions",
            "depth",
            "seconds",
            "states/s",
        ),
    )


LARGEST = {"inclusive,silent,rpc,answers"}
"""The largest shipped guarded variant (with 3 requests: models/guarded_concurrent.py)."""


def _largest() -> None:
    """Three cold runs of the largest variant, each with a fresh policy and timers on its
    guard (they cost ~2% of a run), keeping nothing between runs but their figures: the
    best is recorded and broken down. One more world gives the warm rate and the graph."""
    runs = []
    for _ in range(3):  # this machine's speed varies by a third between runs: best of three
        policy = GuardPolicy(CONFIG)
        parts = _time_guard_parts(policy.guard)
        runs.append((_timed(check, variants(3, LARGEST, policy)[0]), parts))
    cold, parts = min(runs, key=lambda run: run[0].seconds)
    world = variants(3, LARGEST, GuardPolicy(CONFIG))[0]
    explorer = Checker(world)
    _timed(explorer.run)
    warm = _timed(check, world)  # the same world again: every guard step and move is memoised
    rate = cold.states / cold.seconds
    table(
        [
            ("cold: fresh policy, best of 3", f"{cold.states:,}", cold.seconds, rate),
            (
                "warm: everything memoised",
                f"{warm.states:,}",
                warm.seconds,
                warm.states / warm.seconds,
            ),
        ],
        header=(f"largest shipped variant {world.name}", "states", "seconds", "states/s"),
    )
    print(f"checker_states_per_s = {rate:,.0f} (cold; target >= 100,000)")
    record("checker_states_per_s", rate, "states/s")
    envs = len({state.env for state in explorer.states})
    agents = {state.agent for state in explorer.states}
    reactions = sum(len(agent.reactions) for agent in agents)
    print(
        f"{cold.states:,} states share {envs:,} environments and {len(agents):,} agents; "
        f"{reactions:,} client reactions computed"
    )
    _ceiling(cold, parts, _bare_search_s(explorer))


def _ceiling(cold: Report, parts: dict[str, list[Any]], search: float) -> None:
    """Where the best cold run's time went, and the best rate any checker could reach on
    this interpreter while running the shipped guard: the bare graph search over the same
    graph plus the guard's own decisions, everything else free."""
    steps = parts["feed"][1]
    restore, decide, snapshot = (parts[p][0] for p in ("restore", "feed", "snapshot"))
    ceiling = cold.states / (search + decide)
    rest = cold.seconds - decide - restore - snapshot - search
    table(
        [
            ("bare graph search: visited lookups, Tarjan", search, cold.states / search),
            (f"the shipped guard's decisions ({steps:,} Guard.feed)", decide, ""),
            ("  sum: the ceiling, everything else free", search + decide, ceiling),
            ("guard restore + snapshot around each step", restore + snapshot, ""),
            ("the rest: the world, the checker's loop around it", rest, ""),
            ("the cold run", cold.seconds, cold.states / cold.seconds),
        ],
        header=("where the cold run's time goes", "seconds", "states/s"),
    )
    print(f"checker_states_per_s_ceiling = {ceiling:,.0f} (search + guard decisions only)")
    record("checker_states_per_s_ceiling", ceiling, "states/s")


def _time_guard_parts(guard: Guard) -> dict[str, list[Any]]:
    """Wrap ``guard``'s restore, feed and snapshot with timers: name -> [seconds, calls]."""
    parts: dict[str, list[Any]] = {}
    for name in ("restore", "feed", "snapshot"):
        method = getattr(guard, name)
        tally = parts[name] = [0.0, 0]

        def timed(*args: Any, _method: Any = method, _tally: list[Any] = tally) -> Any:
            start = time.perf_counter()
            try:
                return _method(*args)
            finally:
                _tally[0] += time.perf_counter() - start
                _tally[1] += 1

        setattr(guard, name, timed)
    return parts


def _bare_search_s(explorer: Checker[WorldState, Any]) -> float:
    """Breadth-first search over the graph ``explorer`` found, every successor state
    precomputed (no model code runs): each edge is one visited-index lookup of a real
    state and one edge append; then Tarjan for termination. Best of three."""
    states, offsets, edges = explorer.states, explorer.offsets, explorer.edges
    successors = {
        s: [states[j] for j in edges[offsets[i] : offsets[i + 1]]] for i, s in enumerate(states)
    }
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        index = {states[0]: 0}
        order, ends, out = [states[0]], array("i", [0]), array("i")
        for s in order:  # grows while it is read: a queue
            for t in successors[s]:
                j = index.get(t)
                if j is None:
                    j = index[t] = len(order)
                    order.append(t)
                out.append(j)
            ends.append(len(out))
        cyclic_components(len(order), ends, out)
        best = min(best, time.perf_counter() - start)
    return best


def _all_models() -> None:
    files = [str(ROOT / "models" / f) for f in MODEL_FILES]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "fsm", "check", "--brief", "--quiet", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:  # the seed and SDK models fail exactly as they declare: exit 0
        raise SystemExit(f"fsm check failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    states = sum(int(n) for n in re.findall(r"\bstates=(\d+)", done.stdout))
    print(
        f"python -m fsm check models/*.py: {seconds:.2f} s wall, fresh process, "
        f"{states:,} states (target < 10 s)"
    )
    record("check_all_models_s", seconds, "s")
    record("check_all_models_states", states, "states")


def _time_to_bug() -> None:
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import strategies as st
    from hypothesis.stateful import (
        RuleBasedStateMachine,
        invariant,
        rule,
        run_state_machine_as_test,
    )

    seed = load_models(str(ROOT / "models" / "seed_incident.py"))[0]
    checker_times, hypothesis_times = [], []
    for attempt in range(5):
        start = time.perf_counter()
        report = check(seed)
        report.assert_violated("P1")
        checker_times.append(time.perf_counter() - start)

        class Walk(RuleBasedStateMachine):
            """A random walk over the same model, P1 as an invariant."""

            def __init__(self) -> None:
                super().__init__()
                self.state = seed.init_states()[0]

            @rule(pick=st.integers(0, 20))
            def move(self, pick: int) -> None:
                moves = list(seed.actions(self.state))
                if moves:
                    self.state = seed.next_state(self.state, moves[pick % len(moves)])

            @invariant()
            def p1(self) -> None:
                assert "P1" not in self.state.monitor.violated

        start = time.perf_counter()
        try:
            run_state_machine_as_test(
                Walk,
                settings=settings(
                    max_examples=10_000,
                    stateful_step_count=50,
                    deadline=None,
                    database=None,
                    derandomize=False,
                    suppress_health_check=list(HealthCheck),
                    phases=[p for p in Phase if p is not Phase.shrink],
                ),
            )
        except AssertionError:
            hypothesis_times.append(time.perf_counter() - start)
        else:
            hypothesis_times.append(float("inf"))
        print(
            f"  attempt {attempt + 1}: checker {checker_times[-1]:.3f} s, "
            f"hypothesis {hypothesis_times[-1]:.3f} s",
            flush=True,
        )
    ratio = statistics.median(hypothesis_times) / statistics.median(checker_times)
    table(
        [
            ("checker (shortest counterexample)", statistics.median(checker_times)),
            ("hypothesis (first failure, no shrinking)", statistics.median(hypothesis_times)),
            ("ratio", ratio),
        ],
        header=("time to the seed client's P1 bug (median of 5)", "s"),
    )
    record("hypothesis_over_checker_time_to_bug", ratio, "ratio")


def main() -> None:
    _largest()
    _all_models()
    _growth()
    _time_to_bug()


if __name__ == "__main__":
    main()
