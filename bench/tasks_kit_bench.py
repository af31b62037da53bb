"""The tasks conformance kit's default profile: how often, and how fast, it finds the
ext-tasks 0.2.2 requester presenting a key twice, and that the task rules pass.

``kit_fast_tasks_p2_found_rate`` (``..._find_median_s``, ``..._find_max_s``): the model of
the ``@modelcontextprotocol/ext-tasks`` 0.2.2 requester (``tests/support/tasks_clients.py``:
a key released by a failed ``tasks/update`` presented again; keys de-duplicated, questions
not) is run ``RUNS`` times (20; ``$KIT_BENCH_RUNS``) under ``fsm-fast``, judged on P2
only, each run in a fresh Python process with no example database and randomized
generation, as :mod:`bench.kit_bench` runs the SSE kit. A run *finds* it when the kit
reports P2. The library's :class:`~fsm.tasks.task.TaskCall` is run as often:
``kit_fast_tasks_correct_passes`` (out of ``RUNS``) and its median time, the profile's
whole budget (``kit_fast_tasks_correct_median_s``). Targets: found-rate >= 0.95, every
find <= 10 s, no false alarm.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from bench.results import child_json, env_int, record, table

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from hypothesis import settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

from bench.kit_bench import TARGET_S, _found, _seconds_of  # noqa: E402
from fsm.testing.kit import FAST, ConformanceFailure, kit_settings  # noqa: E402
from fsm.testing.tasks_kit import tasks_conformance_machine  # noqa: E402
from support.tasks_clients import ExtTasks022Client, guarded_task  # noqa: E402

CLIENTS = {"ext-tasks-0.2.2": ExtTasks022Client, "correct": guarded_task}


def one_run(name: str) -> dict[str, object]:
    """One ``fsm-fast`` run against client ``name`` (a key of :data:`CLIENTS`) in this
    process, judged on P2 for the requester (every property for the rules): the
    properties reported (none for a pass) and the seconds to the report."""
    check = {"P2"} if name != "correct" else None
    machine = tasks_conformance_machine(CLIENTS[name], check=check)
    fresh = settings(kit_settings(FAST), database=None, derandomize=False)
    start = time.perf_counter()
    found: list[str] = []
    try:
        run_state_machine_as_test(machine, settings=fresh)
    except ConformanceFailure as failure:
        found = [failure.name]
    return {"found": found, "s": time.perf_counter() - start}


def _in_fresh_process(name: str) -> dict[str, object]:
    result: dict[str, object] = child_json("-m", "bench.tasks_kit_bench", "--run", name)
    return result


def main() -> None:
    runs = env_int("KIT_BENCH_RUNS", 20)
    buggy = [_in_fresh_process("ext-tasks-0.2.2") for _ in range(runs)]
    hits = [_seconds_of(r) for r in buggy if "P2" in _found(r)]
    rate = len(hits) / runs
    median = statistics.median(hits) if hits else float("nan")
    worst = max(hits) if hits else float("nan")
    record("kit_fast_tasks_p2_found_rate", rate, "ratio")
    record("kit_fast_tasks_p2_find_median_s", median, "s")
    record("kit_fast_tasks_p2_find_max_s", worst, "s")
    correct = [_in_fresh_process("correct") for _ in range(runs)]
    passes = sum(not _found(r) for r in correct)
    seconds = statistics.median(_seconds_of(r) for r in correct)
    record("kit_fast_tasks_correct_passes", passes, "runs")
    record("kit_fast_tasks_correct_median_s", seconds, "s")
    table(
        [
            ("ext-tasks 0.2.2 (P2)", f"{len(hits)}/{runs}", rate, median, worst),
            ("task rules (passes)", f"{passes}/{runs}", passes / runs, seconds, "-"),
        ],
        header=(
            f"tasks client ({FAST}, fresh process per run)",
            "found",
            "rate",
            "median s",
            f"max s (target {TARGET_S:.0f})",
        ),
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run"]:
        print(json.dumps(one_run(sys.argv[2])))
    else:
        main()
