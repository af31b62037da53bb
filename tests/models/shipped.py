"""The shipped models, grouped by the ``models/`` files that define them, each checked
once per test module and only when a test asks for it, with the row of figures every
pinned model gets (:class:`Pin`: state space, verdicts, shortest counterexamples)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from weakref import WeakSet

from fsm.checker import Report, check, load_models
from fsm.checker.model import model_name

ROOT = Path(__file__).resolve().parents[2]

Shortest = Mapping[str, tuple[int, int | None]]
"""Property name -> ``(steps, loop_start)`` of its shortest counterexample."""


@dataclass(frozen=True)
class Pin:
    """What one shipped model, checked at its default bounds, must come to exactly.

    ``states`` and ``transitions``: the space explored (of representatives, where the
    model declares a symmetry). ``violates``: the properties it violates, each with its
    shortest counterexample; empty, the model holds every property. ``full``: the
    unreduced ``(states, transitions)`` of a model that declares a symmetry."""

    states: int
    transitions: int
    violates: Shortest = field(default_factory=dict)
    full: tuple[int, int] | None = None

    @property
    def space(self) -> tuple[int, int]:
        """``(states, transitions)``."""
        return (self.states, self.transitions)


class Shipped:
    """The models defined by ``files`` (names under ``models/``), each checked lazily, once
    until :meth:`forget`."""

    def __init__(self, files: tuple[str, ...]) -> None:
        self.files = files
        self._models: dict[str, Any] = {}
        self._reports: dict[str, tuple[Any, Report]] = {}
        _EVERY.add(self)

    def models(self) -> list[Any]:
        """Every model the files define (freshly loaded)."""
        return [m for f in self.files for m in load_models(str(ROOT / "models" / f))]

    def report(self, name: str) -> tuple[Any, Report]:
        """The model called ``name`` and its report (checked on first use; a name the
        files do not define is a ``KeyError``)."""
        if name not in self._reports:
            if not self._models:
                self._models = {model_name(m): m for m in self.models()}
            model = self._models[name]
            self._reports[name] = (model, check(model))
        return self._reports[name]

    def forget(self) -> None:
        """Drop the loaded models and their reports: checked again when asked."""
        self._models.clear()
        self._reports.clear()


_EVERY: WeakSet[Shipped] = WeakSet()


def forget_reports() -> None:
    """Every :class:`Shipped` drops the models it loaded and their reports (with them the
    worlds' interned states): checked again when a later test asks."""
    for shipped in _EVERY:
        shipped.forget()


class Family:
    """The shipped models of some ``models/`` files and their pins, one per model.

    A model that must hold every property must also reach each of ``witnesses`` (its
    check is not vacuous), and, where its user answers, each of ``answered``."""

    def __init__(
        self,
        files: tuple[str, ...],
        pins: dict[str, Pin],
        *,
        witnesses: tuple[str, ...] = ("presented",),
        answered: tuple[str, ...] = (),
    ) -> None:
        self.shipped = Shipped(files)
        self.pins = pins
        self.witnesses = witnesses
        self.answered = answered
