"""How the checker reports a model that raises: the message, the line of the model's code
that raised, the action it was applying (if any), and the shortest path to the state,
indented under the message."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from checker_models import Counter

from fsm.checker import ModelError, check
from fsm.checker.location import shown


class RaisesInNextState(Counter):
    def next_state(self, state: int, action: str) -> int | None:
        if state == 2 and action == "inc":
            raise RuntimeError("boom")
        return super().next_state(state, action)


class RaisesInActions(Counter):
    def actions(self, state: int) -> Iterable[str]:
        if state == 1:
            raise RuntimeError("no actions")
        return super().actions(state)


HERE = shown(__file__)  # relative to the working directory, as the report shows it
SOURCE = Path(__file__).read_text().splitlines()
BOOM = SOURCE.index('            raise RuntimeError("boom")') + 1
NO_ACTIONS = SOURCE.index('            raise RuntimeError("no actions")') + 1


def _error(model: Counter) -> ModelError:
    with pytest.raises(ModelError) as info:
        check(model)
    return info.value


def test_the_report_names_the_action_and_indents_the_path() -> None:
    assert _error(RaisesInNextState()).format_text().splitlines() == [
        "model raised RuntimeError: boom",
        f'  at {HERE}:{BOOM}, in next_state: raise RuntimeError("boom")',
        "  raised applying 'inc' in the state reached by:",
        "    0. (init)  0",
        "    1. inc     1",
        "    2. inc     2",
    ]


def test_without_an_action_the_report_names_none() -> None:
    assert _error(RaisesInActions()).format_text().splitlines() == [
        "model raised RuntimeError: no actions",
        f'  at {HERE}:{NO_ACTIONS}, in actions: raise RuntimeError("no actions")',
        "  raised in the state reached by:",
        "    0. (init)  0",
        "    1. inc     1",
    ]
