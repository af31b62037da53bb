"""Mutation testing of the decision code: ``make mutate`` (``python -m bench.mutation run``).

Runs mutmut 3 (the ``[tool.mutmut]`` table of ``pyproject.toml`` says which files and which
tests) under ``nice -n 19``, then prints one row per file and writes the rows to
``bench/mutation.json``. ``python -m bench.mutation`` alone reports the last run again
(from mutmut's results in ``mutants/``; without them it prints the table
``bench/mutation.json`` holds and leaves the file as it is); mutant names given after
``run`` are passed to mutmut (``run 'fsm.sse.history*'`` tests one file's mutants).

Columns: every mutant of the file; killed (a test failed); timed out (a test hung until
the harness stopped it: the change was noticed); survived (every selected test passed);
equivalent, the survivors listed in ``bench/mutation_equivalent.toml`` with a one-line
argument why no test can tell them from the original; import-time, the survivors in
functions that run only while their module is imported (listed in the same file, with
the tests that pin what they build): mutmut switches a mutant on after the import, so it
cannot run them; and the score, killed plus timed out over the mutants that are neither
equivalent nor import-time. A mutant of a function no selected test calls counts as
survived. Survivors not argued equivalent are printed by name (``mutmut
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

# mutmut 3's exit codes of a mutant's test run (5, 33: no test ran it: it survived)
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


def _listed() -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads(EQUIVALENT.read_text(encoding="utf-8"))
    return data


def equivalents() -> dict[str, str]:
    """Mutant name -> why it is equivalent (``bench/mutation_equivalent.toml``)."""
    return {name: str(why) for name, why in _listed().get("equivalent", {}).items()}


def import_time() -> dict[str, str]:
    """Function (mutmut's name for it) -> what runs it at import and which tests pin it."""
    return {name: str(why) for name, why in _listed().get("import-time", {}).items()}


def outcomes(path: str) -> dict[str, str]:
    """Mutant name -> status for one source file, from mutmut's last run."""
    meta = MUTANTS / (path + ".meta")
    if not meta.exists():
        return {}
    data: dict[str, Any] = json.loads(meta.read_text(encoding="utf-8"))
    return {name: _status(code) for name, code in data["exit_code_by_key"].items()}


def _column(name: str, state: str, argued: dict[str, str], at_import: dict[str, str]) -> str:
    """The column a mutant counts in: its status, or why a survivor does not count."""
    if state != "survived":
        return state
    if name in argued:
        return "equivalent"
    return "import-time" if name.rsplit("__mutmut_", 1)[0] in at_import else state


COLUMNS = ("killed", "timed out", "survived", "equivalent", "import-time", "not checked")


def summarise(path: str, argued: dict[str, str], at_import: dict[str, str]) -> dict[str, Any]:
    """One file's counts (``COLUMNS``, ``mutants``, ``killed %``: ``None`` before any run
    of it) and its unexplained survivors (``survivors``). ``killed %`` is over the mutants
    checked: not those the run did not reach, nor the equivalent and import-time ones."""
    status = outcomes(path)
    columns = {n: _column(n, s, argued, at_import) for n, s in status.items()}
    count = Counter(c if c in COLUMNS else "not checked" for c in columns.values())
    judged = len(status) - count["equivalent"] - count["import-time"] - count["not checked"]
    detected = count["killed"] + count["timed out"]
    return {
        "mutants": len(status),
        **{c: count[c] for c in COLUMNS},
        "killed %": round(100.0 * detected / judged, 1) if judged else None,
        "survivors": sorted(n for n, c in columns.items() if c == "survived"),
    }


def _key(column: str) -> str:
    """A column's key in ``bench/mutation.json`` (``killed %`` -> ``killed_pct``)."""
    return column.replace(" ", "_").replace("-", "_").replace("%", "pct")


HEADER = ("file", "mutants", *COLUMNS, "killed %")


def _print(rows: dict[str, dict[str, Any]]) -> None:
    """Print one line per file of ``rows`` (a column missing from a row shows as ``-``)."""
    table = [
        (p, *("-" if r.get(_key(h)) is None else r[_key(h)] for h in HEADER[1:]))
        for p, r in rows.items()
    ]
    results.table(table, header=HEADER)


def _previous() -> dict[str, Any]:
    """What ``bench/mutation.json`` holds now (empty if there is no such file)."""
    if not OUT.exists():
        return {}
    data: dict[str, Any] = json.loads(OUT.read_text(encoding="utf-8"))
    return data


def report(seconds: tuple[float, float, int] | None = None) -> int:
    """Print the table, write ``bench/mutation.json``; exit 1 if a file misses 95% or an
    entry of ``bench/mutation_equivalent.toml`` names a mutant that did not survive (or
    that the last run did not make: the code it argued about changed).

    Only files with a mutant checked in ``mutants/`` get a new row: a file the last run
    did not reach (no results, or mutants made and none checked) keeps the row
    bench/mutation.json already has (and is listed as not measured). With no results at
    all (no ``mutants/``, as after ``make clean``) the JSON file is left untouched: its
    table is printed, and the exit code is 1."""
    previous = _previous()
    argued, at_import = equivalents(), import_time()
    summary = {path: summarise(path, argued, at_import) for path in files()}
    # a file is measured once the run checked any of its mutants: one whose mutants were
    # only made (a run of other files' mutants) keeps its row
    measured = {p: f for p, f in summary.items() if f["mutants"] > f["not checked"]}
    if not measured:
        print(f"no mutmut results in {MUTANTS}: {OUT} is left as it is; its table:")
        _print({p: previous[p] for p in files() if p in previous})
        return 1
    rows = {p: {_key(k): v for k, v in f.items() if k != "survivors"} for p, f in summary.items()}
    _print(rows)
    out: dict[str, Any] = {
        p: rows[p] if p in measured else previous[p]
        for p in files()
        if p in measured or p in previous
    }
    if seconds is not None:
        wall, cpu, workers = seconds
        out["run"] = {"wall_s": round(wall), "cpu_s": round(cpu), "workers": workers}
        print(f"run: {wall:.0f} s wall-clock, {cpu:.0f} s CPU, {workers} worker(s)")
    elif "run" in previous:
        out["run"] = previous["run"]
    if "tables" in previous:  # the row mutation of the tables (bench/table_mutation.py)
        out["tables"] = previous["tables"]
    OUT.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    status = {n: s for path in summary for n, s in outcomes(path).items()}
    stale = [n for n in argued if status.get(n, "gone") != "survived"]
    for name in stale:
        if name in status:
            print(f"stale: {name} is listed as equivalent but {status[name]}")
        else:
            print(f"stale: {name} is listed as equivalent but is no mutant of the last run")
    for f in summary.values():
        for name in f["survivors"]:
            print("survived:", name)
    unmeasured = [p for p in summary if p not in measured]
    if unmeasured:
        print("not measured yet:", ", ".join(unmeasured))
    low = [p for p, f in measured.items() if f["killed %"] is not None and f["killed %"] < 95.0]
    if low:
        print("below 95% killed:", ", ".join(low))
    return 1 if low or stale or unmeasured else 0


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
    return report(None if names else (wall, cpu, workers))


def main(argv: list[str]) -> int:
    if argv[:1] == ["run"]:
        return run(argv[1:], int(os.environ.get("MUTATE_WORKERS", "1")))
    if argv:
        print("usage: python -m bench.mutation [run [MUTANT-NAME ...]]", file=sys.stderr)
        return 2
    return report()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
