"""What every test directory shares: the async tests run on asyncio, the SDKs' event
loop, whichever other anyio backends are installed; the heaviest modules are collected
first; a session ends with its heap swept, then frozen."""

from __future__ import annotations

import gc

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _weight(item: pytest.Item) -> float:
    heavy = item.get_closest_marker("heavy")
    return 0.0 if heavy is None else float(heavy.kwargs.get("minutes", 1))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules marked ``heavy(minutes=N)`` (N: roughly the worker-minutes the module takes
    on a loaded two-core machine) come first, the heaviest first, the rest after them in
    their own order. ``make test`` hands whole modules to the workers in this order
    (``--dist loadfile --no-loadscope-reorder``): started last, the longest module would
    leave the other workers idle at the end of the run."""
    items.sort(key=lambda item: -_weight(item))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Sweep the heap once the session's fixtures are torn down, then freeze it.

    A worker that checked models holds millions of objects (the loaded model files' worlds
    and memos: 3.65 million after ``tests/models/test_pins.py``), and pytest's last
    collection ran over them after the worker had reported its end, when pytest-xdist's
    execnet gives it 5 s before it sends SIGINT. Here the collection runs before that
    report (unraisable exceptions surface in it as they did), and the frozen heap leaves
    the last one nothing to sweep."""
    gc.collect()
    gc.freeze()
