"""Symmetry reduction, side by side: the guarded policy with 1 to 4 concurrent requests,
explored once per orbit (representatives) and in full, each run cold in a fresh process.

For each run: states explored, the full-space states they stand for, seconds to the
verdict (wall, and the process's CPU time: on this shared 2-core machine other work can
stretch wall time several times while CPU time stays put), both rates per CPU second
(representatives and the full-space states they stand for), and memory per explored state
(the growth of the process's resident set over the run, everything the run keeps: graph,
states, the world's and the policy's memos, divided by the states explored).

Figures recorded: ``symmetry_speedup_x3`` (full over reduced time to verdict, 3 requests,
CPU time), ``checker_x4_verified_s`` (time to the verdict with 4 requests, reduced, wall;
``checker_x4_verified_cpu_s`` its CPU time),
``checker_x4_states`` (representatives explored with 4 requests), ``bytes_per_state_x4``.
"""

from __future__ import annotations

import os
from typing import Any

from bench.results import child_json, record, table

VARIANT = "after,silent,rpc,answers"
FULL_UP_TO = 3  # 4 requests in full is ~10 million states: not run


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_one(requests: int, symmetry: bool) -> dict[str, Any]:
    """One cold run in this process (a fresh policy): its figures as a dict."""
    import gc
    import time

    from fsm.checker import check
    from models.guarded import CONFIG, GuardPolicy, variants

    world = variants(requests, {VARIANT}, GuardPolicy(CONFIG))[0]
    gc.collect()
    before, cpu = _rss(), time.process_time()
    report = check(world, symmetry=symmetry)
    cpu = time.process_time() - cpu
    grown = _rss() - before
    return {
        "states": report.states,
        "represented": report.represented,
        "transitions": report.transitions,
        "seconds": report.seconds,
        "cpu_seconds": cpu,
        "ok": report.ok,
        "bytes_per_state": grown / report.states,
    }


def _spawn(requests: int, symmetry: bool) -> dict[str, Any]:
    code = (
        "import json, sys; from bench.symmetry_bench import run_one; "
        f"print(json.dumps(run_one({requests}, {symmetry})))"
    )
    result: dict[str, Any] = child_json("-c", code)
    return result


def main() -> None:
    rows: list[tuple[Any, ...]] = []
    runs: dict[tuple[int, bool], dict[str, Any]] = {}
    for requests in (1, 2, 3, 4):
        for symmetry in (True, False):
            if not symmetry and requests > FULL_UP_TO:
                continue
            r = runs[(requests, symmetry)] = _spawn(requests, symmetry)
            rows.append(
                (
                    f"requests={requests} {'reduced' if symmetry else 'full'}",
                    f"{r['states']:,}",
                    f"{r['represented']:,}",
                    r["seconds"],
                    r["cpu_seconds"],
                    r["states"] / r["cpu_seconds"],
                    r["represented"] / r["cpu_seconds"],
                    r["bytes_per_state"],
                    "holds" if r["ok"] else "FAILS",
                )
            )
    table(
        rows,
        header=(
            f"guarded[{VARIANT}]",
            "states explored",
            "full-space states",
            "wall s",
            "CPU s",
            "explored/CPU s",
            "full-space/CPU s",
            "bytes/state",
            "P1-P7, L1",
        ),
    )
    full3, reduced3 = runs[(3, False)], runs[(3, True)]
    speedup = full3["cpu_seconds"] / reduced3["cpu_seconds"]
    wall = full3["seconds"] / reduced3["seconds"]
    x4 = runs[(4, True)]
    print(
        f"requests=3: full / reduced time to verdict = {speedup:.1f}x CPU, {wall:.1f}x wall "
        "(target >= 5x)"
    )
    print(
        f"requests=4 verified completely in {x4['seconds']:.1f} s wall, "
        f"{x4['cpu_seconds']:.1f} s CPU (target <= 30 s)"
    )
    record("symmetry_speedup_x3", speedup, "ratio")
    record("checker_x4_verified_s", x4["seconds"], "s")
    record("checker_x4_verified_cpu_s", x4["cpu_seconds"], "s")
    record("checker_x4_states", x4["states"], "states")
    record("bytes_per_state_x4", x4["bytes_per_state"], "bytes")


if __name__ == "__main__":
    main()
