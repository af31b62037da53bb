"""The search hides its growing graph from the cyclic gc, and always gives it back."""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import pytest

from fsm.checker import BaseModel, Checker, Property, check

N = 5000  # several freeze periods (every 1024 expanded states)


class Line(BaseModel[int, str]):
    """0 -> 1 -> ... -> N; every 500th step records how many objects the gc had frozen
    (counting them walks the frozen list: not on every step)."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.frozen_seen: set[int] = set()
        self.fail_at = fail_at

    def init_states(self) -> Sequence[int]:
        return [0]

    def actions(self, n: int) -> Iterable[str]:
        return ["step"] if n < N else []

    def next_state(self, n: int, action: str) -> int | None:
        if n == self.fail_at:
            raise RuntimeError("boom")
        if n % 500 == 499:
            self.frozen_seen.add(gc.get_freeze_count())
        return n + 1

    def is_terminal(self, n: int) -> bool:
        return n == N

    def properties(self) -> Sequence[Property[int]]:
        return [Property.always("bounded", lambda n: n <= N)]


@contextmanager
def _collector(enabled: bool) -> Iterator[None]:
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


def test_the_search_freezes_while_it_runs_and_unfreezes_after() -> None:
    model = Line()
    with _collector(True):
        assert gc.get_freeze_count() == 0
        report = check(model)
        assert gc.get_freeze_count() == 0
    assert report.ok and report.states == N + 1
    assert max(model.frozen_seen) > 0  # the graph was hidden during the search


def test_the_search_unfreezes_when_the_model_raises() -> None:
    with _collector(True), pytest.raises(Exception, match="boom"):
        Checker(Line(fail_at=3000)).run()
    assert gc.get_freeze_count() == 0


def test_a_process_that_freezes_objects_itself_is_left_alone() -> None:
    model = Line()
    with _collector(True):
        gc.freeze()
        try:
            before = gc.get_freeze_count()
            check(model)
            # Not unfrozen (the process's frozen objects stay frozen) and not frozen further
            # (the search's thousands of objects would show). Another thread may free a few
            # frozen objects meanwhile (pytest-xdist's worker does), never add any.
            assert before - 100 <= gc.get_freeze_count() <= before
            assert all(before - 100 <= n <= before for n in model.frozen_seen)
        finally:
            gc.unfreeze()


def test_a_small_search_never_counts_the_frozen_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[int] = []

    def count() -> int:
        counted.append(1)
        return 0

    monkeypatch.setattr(gc, "get_freeze_count", count)
    with _collector(True):
        check(Chain(1000))  # 1,001 states: never moves its graph
        assert counted == []
        check(Chain(N))  # asks once, when it first moves its graph
    assert counted == [1]


class Chain(BaseModel[int, str]):
    """0 -> 1 -> ... -> last."""

    def __init__(self, last: int) -> None:
        self.last = last

    def init_states(self) -> Sequence[int]:
        return [0]

    def actions(self, n: int) -> Iterable[str]:
        return ["step"] if n < self.last else []

    def next_state(self, n: int, action: str) -> int | None:
        return n + 1

    def is_terminal(self, n: int) -> bool:
        return n == self.last

    def properties(self) -> Sequence[Property[int]]:
        return [Property.always("bounded", lambda n: n <= self.last)]


def test_a_disabled_collector_is_left_alone() -> None:
    model = Line()
    with _collector(False):
        check(model)
        assert not gc.isenabled()
    assert model.frozen_seen == {0}
