"""Make the repository root importable (``fsm``) and share helpers for the checker tests."""

from __future__ import annotations

import sys

import pytest
from python_runner import ROOT, Run, run_python

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture
def python() -> Run:
    """:func:`python_runner.run_python`."""
    return run_python
