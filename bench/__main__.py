"""Run every ``bench/*_bench.py`` module's ``main()`` in turn, then print one table.

``python -m bench`` runs them all (sorted by file name); ``python -m bench guard``
runs only the modules whose name contains one of the given words.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from bench import results


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent
    names = sorted(p.stem for p in here.glob("*_bench.py"))
    if argv:
        names = [n for n in names if any(word in n for word in argv)]
    if not names:
        print("no benchmark matched", file=sys.stderr)
        return 2
    for name in names:
        print(f"== {name}", flush=True)
        module = importlib.import_module(f"bench.{name}")
        module.main()
        print()
    print("== all figures (merged into bench/results.json)")
    results.table(
        [(name, value, unit) for name, (value, unit) in results.recorded.items()],
        header=("figure", "value", "unit"),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
