"""Put the repository root (for the ``models`` folder) and this folder (for ``shipped``)
on sys.path; freeze what each module leaves on the heap."""

import gc
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for path in (str(HERE.parents[1]), str(HERE)):
    if path not in sys.path:
        sys.path.insert(0, path)


@pytest.fixture(autouse=True, scope="module")
def _freeze_what_the_module_leaves() -> Iterator[None]:
    """Once a module's tests are done: one full collection, then ``gc.freeze()``.

    The model files a module loads stay in ``sys.modules`` with their explored worlds
    (millions of objects after the symmetry audits), and every later full collection of
    the worker would walk them again: seconds with the event loop held, while the worker
    runs end-to-end tests whose servers and clients wait on deadlines. Frozen, they are
    left out of every later collection; they were alive, so nothing is kept that would
    have been freed."""
    yield
    gc.collect()
    gc.freeze()
