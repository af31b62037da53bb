"""Put the repository root (for the ``models`` folder) and this folder (for ``shipped``)
on sys.path; free what each module's model files hold once the module is done."""

import gc
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsm.checker import unload_models

HERE = Path(__file__).resolve().parent
for path in (str(HERE.parents[1]), str(HERE)):
    if path not in sys.path:
        sys.path.insert(0, path)

from shipped import forget_reports  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _unload_the_module_s_models() -> Iterator[None]:
    """Once a module's tests are done: the model files it loaded are unloaded and the
    shipped models' reports forgotten, then the heap is swept once.

    A loaded model file stays registered with its models and what checking them memoised
    (8 million objects after the symmetry audits, 3.6 million after ``test_pins``). Kept,
    every later full collection of the worker would walk them again: seconds with the
    event loop held, while the worker runs end-to-end tests whose servers and clients wait
    on deadlines. They are freed rather than frozen: a frozen heap turns the searches' own
    freezing off, and each search that moves its graph counts the frozen objects
    (``gc.get_freeze_count`` walks them all: a second over millions)."""
    yield
    forget_reports()
    unload_models()
    gc.collect()
