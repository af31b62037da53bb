"""Mutation testing of the decision code: ``make mutate`` (``python -m bench.mutation run``).

Runs mutmut 3 (the ``[tool.mutmut]`` table of ``pyproject.toml`` says which files and which
tests) under ``nice -n 19``, then prints one row per file and writes the rows to
``bench/mutation.json``. ``python -m bench.mutation`` alone reports the last run again
(from mutmut's results in ``mutants/``); mutant names given after ``run`` are passed to
mutmut (``run 'fsm.history*'`` tests one file's mutants).

Columns: every mutant of the file; killed (a test failed); timed out (a test hung until
the harness stopped it: the change was noticed); survived (every selected test passed);
equivalent, the survivors listed in ``bench/mutation_equivalent.toml`` with a one-line
argument why no test can tell them from the original; and the score, killed plus timed
out over the mutants that are not equivalent. A mutant of a function no selected test
calls counts as survived. Survivors not argued equivalent are printed by name (``mutmut
show NAME`` prints the change).

Not part of ``make bench`` or CI: a full run takes tens of minutes. It is not a speed
benchmark either; the run's wall-clock and CPU seconds are recorded only to keep the
selection fast.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

from bench import results

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ROOT / "mutants"
EQUIVALENT = Path(__file__).resolve().parent / "mutation_equivalent.toml"
OUT = Path(__file__).resolve().parent / "mutation.json"

# mutmut 3's exit codes of a mutant's test run, as its ``results`` command names them
_STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "survived", 33: "survived"}
_TIMEOUT = {24, -24, 152, 255, 36}


def _status(code: int | None) -> str:
    if code is None:
        return "not checked"
    if code in _TIMEOUT:
        return "timed out"
    return _STATUS.get(code, "suspicious")


def files() -> list[str]:
    """The files ``[tool.mutmut] only_mutate`` names, in that order."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return list(config["tool"]["mutmut"]["only_mutate"])


def equivalents() -> dict[str, str]:
    """Mutant name -> why it is equivalent (``bench/mutation_equivalent.toml``)."""
    data = tomllib.loads(EQUIVALENT.read_text(encoding="utf-8"))
    return {name: str(why) for name, why in data.get("equivalent", {}).items()}


def outcomes(path: str) -> dict[str, str]:
    """Mutant name -> status for one source file, from mutmut's last run."""
    meta = MUTANTS / (path + ".meta")
    if not meta.exists():
        return {}
    data: dict[str, Any] = json.loads(meta.read_text(encoding="utf-8"))
    return {name: _status(code) for name, code in data["exit_code_by_key"].items()}


def report(seconds: tuple[float, float] | None = None) -> int:
    """Print the table, write ``bench/mutation.json``; exit 1 if a file misses 95%."""
    argued = equivalents()
    rows: list[tuple[object, ...]] = []
    summary: dict[str, Any] = {}
    unexplained: list[str] = []
    stale: list[str] = []
    for path in files():
        status = outcomes(path)
        for name in argued:
            if name in status and status[name] != "survived":
                stale.append(f"{name} is listed as equivalent but {status[name]}")
        count = Counter(
            "equivalent" if s == "survived" and n in argued else s for n, s in status.items()
        )
        unexplained += sorted(n for n, s in status.items() if s == "survived" and n not in argued)
        total = len(status)
        detected = count["killed"] + count["timed out"]
        score = 100.0 * detected / (total - count["equivalent"]) if total else 0.0
        summary[path] = {
            "mutants": total,
            "killed": count["killed"],
            "timed_out": count["timed out"],
            "survived": count["survived"],
            "equivalent": count["equivalent"],
            "not_checked": count["not checked"] + count["suspicious"],
            "killed_pct": round(score, 1),
        }
        rows.append(
            (
                path,
                total,
                count["killed"],
                count["timed out"],
                count["survived"],
                count["equivalent"],
                count["not checked"] + count["suspicious"],
                round(score, 1),
            )
        )
    results.table(
        rows,
        header=(
            "file",
            "mutants",
            "killed",
            "timed out",
            "survived",
            "equivalent",
            "not run",
            "killed %",
        ),
    )
    if seconds is not None:
        summary["run_wall_s"], summary["run_cpu_s"] = (round(s) for s in seconds)
        print(f"run: {seconds[0]:.0f} s wall-clock, {seconds[1]:.0f} s CPU (one worker)")
        results.record("mutation_run_cpu_s", round(seconds[1]), "s")
    elif OUT.exists():
        old = json.loads(OUT.read_text(encoding="utf-8"))
        for key in ("run_wall_s", "run_cpu_s"):
            if key in old:
                summary[key] = old[key]
    OUT.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    for line in stale:
        print("stale:", line)
    for name in unexplained:
        print("survived:", name)
    low = [p for p in files() if summary[p]["killed_pct"] < 95.0]
    if low:
        print("below 95% killed:", ", ".join(low))
    return 1 if low or stale else 0


def run(names: list[str], workers: int) -> int:
    """Run mutmut (niced, ``workers`` children), then :func:`report`."""
    cmd = [
        "nice",
        "-n",
        "19",
        sys.executable,
        "-m",
        "mutmut",
        "run",
        "--max-children",
        str(workers),
        *names,
    ]
    start, cpu0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, cwd=ROOT, check=False)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.monotonic() - start
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    if done.returncode != 0:
        print(f"mutmut exited {done.returncode}", file=sys.stderr)
        return 2
    return report(None if names else (wall, cpu))


def main(argv: list[str]) -> int:
    if argv[:1] == ["run"]:
        return run(argv[1:], int(os.environ.get("MUTATE_WORKERS", "1")))
    if argv:
        print("usage: python -m bench.mutation [run [MUTANT-NAME ...]]", file=sys.stderr)
        return 2
    return report()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
