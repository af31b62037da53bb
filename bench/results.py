"""Shared helpers for benchmarks: record figures to ``bench/results.json``, print tables.

``results.json`` maps a figure name to ``{"value": number, "unit": "..."}``. Each
:func:`record` merges one figure into it (other benchmarks' figures are kept), and
remembers it for the combined table ``python -m bench`` prints at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

RESULTS = Path(__file__).resolve().parent / "results.json"
ROOT = RESULTS.parents[1]
"""The checkout: where a benchmark's child processes run."""

recorded: dict[str, tuple[float, str]] = {}
"""The figures recorded by this process, in order (for the combined table)."""


def record(name: str, value: float, unit: str) -> None:
    """Merge ``name = value unit`` into ``results.json``."""
    try:
        data: dict[str, Any] = json.loads(RESULTS.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            data = {}
    except (FileNotFoundError, ValueError):
        data = {}
    data[name] = {"value": value, "unit": unit}
    tmp = RESULTS.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(RESULTS)
    recorded[name] = (value, unit)


def fmt(value: object) -> str:
    """A number with a sensible number of digits; anything else as ``str``."""
    if isinstance(value, float):
        if value == 0 or abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(rows: Iterable[Sequence[object]], header: Sequence[str] | None = None) -> str:
    """Print ``rows`` as an aligned table (numbers right-aligned) and return the text."""
    body = [[fmt(c) for c in row] for row in rows]
    all_rows = ([list(header)] if header else []) + body
    if not all_rows:
        return ""
    ncols = max(len(r) for r in all_rows)
    widths = [max(len(r[i]) if i < len(r) else 0 for r in all_rows) for i in range(ncols)]
    lines = []
    for n, row in enumerate(all_rows):
        cells = []
        for i, cell in enumerate(row):
            numeric = cell[:1].isdigit() or (cell[:1] in "-+." and cell[1:2].isdigit())
            cells.append(cell.rjust(widths[i]) if numeric else cell.ljust(widths[i]))
        lines.append("  ".join(cells).rstrip())
        if header and n == 0:
            lines.append("  ".join("-" * w for w in widths))
    text = "\n".join(lines)
    print(text)
    return text


T = TypeVar("T")


def run_quietly(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``anyio.run(fn, *args)`` with logging below ERROR silenced (the SDK logs the faults
    and retries the benchmarks cause)."""
    import logging

    import anyio

    logging.disable(logging.WARNING)
    try:
        return anyio.run(fn, *args)
    finally:
        logging.disable(logging.NOTSET)


def alternating(kinds: Sequence[T], rounds: int) -> Iterator[T]:
    """Each of ``kinds`` once a round for ``rounds`` rounds: in their order on even rounds,
    reversed on odd ones, so that the machine's drift over a run (and whatever going
    first costs) falls on every kind alike."""
    for i in range(rounds):
        yield from kinds if i % 2 == 0 else kinds[::-1]


def child_json(*args: str, python: str = sys.executable, cwd: Path = ROOT) -> Any:
    """Run ``python *args`` in a fresh process in ``cwd`` and return the JSON its last line
    of output holds (a run measured with nothing warm from an earlier one). A child that
    fails raises :class:`subprocess.CalledProcessError`."""
    done = subprocess.run([python, *args], cwd=cwd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def env_int(name: str, default: int) -> int:
    """The integer in environment variable ``name``, or ``default`` when it is unset or
    blank (a benchmark's size, set from outside)."""
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def env_float(name: str, default: float) -> float:
    """The number in environment variable ``name``, or ``default`` when unset or blank."""
    value = os.environ.get(name, "")
    return float(value) if value.strip() else default
