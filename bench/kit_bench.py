"""The conformance kit's default profile: how often, and how fast, it finds a planted bug.

Found-rate (``kit_fast_<property>_found_rate``, ``..._find_median_s``, ``..._find_max_s``):
each client of :data:`support.kit_clients.BUGGY` (one bug each: P1 batch-blind, P3 a 500
"Request not found" retried, P7 a cursor moved back on a duplicate) is run ``RUNS`` times
(20; ``$KIT_BENCH_RUNS``) under the default ``fsm-fast`` profile, each run in a fresh
Python process with no example database and randomized generation, so the runs are
independent. A run *finds* the bug when the kit's report names the planted property; the
time is from the start of ``run_state_machine_as_test`` to its report (search and
shrinking; not the interpreter's start-up). The correct client (the library's guard) is
run as often: ``kit_fast_correct_passes`` (out of ``RUNS``) and its time, the profile's
whole budget (``kit_fast_correct_median_s``, ``..._max_s``). Targets: found-rate >= 0.95
with every time <= 10 s; no false alarm. The machine's load average when the measurement
began is ``kit_bench_loadavg_1min`` (the runs are timed on a shared machine).

The same for the ``fsm-thorough`` profile, with fewer runs (5; ``$KIT_BENCH_THOROUGH_RUNS``,
0 skips it; the correct client 2): ``kit_thorough_<property>_found_rate``,
``..._report_median_s`` (it searches its whole budget before it reports, so the time is
about the budget's, bug or not) and ``kit_thorough_correct_s`` (the median).

Time to the first shrunk failure against the naive reference clients
(``kit_first_failure_s``): the worst, over the mcp 2.3.0 client's behaviour and the guard
without de-duplication, of the median over 5 in-process runs under ``fsm-fast`` (no
example database). Side by side, one run against the mcp 2.3.0 client with hypothesis's
default reporting (every distinct bug, each explained), which the profile does not do:
``kit_first_failure_explained_over_fast`` (over that client's fast median).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

from bench.results import child_json, env_int, record, table

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hypothesis import Phase, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

from fsm.testing import NoDedupGuard, Sdk230Client, conformance_machine  # noqa: E402
from fsm.testing.kit import FAST, THOROUGH, ClientFactory, ConformanceFailure, kit_settings  # noqa: E402
from support.kit_clients import BUGGY, correct_client  # noqa: E402

NAIVE: dict[str, ClientFactory] = {"mcp 2.3.0 client": Sdk230Client, "no dedup": NoDedupGuard}
NAIVE_RUNS = 5
CORRECT = "correct"
TARGET_S = 10.0


def _seconds(factory: ClientFactory, chosen: settings) -> float:
    start = time.perf_counter()
    try:
        run_state_machine_as_test(conformance_machine(factory), settings=chosen)
    except (ConformanceFailure, ExceptionGroup):
        return time.perf_counter() - start
    raise AssertionError("the kit found nothing against a naive client")


def one_run(name: str, profile: str = FAST) -> dict[str, object]:
    """One run of ``profile`` against client ``name`` (a key of ``BUGGY`` or
    ``"correct"``), in this process: the properties the kit reported (none for a pass)
    and the seconds to the report."""
    factory = correct_client if name == CORRECT else BUGGY[name][0]
    fresh = settings(kit_settings(profile), database=None, derandomize=False)
    start = time.perf_counter()
    found: list[str] = []
    try:
        run_state_machine_as_test(conformance_machine(factory), settings=fresh)
    except ConformanceFailure as failure:
        found = [failure.name]
    except ExceptionGroup as group:  # the thorough profile: every violated property
        _, rest = group.split(ConformanceFailure)
        if rest is not None:
            raise
        found = sorted({str(getattr(e, "name", e)) for e in group.exceptions})
    return {"found": found, "s": time.perf_counter() - start}


def _in_fresh_process(name: str, profile: str = FAST) -> dict[str, object]:
    result: dict[str, object] = child_json("-m", "bench.kit_bench", "--run", name, profile)
    return result


def _found(result: dict[str, object]) -> list[str]:
    found = result["found"]
    assert isinstance(found, list)
    return [str(name) for name in found]


def _seconds_of(result: dict[str, object]) -> float:
    return float(str(result["s"]))


def found_rates(runs: int, profile: str = FAST, correct_runs: int | None = None) -> None:
    """The table and figures of the found-rate measurement (see the module docstring)."""
    short = "fast" if profile == FAST else "thorough"
    if profile == FAST:
        record("kit_bench_loadavg_1min", os.getloadavg()[0], "load")
    rows = []
    for name, (_, prop) in BUGGY.items():
        results = [_in_fresh_process(name, profile) for _ in range(runs)]
        hits = [_seconds_of(r) for r in results if prop in _found(r)]
        other = sorted({p for r in results for p in _found(r)} - {prop})
        rate = len(hits) / runs
        median = statistics.median(hits) if hits else float("nan")
        worst = max(hits) if hits else float("nan")
        within = sum(s <= TARGET_S for s in hits)
        rows.append(
            (f"{name} ({prop})", f"{len(hits)}/{runs}", rate, median, worst, within, *other)
        )
        key = f"kit_{short}_{prop.lower()}"
        record(f"{key}_found_rate", rate, "ratio")
        if profile == FAST:
            record(f"{key}_find_median_s", median, "s")
            record(f"{key}_find_max_s", worst, "s")
        else:
            record(f"{key}_report_median_s", median, "s")
    n = runs if correct_runs is None else correct_runs
    results = [_in_fresh_process(CORRECT, profile) for _ in range(n)]
    seconds = [_seconds_of(r) for r in results]
    passes = sum(not _found(r) for r in results)
    median, worst = statistics.median(seconds), max(seconds)
    rows.append((f"{CORRECT} (passes)", f"{passes}/{n}", passes / n, median, worst, "-"))
    if profile == FAST:
        record("kit_fast_correct_passes", passes, "runs")
        record("kit_fast_correct_median_s", median, "s")
        record("kit_fast_correct_max_s", worst, "s")
    else:
        record("kit_thorough_correct_passes", passes, "runs")
        record("kit_thorough_correct_s", median, "s")
    table(
        rows,
        header=(
            f"client ({profile}, fresh process per run)",
            "found",
            "rate",
            "median s",
            "max s",
            f"<= {TARGET_S:.0f} s",
        ),
    )


def naive_first_failure() -> None:
    """The naive reference clients' time to the first shrunk failure (module docstring)."""
    fast = settings(kit_settings(FAST), database=None)
    explained = settings(fast, report_multiple_bugs=True, phases=tuple(Phase))
    rows = []
    medians = {}
    for name, factory in NAIVE.items():
        medians[name] = statistics.median(_seconds(factory, fast) for _ in range(NAIVE_RUNS))
        rows.append((f"{name}: {FAST} (median of {NAIVE_RUNS})", medians[name]))
    sdk = "mcp 2.3.0 client"
    before = _seconds(NAIVE[sdk], explained)
    rows.append((f"{sdk}: every bug, explained (1 run)", before))
    table(rows, header=("time to the first shrunk failure", "s"))
    record("kit_first_failure_s", max(medians.values()), "s")
    record("kit_first_failure_explained_over_fast", before / medians[sdk], "ratio")


def main() -> None:
    found_rates(env_int("KIT_BENCH_RUNS", 20))
    thorough = env_int("KIT_BENCH_THOROUGH_RUNS", 5)
    if thorough:
        print()
        found_rates(thorough, THOROUGH, correct_runs=min(thorough, 2))
    print()
    naive_first_failure()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run"]:
        print(json.dumps(one_run(sys.argv[2], *sys.argv[3:4])))
    else:
        main()
