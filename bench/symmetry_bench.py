"""Symmetry reduction, side by side: the guarded policy with 1 to 4 concurrent requests,
explored once per orbit (representatives) and in full, each run cold in a fresh process.

For each run: states explored, the full-space states they stand for, seconds to the
verdict, both rates (representatives/s and full-space states/s), and memory per explored
state (the growth of the process's resident set over the run, everything the run keeps:
graph, states, the world's and the policy's memos, divided by the states explored).

Figures recorded: ``symmetry_speedup_x3`` (full over reduced time to verdict, 3 requests),
``checker_x4_verified_s`` (time to the verdict with 4 requests, reduced),
``checker_x4_states`` (representatives explored with 4 requests), ``bytes_per_state_x4``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.results import record, table

ROOT = Path(__file__).resolve().parents[1]
VARIANT = "after,silent,rpc,answers"
FULL_UP_TO = 3  # 4 requests in full is ~10 million states: not run


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_one(requests: int, symmetry: bool) -> dict[str, Any]:
    """One cold run in this process (a fresh policy): its figures as a dict."""
    import gc

    from fsm.checker import check
    from models.guarded import CONFIG, GuardPolicy, variants

    world = variants(requests, {VARIANT}, GuardPolicy(CONFIG))[0]
    gc.collect()
    before = _rss()
    report = check(world, symmetry=symmetry)
    grown = _rss() - before
    return {
        "states": report.states,
        "represented": report.represented,
        "transitions": report.transitions,
        "seconds": report.seconds,
        "ok": report.ok,
        "bytes_per_state": grown / report.states,
    }


def _spawn(requests: int, symmetry: bool) -> dict[str, Any]:
    code = (
        "import json, sys; from bench.symmetry_bench import run_one; "
        f"print(json.dumps(run_one({requests}, {symmetry})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
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
                    r["states"] / r["seconds"],
                    r["represented"] / r["seconds"],
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
            "seconds",
            "explored/s",
            "full-space/s",
            "bytes/state",
            "P1-P7, L1",
        ),
    )
    speedup = runs[(3, False)]["seconds"] / runs[(3, True)]["seconds"]
    x4 = runs[(4, True)]
    print(f"requests=3: full / reduced time to verdict = {speedup:.1f}x (target >= 5x)")
    print(f"requests=4 verified completely in {x4['seconds']:.1f} s (target <= 30 s)")
    record("symmetry_speedup_x3", speedup, "ratio")
    record("checker_x4_verified_s", x4["seconds"], "s")
    record("checker_x4_states", x4["states"], "states")
    record("bytes_per_state_x4", x4["bytes_per_state"], "bytes")


if __name__ == "__main__":
    main()
