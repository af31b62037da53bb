"""Instruction counts (valgrind's callgrind): what the guarded client costs, independent
of the machine's load.

Each workload runs the harness server and one client in one process on 127.0.0.1, as in
``e2e_bench``, under ``valgrind --tool=callgrind``, at two sizes; the difference divided
by the difference in size is the cost of one more unit, without start-up:

* one call streaming 1,000 and 3,000 progress notifications: instructions per event;
* 20 and 120 calls in one session whose stream carries only the result: instructions
  per call (what ``e2e_bench`` calls a one-event call);
* the guard alone (no server, no client), 20,000 and 40,000 new ids past a full window
  (:data:`GUARD_KINDS`): instructions per id,
  ``guard_instructions_per_event_{bare,guard,window_only}``.

Recorded: ``e2e_instructions_added_per_event_pct`` (the guarded client's extra
instructions per progress event, in % of the plain round trip),
``e2e_instructions_per_call_guarded_over_plain`` and the three guard figures. Needs
``valgrind`` on the PATH (the benchmark says so and records nothing without it); fourteen
runs, two at a time, take some minutes. ``python -m bench.instructions_bench run KIND
WORKLOAD N`` runs one workload natively.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.results import record, table

ROOT = Path(__file__).resolve().parents[1]
SIZES = {"events": (1_000, 3_000), "calls": (20, 120)}
KINDS = ("plain", "guarded")
GUARD_SIZES = (20_000, 40_000)
GUARD_KINDS = ("bare", "guard", "window-only")
"""The guard alone (no server, no client): new ids through ``Guard.on_event`` once the
stream's 1,024-id window is full (``guard``: each evicted id fingerprinted; ``window-only``:
``max_event_history=0``), against ``bare``: the benchmark's bare loop (a dict insert and a
cursor), ids made the same way in all three."""


def _guard_workload(kind: str, n: int) -> None:
    from bench.guard_bench import PROGRESS, STREAM, _guard

    ids = [f"ev-{i}" for i in range(n)]
    if kind == "bare":
        seen: dict[str, None] = {}
        cursor = None
        for i in ids:
            seen[i] = None
            cursor = i
        assert cursor == ids[-1]
        return
    guard = _guard(max_event_history=0) if kind == "window-only" else _guard()
    on_event = guard.on_event
    for p in range(2_048):
        on_event(STREAM, f"p-{p}", PROGRESS)
    for i in ids:
        on_event(STREAM, i, PROGRESS)


async def _workload(kind: str, workload: str, n: int) -> None:
    import httpx2

    from bench.e2e_bench import _guarded, _plain, stream_progress
    from fsm.wire.server import running_server

    opener = _plain if kind == "plain" else _guarded
    async with (
        running_server() as server,
        httpx2.AsyncClient(timeout=300.0) as http,
        opener(server.url, http) as session,
    ):
        if workload == "events":
            await stream_progress(session, n)
        else:
            for _ in range(n):
                await session.call_tool("stream_progress", {"count": 1})


def _count(kind: str, workload: str, n: int, out: Path) -> int:
    """Instructions of one process running ``workload`` at size ``n`` under callgrind."""
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out / f'{kind}-{workload}-{n}.out'}",
            sys.executable,
            "-m",
            "bench.instructions_bench",
            "run",
            kind,
            workload,
            str(n),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"callgrind run failed ({kind} {workload} {n}):\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: instruction counts skipped, nothing recorded")
        return
    runs = [(k, w, n) for w, sizes in SIZES.items() for k in KINDS for n in sizes]
    runs += [(k, "history", n) for k in GUARD_KINDS for n in GUARD_SIZES]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        found = pool.map(lambda run: _count(run[0], run[1], run[2], Path(tmp)), runs)
        counts = dict(zip(runs, found, strict=True))
    per: dict[tuple[str, str], float] = {}
    for (kind, workload, n), instructions in counts.items():
        small, large = SIZES.get(workload, GUARD_SIZES)
        if n == large:
            per[kind, workload] = (instructions - counts[kind, workload, small]) / (large - small)
    added = per["guarded", "events"] / per["plain", "events"] - 1
    call_ratio = per["guarded", "calls"] / per["plain", "calls"]
    table(
        [
            ("per progress event", per["plain", "events"], per["guarded", "events"], 1 + added),
            ("per one-event call", per["plain", "calls"], per["guarded", "calls"], call_ratio),
        ],
        header=("instructions (callgrind)", "plain", "guarded", "guarded / plain"),
    )
    table(
        [(kind, per[kind, "history"]) for kind in GUARD_KINDS],
        header=("per new id past the window, instructions (callgrind)", "Guard.on_event"),
    )
    for kind in GUARD_KINDS:
        name = kind.replace("-", "_")
        record(f"guard_instructions_per_event_{name}", round(per[kind, "history"]), "instr")
    record("e2e_instructions_added_per_event_pct", round(100 * added, 2), "%")
    record("e2e_instructions_per_call_guarded_over_plain", round(call_ratio, 3), "ratio")


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"]:
        import logging

        import anyio

        logging.disable(logging.WARNING)
        kind, workload, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
        if workload == "history":
            _guard_workload(kind, n)
        else:
            anyio.run(_workload, kind, workload, n)
    else:
        main()
