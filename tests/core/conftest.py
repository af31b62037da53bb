"""Make the repository root and this folder importable for the core tests; the ``engine``
fixture runs a test on both engines."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for path in (ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from core_support import ENGINES  # noqa: E402  (importable only once the path is set)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """Each engine in turn (a test file may define its own ``engine`` instead)."""
    return str(request.param)
