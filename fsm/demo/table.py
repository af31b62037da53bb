"""The demo's side-by-side tables: a plain client against the guarded one, in 100 columns.

One renderer serves both scenes (:mod:`fsm.demo.cli`, :mod:`fsm.demo.mrtr_scene`): a
title, the fault the scene injects, a header naming the two clients with the one that
behaves marked, then one row per aspect, each cell wrapped to its column (never cut).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["WIDTH", "Row", "side_by_side"]

WIDTH = 100
"""Columns a table takes at most."""

_LABEL = 16
_GAP = 2


@dataclass(frozen=True)
class Row:
    """One aspect of a scene: its label and what each client did (lines of text)."""

    label: str
    plain: Sequence[str]
    guarded: Sequence[str]
    note: str | None = None
    """A line under the row (say, the fault this case injects)."""


def _wrap(lines: Sequence[str], width: int) -> list[str]:
    out: list[str] = []
    for line in lines or ["-"]:
        out += textwrap.wrap(line, width, subsequent_indent="  ") or [""]
    return out


def side_by_side(
    title: str, fault: str | None, headers: tuple[str, str], rows: Sequence[Row], good: int = 1
) -> str:
    """The table: ``title``, then ``fault`` (what the scene injects, if one fault for the
    whole scene), the two ``headers`` (plain, guarded) with column ``good`` (0 or 1)
    marked ``*``, and ``rows``; at most :data:`WIDTH` columns."""
    column = (WIDTH - _LABEL - _GAP) // 2
    out = [title]
    if fault:
        out += textwrap.wrap(f"fault injected: {fault}", WIDTH, subsequent_indent="  ")
    marked = [h + (" *" if i == good else "") for i, h in enumerate(headers)]
    out.append(f"{'':<{_LABEL}}{marked[0]:<{column + _GAP}}{marked[1]}")
    out.append("-" * WIDTH)
    for row in rows:
        left, right = _wrap(row.plain, column), _wrap(row.guarded, column)
        for i in range(max(len(left), len(right))):
            a = left[i] if i < len(left) else ""
            b = right[i] if i < len(right) else ""
            label = row.label if i == 0 else ""
            out.append(f"{label:<{_LABEL}}{a:<{column + _GAP}}{b}".rstrip())
        if row.note:
            out += textwrap.wrap(
                row.note, WIDTH, initial_indent=" " * _LABEL, subsequent_indent=" " * (_LABEL + 2)
            )
    out.append(f"* the client that behaves: {headers[good]}")
    return "\n".join(out)
