"""Throughput of the checker on a cheap synthetic model (not a test: run it by hand).

    .venv/bin/python tests/checker/bench_checker.py [N]

Explores an N x N torus walk (N*N states, 4 successors each) twice: with one invariant, then
with termination added (which also runs Tarjan and finds the lasso).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from checker_models import Grid

import conftest  # noqa: F401  (makes the repository root importable)
from fsm.checker import Property, check


class GridWithTermination(Grid):
    def properties(self) -> Sequence[Property[tuple[int, int]]]:
        return [*super().properties(), Property.terminates()]


def main(n: int) -> None:
    for model in (Grid(n), GridWithTermination(n)):
        report = check(model, progress=True)
        rate = report.states / report.seconds
        print(f"{report.summary()}  {rate:,.0f} states/s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 700)
