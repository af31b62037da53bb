"""The shipped models of some ``models/`` files, each checked once per test session, with
the assertions every pinned model gets (state space, verdicts, shortest counterexamples)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fsm.checker import Report, check, load_models, replay, violated_at

ROOT = Path(__file__).resolve().parents[2]


class Shipped:
    """The models defined by ``files`` (names under ``models/``), checked lazily, once."""

    def __init__(self, files: tuple[str, ...]) -> None:
        self.files = files
        self._reports: dict[str, tuple[Any, Report]] = {}

    def models(self) -> list[Any]:
        """Every model the files define (freshly loaded)."""
        return [m for f in self.files for m in load_models(str(ROOT / "models" / f))]

    def report(self, name: str) -> tuple[Any, Report]:
        """The model called ``name`` and its report (every model is checked on first use)."""
        if not self._reports:
            for model in self.models():
                self._reports[model.name] = (model, check(model))
        return self._reports[name]

    def assert_pinned(self, name: str, pinned: dict[str, tuple[int, int]]) -> None:
        """The model explored completely, exactly the pinned states and transitions."""
        _, report = self.report(name)
        assert report.complete
        assert (report.states, report.transitions) == pinned[name]

    def assert_violates_exactly(
        self, name: str, shortest: dict[str, tuple[int, int | None]]
    ) -> None:
        """The model violates exactly ``shortest``'s properties (and declares them), each
        with a shortest counterexample of the pinned ``(steps, loop_start)`` that replays."""
        model, report = self.report(name)
        violated = {r.name for r in report.results if r.verdict.value == "violated"}
        assert violated == set(shortest) == set(model.expected_violations)
        for prop, (steps, loop_start) in shortest.items():
            path = report.assert_violated(prop)
            assert (len(path.steps), path.loop_start) == (steps, loop_start), prop
            states = replay(model, path.names)
            assert violated_at(model, prop, states, path.loop_start)


def pin_tests(
    shipped: Shipped,
    pinned: dict[str, tuple[int, int]],
    models: Callable[[], list[Any]] | None = None,
) -> tuple[Callable[[], None], Callable[[str], None]]:
    """The two tests every file of pinned models runs: every model it ships (``models()``,
    else ``shipped``'s) is pinned, and each one's state space is exactly as pinned. A test
    file binds them to test names::

        test_every_model_is_pinned, test_state_space_is_pinned = pin_tests(SHIPPED, PINNED)
    """

    def every_model_is_pinned() -> None:
        found = models() if models is not None else shipped.models()
        assert sorted(m.name for m in found) == sorted(pinned)

    @pytest.mark.parametrize("name", sorted(pinned))
    def state_space_is_pinned(name: str) -> None:
        shipped.assert_pinned(name, pinned)

    return every_model_is_pinned, state_space_is_pinned
