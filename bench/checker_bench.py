"""Model-checker figures: throughput on the guarded model, growth, all models, and the
time to the seed client's bug, exhaustive checker versus hypothesis, side by side.

Figures recorded: ``checker_states_per_s`` (distinct states per second on the largest
shipped guarded variant, from a cold start: a fresh guard policy, nothing memoised),
``check_all_models_s`` (``python -m fsm check`` on every shipped model, a fresh process,
wall time including start-up),
``hypothesis_over_checker_time_to_bug`` (median time until a hypothesis stateful test
over the same seed-incident model first fails, divided by the checker's time to its
shortest counterexample).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.results import record, table

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fsm.checker import Checker, check, load_models  # noqa: E402
from fsm.world import Bounds, World  # noqa: E402
from models.guarded import CONFIG, GuardPolicy, variants  # noqa: E402

MODEL_FILES = ("guarded.py", "guarded_concurrent.py", "seed_incident.py", "mcp_sdk_2_3.py")


def _growth() -> None:
    rows: list[tuple[Any, ...]] = []
    for requests in (1, 2, 3, 4):
        world = variants(requests, {"after,silent,rpc,answers"}, GuardPolicy(CONFIG))[0]
        bound = 400_000 if requests == 4 else None
        report = check(world, max_states=bound)
        states = f"{report.states:,}" + ("" if report.complete else "+ (bound hit)")
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
        report = check(world)
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


def _largest() -> None:
    world = variants(3, {"inclusive,silent,rpc,answers"}, GuardPolicy(CONFIG))[0]
    explorer = Checker(world)
    cold = explorer.run()
    envs = len({state.env for state in explorer.states})
    agents = len({state.agent for state in explorer.states})
    warm = check(world)  # the same world again: every guard step and move is memoised
    rate = cold.states / cold.seconds
    table(
        [
            ("cold: guard steps computed", f"{cold.states:,}", cold.seconds, rate),
            (
                "warm: everything memoised",
                f"{warm.states:,}",
                warm.seconds,
                warm.states / warm.seconds,
            ),
        ],
        header=(f"largest shipped variant {world.name}", "states", "seconds", "states/s"),
    )
    steps = len(world.policy._memo)  # type: ignore[attr-defined]
    print(
        f"{cold.states:,} states share {envs:,} environments and {agents:,} agents; "
        f"the cold run computed {steps:,} guard steps"
    )
    print(f"checker_states_per_s = {rate:,.0f} (cold; target >= 100,000)")
    record("checker_states_per_s", rate, "states/s")


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
    print(f"python -m fsm check models/*.py: {seconds:.2f} s wall, fresh process (target < 10 s)")
    record("check_all_models_s", seconds, "s")


def _time_to_bug() -> None:
    from hypothesis import HealthCheck, settings
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
                    phases=[p for p in settings.default.phases if p.name != "shrink"],
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
